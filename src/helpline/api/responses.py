"""Fast JSON responses (orjson) for routes that build their body as plain dicts."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import Response


class JSONBody(Response):
    """``application/json`` serialised with orjson (datetimes as ISO 8601)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)

    @staticmethod
    def jsonable(content: Any) -> Any:
        """Plain JSON types (datetimes as ISO strings), e.g. to store in a JSONB column."""
        return orjson.loads(orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS))


def replay_headers(replayed: bool) -> dict[str, str] | None:
    """``Idempotent-Replayed: true`` on a replayed response."""
    return {"Idempotent-Replayed": "true"} if replayed else None
