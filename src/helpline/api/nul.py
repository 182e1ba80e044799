"""Reject NUL characters before they reach PostgreSQL, which cannot store them in text.

Every JSON body (``\\u0000`` escapes), path and query string is checked once here, so no
endpoint can turn such input into a 500 or a half-written row. Other bodies (git packs) pass.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from helpline.api.errors import error_response, plain_style

# A \u0000 escape that is not itself escaped (an odd number of backslashes before "u0000").
_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000", re.IGNORECASE)
MESSAGE = "text must not contain NUL characters (\\u0000)"


class RejectNulMiddleware:
    """Answers 422 (400 on the unversioned endpoints) for input holding NUL characters."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if "\x00" in scope.get("path", "") or b"%00" in scope.get("query_string", b"").lower():
            await self._reject(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        if b"json" not in headers.get(b"content-type", b""):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if b"\x00" in body or _NUL_ESCAPE.search(body):
            await self._reject(scope, receive, send)
            return
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _reject(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "").replace("\x00", "")
        status = 400 if plain_style(path) else 422
        await error_response(path, status, "validation_error", MESSAGE)(scope, receive, send)
