"""The agent end to end through ``POST /v1/chat/messages`` and the conversation endpoints."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from helpline.conversations import closing, webhooks
from helpline.conversations.models import Conversation, Message
from helpline.db.engine import transaction

CHAT = "/v1/chat/messages"


async def say(client, team, text, user="user-1", **extra):
    headers = {**team.headers, **extra.pop("headers", {})}
    response = await client.post(CHAT, headers=headers,
                                 json={"user_id": user, "text": text, **extra})
    assert response.status_code == 200, response.text
    return response.json()


async def test_procedure_with_slot_and_tool_call(client, demo_team, loopback):
    first = await say(client, demo_team, "hi, where is my order?", user_token="tok-secret-1")
    assert first["handoff"] is False and first["destination"] == "AI"
    assert "order number" in first["messages"][-1]["text"].lower()

    retry = await say(client, demo_team, "I don't know", user_token="tok-secret-1")
    assert "doesn't look like an order number" in retry["messages"][-1]["text"]

    loopback.requests.clear()
    done = await say(client, demo_team, "it's A-10001", user_token="tok-secret-1")
    assert done["conversation_id"] == first["conversation_id"]
    reply = " ".join(m["text"] for m in done["messages"])
    assert "A-10001 has shipped" in reply and "1Z999AA110001" in reply
    # The tool got the user's token; the audit log did not.
    (call,) = [r for r in loopback.requests if r["path"] == "/demo-api/orders/A-10001"]
    assert call["headers"]["authorization"] == "Bearer tok-secret-1"

    conversation = (await client.get(f"/v1/conversations/{done['conversation_id']}",
                                     headers=demo_team.headers)).json()
    roles = [m["role"] for m in conversation["messages"]]
    assert roles[:5] == ["USER", "AI", "USER", "AI", "USER"] and set(roles[5:]) == {"AI"}
    assert conversation["messages"][4]["text"] == "it's A-10001"
    audit = {a["text"]: a["payload"] for a in conversation["audit_logs"]}
    assert audit["agent version chosen"]["label"] == "v1"
    assert audit["procedure started"]["procedure"] == "order_status"
    tool = audit["tool call"]
    assert tool["tool"] == "lookup_order" and tool["status"] == 200 and tool["ok"] is True
    assert tool["request"]["headers"]["Authorization"] == "[redacted]"
    assert "tok-secret-1" not in str(conversation)
    assert {"name": "orders", "level": 1} in conversation["tags"]


async def test_knowledge_answer_with_source(client, demo_team):
    reply = await say(client, demo_team, "can i still return headphones i bought 3 weeks ago?")
    (message,) = reply["messages"]
    assert message["role"] == "AI"
    assert message["sources"] == [{"slug": "returns-and-refunds",
                                   "title": "Returns and refunds"}]
    assert "return" in message["text"].lower()


async def test_out_of_scope_gets_fallback_then_handoff(client, demo_team):
    first = await say(client, demo_team, "what's the weather like in Paris tomorrow?")
    assert first["handoff"] is False
    assert "not sure I can help" in first["messages"][0]["text"]
    second = await say(client, demo_team, "can you recommend a good lasagna recipe")
    assert second["handoff"] is True and second["destination"] == "AGENT"


async def test_handoff_then_human_reply(client, demo_team):
    handed = await say(client, demo_team, "can I please speak to a real person")
    assert handed["handoff"] is True and handed["destination"] == "AGENT"
    conversation_id = handed["conversation_id"]

    human = await client.post(f"/v1/conversations/{conversation_id}/messages",
                              headers=demo_team.headers, json={"text": "Hi, I'm Sam."})
    assert human.status_code == 201 and human.json()["role"] == "AGENT"

    after = await say(client, demo_team, "my parcel never arrived")
    assert after["messages"] == [] and after["destination"] == "AGENT"

    whole = (await client.get(f"/v1/conversations/{conversation_id}",
                              headers=demo_team.headers)).json()
    assert whole["undeflected"] is True and whole["destination"] == "AGENT"
    assert [m["role"] for m in whole["messages"]] == ["USER", "AI", "AGENT", "USER"]
    assert any(a["text"] == "handoff" and a["payload"]["reason"] == "user_request"
               for a in whole["audit_logs"])


async def test_csat_notes_tags_and_listing(client, demo_team, other_team):
    reply = await say(client, demo_team, "how do I reset my password?")
    cid = reply["conversation_id"]
    rated = await client.post(f"/v1/conversations/{cid}/csat", headers=demo_team.headers,
                              json={"rating": 5})
    assert rated.status_code == 200
    assert rated.json()["csat_rating"] == 5 and rated.json()["csat_role"] == "AI"
    assert (await client.post(f"/v1/conversations/{cid}/csat", headers=demo_team.headers,
                              json={"rating": 6})).status_code == 422
    patched = await client.patch(f"/v1/conversations/{cid}", headers=demo_team.headers, json={
        "notes": "VIP customer", "tags": [{"name": "account", "level": 1}]})
    assert patched.status_code == 200
    assert patched.json()["notes"] == "VIP customer"
    assert patched.json()["tags"] == [{"name": "account", "level": 1}]
    listed = (await client.get("/v1/conversations", headers=demo_team.headers,
                               params={"user_id": "user-1"})).json()
    assert [c["id"] for c in listed["data"]] == [cid]
    assert (await client.get("/v1/conversations", headers=demo_team.headers,
                             params={"user_id": "someone-else"})).json()["data"] == []
    for method, path, body in (("GET", f"/v1/conversations/{cid}", None),
                               ("PATCH", f"/v1/conversations/{cid}", {"notes": "x"}),
                               ("POST", f"/v1/conversations/{cid}/messages", {"text": "x"}),
                               ("POST", f"/v1/conversations/{cid}/csat", {"rating": 1})):
        response = await client.request(method, path, headers=other_team.headers, json=body)
        assert response.status_code == 404, (method, path)


@pytest.mark.parametrize("body", [
    {}, {"user_id": "u"}, {"text": "hi"}, {"user_id": "", "text": "hi"},
    {"user_id": "u" * 201, "text": "hi"}, {"user_id": "u", "text": ""},
    {"user_id": "u", "text": "x" * 4001}, {"user_id": "u", "text": "hi", "metadata": []},
    {"user_id": "u", "text": "hi", "extra": 1}, {"user_id": 5, "text": "hi"},
])
async def test_chat_body_errors_are_422(client, demo_team, body):
    response = await client.post(CHAT, headers=demo_team.headers, json=body)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"


async def test_no_published_version_is_409(client, team):
    response = await client.post(CHAT, headers=team.headers, json={"user_id": "u", "text": "hi"})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "no_published_version"


async def test_idempotent_retry_stores_the_message_once(client, demo_team, sessions):
    headers = {"Idempotency-Key": "send-1"}
    first = await say(client, demo_team, "how do I reset my password?", headers=headers)
    again = await client.post(CHAT, headers={**demo_team.headers, **headers},
                              json={"user_id": "user-1", "text": "how do I reset my password?"})
    assert again.status_code == 200 and again.json() == first
    assert again.headers["idempotent-replayed"] == "true"
    async with sessions() as session:
        users = (await session.execute(select(func.count()).select_from(Message).where(
            Message.role == "USER"))).scalar_one()
    assert users == 1


async def test_twenty_concurrent_messages_are_serialised(client, demo_team, sessions):
    texts = [f"question number {i}: how do I reset my password?" for i in range(20)]
    results = await asyncio.gather(*[say(client, demo_team, t) for t in texts])
    assert len({r["conversation_id"] for r in results}) == 1
    async with sessions() as session:
        rows = (await session.execute(select(Message.role, Message.text).order_by(Message.seq)))
        messages = rows.all()
    assert len([m for m in messages if m.role == "USER"]) == 20
    # Each user message is followed directly by its own reply: nothing interleaved.
    for index in range(0, len(messages), 2):
        assert messages[index].role == "USER" and messages[index + 1].role == "AI"
    assert sorted(m.text for m in messages if m.role == "USER") == sorted(texts)


async def test_idle_close_writes_summary_and_a_new_message_reopens(client, demo_team, sessions):
    reply = await say(client, demo_team, "where is my order?")
    await say(client, demo_team, "A-10002")
    cid = reply["conversation_id"]
    async with transaction(sessions) as session:
        await session.execute(update(Conversation).values(
            last_activity_at=Conversation.last_activity_at - timedelta(hours=2)))
    async with transaction(sessions) as session:
        assert await closing.close_idle(session=session, idle=timedelta(minutes=30)) == 1
    closed = (await client.get(f"/v1/conversations/{cid}", headers=demo_team.headers)).json()
    assert closed["status"] == "closed"
    assert closed["summary"].startswith("Customer asked: where is my order?")
    assert "order_status" in closed["summary"] and "lookup_order" in closed["summary"]
    assert closed["resolution"] == "Resolved by the agent"
    reopened = await say(client, demo_team, "thanks! and how do refunds work?")
    assert reopened["conversation_id"] == cid
    again = (await client.get(f"/v1/conversations/{cid}", headers=demo_team.headers)).json()
    assert again["status"] == "open" and again["updated_at"] > closed["updated_at"]


async def test_handoff_webhook_is_signed_and_retried(client, team, sessions, loopback, app,
                                                      agent_kit):
    files = agent_kit.files()
    files["agent.yaml"] = files["agent.yaml"].replace(
        "  destination: AGENT", f"  destination: AGENT\n  webhook_url: {loopback.base_url}/hooks/a")
    await agent_kit.publish(team.id, files)
    loopback.requests.clear()
    handed = await say(client, team, "get me a human agent please")
    assert handed["handoff"] is True
    runtime = app.state.runtime
    async with transaction(sessions) as session:
        assert await webhooks.deliver_due(session=session, client=runtime.agent.http) == 1
    (hook,) = [r for r in loopback.requests if r["path"] == "/hooks/a"]
    expected = "sha256=" + hmac.new(team.chat_secret.encode(), hook["body"],
                                    hashlib.sha256).hexdigest()
    assert hook["headers"]["x-helpline-signature"] == expected
    assert handed["conversation_id"].encode() in hook["body"]
    async with transaction(sessions) as session:
        assert await webhooks.deliver_due(session=session, client=runtime.agent.http) == 0


async def test_failed_webhook_backs_off(sessions, team, loopback, app, client, agent_kit):
    files = agent_kit.files()
    hook = f"{loopback.base_url}/broken-hook"
    files["agent.yaml"] = files["agent.yaml"].replace(
        "  destination: AGENT", f"  destination: AGENT\n  webhook_url: {hook}")
    await agent_kit.publish(team.id, files)
    await say(client, team, "human please")
    async with transaction(sessions) as session:
        await webhooks.deliver_due(session=session, client=app.state.runtime.agent.http)
    async with sessions() as session:
        delivery = (await session.execute(select(webhooks.WebhookDelivery))).scalar_one()
    assert delivery.status == "pending" and delivery.attempts == 1
    assert delivery.last_error == "HTTP 500"
    assert delivery.next_attempt_at > delivery.created_at + timedelta(seconds=9)
