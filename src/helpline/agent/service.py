"""``handle_user_message``: the one path every user message takes (chat API, chat socket,
simulations, tests).

In one transaction, under a per-user lock (so concurrent messages of a user are handled one
after another, never interleaved): find or open the conversation, pin a new conversation to
a version by the sticky split, store the user message, run the engine, store every reply,
audit entry, tag and handoff, and NOTIFY the other nodes. The caller commits.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from helpline.agent.engine import BuiltinEngine, ConfigCache, LoadedConfig, TurnResult
from helpline.agent.tools import ToolCaller
from helpline.conversations import service as conversations
from helpline.conversations.models import ROLE_AI, ROLE_USER, Conversation, Message
from helpline.errors import Conflict
from helpline.knowledge.service import IndexCache
from helpline.versions import service as versions
from helpline.versions.models import AgentVersion

log = logging.getLogger(__name__)


@dataclass
class AgentServices:
    """Per-node helpers of the agent: the tools' HTTP client and the caches."""

    http: httpx.AsyncClient
    configs: ConfigCache = field(default_factory=ConfigCache)
    indexes: IndexCache = field(default_factory=IndexCache)

    @classmethod
    def create(cls) -> AgentServices:
        """Services with a fresh HTTP client (close it with ``aclose``)."""
        return cls(http=httpx.AsyncClient(follow_redirects=False,
                                          headers={"User-Agent": "helpline-agent"}))

    async def aclose(self) -> None:
        """Release the HTTP client."""
        await self.http.aclose()


@dataclass
class HandledMessage:
    """What one user message did."""

    conversation: Conversation
    user_message: Message
    replies: list[Message]
    handoff: bool


async def _version_for(
    session: AsyncSession, conversation: Conversation | None, team_id: str, user_id: str
) -> tuple[AgentVersion | None, bool]:
    """The conversation's pinned version, or a freshly routed one (second value: newly routed)."""
    if conversation is not None and conversation.agent_version_id is not None:
        pinned = (await session.execute(
            select(AgentVersion).options(defer(AgentVersion.config_snapshot))
            .where(AgentVersion.id == conversation.agent_version_id,
                   AgentVersion.archived_at.is_(None)))).scalar_one_or_none()
        if pinned is not None:
            return pinned, False
    routed = await versions.route_version(session=session, team_id=team_id, user_id=user_id)
    return routed, True


async def handle_user_message(
    *,
    session: AsyncSession,
    services: AgentServices,
    team_id: str,
    user_id: str,
    text: str,
    metadata: dict[str, Any] | None = None,
    user_token: str | None = None,
    knowledge_mode: Literal["live", "draft"] = "live",
    replies_seen: bool = False,
    loaded_config: LoadedConfig | None = None,
) -> HandledMessage:
    """Store a user message, let the agent answer, and return what it produced."""
    await conversations.lock_user(session, team_id, user_id)
    conversation = await conversations.latest_conversation(
        session=session, team_id=team_id, user_id=user_id
    )
    version, routed = await _version_for(session, conversation, team_id, user_id)
    if version is None and loaded_config is None:
        raise Conflict("this team has no published agent version with traffic",
                       code="no_published_version")
    if conversation is None:
        conversation = await conversations.open_conversation(
            session=session, team_id=team_id, user_id=user_id, metadata=metadata,
            agent_version_id=version.id if version else None,
        )
    else:
        conversations.merge_metadata(conversation, metadata)
        if version is not None and routed:
            conversation.agent_version_id = version.id
    if routed and version is not None:
        conversations.add_audit(session, conversation, "agent version chosen", {
            "agent_version_id": version.id, "label": version.label,
            "commit_sha": version.commit_sha,
        })
    conversations.touch(conversation)
    user_message = await conversations.add_message(
        session=session, conversation=conversation, role=ROLE_USER, text=text
    )
    replies: list[Message] = []
    handed_off = False
    if conversation.destination == "AI":
        if loaded_config is not None:
            loaded = loaded_config
        else:
            assert version is not None  # noqa: S101 - guaranteed by the 409 above
            loaded = await _loaded_config(session, services, version.id)
        turn = await _run_engine(session, services, loaded, conversation, text, user_token,
                                 knowledge_mode)
        for reply in turn.replies:
            replies.append(await conversations.add_message(
                session=session, conversation=conversation, role=ROLE_AI, text=reply.text,
                sources=reply.sources, seen=replies_seen,
            ))
        await _store_turn(session, conversation, loaded, turn)
        handed_off = turn.handoff is not None
    await session.flush()
    await conversations.notify(session, conversation, [user_message.id, *(r.id for r in replies)])
    return HandledMessage(conversation, user_message, replies, handed_off)


async def _loaded_config(
    session: AsyncSession, services: AgentServices, version_id: str
) -> LoadedConfig:
    """A version's parsed config: from this node's cache, else from its stored snapshot."""
    loaded = services.configs.find(version_id)
    if loaded is None:
        config = await versions.get_version_config(session=session, version_id=version_id)
        loaded = services.configs.store(version_id, config)
    return loaded


async def _run_engine(
    session: AsyncSession,
    services: AgentServices,
    loaded: LoadedConfig,
    conversation: Conversation,
    text: str,
    user_token: str | None,
    knowledge_mode: Literal["live", "draft"],
) -> TurnResult:
    knowledge = None
    if loaded.config.agent.knowledge.enabled:
        knowledge = await services.indexes.get(session=session, team_id=conversation.team_id,
                                               mode=knowledge_mode)
    caller = ToolCaller(client=services.http, user_token=user_token)
    engine = BuiltinEngine(loaded, knowledge, caller)
    turn = await engine.reply(state=conversation.engine_state or {}, text=text,
                              metadata=dict(conversation.metadata_))
    requests = iter(caller.requests)
    for index, (entry, payload) in enumerate(turn.audit):
        if entry == "tool call":
            turn.audit[index] = (entry, {**payload, "request": next(requests, None)})
    return turn


async def _store_turn(
    session: AsyncSession, conversation: Conversation, loaded: LoadedConfig, turn: TurnResult
) -> None:
    for entry, payload in turn.audit:
        conversations.add_audit(session, conversation, entry, payload)
    if turn.tags:
        await conversations.add_tags(
            session=session, conversation=conversation,
            tags={name: loaded.tag_levels.get(name, 1) for name in turn.tags},
        )
    if turn.handoff is not None:
        conversations.hand_off(conversation, destination=turn.handoff["destination"])
        conversations.add_audit(session, conversation, "handoff", turn.handoff)
        webhook = loaded.config.agent.handoff.webhook_url
        if webhook:
            conversation.engine_state = turn.state
            from helpline.conversations.webhooks import queue_handoff_webhook

            await queue_handoff_webhook(session=session, conversation=conversation, url=webhook)
    if turn.resolved:
        conversations.add_audit(session, conversation, "resolved", {})
    conversation.engine_state = turn.state
