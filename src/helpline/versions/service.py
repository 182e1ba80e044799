"""Publishing versions, listing them, splitting traffic, archiving, routing a user."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from helpline.agentconfig import service as repository
from helpline.agentconfig.schema import (
    AgentConfig,
    config_from_snapshot,
    config_to_snapshot,
    load_config,
)
from helpline.api.pagination import Page, PageRequest, paginate
from helpline.db.base import utcnow
from helpline.errors import Conflict, InvalidRequest, NotFound
from helpline.ids import new_id
from helpline.teams.models import Team
from helpline.versions import routing
from helpline.versions.models import AgentVersion

STAGING_BRANCH = "main"
VERSIONS = AgentVersion.__table__
PUBLIC_COLUMNS = (
    VERSIONS.c.id,
    VERSIONS.c.label,
    VERSIONS.c.description,
    VERSIONS.c.commit_sha,
    VERSIONS.c.created_at,
    VERSIONS.c.percent_traffic,
)


def version_dict(row: Row[Any] | AgentVersion) -> dict[str, Any]:
    """The spec's AgentVersion: exactly its six fields."""
    return {
        "id": row.id,
        "label": row.label,
        "description": row.description,
        "commit_sha": row.commit_sha,
        "created_at": row.created_at,
        "percent_traffic": row.percent_traffic,
    }


async def _lock_team(session: AsyncSession, team_id: str) -> None:
    """Serialise publishes and traffic changes of one team (sequence numbers, the 100 % rule)."""
    await session.execute(select(Team.id).where(Team.id == team_id).with_for_update())


async def list_versions(
    *, session: AsyncSession, team_id: str, page: PageRequest, has_traffic: bool = False
) -> Page:
    """Non-archived versions, newest first, one keyset page."""
    query = select(*PUBLIC_COLUMNS).where(
        VERSIONS.c.team_id == team_id, VERSIONS.c.archived_at.is_(None)
    )
    if has_traffic:
        query = query.where(VERSIONS.c.percent_traffic > 0)
    return await paginate(
        session, query, table=VERSIONS, team_id=team_id, page=page,
        not_found_message="the before/after id is not an agent version of this team",
    )


async def publish_version(
    *, session: AsyncSession, team_id: str, commit_sha: str, description: str
) -> AgentVersion:
    """Publish a commit of staging main: it must be reachable from main and its config valid."""
    await _lock_team(session, team_id)
    reachable = await repository.is_ancestor_or_equal(
        session=session, team_id=team_id, sha=commit_sha, branch=STAGING_BRANCH
    )
    if not reachable:
        raise NotFound(
            f"commit {commit_sha} is not on the staging main branch", code="commit_not_found"
        )
    files = await repository.read_tree_files(session=session, team_id=team_id,
                                             commit_sha=commit_sha)
    config, errors = load_config(files)
    if config is None or errors:
        raise InvalidRequest(
            f"the agent configuration at {commit_sha} is invalid ({len(errors)} errors)",
            code="invalid_config",
            details=[{"file": e.file, "field": e.field, "message": e.message} for e in errors],
        )
    seq = (
        await session.execute(
            select(func.coalesce(func.max(AgentVersion.seq), 0)).where(
                AgentVersion.team_id == team_id
            )
        )
    ).scalar_one() + 1
    routed = (
        await session.execute(
            select(func.count()).where(
                AgentVersion.team_id == team_id, AgentVersion.percent_traffic > 0
            )
        )
    ).scalar_one()
    version = AgentVersion(
        id=new_id("ver"),
        team_id=team_id,
        seq=seq,
        label=f"v{seq}",
        description=description,
        commit_sha=commit_sha,
        percent_traffic=0 if routed else 100,
        config_snapshot=config_to_snapshot(config),
        created_at=utcnow(),
    )
    session.add(version)
    await session.flush()
    return version


async def set_traffic(
    *, session: AsyncSession, team_id: str, allocation: Sequence[tuple[str, int]]
) -> list[tuple[str, int]]:
    """Apply a full split: it names each version once and sums to 100; others get 0 %."""
    ids = [version_id for version_id, _ in allocation]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise InvalidRequest(
            f"each version may appear once; repeated: {', '.join(repeated)}",
            code="duplicate_agent_version",
        )
    total = sum(percent for _, percent in allocation)
    if total != 100:
        raise InvalidRequest(
            f"percent_traffic must sum to 100 (got {total})", code="traffic_sum_invalid"
        )
    await _lock_team(session, team_id)
    known = set(
        (
            await session.execute(
                select(AgentVersion.id).where(
                    AgentVersion.team_id == team_id,
                    AgentVersion.id.in_(ids),
                    AgentVersion.archived_at.is_(None),
                )
            )
        ).scalars()
    )
    missing = [i for i in ids if i not in known]
    if missing:
        raise NotFound(
            f"unknown or archived agent version: {', '.join(missing)}",
            code="agent_version_not_found",
        )
    await session.execute(
        update(AgentVersion)
        .where(AgentVersion.team_id == team_id, AgentVersion.percent_traffic != 0)
        .values(percent_traffic=0)
    )
    for version_id, percent in allocation:
        if percent:
            await session.execute(
                update(AgentVersion)
                .where(AgentVersion.team_id == team_id, AgentVersion.id == version_id)
                .values(percent_traffic=percent)
            )
    return list(allocation)


async def get_version(*, session: AsyncSession, team_id: str, version_id: str) -> AgentVersion:
    """A non-archived version of the team."""
    version = (
        await session.execute(
            select(AgentVersion).where(
                AgentVersion.team_id == team_id,
                AgentVersion.id == version_id,
                AgentVersion.archived_at.is_(None),
            )
        )
    ).scalar_one_or_none()
    if version is None:
        raise NotFound("agent version not found", code="agent_version_not_found")
    return version


async def archive_version(*, session: AsyncSession, team_id: str, version_id: str) -> None:
    """Archive a version without traffic; it leaves the list and can no longer get traffic."""
    await _lock_team(session, team_id)
    version = await get_version(session=session, team_id=team_id, version_id=version_id)
    if version.percent_traffic > 0:
        raise Conflict(
            f"version {version.label} still has {version.percent_traffic}% of traffic; "
            "move its traffic first",
            code="agent_version_has_traffic",
        )
    version.archived_at = utcnow()
    await session.flush()


async def route_version(
    *, session: AsyncSession, team_id: str, user_id: str
) -> AgentVersion | None:
    """The version a new conversation of this user goes to (None: nothing published)."""
    versions = (
        await session.execute(
            select(AgentVersion)
            .options(defer(AgentVersion.config_snapshot))
            .where(AgentVersion.team_id == team_id, AgentVersion.percent_traffic > 0)
            .order_by(AgentVersion.created_at, AgentVersion.id)
        )
    ).scalars().all()
    allocations = [(v, v.percent_traffic) for v in versions]
    return routing.pick(allocations, routing.bucket(team_id, user_id))


async def get_version_config(*, session: AsyncSession, version_id: str) -> AgentConfig:
    """The validated config frozen into a version (serving never reads git)."""
    snapshot = (await session.execute(
        select(AgentVersion.config_snapshot).where(AgentVersion.id == version_id))).scalar_one()
    return config_from_snapshot(snapshot)
