"""The agent-versioning endpoints, rule by rule of the spec."""

from __future__ import annotations

import asyncio

import pytest

URL = "/v1/agent-versioning/versions"
TRAFFIC = "/v1/agent-versioning/versions/traffic"


async def publish(client, team, sha, description="ship it", **headers):
    return await client.post(URL, headers={**team.headers, **headers},
                             json={"staging_commit_sha": sha, "description": description})


async def publish_n(client, team, commit, n: int) -> list[dict]:
    versions = []
    for i in range(n):
        sha = await commit(team, message=f"change {i}", extra={"README.md": f"revision {i}\n"})
        response = await publish(client, team, sha, description=f"release {i}")
        assert response.status_code == 201, response.text
        versions.append(response.json())
    return versions


# ---- publish ---------------------------------------------------------------------------


async def test_publish_returns_the_six_fields(client, team, commit):
    sha = await commit(team, message="first config")
    response = await publish(client, team, sha, description="First release")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"id", "label", "description", "commit_sha", "created_at",
                         "percent_traffic"}
    assert body["label"] == "v1"
    assert body["description"] == "First release"
    assert body["commit_sha"] == sha
    assert body["id"].startswith("ver_")
    assert body["percent_traffic"] == 100  # the first version takes all traffic


async def test_labels_follow_the_sequence_and_later_versions_start_at_zero(client, team, commit):
    versions = await publish_n(client, team, commit, 3)
    assert [v["label"] for v in versions] == ["v1", "v2", "v3"]
    assert [v["percent_traffic"] for v in versions] == [100, 0, 0]


