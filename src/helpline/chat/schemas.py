"""Bodies of the server-side chat API."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class ChatMessageIn(BaseModel):
    """A message from a user, sent by the company's own channel bridge."""

    model_config = ConfigDict(extra="forbid", strict=True)

    user_id: Annotated[str, Field(min_length=1, max_length=200)]
    text: Annotated[str, Field(min_length=1, max_length=4000)]
    metadata: dict[str, Any] | None = None
    user_token: Annotated[str, Field(min_length=1, max_length=4000)] | None = None
