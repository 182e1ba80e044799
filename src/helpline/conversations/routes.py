"""``/v1/conversations``: find a user's conversations, read one whole, human replies,
notes and tags, CSAT."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from helpline.api.deps import SessionDep, TeamDep
from helpline.api.pagination import PageRequest
from helpline.api.responses import JSONBody
from helpline.conversations import service
from helpline.conversations.schemas import AgentMessageIn, ConversationPatch, CsatIn

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])


@router.get("")
async def list_conversations(
    session: SessionDep,
    identity: TeamDep,
    user_id: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
    before: Annotated[str | None, Query(min_length=1)] = None,
    after: Annotated[str | None, Query(min_length=1)] = None,
) -> JSONBody:
    """Conversations newest first (one user's with ``user_id``), keyset pages."""
    page = await service.list_conversations(
        session=session, team_id=identity.team_id, user_id=user_id,
        page=PageRequest(limit=limit, before=before, after=after),
    )
    return JSONBody({"data": [service.conversation_summary(r) for r in page.rows],
                     "has_more": page.has_more})


@router.get("/{conversation_id}")
async def get_conversation(conversation_id: str, session: SessionDep,
                           identity: TeamDep) -> JSONBody:
    """One conversation with its messages, tags and audit log."""
    conversation = await service.get_conversation(
        session=session, team_id=identity.team_id, conversation_id=conversation_id)
    return JSONBody(await service.conversation_dict(session=session, conversation=conversation))


@router.post("/{conversation_id}/messages", status_code=201)
async def post_agent_message(conversation_id: str, body: AgentMessageIn, session: SessionDep,
                             identity: TeamDep) -> JSONBody:
    """A human agent's reply (role AGENT), delivered to the user's open chat pages."""
    _, message = await service.add_agent_reply(
        session=session, team_id=identity.team_id, conversation_id=conversation_id,
        text=body.text)
    await session.commit()
    return JSONBody(service.message_dict(message), status_code=201)


@router.patch("/{conversation_id}")
async def patch_conversation(conversation_id: str, body: ConversationPatch,
                             session: SessionDep, identity: TeamDep) -> JSONBody:
    """Sets the internal note and/or replaces the tags."""
    conversation = await service.update_conversation(
        session=session, team_id=identity.team_id, conversation_id=conversation_id,
        notes=body.notes,
        tags={t.name: t.level for t in body.tags} if body.tags is not None else None,
    )
    await session.commit()
    return JSONBody(await service.conversation_dict(session=session, conversation=conversation))


@router.post("/{conversation_id}/csat")
async def rate_conversation(conversation_id: str, body: CsatIn, session: SessionDep,
                            identity: TeamDep) -> JSONBody:
    """Records the user's 1-5 rating (for channels the company bridges itself)."""
    conversation = await service.rate(session=session, team_id=identity.team_id,
                                      conversation_id=conversation_id, rating=body.rating)
    await session.commit()
    return JSONBody(service.conversation_summary(conversation))
