"""NOTIFY fan-out of new messages, and engine decisions not covered by the chat flow."""

from __future__ import annotations

import asyncio
import json

import psycopg

from helpline.agent.engine import BuiltinEngine, prepare
from helpline.agent.procedures import ToolResult
from helpline.agent.retrieval import Article, KnowledgeIndex
from helpline.agentconfig.schema import load_config
from helpline.conversations.service import EVENTS_CHANNEL
from helpline.db.engine import libpq_url


async def test_new_messages_are_notified_after_commit(client, demo_team, database_url):
    listener = await psycopg.AsyncConnection.connect(libpq_url(database_url), autocommit=True)
    try:
        await listener.execute(f"LISTEN {EVENTS_CHANNEL}")
        response = await client.post("/v1/chat/messages", headers=demo_team.headers,
                                     json={"user_id": "listener", "text": "reset my password"})
        body = response.json()

        async def first_event() -> dict:
            async for note in listener.notifies():
                return json.loads(note.payload)
            raise AssertionError("no notification")

        event = await asyncio.wait_for(first_event(), timeout=5)
    finally:
        await listener.close()
    assert event["team_id"] == demo_team.id and event["user_id"] == "listener"
    assert event["conversation_id"] == body["conversation_id"]
    assert [m["id"] for m in body["messages"]] == event["message_ids"][1:]


def _engine(agent_kit_files: dict[str, str], articles: list[Article]) -> BuiltinEngine:
    config, errors = load_config(agent_kit_files)
    assert config is not None, errors

    async def no_tools(tool, inputs):  # type: ignore[no-untyped-def]
        return ToolResult(ok=False, error="not in this test")

    return BuiltinEngine(prepare(config), KnowledgeIndex.build(articles), no_tools)


ARTICLES = [Article("returns", "Returns and refunds",
                    "You can return any item within 30 days of delivery for a full refund.")]


async def test_human_request_abandons_a_running_procedure(agent_kit):
    engine = _engine(agent_kit.files(), ARTICLES)
    first = await engine.reply(state={}, text="where is my order", metadata={})
    assert first.state.get("procedure")
    second = await engine.reply(state=first.state, text="let me talk to a person", metadata={})
    assert second.handoff == {"destination": "AGENT", "reason": "user_request"}
    assert "procedure" not in second.state
    assert second.audit[0][0] == "procedure abandoned"


async def test_a_knowledge_answer_resets_the_fallback_count(agent_kit):
    engine = _engine(agent_kit.files(), ARTICLES)
    miss = await engine.reply(state={}, text="what's the capital of peru", metadata={})
    assert miss.state["fallbacks"] == 1 and miss.handoff is None
    hit = await engine.reply(state=miss.state, text="can I return an item for a refund?",
                             metadata={})
    assert hit.replies[0].sources == [{"slug": "returns", "title": "Returns and refunds"}]
    assert hit.state["fallbacks"] == 0
    again = await engine.reply(state=hit.state, text="who won the football", metadata={})
    assert again.handoff is None


async def test_knowledge_can_be_disabled(agent_kit):
    files = agent_kit.files()
    files["agent.yaml"] = files["agent.yaml"].replace("  enabled: true", "  enabled: false")
    engine = _engine(files, ARTICLES)
    result = await engine.reply(state={}, text="can I return an item for a refund?", metadata={})
    assert result.replies[0].sources == []


async def test_a_confident_article_beats_a_loosely_matching_procedure(agent_kit):
    articles = [Article("customs", "International shipping and customs",
                        "Orders shipped outside the US may be charged customs duty and import "
                        "taxes by the destination country, paid by the recipient.")]
    engine = _engine(agent_kit.files(), articles)
    loose = await engine.reply(state={}, text="customs duty for sending an order to germany",
                               metadata={})
    assert loose.replies[0].sources == [{"slug": "customs",
                                         "title": "International shipping and customs"}]
    assert loose.audit[0][0] == "procedure skipped"
    exact = await engine.reply(state={}, text="where is my order", metadata={})
    assert exact.state.get("procedure", {}).get("procedure") == "order_status"