@pytest.mark.parametrize("sha", ["ABCDEF" + "0" * 34, "0" * 39, "0" * 41, "g" * 40, "", 123])
async def test_publish_rejects_a_malformed_sha(client, team, sha):
    response = await client.post(URL, headers=team.headers,
                                 json={"staging_commit_sha": sha, "description": "x"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"


@pytest.mark.parametrize("body", [
    {"staging_commit_sha": "a" * 40},
    {"description": "x"},
    {"staging_commit_sha": "a" * 40, "description": ""},
    {"staging_commit_sha": "a" * 40, "description": "x" * 1001},
    {"staging_commit_sha": "a" * 40, "description": "x", "extra": 1},
    {"staging_commit_sha": "a" * 40, "description": None},
    [],
])
async def test_publish_rejects_malformed_bodies(client, team, body):
    response = await client.post(URL, headers=team.headers, json=body)
    assert response.status_code == 422
    assert "error" in response.json()


async def test_publish_accepts_a_1000_character_description(client, team, commit):
    sha = await commit(team)
    assert (await publish(client, team, sha, description="d" * 1000)).status_code == 201


async def test_publish_unknown_commit_is_404(client, team, commit):
    await commit(team)
    response = await publish(client, team, "0123456789abcdef0123456789abcdef01234567")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "commit_not_found"


async def test_publish_commit_not_on_main_is_404(client, team, commit):
    await commit(team)
    side = await commit(team, branch="experiment", files={"README.md": "wip\n"})
    response = await publish(client, team, side)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "commit_not_found"


async def test_publish_an_older_main_commit_works(client, team, commit):
    old = await commit(team, message="old")
    await commit(team, message="new", files={"README.md": "newer\n"})
    response = await publish(client, team, old)
    assert response.status_code == 201
    assert response.json()["commit_sha"] == old


async def test_publish_another_teams_commit_is_404(client, team, other_team, commit):
    theirs = await commit(other_team)
    await commit(team, files={"README.md": "mine\n"})
    assert (await publish(client, team, theirs)).status_code == 404


async def test_publish_invalid_config_is_422_with_errors(client, team, commit):
    sha = await commit(team, files={"agent.yaml": "name: [unclosed\n"}, replace_all=True)
    response = await publish(client, team, sha)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_config"
    assert error["details"] and error["details"][0]["file"] == "agent.yaml"


async def test_publish_idempotency_key_replays_without_duplicates(client, team, commit):
    sha = await commit(team)
    first = await publish(client, team, sha, **{"Idempotency-Key": "pub-1"})
    again = await publish(client, team, sha, **{"Idempotency-Key": "pub-1"})
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers.get("idempotent-replayed") == "true"
    listed = (await client.get(URL, headers=team.headers)).json()["data"]
    assert len(listed) == 1
    reused = await publish(client, team, sha, description="other", **{"Idempotency-Key": "pub-1"})
    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "idempotency_key_reused"


@pytest.mark.parametrize("key", ["", "   ", "k" * 201])
async def test_publish_rejects_bad_idempotency_keys(client, team, commit, key):
    sha = await commit(team)
    response = await publish(client, team, sha, **{"Idempotency-Key": key})
    assert response.status_code == 422


async def test_concurrent_publishes_get_distinct_labels(client, team, commit):
    sha = await commit(team)
    responses = await asyncio.gather(*[publish(client, team, sha, f"r{i}") for i in range(6)])
    assert all(r.status_code == 201 for r in responses)
    labels = sorted(r.json()["label"] for r in responses)
    assert labels == sorted(f"v{i}" for i in range(1, 7))
    assert sum(r.json()["percent_traffic"] for r in responses) == 100


# ---- list ------------------------------------------------------------------------------


async def test_list_is_newest_first_with_keyset_pages(client, team, commit):
    versions = await publish_n(client, team, commit, 5)
    newest_first = [v["id"] for v in reversed(versions)]

    page = (await client.get(URL, headers=team.headers)).json()
    assert [v["id"] for v in page["data"]] == newest_first and page["has_more"] is False

    first = (await client.get(URL, headers=team.headers, params={"limit": 2})).json()
    assert [v["id"] for v in first["data"]] == newest_first[:2] and first["has_more"]
    second = (await client.get(URL, headers=team.headers,
                               params={"limit": 2, "after": first["data"][-1]["id"]})).json()
    assert [v["id"] for v in second["data"]] == newest_first[2:4] and second["has_more"]
    third = (await client.get(URL, headers=team.headers,
                              params={"limit": 2, "after": second["data"][-1]["id"]})).json()
    assert [v["id"] for v in third["data"]] == newest_first[4:] and not third["has_more"]

    back = (await client.get(URL, headers=team.headers,
                             params={"limit": 2, "before": third["data"][0]["id"]})).json()
    assert [v["id"] for v in back["data"]] == newest_first[2:4] and back["has_more"]
    start = (await client.get(URL, headers=team.headers,
                              params={"limit": 2, "before": newest_first[2]})).json()
    assert [v["id"] for v in start["data"]] == newest_first[:2] and not start["has_more"]


async def test_list_has_traffic_filter(client, team, commit):
    versions = await publish_n(client, team, commit, 3)
    response = await client.post(TRAFFIC, headers=team.headers, json={"traffic_allocation": [
        {"agent_version_id": versions[0]["id"], "percent_traffic": 60},
        {"agent_version_id": versions[2]["id"], "percent_traffic": 40},
    ]})
    assert response.status_code == 200
    routed = (await client.get(URL, headers=team.headers, params={"has_traffic": "true"})).json()
    assert [v["label"] for v in routed["data"]] == ["v3", "v1"]
    everything = (await client.get(URL, headers=team.headers,
                                   params={"has_traffic": "false"})).json()
    assert len(everything["data"]) == 3


async def test_list_both_cursors_is_422(client, team, commit):
    versions = await publish_n(client, team, commit, 2)
    response = await client.get(URL, headers=team.headers, params={
        "before": versions[0]["id"], "after": versions[1]["id"]})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "conflicting_cursors"


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 101}, {"limit": "x"},
                                    {"before": ""}, {"after": ""}, {"has_traffic": "maybe"}])
async def test_list_rejects_bad_parameters(client, team, params):
    response = await client.get(URL, headers=team.headers, params=params)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"


async def test_list_unknown_or_foreign_boundary_is_404(client, team, other_team, commit):
    await publish_n(client, team, commit, 1)
    theirs = await publish_n(client, other_team, commit, 1)
    for params in ({"after": "ver_doesnotexist"}, {"before": theirs[0]["id"]}):
        response = await client.get(URL, headers=team.headers, params=params)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "cursor_not_found"


async def test_list_is_team_scoped(client, team, other_team, commit):
    await publish_n(client, team, commit, 2)
    assert (await client.get(URL, headers=other_team.headers)).json() == {
        "data": [], "has_more": False}


async def test_list_requires_auth(client):
    assert (await client.get(URL)).status_code == 401


# ---- traffic ---------------------------------------------------------------------------


async def test_traffic_sets_the_full_split(client, team, commit):
    v1, v2, v3 = await publish_n(client, team, commit, 3)
    split = [{"agent_version_id": v2["id"], "percent_traffic": 50},
             {"agent_version_id": v3["id"], "percent_traffic": 50}]
    response = await client.post(TRAFFIC, headers=team.headers,
                                 json={"traffic_allocation": split})
    assert response.status_code == 200
    assert response.json() == {"traffic_allocation": split}
    listed = {v["id"]: v["percent_traffic"]
              for v in (await client.get(URL, headers=team.headers)).json()["data"]}
    assert listed == {v1["id"]: 0, v2["id"]: 50, v3["id"]: 50}


