"""Team settings endpoints."""

from __future__ import annotations

from fastapi import APIRouter

from helpline.api.deps import SessionDep, TeamDep
from helpline.teams import service
from helpline.teams.models import Team
from helpline.teams.schemas import TeamSettings, TeamSettingsPatch

router = APIRouter(prefix="/v1/team", tags=["team"])


def _settings_of(team: Team) -> TeamSettings:
    return TeamSettings(
        id=team.id,
        slug=team.slug,
        name=team.name,
        draft_reads_enabled=team.draft_reads_enabled,
        chat_auth_required=team.chat_auth_required,
    )


@router.get("/settings", response_model=TeamSettings)
async def get_settings(session: SessionDep, identity: TeamDep) -> TeamSettings:
    """The calling team's settings."""
    team = await service.get_team(session=session, team_id=identity.team_id)
    return _settings_of(team)


@router.patch("/settings", response_model=TeamSettings)
async def patch_settings(
    body: TeamSettingsPatch, session: SessionDep, identity: TeamDep
) -> TeamSettings:
    """Change the calling team's settings (``draft_reads_enabled``, ``chat_auth_required``)."""
    team = await service.update_team_settings(
        session=session,
        team_id=identity.team_id,
        draft_reads_enabled=body.draft_reads_enabled,
        chat_auth_required=body.chat_auth_required,
    )
    await session.commit()
    return _settings_of(team)
