"""Git smart HTTP at ``/v1/agent-config/repo.git``: clone, fetch and push with the real ``git``.

Authentication: ``Authorization: Bearer <API key>`` (``git -c http.extraHeader=...``) or HTTP
Basic with the API key as the password and any user name (``http://x:<key>@host/...``). A
missing or wrong key gets 401 with ``WWW-Authenticate: Basic realm="helpline"``, which makes
git ask its credential helper. These routes are not in the OpenAPI description (they speak
git's protocol, not JSON).
"""

from __future__ import annotations

import base64
import binascii
import zlib
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import Response

from helpline.agentconfig import gitserver
from helpline.api.deps import SessionDep
from helpline.teams.service import TeamIdentity, authenticate

router = APIRouter(prefix="/v1/agent-config/repo.git", include_in_schema=False)

MAX_PUSH_BYTES = 32 * 1024 * 1024
MAX_FETCH_REQUEST_BYTES = 8 * 1024 * 1024
_CHALLENGE = {"WWW-Authenticate": 'Basic realm="helpline"'}
_NO_CACHE = {
    "Cache-Control": "no-cache, max-age=0, must-revalidate",
    "Pragma": "no-cache",
    "Expires": "Fri, 01 Jan 1980 00:00:00 GMT",
}


def _api_key(authorization: str | None) -> str | None:
    """The API key of a ``Bearer`` or ``Basic`` Authorization header."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer":
        return value or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, _, password = decoded.partition(":")
        # The key goes in the password; a key given as the user name alone works too.
        return password or user or None
    return None


async def require_git_team(request: Request, session: SessionDep) -> TeamIdentity:
    """The team of the request's API key, or 401 with a Basic challenge git understands."""
    api_key = _api_key(request.headers.get("authorization"))
    identity = await authenticate(session=session, api_key=api_key) if api_key else None
    if identity is None:
        message = (
            "unknown or revoked API key" if api_key else
            "authentication required: use the API key as the password, or send "
            "'Authorization: Bearer <API_KEY>'"
        )
        raise HTTPException(status_code=401, detail=message, headers=_CHALLENGE)
    return identity


GitTeamDep = Annotated[TeamIdentity, Depends(require_git_team)]


async def read_body(request: Request, limit: int) -> bytes:
    """The request body (gzip decoded), at most ``limit`` bytes either way, else 413."""
    too_large = HTTPException(
        status_code=413, detail=f"request body larger than {limit} bytes; push fewer or smaller "
        "objects at a time"
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        return bytes(body)
    if encoding not in ("gzip", "x-gzip"):
        raise HTTPException(status_code=415, detail=f"unsupported Content-Encoding {encoding!r}")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(bytes(body), limit + 1)
    except zlib.error as exc:
        raise HTTPException(status_code=400, detail=f"invalid gzip body: {exc}") from exc
    if len(data) > limit or inflater.unconsumed_tail:
        raise too_large
    if not inflater.eof:
        raise HTTPException(status_code=400, detail="truncated gzip body")
    return data


def _check_content_type(request: Request, service: str) -> None:
    expected = f"application/x-{service}-request"
    if request.headers.get("content-type", "").split(";")[0].strip() != expected:
        raise HTTPException(status_code=415, detail=f"expected Content-Type {expected}")


@router.get("/info/refs")
async def info_refs(
    session: SessionDep, identity: GitTeamDep, service: str | None = None
) -> Response:
    """Ref advertisement of the smart protocol."""
    if service not in gitserver.SERVICES:
        raise HTTPException(
            status_code=403,
            detail="only git's smart HTTP protocol is served: "
            "info/refs?service=git-upload-pack or git-receive-pack",
        )
    body = await gitserver.advertise(session=session, team_id=identity.team_id, service=service)
    return Response(
        body, media_type=f"application/x-{service}-advertisement", headers=_NO_CACHE
    )


@router.post("/git-upload-pack")
async def upload_pack(request: Request, session: SessionDep, identity: GitTeamDep) -> Response:
    """Fetch and clone."""
    _check_content_type(request, gitserver.UPLOAD_PACK)
    data = await read_body(request, MAX_FETCH_REQUEST_BYTES)
    body = await gitserver.upload_pack(session=session, team_id=identity.team_id, request=data)
    return Response(body, media_type="application/x-git-upload-pack-result", headers=_NO_CACHE)


@router.post("/git-receive-pack")
async def receive_pack(request: Request, session: SessionDep, identity: GitTeamDep) -> Response:
    """Push: objects and ref updates land in one transaction, committed before the answer."""
    _check_content_type(request, gitserver.RECEIVE_PACK)
    data = await read_body(request, MAX_PUSH_BYTES)
    result = await gitserver.receive_pack(
        session=session, team_id=identity.team_id, request=data
    )
    if result.changed:
        await session.commit()
    else:
        await session.rollback()
    return Response(
        result.body, media_type="application/x-git-receive-pack-result", headers=_NO_CACHE
    )
