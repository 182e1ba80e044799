"""Bodies of the conversation endpoints."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class AgentMessageIn(BaseModel):
    """A human agent's reply."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: Annotated[str, Field(min_length=1, max_length=4000)]


class TagIn(BaseModel):
    """A tag to set on a conversation."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: Annotated[str, Field(min_length=1, max_length=100)]
    level: Annotated[int, Field(ge=1, le=10)] = 1


class ConversationPatch(BaseModel):
    """Internal note and/or the full tag list."""

    model_config = ConfigDict(extra="forbid", strict=True)

    notes: Annotated[str, Field(max_length=10000)] | None = None
    tags: Annotated[list[TagIn], Field(max_length=50)] | None = None


class CsatIn(BaseModel):
    """The user's satisfaction rating."""

    model_config = ConfigDict(extra="forbid", strict=True)

    rating: Annotated[int, Field(ge=1, le=5)]
