"""Test harness: a real PostgreSQL database built by the migrations, cleaned between tests.

The database server is the one named by ``HELPLINE_TEST_DATABASE_URL`` (CI and this machine
kind) or else a private embedded server. Each test session creates its own database on it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from helpline.api.app import create_app
from helpline.db import migrate
from helpline.db.engine import create_engine, create_session_factory, libpq_url, transaction
from helpline.settings import Settings
from helpline.teams import service as teams

IN_CI = os.environ.get("CI", "").lower() == "true"


def _server_url() -> Iterator[str]:
    configured = os.environ.get("HELPLINE_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    if IN_CI:
        pytest.fail("CI=true but HELPLINE_TEST_DATABASE_URL is not set: CI must test against "
                    "the machine's PostgreSQL server")
    from helpline.db.embedded import EmbeddedPostgres

    with tempfile.TemporaryDirectory(prefix="helpline-test-") as data_dir:
        server = EmbeddedPostgres(Path(data_dir))
        url = server.start()
        try:
            yield url
        finally:
            server.stop()


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A fresh database for this test session, migrated to head."""
    for server_url in _server_url():
        admin = libpq_url(server_url)
        name = f"helpline_test_{os.getpid()}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
        migrate.upgrade(url)
        try:
            yield url
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(name)))


@pytest.fixture(scope="session")
def _table_names(database_url: str) -> list[str]:
    with psycopg.connect(libpq_url(database_url)) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename <> 'alembic_version'"
        ).fetchall()
    return [row[0] for row in rows]


@pytest.fixture(autouse=True)
def _clean_database(request: pytest.FixtureRequest) -> None:
    """Every test that touches the database starts from empty tables."""
    if "database_url" not in request.fixturenames:
        return
    url = request.getfixturevalue("database_url")
    tables = request.getfixturevalue("_table_names")
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(
            sql.SQL(", ").join(sql.Identifier(t) for t in tables)))


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    """Settings pointing at the test database."""
    return Settings(database_url=database_url, data_dir=tmp_path, run_worker=False)


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine for tests that call services directly."""
    engine = create_engine(database_url, pool_size=5)
    yield engine
    await engine.dispose()


@pytest.fixture
def sessions(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """A session factory on the test database."""
    return create_session_factory(engine)


@dataclass
class TeamFixture:
    """A team made for a test, with its clear API key."""

    id: str
    slug: str
    api_key: str
    chat_secret: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


@pytest.fixture
def make_team(sessions: async_sessionmaker[AsyncSession]):  # type: ignore[no-untyped-def]
    """Factory: ``await make_team("acme")`` creates a team with one API key."""

    async def make(slug: str = "acme", name: str | None = None) -> TeamFixture:
        async with transaction(sessions) as session:
            team = await teams.create_team(session=session, slug=slug, name=name or slug.title())
            _, api_key = await teams.create_api_key(session=session, team_id=team.id)
            return TeamFixture(team.id, team.slug, api_key, team.chat_secret)

    return make


@pytest.fixture
async def team(make_team) -> TeamFixture:  # type: ignore[no-untyped-def]
    """One team."""
    return await make_team("acme")


@pytest.fixture
async def other_team(make_team) -> TeamFixture:  # type: ignore[no-untyped-def]
    """A second team, for isolation tests."""
    return await make_team("globex")


@pytest.fixture
async def app(settings: Settings):  # type: ignore[no-untyped-def]
    """The ASGI app with its lifespan running (no in-process worker)."""
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app) -> AsyncIterator[httpx.AsyncClient]:  # type: ignore[no-untyped-def]
    """An HTTP client talking to the app in-process."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c
