"""Request dependencies as ``Annotated`` aliases: runtime, session, authenticated team."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncSession

from helpline.api.runtime import Runtime
from helpline.errors import InvalidRequest, Unauthorized
from helpline.teams.service import TeamIdentity, authenticate

# The one security scheme the OpenAPI description declares ("HTTPBearer", http/bearer).
_bearer = HTTPBearer(auto_error=False)


async def get_runtime(request: Request) -> Runtime:
    """The node's runtime."""
    runtime: Runtime = request.app.state.runtime
    return runtime


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """A session for this request; the route commits, anything uncommitted rolls back."""
    runtime: Runtime = request.app.state.runtime
    async with runtime.sessions() as session:
        yield session


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
SessionDep = Annotated[AsyncSession, Depends(get_session)]


async def require_team(
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> TeamIdentity:
    """Resolve ``Authorization: Bearer <key>`` to its team, or answer 401."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized("missing bearer API key: send 'Authorization: Bearer <API_KEY>'")
    identity = await authenticate(session=session, api_key=credentials.credentials)
    if identity is None:
        raise Unauthorized("unknown or revoked API key")
    return identity


TeamDep = Annotated[TeamIdentity, Depends(require_team)]


def _valid_idempotency_key(value: str | None) -> str | None:
    if value is None:
        return None
    if not 1 <= len(value) <= 200 or not value.strip():
        raise InvalidRequest(
            "Idempotency-Key must be 1 to 200 characters with a non-whitespace character",
            code="invalid_idempotency_key",
        )
    return value


async def optional_idempotency_key(
    idempotency_key: Annotated[
        str | None,
        Header(description="1-200 characters with a non-whitespace character; unique per team."),
    ] = None,
) -> str | None:
    """The optional Idempotency-Key header, validated."""
    return _valid_idempotency_key(idempotency_key)


async def required_idempotency_key(
    idempotency_key: Annotated[
        str | None,
        Header(description="REQUIRED. 1-200 characters with a non-whitespace character."),
    ] = None,
) -> str:
    """The required Idempotency-Key header, validated."""
    key = _valid_idempotency_key(idempotency_key)
    if key is None:
        raise InvalidRequest(
            "the Idempotency-Key header is required", code="missing_idempotency_key"
        )
    return key


OptionalIdempotencyKey = Annotated[str | None, Depends(optional_idempotency_key)]
RequiredIdempotencyKey = Annotated[str, Depends(required_idempotency_key)]
