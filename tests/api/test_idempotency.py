"""The Idempotency-Key mechanism: replay, reuse, in-flight, expiry, race safety."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from helpline.api import idempotency
from helpline.api.models import IdempotencyRecord
from helpline.errors import IdempotencyKeyInUse, IdempotencyKeyReused, NotFound
from helpline.teams import service as teams
from helpline.teams.models import ApiKey


async def _count_keys(sessions, team_id: str) -> int:
    async with sessions() as session:
        return (await session.execute(
            select(func.count()).select_from(ApiKey).where(ApiKey.team_id == team_id)
        )).scalar_one()


async def _create_key(sessions, team_id: str, key: str | None, fp: str = "fp-1",
                      pause: float = 0.0):
    """A POST-like operation that creates one resource (an API key)."""
    async with sessions() as session:
        async def work():
            created, _ = await teams.create_api_key(session=session, team_id=team_id)
            if pause:
                await asyncio.sleep(pause)
            return {"id": created.id}

        return await idempotency.run_idempotent(
            session=session, team_id=team_id, key=key, request_fingerprint=fp,
            status_code=201, work=work,
        )


async def test_replay_returns_stored_response_and_creates_nothing(sessions, team):
    before = await _count_keys(sessions, team.id)
    first = await _create_key(sessions, team.id, "k1")
    again = await _create_key(sessions, team.id, "k1")
    assert not first.replayed and again.replayed
    assert again.body == first.body and again.status_code == 201
    assert await _count_keys(sessions, team.id) == before + 1


async def test_without_key_every_call_creates(sessions, team):
    before = await _count_keys(sessions, team.id)
    await _create_key(sessions, team.id, None)
    await _create_key(sessions, team.id, None)
    assert await _count_keys(sessions, team.id) == before + 2


async def test_same_key_different_request_is_rejected(sessions, team):
    await _create_key(sessions, team.id, "k1", fp="fp-1")
    with pytest.raises(IdempotencyKeyReused):
        await _create_key(sessions, team.id, "k1", fp="fp-2")


async def test_keys_are_scoped_per_team(sessions, team, other_team):
    a = await _create_key(sessions, team.id, "shared")
    b = await _create_key(sessions, other_team.id, "shared", fp="other")
    assert not b.replayed and a.body != b.body


async def test_key_in_flight_is_409(sessions, team):
    slow = asyncio.create_task(_create_key(sessions, team.id, "slow", pause=0.5))
    await asyncio.sleep(0.15)
    with pytest.raises(IdempotencyKeyInUse):
        await _create_key(sessions, team.id, "slow")
    first = await slow
    replay = await _create_key(sessions, team.id, "slow")
    assert replay.replayed and replay.body == first.body


async def test_twenty_concurrent_first_uses_create_exactly_one(sessions, team):
    before = await _count_keys(sessions, team.id)
    results = await asyncio.gather(
        *[_create_key(sessions, team.id, "race", pause=0.05) for _ in range(20)],
        return_exceptions=True,
    )
    outcomes = [r for r in results if isinstance(r, idempotency.Outcome)]
    in_use = [r for r in results if isinstance(r, IdempotencyKeyInUse)]
    assert len(outcomes) + len(in_use) == 20
    assert len([o for o in outcomes if not o.replayed]) == 1
    assert len({str(o.body) for o in outcomes}) == 1
    assert await _count_keys(sessions, team.id) == before + 1


async def test_failed_work_stores_nothing_and_retry_runs(sessions, team):
    async with sessions() as session:
        async def failing():
            await teams.create_api_key(session=session, team_id=team.id)
            raise NotFound("nothing here")

        with pytest.raises(NotFound):
            await idempotency.run_idempotent(
                session=session, team_id=team.id, key="k-fail", request_fingerprint="fp-1",
                status_code=201, work=failing,
            )
    before = await _count_keys(sessions, team.id)
    retried = await _create_key(sessions, team.id, "k-fail")
    assert not retried.replayed
    assert await _count_keys(sessions, team.id) == before + 1


async def test_expired_keys_are_removed_and_can_be_reused(sessions, team):
    first = await _create_key(sessions, team.id, "old")
    async with sessions() as session:
        await session.execute(update(IdempotencyRecord).values(
            created_at=IdempotencyRecord.created_at - timedelta(hours=25)))
        await session.commit()
    fresh = await _create_key(sessions, team.id, "old", fp="another request")
    assert not fresh.replayed and fresh.body != first.body
    async with sessions() as session:
        await session.execute(update(IdempotencyRecord).values(
            created_at=IdempotencyRecord.created_at - timedelta(hours=25)))
        removed = await idempotency.expire_keys(session=session)
        await session.commit()
    assert removed == 1


def test_fingerprint_is_canonical():
    a = idempotency.fingerprint("post", "/v1/x", {"b": 1, "a": [1, 2]})
    b = idempotency.fingerprint("POST", "/v1/x", {"a": [1, 2], "b": 1})
    assert a == b
    assert a != idempotency.fingerprint("POST", "/v1/y", {"a": [1, 2], "b": 1})
