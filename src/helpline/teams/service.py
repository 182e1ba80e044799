"""Teams and API keys: creation, lookup, revocation, authentication."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from helpline.db.base import utcnow
from helpline.errors import Conflict, InvalidRequest, NotFound
from helpline.ids import new_id
from helpline.teams.models import ApiKey, Team

KEY_PREFIX = "hl_"
SLUG_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")


@dataclass(frozen=True)
class TeamIdentity:
    """The team a request acts for, resolved from its bearer key."""

    team_id: str
    key_id: str


def hash_key(api_key: str) -> str:
    """SHA-256 hex digest of an API key (what is stored)."""
    return hashlib.sha256(api_key.encode()).hexdigest()


def _generate_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


async def create_team(*, session: AsyncSession, slug: str, name: str) -> Team:
    """Create a team with a fresh chat signing secret; the slug must be free."""
    if not SLUG_PATTERN.match(slug):
        raise InvalidRequest(
            "slug must be 1-64 lowercase letters, digits or hyphens, not starting or ending "
            "with a hyphen",
            code="invalid_slug",
        )
    if not name.strip() or len(name) > 200:
        raise InvalidRequest("name must be 1-200 characters", code="invalid_name")
    team = Team(id=new_id("team"), slug=slug, name=name, chat_secret=secrets.token_hex(32))
    session.add(team)
    try:
        await session.flush()
    except IntegrityError as exc:
        raise Conflict(f"a team with slug {slug!r} already exists", code="slug_taken") from exc
    return team


async def get_team(*, session: AsyncSession, team_id: str) -> Team:
    """The team with this id."""
    team = await session.get(Team, team_id)
    if team is None:
        raise NotFound("team not found", code="team_not_found")
    return team


async def find_team_by_slug(*, session: AsyncSession, slug: str) -> Team | None:
    """The team with this slug, if any."""
    return (await session.execute(select(Team).where(Team.slug == slug))).scalar_one_or_none()


async def get_team_by_slug(*, session: AsyncSession, slug: str) -> Team:
    """The team with this slug."""
    team = await find_team_by_slug(session=session, slug=slug)
    if team is None:
        raise NotFound(f"no team with slug {slug!r}", code="team_not_found")
    return team


async def create_api_key(*, session: AsyncSession, team_id: str) -> tuple[ApiKey, str]:
    """Create a key; returns the row and the clear key, which is never available again."""
    clear = _generate_key()
    key = ApiKey(
        id=new_id("key"), team_id=team_id, key_hash=hash_key(clear), prefix=clear[:10]
    )
    session.add(key)
    await session.flush()
    return key, clear


async def revoke_api_key(*, session: AsyncSession, team_id: str, api_key: str) -> ApiKey:
    """Revoke a key of the team, given in clear or by its id."""
    condition = ApiKey.id == api_key if api_key.startswith("key_") else (
        ApiKey.key_hash == hash_key(api_key)
    )
    key = (
        await session.execute(select(ApiKey).where(condition, ApiKey.team_id == team_id))
    ).scalar_one_or_none()
    if key is None:
        raise NotFound("no such key for this team", code="key_not_found")
    if key.revoked_at is None:
        key.revoked_at = utcnow()
        await session.flush()
    return key


async def authenticate(*, session: AsyncSession, api_key: str) -> TeamIdentity | None:
    """The team of a live key, or None for an unknown or revoked key."""
    row = (
        await session.execute(
            select(ApiKey.id, ApiKey.team_id).where(
                ApiKey.key_hash == hash_key(api_key), ApiKey.revoked_at.is_(None)
            )
        )
    ).first()
    return TeamIdentity(team_id=row.team_id, key_id=row.id) if row else None


async def update_team_settings(
    *,
    session: AsyncSession,
    team_id: str,
    draft_reads_enabled: bool | None = None,
    chat_auth_required: bool | None = None,
) -> Team:
    """Change a team's settings; omitted values stay as they are."""
    values: dict[str, bool] = {}
    if draft_reads_enabled is not None:
        values["draft_reads_enabled"] = draft_reads_enabled
    if chat_auth_required is not None:
        values["chat_auth_required"] = chat_auth_required
    if values:
        await session.execute(update(Team).where(Team.id == team_id).values(**values))
    team = await get_team(session=session, team_id=team_id)
    await session.refresh(team)
    return team
