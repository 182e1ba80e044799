"""The one mapping from domain errors to HTTP, and the error body shapes.

- Paths under ``/v1`` (and everything else that is not listed below) answer
  ``{"error": {"code": "...", "message": "..."}}`` (plus ``details`` where useful).
- The unversioned endpoints (``/chat/outbound``, ``/conversation/...``) answer
  ``{"error": "<message>"}``, and their validation failures are 400, as the spec says.
"""

from __future__ import annotations

import logging
import re
import secrets
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from helpline.errors import (
    Conflict,
    HelplineError,
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    InvalidRequest,
    NotFound,
    Unauthorized,
)

log = logging.getLogger(__name__)

_STATUS_BY_ERROR: list[tuple[type[HelplineError], int]] = [
    (NotFound, 404),
    (Unauthorized, 401),
    (IdempotencyKeyInUse, 409),
    (IdempotencyKeyReused, 422),
    (Conflict, 409),
    (InvalidRequest, 422),
]
_CODE_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}
_PLAIN_ERROR_PATHS = re.compile(r"^/(chat/outbound|conversation/)")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,100}$")


def plain_style(path: str) -> bool:
    """True for the unversioned endpoints whose error body is ``{"error": "<message>"}``."""
    return bool(_PLAIN_ERROR_PATHS.match(path))


def status_for(exc: HelplineError) -> int:
    """The HTTP status of a domain error."""
    for cls, status in _STATUS_BY_ERROR:
        if isinstance(exc, cls):
            return status
    return 400


def error_response(
    path: str,
    status: int,
    code: str,
    message: str,
    *,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """An error response in the shape the path's family of endpoints uses."""
    body: dict[str, Any]
    if plain_style(path):
        body = {"error": message}
    else:
        error: dict[str, Any] = {"code": code, "message": message}
        if details is not None:
            error["details"] = details
        body = {"error": error}
    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers=headers
    )


def _validation_details(exc: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {"loc": [str(part) for part in err.get("loc", ())], "message": err.get("msg", ""),
         "type": err.get("type", "")}
        for err in exc.errors()
    ]


def _validation_message(details: list[dict[str, Any]]) -> str:
    parts = []
    for item in details[:5]:
        loc = ".".join(part for part in item["loc"] if part not in ("body", "query", "header"))
        parts.append(f"{loc}: {item['message']}" if loc else item["message"])
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that turn every failure into the documented error bodies."""

    @app.exception_handler(HelplineError)
    async def _domain(request: Request, exc: HelplineError) -> Response:
        status = status_for(exc)
        if plain_style(request.url.path) and status == 422:
            status = 400
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return error_response(
            request.url.path, status, exc.code, exc.message, details=exc.details, headers=headers
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> Response:
        details = _validation_details(exc)
        status = 400 if plain_style(request.url.path) else 422
        return error_response(
            request.url.path, status, "validation_error", _validation_message(details),
            details=details,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        status = exc.status_code
        code = _CODE_BY_STATUS.get(status, "error")
        if status == 404 and exc.detail == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path}"
        elif status == 405:
            message = f"method {request.method} not allowed on {request.url.path}"
        else:
            message = str(exc.detail) if exc.detail else HTTPStatus(status).phrase
        return error_response(
            request.url.path, status, code, message, headers=getattr(exc, "headers", None)
        )


class RequestContextMiddleware:
    """Gives each request an id (``X-Request-ID``) and turns an unhandled error into a 500 body.

    The traceback goes to the log with the request id; the client gets only the id.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = ""
        for name, value in scope.get("headers", []):
            if name == b"x-request-id":
                candidate = value.decode("latin-1")
                if _REQUEST_ID.match(candidate):
                    request_id = candidate
                break
        request_id = request_id or secrets.token_hex(8)
        scope.setdefault("state", {})["request_id"] = request_id
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            log.exception(
                "unhandled error",
                extra={"action": "unhandled_error", "request_id": request_id,
                       "path": scope.get("path"), "method": scope.get("method")},
            )
            if started:
                raise
            response = error_response(
                scope.get("path", ""),
                500,
                "internal_error",
                f"internal server error (request id {request_id})",
            )
            await response(scope, receive, send_with_id)
