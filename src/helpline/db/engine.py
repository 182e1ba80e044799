"""Engine and session factory for the application's queries (SQLAlchemy async on asyncpg)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)


def sqlalchemy_url(database_url: str, driver: str) -> URL:
    """``postgresql://…`` with the given driver (``asyncpg`` or ``psycopg``)."""
    url = make_url(database_url)
    return url.set(drivername=f"postgresql+{driver}")


def libpq_url(database_url: str) -> str:
    """A plain ``postgresql://`` conninfo for psycopg / procrastinate."""
    url = make_url(database_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


def create_engine(database_url: str, *, pool_size: int = 10) -> AsyncEngine:
    """The application's async engine."""
    return create_async_engine(
        sqlalchemy_url(database_url, "asyncpg"),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_recycle=1800,
    )


def create_session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep objects usable after commit (routes serialise after committing)."""
    return async_sessionmaker(engine, expire_on_commit=False)


@asynccontextmanager
async def transaction(
    factory: async_sessionmaker[AsyncSession],
) -> AsyncIterator[AsyncSession]:
    """One session in one transaction: committed on success, rolled back on error."""
    async with factory() as session, session.begin():
        yield session
