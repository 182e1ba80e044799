"""Conversation storage: find/open, messages, audit entries, tags, CSAT, notes, closing."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from helpline.api.pagination import Page, PageRequest, paginate
from helpline.conversations.models import (
    ROLE_AGENT,
    ROLE_AI,
    ROLE_USER,
    STATUS_CLOSED,
    STATUS_OPEN,
    AuditLog,
    Conversation,
    ConversationTag,
    Message,
)
from helpline.db.base import utcnow
from helpline.errors import Conflict, InvalidRequest, NotFound
from helpline.ids import new_id

EVENTS_CHANNEL = "helpline_events"
CONVERSATIONS = Conversation.__table__


def _lock_number(*parts: str) -> int:
    digest = hashlib.sha256("\n".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def lock_user(session: AsyncSession, team_id: str, user_id: str) -> None:
    """Serialise everything that writes one user's conversations (held until commit)."""
    await session.execute(select(func.pg_advisory_xact_lock(_lock_number("user", team_id,
                                                                           user_id))))


async def latest_conversation(
    *, session: AsyncSession, team_id: str, user_id: str, flow_id: str | None = None,
    any_flow: bool = True,
) -> Conversation | None:
    """The user's most recently active conversation (optionally of one flow)."""
    query = select(Conversation).where(
        Conversation.team_id == team_id, Conversation.user_id == user_id
    )
    if not any_flow:
        query = query.where(Conversation.flow_id.is_(None) if flow_id is None
                            else Conversation.flow_id == flow_id)
    query = query.order_by(Conversation.last_activity_at.desc(), Conversation.id.desc()).limit(1)
    return (await session.execute(query)).scalar_one_or_none()


async def open_conversation(
    *,
    session: AsyncSession,
    team_id: str,
    user_id: str,
    metadata: dict[str, Any] | None = None,
    flow_id: str | None = None,
    agent_version_id: str | None = None,
) -> Conversation:
    """Start a conversation."""
    now = utcnow()
    conversation = Conversation(
        id=new_id("conv"), team_id=team_id, user_id=user_id, flow_id=flow_id,
        agent_version_id=agent_version_id, destination="AI", status=STATUS_OPEN,
        metadata_=dict(metadata or {}), undeflected=False, engine_state={},
        created_at=now, updated_at=now, last_activity_at=now,
    )
    session.add(conversation)
    await session.flush()
    return conversation


def touch(conversation: Conversation, *, reopen: bool = True) -> None:
    """Mark activity: updated now (export sees it again), reopened if it was closed."""
    now = utcnow()
    conversation.updated_at = conversation.last_activity_at = now
    if reopen and conversation.status == STATUS_CLOSED:
        conversation.status, conversation.closed_at = STATUS_OPEN, None


def merge_metadata(conversation: Conversation, metadata: dict[str, Any] | None) -> None:
    """Add or overwrite metadata keys (never drops existing ones)."""
    if metadata:
        conversation.metadata_ = {**conversation.metadata_, **metadata}


async def add_message(
    *,
    session: AsyncSession,
    conversation: Conversation,
    role: str,
    text: str,
    sources: Sequence[dict[str, str]] = (),
    seen: bool = False,
) -> Message:
    """Append a message; AI/AGENT messages count as unread until seen."""
    now = utcnow()
    message = Message(
        id=new_id("msg"), team_id=conversation.team_id, conversation_id=conversation.id,
        user_id=conversation.user_id, role=role, text=text, sources=list(sources),
        created_at=now, seen_at=now if (seen or role == ROLE_USER) else None,
    )
    session.add(message)
    return message


def add_audit(
    session: AsyncSession, conversation: Conversation, text: str, payload: dict[str, Any]
) -> None:
    """Record an agent decision or event on the conversation."""
    session.add(AuditLog(team_id=conversation.team_id, conversation_id=conversation.id,
                         text=text, payload=_jsonable(payload), created_at=utcnow()))


