"""The JSON authoring API of the agent repository, and the service functions behind it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from helpline.agentconfig import service
from helpline.db.engine import transaction
from helpline.errors import Conflict, InvalidRequest, NotFound

AGENT_YAML = """\
name: Test agent
instructions: Be helpful.
"""


async def commit(client, team, files, branch="main", message="change", parent_sha=None,
                 headers=None, expect=201):
    body = {"branch": branch, "message": message, "files": files}
    if parent_sha is not None:
        body["parent_sha"] = parent_sha
    response = await client.post("/v1/agent-config/commits", json=body,
                                 headers={**team.headers, **(headers or {})})
    assert response.status_code == expect, response.text
    return response.json()


async def test_first_commit_then_history_files_and_branches(client, team):
    first = await commit(client, team, {"agent.yaml": AGENT_YAML, "notes/a.md": "hello"},
                         message="first")
    assert first["branch"] == "main" and first["parent_sha"] is None
    assert len(first["commit_sha"]) == 40
    second = await commit(client, team, {"notes/a.md": None, "notes/b.md": "b"},
                          message="second", parent_sha=first["commit_sha"])
    assert second["parent_sha"] == first["commit_sha"]

    branches = (await client.get("/v1/agent-config/branches", headers=team.headers)).json()
    assert branches == {"data": [{"name": "main", "commit_sha": second["commit_sha"]}]}

    files = (await client.get("/v1/agent-config/files?ref=main", headers=team.headers)).json()
    assert files == {"ref": "main", "commit_sha": second["commit_sha"],
                     "files": {"agent.yaml": AGENT_YAML, "notes/b.md": "b"}}
    old = (await client.get(f"/v1/agent-config/files?ref={first['commit_sha']}",
                            headers=team.headers)).json()
    assert old["files"] == {"agent.yaml": AGENT_YAML, "notes/a.md": "hello"}

    history = (await client.get("/v1/agent-config/commits?branch=main",
                                headers=team.headers)).json()
    assert history["has_more"] is False
    assert [c["sha"] for c in history["data"]] == [second["commit_sha"], first["commit_sha"]]
    newest = history["data"][0]
    assert newest["message"] == "second"
    assert newest["parents"] == [first["commit_sha"]]
    assert newest["author"] == "helpline <noreply@helpline.invalid>"
    assert newest["created_at"].endswith("+00:00")


async def test_history_pages(client, team):
    shas = []
    for i in range(5):
        shas.append((await commit(client, team, {"n.txt": str(i)}))["commit_sha"])
    page = (await client.get("/v1/agent-config/commits?limit=2", headers=team.headers)).json()
    assert [c["sha"] for c in page["data"]] == shas[::-1][:2] and page["has_more"] is True
    rest = (await client.get(f"/v1/agent-config/commits?limit=3&after={page['data'][-1]['sha']}",
                             headers=team.headers)).json()
    assert [c["sha"] for c in rest["data"]] == shas[::-1][2:] and rest["has_more"] is False


async def test_commit_checks_the_parent(client, team):
    first = await commit(client, team, {"a.txt": "1"})
    second = await commit(client, team, {"a.txt": "2"}, parent_sha=first["commit_sha"])
    stale = await commit(client, team, {"a.txt": "3"}, parent_sha=first["commit_sha"],
                         expect=409)
    assert stale["error"]["code"] == "branch_moved"
    assert second["commit_sha"] in stale["error"]["message"]
    # without parent_sha the commit goes on top of the current head
    third = await commit(client, team, {"a.txt": "3"})
    assert third["parent_sha"] == second["commit_sha"]


async def test_new_branches_start_from_main_or_the_given_parent(client, team):
    first = await commit(client, team, {"agent.yaml": AGENT_YAML})
    second = await commit(client, team, {"x.txt": "x"})
    feature = await commit(client, team, {"y.txt": "y"}, branch="feature/y")
    assert feature["parent_sha"] == second["commit_sha"]
    old = await commit(client, team, {"z.txt": "z"}, branch="old-base",
                       parent_sha=first["commit_sha"])
    assert old["parent_sha"] == first["commit_sha"]
    files = (await client.get("/v1/agent-config/files?ref=old-base", headers=team.headers)).json()
    assert set(files["files"]) == {"agent.yaml", "z.txt"}
    unknown = await commit(client, team, {"z.txt": "z"}, branch="other", parent_sha="a" * 40,
                           expect=404)
    assert unknown["error"]["code"] == "commit_not_found"
    names = [b["name"] for b in
             (await client.get("/v1/agent-config/branches", headers=team.headers)).json()["data"]]
    assert names == ["feature/y", "main", "old-base"]


@pytest.mark.parametrize(
    "body",
    [
        {"branch": "main", "message": "m", "files": {}, "extra": 1},
        {"branch": "main", "message": "", "files": {"a": "1"}},
        {"branch": "main", "message": "m" * 1001, "files": {"a": "1"}},
        {"branch": "main", "message": "m", "files": {"a": "1"}, "parent_sha": "ABC"},
        {"branch": "main", "message": "m", "files": {"a": "1"}, "parent_sha": "A" * 40},
        {"branch": "", "message": "m", "files": {"a": "1"}},
        {"branch": "a..b", "message": "m", "files": {"a": "1"}},
        {"branch": "refs/heads/main", "message": "m", "files": {"a": "1"}},
        {"branch": "main", "message": "m", "files": {"../a": "1"}},
        {"branch": "main", "message": "m", "files": {"/etc/passwd": "1"}},
        {"branch": "main", "message": "m", "files": {"a//b": "1"}},
        {"branch": "main", "message": "m", "files": {"a/": "1"}},
        {"branch": "main", "message": "m", "files": {"./a": "1"}},
        {"branch": "main", "message": "m", "files": {".git/config": "1"}},
        {"branch": "main", "message": "m", "files": {"a\\b": "1"}},
        {"branch": "main", "message": "m", "files": {"a": 1}},
        {"branch": "main", "message": "m"},
        {"message": "m", "files": {"a": "1"}},
    ],
)
async def test_commit_validation_is_422(client, team, body):
    response = await client.post("/v1/agent-config/commits", json=body, headers=team.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "validation_error"


async def test_commit_content_rules(client, team):
    await commit(client, team, {"a.txt": "1"})
    unchanged = await commit(client, team, {"a.txt": "1"}, expect=422)
    assert unchanged["error"]["code"] == "no_changes"
    missing = await commit(client, team, {"nope.txt": None}, expect=422)
    assert missing["error"]["code"] == "no_such_file"
    conflict = await commit(client, team, {"a.txt/b": "x"}, expect=422)
    assert conflict["error"]["code"] == "path_conflict"
    whitespace = await commit(client, team, {"b.txt": "b"}, message="   ", expect=422)
    assert whitespace["error"]["code"] == "invalid_message"


async def test_commit_idempotency(client, team):
    key = {"Idempotency-Key": "commit-1"}
    first = await client.post("/v1/agent-config/commits", headers={**team.headers, **key},
                              json={"branch": "main", "message": "m", "files": {"a": "1"}})
    again = await client.post("/v1/agent-config/commits", headers={**team.headers, **key},
                              json={"branch": "main", "message": "m", "files": {"a": "1"}})
    assert first.status_code == again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    history = (await client.get("/v1/agent-config/commits", headers=team.headers)).json()
    assert len(history["data"]) == 1
    other = await client.post("/v1/agent-config/commits", headers={**team.headers, **key},
                              json={"branch": "main", "message": "m", "files": {"a": "2"}})
    assert other.status_code == 422
    assert other.json()["error"]["code"] == "idempotency_key_reused"


async def test_concurrent_commits_on_the_same_parent_one_wins(client, team):
    base = await commit(client, team, {"a.txt": "0"})

    async def attempt(text: str):
        return await client.post(
            "/v1/agent-config/commits", headers=team.headers,
            json={"branch": "main", "message": text, "files": {"a.txt": text},
                  "parent_sha": base["commit_sha"]},
        )

    responses = await asyncio.gather(*(attempt(str(i)) for i in range(1, 5)))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201, 409, 409, 409]
    winner = next(r.json() for r in responses if r.status_code == 201)
    branches = (await client.get("/v1/agent-config/branches", headers=team.headers)).json()
    assert branches["data"][0]["commit_sha"] == winner["commit_sha"]


async def test_concurrent_commits_without_parent_all_land(client, team):
    await commit(client, team, {"a.txt": "0"})

    async def attempt(i: int):
        return await client.post(
            "/v1/agent-config/commits", headers=team.headers,
            json={"branch": "main", "message": f"add {i}", "files": {f"f{i}.txt": str(i)}},
        )

    responses = await asyncio.gather(*(attempt(i) for i in range(4)))
    assert all(r.status_code == 201 for r in responses), [r.text for r in responses]
    files = (await client.get("/v1/agent-config/files", headers=team.headers)).json()["files"]
    assert set(files) == {"a.txt", "f0.txt", "f1.txt", "f2.txt", "f3.txt"}


async def test_read_endpoints_errors(client, team):
    assert (await client.get("/v1/agent-config/branches", headers=team.headers)).json() == {
        "data": []
    }
    for url, code in [
        ("/v1/agent-config/commits?branch=main", "branch_not_found"),
        ("/v1/agent-config/files?ref=main", "ref_not_found"),
        ("/v1/agent-config/validate?ref=main", "ref_not_found"),
        (f"/v1/agent-config/files?ref={'a' * 40}", "ref_not_found"),
    ]:
        response = await client.get(url, headers=team.headers)
        assert response.status_code == 404, url
        assert response.json()["error"]["code"] == code
    first = await commit(client, team, {"a.txt": "1"})
    unknown_after = await client.get(f"/v1/agent-config/commits?after={'b' * 40}",
                                     headers=team.headers)
    assert unknown_after.status_code == 404
    for url in ["/v1/agent-config/commits?limit=0", "/v1/agent-config/commits?limit=101",
                "/v1/agent-config/commits?after=xyz", "/v1/agent-config/files?ref="]:
        response = await client.get(url, headers=team.headers)
        assert response.status_code == 422, url
    no_auth = await client.get("/v1/agent-config/branches")
    assert no_auth.status_code == 401
    assert no_auth.headers["WWW-Authenticate"] == "Bearer"
    assert first["commit_sha"]


async def test_validate(client, team, demo_files):
    valid = await commit(client, team, demo_files, message="demo")
    result = (await client.get("/v1/agent-config/validate", headers=team.headers)).json()
    assert result == {"ref": "main", "commit_sha": valid["commit_sha"], "valid": True,
                      "errors": []}
    # An invalid configuration is still committed (it is git); validation reports why.
    broken = await commit(client, team, {"agent.yaml": "name: [unclosed\n",
                                         "tools/Bad-Name.yaml": "x: 1\n"})
    result = (await client.get(f"/v1/agent-config/validate?ref={broken['commit_sha']}",
                               headers=team.headers)).json()
    assert result["valid"] is False and result["commit_sha"] == broken["commit_sha"]
    assert {e["file"] for e in result["errors"]} >= {"agent.yaml", "tools/Bad-Name.yaml"}
    assert all(set(e) == {"file", "field", "message"} for e in result["errors"])


async def test_another_team_sees_nothing(client, team, other_team):
    mine = await commit(client, team, {"agent.yaml": AGENT_YAML})
    sha = mine["commit_sha"]
    for url in [
        "/v1/agent-config/commits?branch=main",
        "/v1/agent-config/files?ref=main",
        f"/v1/agent-config/files?ref={sha}",
        f"/v1/agent-config/validate?ref={sha}",
    ]:
        response = await client.get(url, headers=other_team.headers)
        assert response.status_code == 404, url
    assert (await client.get("/v1/agent-config/branches", headers=other_team.headers)).json() == {
        "data": []
    }
    # committing on top of another team's commit: it does not exist for this team
    response = await client.post(
        "/v1/agent-config/commits", headers=other_team.headers,
        json={"branch": "main", "message": "m", "files": {"a": "1"}, "parent_sha": sha},
    )
    assert response.status_code == 404
    # the other team's own first commit is independent (no parent)
    theirs = await commit(client, other_team, {"agent.yaml": AGENT_YAML})
    assert theirs["parent_sha"] is None


async def test_openapi_lists_json_endpoints_not_the_git_protocol(client):
    spec = (await client.get("/openapi.json")).json()
    assert "/v1/agent-config/commits" in spec["paths"]
    assert not any("repo.git" in path for path in spec["paths"])
    assert spec["components"]["securitySchemes"] == {
        "HTTPBearer": {"type": "http", "scheme": "bearer"}
    }


async def test_service_functions_for_versions(sessions, team, other_team):
    async with transaction(sessions) as session:
        first = await service.create_commit(
            session=session, team_id=team.id, branch="main", message="one",
            files={"agent.yaml": AGENT_YAML, "procedures/a.yaml": "x: 1\n"},
        )
        feature = await service.create_commit(
            session=session, team_id=team.id, branch="feature", message="feature",
            files={"procedures/b.yaml": b"y: 2\n"},
        )
        second = await service.create_commit(
            session=session, team_id=team.id, branch="main", message="replace",
            files={"agent.yaml": AGENT_YAML, "tags.yaml": "[]\n"}, replace_all=True,
        )
    async with sessions() as session:
        assert await service.resolve_ref(session=session, team_id=team.id, ref="main") == second
        assert await service.resolve_ref(session=session, team_id=team.id, ref=first) == first
        assert await service.resolve_ref(session=session, team_id=team.id,
                                         ref="refs/heads/feature") == feature
        assert await service.resolve_ref(session=session, team_id=team.id, ref="nope") is None
        assert await service.resolve_ref(session=session, team_id=other_team.id,
                                         ref=first) is None
        assert await service.is_ancestor_or_equal(session=session, team_id=team.id, sha=first)
        assert await service.is_ancestor_or_equal(session=session, team_id=team.id, sha=second)
        assert not await service.is_ancestor_or_equal(session=session, team_id=team.id,
                                                      sha=feature)
        assert await service.is_ancestor_or_equal(session=session, team_id=team.id, sha=first,
                                                  branch="feature")
        assert not await service.is_ancestor_or_equal(session=session, team_id=other_team.id,
                                                      sha=first)
        assert await service.read_tree_files(session=session, team_id=team.id,
                                             commit_sha=second) == {
            "agent.yaml": AGENT_YAML.encode(), "tags.yaml": b"[]\n"
        }
        assert set(await service.read_tree_files(session=session, team_id=team.id,
                                                 commit_sha=feature)) == {
            "agent.yaml", "procedures/a.yaml", "procedures/b.yaml"
        }
        info = await service.get_commit_info(session=session, team_id=team.id, sha=second)
        assert info.message == "replace" and info.parents == [first]
        with pytest.raises(NotFound):
            await service.get_commit_info(session=session, team_id=other_team.id, sha=second)
        with pytest.raises(NotFound):
            await service.read_tree_files(session=session, team_id=other_team.id,
                                          commit_sha=second)
        with pytest.raises(Conflict):
            await service.create_commit(session=session, team_id=team.id, branch="main",
                                        message="m", files={"z": "z"}, parent_sha=first)
        with pytest.raises(InvalidRequest):
            await service.create_commit(session=session, team_id=team.id, branch="main",
                                        message="m", files={"../z": "z"})


def test_read_directory_skips_git_and_symlinks(tmp_path: Path):
    (tmp_path / "procedures").mkdir()
    (tmp_path / "agent.yaml").write_text("name: A\n")
    (tmp_path / "procedures" / "p.yaml").write_text("x: 1\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "agent.yaml")
    assert service.read_directory(tmp_path) == {
        "agent.yaml": b"name: A\n", "procedures/p.yaml": b"x: 1\n"
    }
