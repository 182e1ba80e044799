"""Shared set-up for benchmarks: a scratch database, a migrated schema, an in-process app."""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from helpline.api.app import create_app
from helpline.db import migrate
from helpline.db.embedded import EmbeddedPostgres
from helpline.db.engine import libpq_url
from helpline.settings import Settings


@contextlib.contextmanager
def scratch_database() -> Iterator[str]:
    """A fresh, migrated database on the configured server (or an embedded one); dropped after."""
    server = os.environ.get("HELPLINE_BENCH_DATABASE_URL") or os.environ.get(
        "HELPLINE_TEST_DATABASE_URL")
    with contextlib.ExitStack() as stack:
        if not server:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="helpline-bench-"))
            embedded = EmbeddedPostgres(Path(data_dir))
            server = embedded.start()
            stack.callback(embedded.stop)
        name = f"helpline_bench_{secrets.token_hex(4)}"
        admin = libpq_url(server)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        url = make_url(server).set(database=name).render_as_string(hide_password=False)
        try:
            migrate.upgrade(url)
            yield url
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(name)))


@contextlib.asynccontextmanager
async def app_client(database_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, object]]:
    """The app (no worker) and an in-process HTTP client to it."""
    app = create_app(Settings(database_url=database_url, run_worker=False))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            yield client, app
