"""Liveness and readiness probes."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from sqlalchemy import text

from helpline.api.deps import RuntimeDep
from helpline.api.responses import JSONBody
from helpline.db import migrate

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Process is up")
async def healthz() -> JSONBody:
    """Answers 200 as long as the process serves requests."""
    return JSONBody({"status": "ok"})


@router.get("/readyz", summary="Ready to serve traffic")
async def readyz(runtime: RuntimeDep) -> JSONBody:
    """200 when the database answers and its schema is at the code's migration head, else 503."""
    try:
        async with runtime.engine.connect() as conn:
            current = (
                await asyncio.wait_for(
                    conn.execute(text("SELECT version_num FROM alembic_version")), timeout=5
                )
            ).scalar_one_or_none()
    except Exception as exc:  # any failure to reach the database means "not ready"
        return JSONBody(
            {"status": "unavailable", "database": "unreachable", "reason": type(exc).__name__},
            status_code=503,
        )
    head = migrate.head_revision()
    if current != head:
        return JSONBody(
            {"status": "unavailable", "database": "ok", "migrations": "behind",
             "current": current, "head": head},
            status_code=503,
        )
    return JSONBody({"status": "ready", "database": "ok", "migrations": "head"})
