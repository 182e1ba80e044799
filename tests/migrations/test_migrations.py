"""Migrations are code: head matches the models, and they go down and up again cleanly."""

from __future__ import annotations

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from psycopg import sql
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url

from helpline.db import migrate
from helpline.db.engine import libpq_url, sqlalchemy_url
from helpline.db.models import metadata
from helpline.migrations.env_filters import include_object


def test_upgrade_head_matches_models(database_url):
    engine = create_engine(sqlalchemy_url(database_url, "psycopg"))
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"include_object": include_object, "compare_type": True}
            )
            diff = compare_metadata(context, metadata)
    finally:
        engine.dispose()
    assert diff == []


DROP = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")


@pytest.fixture
def scratch_database(database_url):
    admin = libpq_url(database_url)
    name = make_url(database_url).database + "_scratch"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(DROP.format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_url(database_url).set(database=name).render_as_string(hide_password=False)
    yield url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(DROP.format(sql.Identifier(name)))


def test_downgrade_to_base_and_upgrade_again(scratch_database):
    migrate.upgrade(scratch_database)
    assert migrate.current_revision(scratch_database) == migrate.head_revision()
    migrate.downgrade(scratch_database, "base")
    assert migrate.current_revision(scratch_database) is None
    with psycopg.connect(libpq_url(scratch_database)) as conn:
        left = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename <> 'alembic_version'"
        ).fetchall()
    assert left == []
    migrate.upgrade(scratch_database)
    assert migrate.current_revision(scratch_database) == migrate.head_revision()


def test_upgrade_is_idempotent(database_url):
    migrate.upgrade(database_url)
    assert migrate.current_revision(database_url) == migrate.head_revision()