async def test_traffic_listing_zero_is_allowed(client, team, commit):
    v1, v2 = await publish_n(client, team, commit, 2)
    response = await client.post(TRAFFIC, headers=team.headers, json={"traffic_allocation": [
        {"agent_version_id": v1["id"], "percent_traffic": 0},
        {"agent_version_id": v2["id"], "percent_traffic": 100}]})
    assert response.status_code == 200


@pytest.mark.parametrize("split_of", [
    lambda a, b: [{"agent_version_id": a, "percent_traffic": 50}],
    lambda a, b: [{"agent_version_id": a, "percent_traffic": 60},
                  {"agent_version_id": b, "percent_traffic": 60}],
    lambda a, b: [{"agent_version_id": a, "percent_traffic": 50},
                  {"agent_version_id": a, "percent_traffic": 50}],
])
async def test_traffic_rule_violations_are_422(client, team, commit, split_of):
    v1, v2 = await publish_n(client, team, commit, 2)
    response = await client.post(TRAFFIC, headers=team.headers,
                                 json={"traffic_allocation": split_of(v1["id"], v2["id"])})
    assert response.status_code == 422
    listed = [v["percent_traffic"] for v in (await client.get(URL, headers=team.headers)).json()[
        "data"]]
    assert sorted(listed) == [0, 100]  # nothing half-applied


@pytest.mark.parametrize("body", [
    {}, {"traffic_allocation": []}, {"traffic_allocation": "x"},
    {"traffic_allocation": [{"agent_version_id": "ver_x"}]},
    {"traffic_allocation": [{"agent_version_id": "ver_x", "percent_traffic": 101}]},
    {"traffic_allocation": [{"agent_version_id": "ver_x", "percent_traffic": -1}]},
    {"traffic_allocation": [{"agent_version_id": "ver_x", "percent_traffic": 50.5}]},
    {"traffic_allocation": [{"agent_version_id": "ver_x", "percent_traffic": "100"}]},
    {"traffic_allocation": [{"agent_version_id": "", "percent_traffic": 100}]},
    {"traffic_allocation": [{"agent_version_id": "v" * 101, "percent_traffic": 100}]},
    {"traffic_allocation": [{"agent_version_id": "ver_x", "percent_traffic": 100, "x": 1}]},
    {"traffic_allocation": [{"agent_version_id": "ver_x", "percent_traffic": 100}], "x": 1},
    {"traffic_allocation": [{"agent_version_id": f"v{i}", "percent_traffic": 1}
                            for i in range(101)]},
])
async def test_traffic_malformed_bodies_are_422(client, team, body):
    response = await client.post(TRAFFIC, headers=team.headers, json=body)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"


async def test_traffic_unknown_foreign_or_archived_version_is_404(client, team, other_team,
                                                                   commit):
    v1, v2 = await publish_n(client, team, commit, 2)
    (theirs,) = await publish_n(client, other_team, commit, 1)
    assert (await client.delete(f"{URL}/{v2['id']}", headers=team.headers)).status_code == 204
    for unknown in ("ver_missing", theirs["id"], v2["id"]):
        response = await client.post(TRAFFIC, headers=team.headers, json={"traffic_allocation": [
            {"agent_version_id": v1["id"], "percent_traffic": 50},
            {"agent_version_id": unknown, "percent_traffic": 50}]})
        assert response.status_code == 404, unknown
        assert response.json()["error"]["code"] == "agent_version_not_found"


async def test_traffic_idempotency_key(client, team, commit):
    _, v2 = await publish_n(client, team, commit, 2)
    body = {"traffic_allocation": [{"agent_version_id": v2["id"], "percent_traffic": 100}]}
    first = await client.post(TRAFFIC, headers={**team.headers, "Idempotency-Key": "t1"}, json=body)
    again = await client.post(TRAFFIC, headers={**team.headers, "Idempotency-Key": "t1"}, json=body)
    assert first.status_code == again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"


# ---- archive ---------------------------------------------------------------------------


async def test_archive_needs_zero_traffic_and_leaves_the_list(client, team, other_team, commit):
    v1, v2 = await publish_n(client, team, commit, 2)
    response = await client.delete(f"{URL}/{v1['id']}", headers=team.headers)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "agent_version_has_traffic"
    assert (await client.delete(f"{URL}/{v2['id']}", headers=other_team.headers)).status_code == 404
    assert (await client.delete(f"{URL}/{v2['id']}", headers=team.headers)).status_code == 204
    listed = [v["id"] for v in (await client.get(URL, headers=team.headers)).json()["data"]]
    assert listed == [v1["id"]]
    assert (await client.delete(f"{URL}/{v2['id']}", headers=team.headers)).status_code == 404
