"""Closing idle conversations with a deterministic summary and resolution."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from helpline.conversations import service as conversations
from helpline.conversations.models import ROLE_AGENT, ROLE_USER, STATUS_OPEN, Conversation
from helpline.db.base import utcnow

MAX_NEED_CHARS = 200


def _clip(text: str, limit: int = MAX_NEED_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def summarize(
    conversation: Any, messages: Sequence[Any], audit: Sequence[Any]
) -> tuple[str, str]:
    """(summary, resolution): the first user need, what the agent did, how it ended."""
    first_need = next((m.text for m in messages if m.role == ROLE_USER), None)
    procedures = [a.payload.get("procedure") for a in audit if a.text == "procedure started"]
    articles = [a.payload.get("title") for a in audit if a.text == "knowledge answer"]
    tools = [a.payload.get("tool") for a in audit if a.text == "tool call"]
    handoff = next((a.payload for a in audit if a.text == "handoff"), None)
    resolved = any(a.text == "resolved" for a in audit)
    human_replies = sum(1 for m in messages if m.role == ROLE_AGENT)

    parts = [f"Customer asked: {_clip(first_need)}" if first_need
             else "The customer sent no message."]
    did = []
    if procedures:
        did.append("ran " + ", ".join(dict.fromkeys(p for p in procedures if p)))
    if tools:
        did.append("called " + ", ".join(dict.fromkeys(t for t in tools if t)))
    if articles:
        did.append("answered from " + ", ".join(f"'{t}'" for t in dict.fromkeys(articles) if t))
    if did:
        parts.append("The agent " + "; ".join(did) + ".")
    if handoff is not None:
        destination = handoff.get("destination", "AGENT")
        reason = str(handoff.get("reason", "")).replace("_", " ")
        parts.append(f"Handed off to {destination} ({reason}); "
                     f"{human_replies} human repl{'y' if human_replies == 1 else 'ies'}.")
        resolution = f"Handed off to {destination}"
    elif resolved:
        resolution = "Resolved by the agent"
    elif articles:
        resolution = "Answered from the knowledge base"
    else:
        resolution = "Closed without resolution"
    if conversation.csat_rating is not None:
        parts.append(f"Rated {conversation.csat_rating}/5.")
    return " ".join(parts), resolution


async def close_with_summary(
    *, session: AsyncSession, conversation: Conversation, reason: str
) -> None:
    """Write summary and resolution, then close."""
    messages, _, audit = await conversations.load_details(session=session,
                                                          conversation_id=conversation.id)
    summary, resolution = summarize(conversation, messages, audit)
    await conversations.close_conversation(session=session, conversation=conversation,
                                           summary=summary, resolution=resolution, reason=reason)


async def close_idle(*, session: AsyncSession, idle: timedelta, limit: int = 100) -> int:
    """Close open conversations without activity for ``idle``; returns how many."""
    stale = (await session.execute(
        select(Conversation)
        .where(Conversation.status == STATUS_OPEN,
               Conversation.last_activity_at < utcnow() - idle)
        .order_by(Conversation.last_activity_at).limit(limit)
        .with_for_update(skip_locked=True)
    )).scalars().all()
    for conversation in stale:
        await close_with_summary(session=session, conversation=conversation, reason="idle")
    return len(stale)
