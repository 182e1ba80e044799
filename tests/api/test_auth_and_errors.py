"""Bearer authentication, the error envelope, and the OpenAPI description."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import select

from helpline.api.errors import error_response
from helpline.db.engine import transaction
from helpline.teams import service as teams
from helpline.teams.models import ApiKey


async def test_missing_key_gets_401_envelope(client):
    response = await client.get("/v1/team/settings")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    body = response.json()
    assert body["error"]["code"] == "unauthorized"
    assert "Bearer" in body["error"]["message"]


async def test_wrong_key_and_wrong_scheme_get_401(client, team):
    for header in ("Bearer hl_not-a-real-key", f"Basic {team.api_key}", "Bearer"):
        response = await client.get("/v1/team/settings", headers={"Authorization": header})
        assert response.status_code == 401, header
        assert response.json()["error"]["code"] == "unauthorized"


async def test_valid_key_reaches_its_own_team(client, team, other_team):
    response = await client.get("/v1/team/settings", headers=team.headers)
    assert response.status_code == 200
    assert response.json()["slug"] == "acme"
    response = await client.get("/v1/team/settings", headers=other_team.headers)
    assert response.json()["slug"] == "globex"


async def test_revoked_key_gets_401(client, team, sessions):
    async with transaction(sessions) as session:
        await teams.revoke_api_key(session=session, team_id=team.id, api_key=team.api_key)
    response = await client.get("/v1/team/settings", headers=team.headers)
    assert response.status_code == 401


async def test_keys_are_stored_hashed(team, sessions):
    async with sessions() as session:
        stored = await session.execute(select(ApiKey.key_hash))
        hashes = [row[0] for row in stored]
    assert team.api_key not in hashes
    assert teams.hash_key(team.api_key) in hashes


async def test_unknown_v1_route_and_method_use_envelope(client, team):
    response = await client.get("/v1/does-not-exist", headers=team.headers)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    response = await client.delete("/v1/team/settings", headers=team.headers)
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


async def test_validation_errors_are_422_envelope(client, team):
    response = await client.patch(
        "/v1/team/settings", headers=team.headers, json={"draft_reads_enabled": True, "x": 1}
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert "x" in error["message"]
    response = await client.patch(
        "/v1/team/settings", headers={**team.headers, "content-type": "application/json"},
        content=b"{not json",
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"


async def test_settings_patch_changes_only_given_fields(client, team):
    response = await client.patch(
        "/v1/team/settings", headers=team.headers, json={"draft_reads_enabled": True}
    )
    assert response.status_code == 200
    assert response.json()["draft_reads_enabled"] is True
    assert response.json()["chat_auth_required"] is False


async def test_unhandled_error_is_500_envelope_with_request_id(app, client, team, caplog):
    router = APIRouter()

    @router.get("/v1/_boom")
    async def boom() -> None:
        raise RuntimeError("secret internals")

    app.include_router(router)
    response = await client.get("/v1/_boom", headers={"X-Request-ID": "req-123"})
    assert response.status_code == 500
    body = response.json()
    assert body["error"]["code"] == "internal_error"
    assert "req-123" in body["error"]["message"]
    assert "secret internals" not in response.text
    assert response.headers["x-request-id"] == "req-123"
    assert any(getattr(r, "request_id", None) == "req-123" for r in caplog.records)


def test_unversioned_endpoints_use_plain_error_string():
    response = error_response("/chat/outbound", 400, "validation_error", "flow_id is invalid")
    assert response.body == b'{"error":"flow_id is invalid"}'
    response = error_response("/conversation/export", 400, "validation_error", "bad cursor")
    assert response.body == b'{"error":"bad cursor"}'
    response = error_response("/v1/simulations", 404, "not_found", "nope")
    assert response.body == b'{"error":{"code":"not_found","message":"nope"}}'


async def test_openapi_declares_one_bearer_scheme(client):
    spec = (await client.get("/openapi.json")).json()
    assert spec["info"]["version"] == "1.0.0"
    assert spec["components"]["securitySchemes"] == {
        "HTTPBearer": {"type": "http", "scheme": "bearer"}
    }
    docs = await client.get("/docs")
    assert docs.status_code == 200
    assert "openapi.json" in docs.text


async def test_nul_characters_are_rejected_not_stored(client, team):
    cases = [
        ("PATCH", "/v1/team/settings", b'{"draft_reads_enabled": true, "x": "a\\u0000"}'),
        ("PUT", "/v1/knowledge/articles/x", b'{"title": "t\\u0000", "body": "b"}'),
        ("POST", "/v1/chat/messages",
         b'{"user_id": "u", "text": "hi", "metadata": {"k": "\\u0000"}}'),
    ]
    for method, path, body in cases:
        response = await client.request(method, path, content=body, headers={
            **team.headers, "content-type": "application/json"})
        assert response.status_code == 422, path
        assert response.json()["error"]["code"] == "validation_error"
    response = await client.get("/v1/conversations", headers=team.headers,
                                params={"user_id": "a\x00b"})
    assert response.status_code == 422
    # An escaped backslash followed by "u0000" is ordinary text, not a NUL.
    response = await client.put("/v1/knowledge/articles/x", headers=team.headers,
                                json={"title": "literal \\u0000", "body": "b"})
    assert response.status_code == 201
    assert response.json()["draft"]["title"] == "literal \\u0000"
