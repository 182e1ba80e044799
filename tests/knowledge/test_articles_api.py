"""Knowledge-base articles: drafts, publishing, reading, listing, deleting, isolation."""

from __future__ import annotations

import pytest

from helpline.knowledge.service import IndexCache, load_articles

URL = "/v1/knowledge/articles"


async def put(client, team, slug, title="Returns", body="You can return items within 30 days."):
    return await client.put(f"{URL}/{slug}", headers=team.headers,
                            json={"title": title, "body": body})


async def test_put_creates_then_updates_the_draft(client, team):
    created = await put(client, team, "returns")
    assert created.status_code == 201
    article = created.json()
    assert article["slug"] == "returns"
    assert article["draft"] == {"title": "Returns",
                                "body": "You can return items within 30 days."}
    assert article["live"] is None and article["published_at"] is None
    updated = await put(client, team, "returns", body="Returns are free for 30 days.")
    assert updated.status_code == 200
    assert updated.json()["draft"]["body"] == "Returns are free for 30 days."
    assert updated.json()["id"] == article["id"]


async def test_publish_makes_the_draft_live(client, team):
    await put(client, team, "returns")
    published = await client.post(f"{URL}/returns/publish", headers=team.headers)
    assert published.status_code == 200
    body = published.json()
    assert body["live"]["body"] == "You can return items within 30 days."
    assert body["draft"] is None and body["published_at"] is not None
    again = await client.post(f"{URL}/returns/publish", headers=team.headers)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "no_draft"


async def test_retrieval_reads_live_or_draft_with_fallback(client, team, sessions):
    await put(client, team, "returns", body="Live text about returns.")
    await client.post(f"{URL}/returns/publish", headers=team.headers)
    await put(client, team, "returns", body="Draft text about returns.")
    await put(client, team, "warranty", title="Warranty", body="Two years of warranty.")
    async with sessions() as session:
        live = await load_articles(session=session, team_id=team.id, mode="live")
        draft = await load_articles(session=session, team_id=team.id, mode="draft")
    assert [(a.slug, a.body) for a in live] == [("returns", "Live text about returns.")]
    assert [(a.slug, a.body) for a in draft] == [("returns", "Draft text about returns."),
                                                 ("warranty", "Two years of warranty.")]


async def test_index_cache_rebuilds_after_a_change(client, team, sessions):
    cache = IndexCache()
    await put(client, team, "returns", title="Returns and refunds",
              body="You can return any item within 30 days for a full refund.")
    await client.post(f"{URL}/returns/publish", headers=team.headers)
    async with sessions() as session:
        first = await cache.get(session=session, team_id=team.id, mode="live")
        assert await cache.get(session=session, team_id=team.id, mode="live") is first
    await client.delete(f"{URL}/returns", headers=team.headers)
    async with sessions() as session:
        second = await cache.get(session=session, team_id=team.id, mode="live")
    assert second is not first
    assert second.best("can I return an item for a refund?") is None


async def test_get_list_delete(client, team):
    for slug in ("a-one", "b-two", "c-three"):
        await put(client, team, slug)
    one = await client.get(f"{URL}/b-two", headers=team.headers)
    assert one.status_code == 200 and one.json()["slug"] == "b-two"
    page = (await client.get(URL, headers=team.headers, params={"limit": 2})).json()
    assert [a["slug"] for a in page["data"]] == ["c-three", "b-two"] and page["has_more"]
    rest = (await client.get(URL, headers=team.headers,
                             params={"limit": 2, "after": page["data"][-1]["id"]})).json()
    assert [a["slug"] for a in rest["data"]] == ["a-one"] and not rest["has_more"]
    assert (await client.delete(f"{URL}/b-two", headers=team.headers)).status_code == 204
    assert (await client.get(f"{URL}/b-two", headers=team.headers)).status_code == 404
    assert (await client.delete(f"{URL}/b-two", headers=team.headers)).status_code == 404


async def test_other_team_gets_404(client, team, other_team):
    await put(client, team, "returns")
    for method, path in (("GET", f"{URL}/returns"), ("DELETE", f"{URL}/returns"),
                         ("POST", f"{URL}/returns/publish")):
        response = await client.request(method, path, headers=other_team.headers)
        assert response.status_code == 404, (method, path)
    assert (await client.get(URL, headers=other_team.headers)).json()["data"] == []


@pytest.mark.parametrize("slug,body", [
    ("Bad_Slug", {"title": "t", "body": "b"}),
    ("ok", {"title": "", "body": "b"}),
    ("ok", {"title": "t", "body": ""}),
    ("ok", {"title": "t"}),
    ("ok", {"title": "t", "body": "b", "extra": True}),
    ("ok", {"title": 1, "body": "b"}),
])
async def test_bad_input_is_422(client, team, slug, body):
    response = await client.put(f"{URL}/{slug}", headers=team.headers, json=body)
    assert response.status_code == 422
    assert "code" in response.json()["error"]
