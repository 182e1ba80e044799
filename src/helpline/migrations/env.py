"""Alembic environment: runs on a synchronous psycopg connection under an advisory lock."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool, text

from helpline.db.engine import sqlalchemy_url
from helpline.db.models import metadata
from helpline.migrations.env_filters import include_object

# Any fixed 64-bit number: serialises migrations started by several nodes at once.
MIGRATION_LOCK = 7_402_113_911


def run_migrations_online() -> None:
    """Apply the pending migrations."""
    url = context.config.attributes["database_url"]
    engine = create_engine(sqlalchemy_url(url, "psycopg"), poolclass=pool.NullPool)
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK})
        connection.commit()
        try:
            context.configure(
                connection=connection,
                target_metadata=metadata,
                include_object=include_object,
                compare_type=True,
            )
            with context.begin_transaction():
                context.run_migrations()
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK})
            connection.commit()
    engine.dispose()


run_migrations_online()
