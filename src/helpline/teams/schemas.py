"""Request and response bodies of the team endpoints."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class TeamSettings(BaseModel):
    """A team's settings as the API shows them."""

    id: str
    slug: str
    name: str
    draft_reads_enabled: bool
    chat_auth_required: bool


class TeamSettingsPatch(BaseModel):
    """Settings to change; omitted fields stay as they are."""

    model_config = ConfigDict(extra="forbid")

    draft_reads_enabled: bool | None = None
    chat_auth_required: bool | None = None
