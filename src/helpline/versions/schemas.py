"""Bodies of the agent-versioning endpoints (spec: AgentVersion, AgentVersionTraffic)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

Sha = Annotated[str, Field(pattern=r"^[0-9a-f]{40}$", description="40 lowercase hex characters.")]


class AgentVersionOut(BaseModel):
    """A published agent version (all six fields always present)."""

    id: str = Field(description="Opaque identifier.")
    label: str = Field(description="Derived from the version sequence: v1, v2, ...")
    description: str | None = Field(description="Commit message of the version.")
    commit_sha: str = Field(description="Git commit SHA the version was created from.")
    created_at: datetime
    percent_traffic: int = Field(ge=0, le=100)


class AgentVersionPage(BaseModel):
    """A page of agent versions, newest first."""

    data: list[AgentVersionOut]
    has_more: bool = False


class PublishRequest(BaseModel):
    """Publish the staging-main commit ``staging_commit_sha`` as a new version."""

    model_config = ConfigDict(extra="forbid", strict=True)

    staging_commit_sha: Sha
    description: Annotated[str, Field(min_length=1, max_length=1000)]


class AgentVersionTraffic(BaseModel):
    """The share of traffic routed to one version."""

    model_config = ConfigDict(extra="forbid", strict=True)

    agent_version_id: Annotated[str, Field(min_length=1, max_length=100)]
    percent_traffic: Annotated[int, Field(ge=0, le=100)]


class TrafficRequest(BaseModel):
    """The full traffic split: versions not listed receive 0 %."""

    model_config = ConfigDict(extra="forbid", strict=True)

    traffic_allocation: Annotated[list[AgentVersionTraffic], Field(min_length=1, max_length=100)]


class TrafficResponse(BaseModel):
    """The split as applied."""

    traffic_allocation: list[AgentVersionTraffic]
