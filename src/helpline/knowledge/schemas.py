"""Bodies of the knowledge-base endpoints."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

SLUG_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,98}[a-z0-9])?$"


class ArticleWrite(BaseModel):
    """A new draft of an article."""

    model_config = ConfigDict(extra="forbid", strict=True)

    title: Annotated[str, Field(min_length=1, max_length=300)]
    body: Annotated[str, Field(min_length=1, max_length=100_000)]
