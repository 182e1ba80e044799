"""Keyset pagination, exercised on a real team-owned table (API keys)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from helpline.api.pagination import PageRequest, paginate
from helpline.db.engine import transaction
from helpline.errors import InvalidRequest, NotFound
from helpline.teams.models import ApiKey
from helpline.teams.service import hash_key

TABLE = ApiKey.__table__


async def _make_keys(sessions, team_id: str, count: int, *, same_time: bool = False) -> list[str]:
    """Create keys; return their ids newest first (the endpoint order)."""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    async with transaction(sessions) as session:
        keys = []
        for i in range(count):
            created = base if same_time else base + timedelta(seconds=i)
            key = ApiKey(id=f"pg{team_id[-4:]}_{i:03d}{'x' if i % 2 else 'a'}", team_id=team_id,
                         key_hash=hash_key(f"{team_id}-{i}"), prefix="hl_",
                         created_at=created)
            session.add(key)
            keys.append(key)
    ordered = sorted(keys, key=lambda k: (k.created_at, k.id), reverse=True)
    return [k.id for k in ordered]


async def _page(sessions, team_id: str, **kwargs) -> tuple[list[str], bool]:
    async with sessions() as session:
        query = select(TABLE.c.id).where(TABLE.c.team_id == team_id, TABLE.c.id.like("pg%"))
        page = await paginate(session, query, table=TABLE, team_id=team_id,
                              page=PageRequest(**kwargs))
    return [row.id for row in page.rows], page.has_more


@pytest.mark.parametrize("same_time", [False, True])
async def test_forward_and_backward_walks(sessions, team, same_time):
    ids = await _make_keys(sessions, team.id, 7, same_time=same_time)

    first, more = await _page(sessions, team.id, limit=3)
    assert (first, more) == (ids[0:3], True)
    second, more = await _page(sessions, team.id, limit=3, after=first[-1])
    assert (second, more) == (ids[3:6], True)
    last, more = await _page(sessions, team.id, limit=3, after=second[-1])
    assert (last, more) == (ids[6:7], False)

    # Backward from the last page: nearest items before the boundary, still newest first.
    back, more = await _page(sessions, team.id, limit=3, before=last[0])
    assert (back, more) == (ids[3:6], True)
    back, more = await _page(sessions, team.id, limit=3, before=back[0])
    assert (back, more) == (ids[0:3], False)
    # Before the first item: empty, nothing more.
    assert await _page(sessions, team.id, limit=3, before=ids[0]) == ([], False)
    # After the last item: empty, nothing more.
    assert await _page(sessions, team.id, limit=3, after=ids[-1]) == ([], False)


async def test_exact_fit_has_no_more(sessions, team):
    ids = await _make_keys(sessions, team.id, 4)
    assert await _page(sessions, team.id, limit=4) == (ids, False)
    assert await _page(sessions, team.id, limit=2, before=ids[2]) == (ids[0:2], False)


async def test_default_limit_is_100(sessions, team):
    ids = await _make_keys(sessions, team.id, 105)
    page, more = await _page(sessions, team.id)
    assert page == ids[:100] and more


async def test_both_cursors_rejected():
    with pytest.raises(InvalidRequest):
        PageRequest(before="a", after="b")


async def test_unknown_or_foreign_boundary_is_not_found(sessions, team, other_team):
    await _make_keys(sessions, team.id, 2)
    foreign = await _make_keys(sessions, other_team.id, 1)
    with pytest.raises(NotFound):
        await _page(sessions, team.id, after="key_missing")
    # Same id shape, other team: indistinguishable from a missing one.
    async with sessions() as session:
        query = select(TABLE.c.id).where(TABLE.c.team_id == team.id)
        with pytest.raises(NotFound):
            await paginate(session, query, table=TABLE, team_id=team.id,
                           page=PageRequest(before=foreign[0]))
