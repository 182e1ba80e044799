"""Fast JSON responses (orjson) for routes that build their body as plain dicts."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import Response

from helpline.api.idempotency import Outcome


class JSONBody(Response):
    """``application/json`` serialised with orjson (datetimes as ISO 8601)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)

    @staticmethod
    def jsonable(content: Any) -> Any:
        """Plain JSON types (datetimes as ISO strings), e.g. to store in a JSONB column."""
        return orjson.loads(orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS))


def outcome_response(outcome: Outcome) -> JSONBody:
    """The response of an idempotent operation (``Idempotent-Replayed: true`` on a replay)."""
    headers = {"Idempotent-Replayed": "true"} if outcome.replayed else None
    return JSONBody(outcome.body, status_code=outcome.status_code, headers=headers)
