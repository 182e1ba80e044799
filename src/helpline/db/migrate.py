"""Alembic, driven from code: upgrade to head, and tell whether a database is at head."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

from helpline.db.engine import sqlalchemy_url

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(database_url: str) -> Config:
    """An Alembic config for the service's migrations against ``database_url``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["database_url"] = database_url
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Apply migrations up to ``revision`` (concurrent callers are serialised by a lock)."""
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    """Revert migrations down to ``revision``."""
    command.downgrade(alembic_config(database_url), revision)


def head_revision() -> str | None:
    """The newest revision shipped with this code."""
    return ScriptDirectory.from_config(alembic_config("postgresql://unused")).get_current_head()


def current_revision(database_url: str) -> str | None:
    """The revision the database is at (None for an empty database)."""
    engine = create_engine(sqlalchemy_url(database_url, "psycopg"))
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
