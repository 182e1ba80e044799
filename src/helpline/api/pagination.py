"""Keyset pagination over ``(created_at DESC, id DESC)`` (DESIGN.md §4, spec "Page envelope").

``after`` (or no cursor) walks forward, towards older items; ``before`` returns the nearest
``limit`` items newer than the boundary, still newest first. ``has_more`` tells whether items
exist beyond the page in the requested direction. Never OFFSET.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.expression import FromClause

from helpline.errors import InvalidRequest, NotFound

MAX_LIMIT = 100


@dataclass(frozen=True)
class PageRequest:
    """Validated cursor parameters of a list request."""

    limit: int = MAX_LIMIT
    before: str | None = None
    after: str | None = None

    def __post_init__(self) -> None:
        if self.before is not None and self.after is not None:
            raise InvalidRequest(
                "supply either before or after, not both", code="conflicting_cursors"
            )


@dataclass(frozen=True)
class Page:
    """Rows of one page in endpoint order, and whether more exist in that direction."""

    rows: list[Any]
    has_more: bool


async def paginate(
    session: AsyncSession,
    query: Select[Any],
    *,
    table: FromClause,
    team_id: str,
    page: PageRequest,
    not_found_message: str = "the before/after id is not a known item",
    boundary_scope: ColumnElement[bool] | None = None,
) -> Page:
    """Run ``query`` (already filtered to the team) one keyset page at a time."""
    created_at, item_id = table.c.created_at, table.c.id
    cursor_id = page.before if page.before is not None else page.after
    if cursor_id is not None:
        lookup = select(created_at, item_id).where(item_id == cursor_id, table.c.team_id == team_id)
        if boundary_scope is not None:
            lookup = lookup.where(boundary_scope)
        boundary = (await session.execute(lookup)).first()
        if boundary is None:
            raise NotFound(not_found_message, code="cursor_not_found")
        position = tuple_(created_at, item_id)
        if page.before is not None:
            query = query.where(position > tuple_(boundary.created_at, boundary.id))
        else:
            query = query.where(position < tuple_(boundary.created_at, boundary.id))
    if page.before is not None:
        query = query.order_by(created_at.asc(), item_id.asc())
    else:
        query = query.order_by(created_at.desc(), item_id.desc())
    rows = list((await session.execute(query.limit(page.limit + 1))).all())
    has_more = len(rows) > page.limit
    rows = rows[: page.limit]
    if page.before is not None:
        rows.reverse()
    return Page(rows=rows, has_more=has_more)
