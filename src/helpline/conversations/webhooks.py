"""Handoff webhooks: an outbox row written with the handoff, delivered by jobs with backoff.

The row is inserted in the same transaction as the handoff, so a crash can't lose it; a job
deferred after the commit delivers it at once, and a periodic sweep retries what failed.
Each POST carries ``X-Helpline-Signature: sha256=<hex HMAC-SHA256 of the body>`` keyed with
the team's secret, and ``X-Helpline-Delivery`` (a stable id, for de-duplication).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from datetime import datetime, timedelta

import httpx
import orjson
from sqlalchemy import DateTime, ForeignKey, Index, Integer, String, Text, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from helpline.conversations import service as conversations
from helpline.conversations.models import Conversation
from helpline.db.base import Base, TeamOwned, created_at_column, utcnow
from helpline.ids import new_id
from helpline.teams.models import Team

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 10
SIGNATURE_HEADER = "X-Helpline-Signature"


class WebhookDelivery(TeamOwned, Base):
    """One webhook POST to make (or made)."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_due", "next_attempt_at",
              postgresql_where=text("status = 'pending'")),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False
    )
    event: Mapped[str] = mapped_column(String(50), nullable=False)
    url: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(String(10), nullable=False, default="pending")
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    next_attempt_at: Mapped[datetime] = created_at_column()
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = created_at_column()
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


def sign(secret: str, body: bytes) -> str:
    """The signature header value for a body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def backoff(attempts: int) -> timedelta:
    """Wait before the next try: 10 s, 20 s, 40 s ... at most one hour."""
    return timedelta(seconds=min(10 * 2 ** max(attempts - 1, 0), 3600))


async def queue_handoff_webhook(
    *, session: AsyncSession, conversation: Conversation, url: str
) -> WebhookDelivery:
    """Write the delivery in the handoff's transaction."""
    delivery = WebhookDelivery(
        id=new_id("whd"), team_id=conversation.team_id, conversation_id=conversation.id,
        event="conversation.handoff", url=url, status="pending", attempts=0,
        next_attempt_at=utcnow(), created_at=utcnow(),
    )
    session.add(delivery)
    return delivery


async def deliver_due(*, session: AsyncSession, client: httpx.AsyncClient, limit: int = 20) -> int:
    """Attempt the deliveries that are due (each once); returns how many were attempted."""
    due = (await session.execute(
        select(WebhookDelivery)
        .where(WebhookDelivery.status == "pending", WebhookDelivery.next_attempt_at <= utcnow())
        .order_by(WebhookDelivery.next_attempt_at).limit(limit)
        .with_for_update(skip_locked=True)
    )).scalars().all()
    for delivery in due:
        await _attempt(session, client, delivery)
    await session.flush()
    return len(due)


async def _attempt(session: AsyncSession, client: httpx.AsyncClient,
                   delivery: WebhookDelivery) -> None:
    conversation = await conversations.get_conversation(
        session=session, team_id=delivery.team_id, conversation_id=delivery.conversation_id)
    secret = (await session.execute(
        select(Team.chat_secret).where(Team.id == delivery.team_id))).scalar_one()
    body = orjson.dumps({
        "event": delivery.event,
        "delivery_id": delivery.id,
        "conversation": await conversations.conversation_dict(session=session,
                                                             conversation=conversation),
    })
    delivery.attempts += 1
    try:
        response = await client.post(delivery.url, content=body, timeout=10, headers={
            "Content-Type": "application/json", SIGNATURE_HEADER: sign(secret, body),
            "X-Helpline-Delivery": delivery.id,
        })
        error = None if response.is_success else f"HTTP {response.status_code}"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}"
    if error is None:
        delivery.status, delivery.delivered_at, delivery.last_error = "delivered", utcnow(), None
        conversations.add_audit(session, conversation, "handoff webhook delivered",
                                {"delivery_id": delivery.id, "attempts": delivery.attempts})
        return
    delivery.last_error = error
    if delivery.attempts >= MAX_ATTEMPTS:
        delivery.status = "failed"
        conversations.add_audit(session, conversation, "handoff webhook failed",
                                {"delivery_id": delivery.id, "error": error})
    else:
        delivery.next_attempt_at = utcnow() + backoff(delivery.attempts)
    log.warning("webhook delivery failed", extra={
        "action": "webhook_failed", "delivery": delivery.id, "attempts": delivery.attempts,
        "error": error})
