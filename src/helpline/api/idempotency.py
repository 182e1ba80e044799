"""Idempotency-Key handling for POST endpoints (DESIGN.md §4).

The key's advisory lock and the stored outcome live in the *same* transaction as the work:
- first use: the lock is taken, the work runs, the outcome row is inserted, all commit together;
  a crash or an error rolls everything back, so a retry simply runs again;
- same key while that transaction is open: the lock is busy → 409 ``idempotency_key_in_use``;
- same key and same request afterwards: the stored response is replayed, nothing new is made;
- same key with a different request: 422 ``idempotency_key_reused``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import orjson
from fastapi import Request
from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from helpline.api.models import IdempotencyRecord
from helpline.db.base import utcnow
from helpline.errors import IdempotencyKeyInUse, IdempotencyKeyReused

KEY_TTL = timedelta(hours=24)


@dataclass(frozen=True)
class Outcome:
    """A response to send: freshly produced or replayed."""

    status_code: int
    body: Any
    replayed: bool = False


def fingerprint(method: str, path: str, body: Any) -> str:
    """SHA-256 of method, path and the canonical JSON of the body."""
    canonical = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    head = f"{method.upper()} {path}\n".encode()
    return hashlib.sha256(head + canonical).hexdigest()


def _lock_id(team_id: str, key: str) -> int:
    """A 64-bit advisory lock number for (team, key); a rare collision only causes a 409."""
    digest = hashlib.sha256(f"{team_id}\n{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def run_idempotent_request(
    *,
    request: Request,
    session: AsyncSession,
    team_id: str,
    key: str | None,
    body: Any,
    status_code: int,
    work: Callable[[], Awaitable[Any]],
) -> Outcome:
    """``run_idempotent`` for a route: the fingerprint is this request's method, path and body."""
    return await run_idempotent(
        session=session, team_id=team_id, key=key, status_code=status_code, work=work,
        request_fingerprint=fingerprint(request.method, request.url.path, body),
    )


async def run_idempotent(
    *,
    session: AsyncSession,
    team_id: str,
    key: str | None,
    request_fingerprint: str,
    status_code: int,
    work: Callable[[], Awaitable[Any]],
    ttl: timedelta = KEY_TTL,
) -> Outcome:
    """Run ``work`` at most once per (team, key); commit its effects with the stored outcome."""
    if key is None:
        body = await work()
        await session.commit()
        return Outcome(status_code, body)

    locked = (
        await session.execute(select(func.pg_try_advisory_xact_lock(_lock_id(team_id, key))))
    ).scalar_one()
    if not locked:
        await session.rollback()
        raise IdempotencyKeyInUse(
            "a request with this Idempotency-Key is still being processed; retry later"
        )
    record = await session.get(IdempotencyRecord, (team_id, key), populate_existing=True)
    if record is not None and record.created_at < utcnow() - ttl:
        await session.delete(record)
        await session.flush()
        record = None
    if record is not None:
        stored = Outcome(record.response_status, record.response_body, replayed=True)
        same_request = record.fingerprint == request_fingerprint
        await session.rollback()
        if not same_request:
            raise IdempotencyKeyReused(
                "this Idempotency-Key was already used with a different request"
            )
        return stored

    body = await work()
    await session.execute(
        insert(IdempotencyRecord).values(
            team_id=team_id,
            key=key,
            fingerprint=request_fingerprint,
            response_status=status_code,
            response_body=body,
            created_at=utcnow(),
        )
    )
    await session.commit()
    return Outcome(status_code, body)


async def expire_keys(*, session: AsyncSession, ttl: timedelta = KEY_TTL) -> int:
    """Delete outcomes older than the TTL; returns how many were removed."""
    result = await session.execute(
        delete(IdempotencyRecord).where(IdempotencyRecord.created_at < utcnow() - ttl)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
