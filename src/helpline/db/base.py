"""Declarative base with a constraint naming convention, and the team-owned mixin."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import DateTime, ForeignKey, MetaData, String
from sqlalchemy.orm import DeclarativeBase, Mapped, declared_attr, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """The current time, timezone-aware, with microseconds (keyset order relies on them)."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Base of every table of the service (procrastinate's tables are its own)."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class TeamOwned:
    """Every row that belongs to a team carries ``team_id``; queries always filter on it."""

    @declared_attr
    def team_id(cls) -> Mapped[str]:
        return mapped_column(
            String(40), ForeignKey("teams.id", ondelete="CASCADE"), nullable=False, index=True
        )


def created_at_column() -> Mapped[datetime]:
    """A creation timestamp set by the application (microsecond precision, UTC)."""
    return mapped_column(DateTime(timezone=True), nullable=False, default=utcnow)