def _jsonable(payload: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = orjson.loads(orjson.dumps(payload, default=str))
    return result


async def add_tags(
    *, session: AsyncSession, conversation: Conversation, tags: dict[str, int]
) -> None:
    """Apply tags (name → level); re-applying one keeps it once."""
    if not tags:
        return
    now = utcnow()
    await session.execute(
        insert(ConversationTag)
        .values([{"team_id": conversation.team_id, "conversation_id": conversation.id,
                  "name": name, "level": level, "created_at": now}
                 for name, level in tags.items()])
        .on_conflict_do_update(index_elements=["conversation_id", "name"],
                               set_={"level": insert(ConversationTag).excluded.level})
    )


async def set_tags(
    *, session: AsyncSession, conversation: Conversation, tags: dict[str, int]
) -> None:
    """Replace the conversation's tags."""
    await session.execute(delete(ConversationTag).where(
        ConversationTag.conversation_id == conversation.id))
    await add_tags(session=session, conversation=conversation, tags=tags)


def hand_off(conversation: Conversation, *, destination: str) -> None:
    """Route the conversation to humans: the AI stops answering it."""
    conversation.destination = destination
    conversation.undeflected = True


async def notify(session: AsyncSession, conversation: Conversation,
                 message_ids: Sequence[str]) -> None:
    """Tell every node (LISTEN) that messages were added; delivered when the commit lands."""
    payload = orjson.dumps({
        "team_id": conversation.team_id, "conversation_id": conversation.id,
        "user_id": conversation.user_id, "message_ids": list(message_ids),
    }).decode()
    await session.execute(select(func.pg_notify(EVENTS_CHANNEL, payload)))


async def get_conversation(
    *, session: AsyncSession, team_id: str, conversation_id: str, for_update: bool = False
) -> Conversation:
    """The team's conversation with this id."""
    query = select(Conversation).where(Conversation.team_id == team_id,
                                       Conversation.id == conversation_id)
    if for_update:
        query = query.with_for_update()
    conversation = (await session.execute(query)).scalar_one_or_none()
    if conversation is None:
        raise NotFound("conversation not found", code="conversation_not_found")
    return conversation


async def add_agent_reply(
    *, session: AsyncSession, team_id: str, conversation_id: str, text: str
) -> tuple[Conversation, Message]:
    """A human agent's reply (role AGENT)."""
    conversation = await get_conversation(session=session, team_id=team_id,
                                          conversation_id=conversation_id)
    await lock_user(session, team_id, conversation.user_id)
    await session.refresh(conversation)
    message = await add_message(session=session, conversation=conversation, role=ROLE_AGENT,
                                text=text)
    touch(conversation)
    add_audit(session, conversation, "human reply", {"message_id": message.id})
    await session.flush()
    await notify(session, conversation, [message.id])
    return conversation, message


async def rate(
    *, session: AsyncSession, team_id: str, conversation_id: str, rating: int
) -> Conversation:
    """Store the user's CSAT rating; csat_role says who handled the conversation."""
    if not 1 <= rating <= 5:
        raise InvalidRequest("rating must be 1 to 5", code="invalid_rating")
    conversation = await get_conversation(session=session, team_id=team_id,
                                          conversation_id=conversation_id, for_update=True)
    conversation.csat_rating = rating
    conversation.csat_role = ROLE_AGENT if conversation.undeflected else ROLE_AI
    conversation.updated_at = utcnow()
    add_audit(session, conversation, "csat", {"rating": rating, "role": conversation.csat_role})
    await session.flush()
    return conversation


async def update_conversation(
    *,
    session: AsyncSession,
    team_id: str,
    conversation_id: str,
    notes: str | None = None,
    tags: dict[str, int] | None = None,
) -> Conversation:
    """Set the internal note and/or replace the tags."""
    conversation = await get_conversation(session=session, team_id=team_id,
                                          conversation_id=conversation_id, for_update=True)
    if notes is not None:
        conversation.notes = notes
    if tags is not None:
        await set_tags(session=session, conversation=conversation, tags=tags)
    conversation.updated_at = utcnow()
    add_audit(session, conversation, "conversation updated",
              {"notes": notes is not None, "tags": sorted(tags) if tags is not None else None})
    await session.flush()
    return conversation


async def close_conversation(
    *, session: AsyncSession, conversation: Conversation, summary: str, resolution: str,
    reason: str,
) -> None:
    """Close with a summary and resolution (a later user message reopens it)."""
    if conversation.status == STATUS_CLOSED:
        raise Conflict("conversation already closed", code="conversation_closed")
    now = utcnow()
    conversation.status, conversation.closed_at = STATUS_CLOSED, now
    conversation.summary, conversation.resolution = summary, resolution
    conversation.updated_at = now
    add_audit(session, conversation, "conversation closed", {"reason": reason})
    await session.flush()


async def list_conversations(
    *, session: AsyncSession, team_id: str, user_id: str | None, page: PageRequest
) -> Page:
    """The team's conversations (optionally one user's), newest first."""
    query = select(CONVERSATIONS).where(CONVERSATIONS.c.team_id == team_id)
    if user_id is not None:
        query = query.where(CONVERSATIONS.c.user_id == user_id)
    return await paginate(session, query, table=CONVERSATIONS, team_id=team_id, page=page,
                          not_found_message="the before/after id is not a conversation of "
                                            "this team")


async def load_details(
    *, session: AsyncSession, conversation_id: str
) -> tuple[list[Any], list[Any], list[Any]]:
    """Messages (in order), tags and audit entries of one conversation."""
    messages = (await session.execute(
        select(Message.__table__).where(Message.conversation_id == conversation_id)
        .order_by(Message.seq))).all()
    tags = (await session.execute(
        select(ConversationTag.name, ConversationTag.level)
        .where(ConversationTag.conversation_id == conversation_id)
        .order_by(ConversationTag.level, ConversationTag.name))).all()
    audit = (await session.execute(
        select(AuditLog.text, AuditLog.payload, AuditLog.created_at)
        .where(AuditLog.conversation_id == conversation_id).order_by(AuditLog.id))).all()
    return list(messages), list(tags), list(audit)


def message_dict(row: Any) -> dict[str, Any]:
    """A message as the v1 API shows it."""
    return {"id": row.id, "role": row.role, "text": row.text, "created_at": row.created_at,
            "sources": row.sources or []}


async def conversation_dict(*, session: AsyncSession, conversation: Any) -> dict[str, Any]:
    """One conversation whole: fields, messages, tags, audit log."""
    messages, tags, audit = await load_details(session=session, conversation_id=conversation.id)
    return {
        **conversation_summary(conversation),
        "messages": [message_dict(m) for m in messages],
        "tags": [{"name": t.name, "level": t.level} for t in tags],
        "audit_logs": [{"text": a.text, "payload": a.payload, "created_at": a.created_at}
                       for a in audit],
    }


def conversation_summary(row: Any) -> dict[str, Any]:
    """A conversation's own fields (no messages)."""
    metadata = row.metadata_ if hasattr(row, "metadata_") else row.metadata
    return {
        "id": row.id, "user_id": row.user_id, "flow_id": row.flow_id,
        "agent_version_id": row.agent_version_id, "destination": row.destination,
        "status": row.status, "metadata": metadata, "undeflected": row.undeflected,
        "summary": row.summary, "resolution": row.resolution, "csat_rating": row.csat_rating,
        "csat_role": row.csat_role, "notes": row.notes, "created_at": row.created_at,
        "updated_at": row.updated_at, "closed_at": row.closed_at,
    }


async def mark_seen(
    *, session: AsyncSession, team_id: str, user_id: str, up_to: datetime | None = None
) -> int:
    """Mark the user's AI/AGENT messages seen (all, or those created up to a time)."""
    query = update(Message).where(
        Message.team_id == team_id, Message.user_id == user_id, Message.seen_at.is_(None),
        Message.role.in_([ROLE_AI, ROLE_AGENT]),
    )
    if up_to is not None:
        query = query.where(Message.created_at <= up_to)
    result = await session.execute(query.values(seen_at=utcnow()))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
