"""Conversations with their messages, tags and audit log (read by export, unread, outbound)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy import (
    text as sql_text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from helpline.db.base import Base, TeamOwned, created_at_column

ROLE_USER = "USER"
ROLE_AI = "AI"
ROLE_AGENT = "AGENT"
STATUS_OPEN = "open"
STATUS_CLOSED = "closed"


class Conversation(TeamOwned, Base):
    """One conversation of a user with the team's agent (and maybe a human)."""

    __tablename__ = "conversations"
    __table_args__ = (
        CheckConstraint("csat_rating IS NULL OR csat_rating BETWEEN 1 AND 5", name="csat_range"),
        CheckConstraint("status IN ('open', 'closed')", name="status_values"),
        Index("ix_conversations_user", "team_id", "user_id", "created_at", "id"),
        Index("ix_conversations_export", "team_id", "updated_at", "id"),
        Index("ix_conversations_metadata", "metadata", postgresql_using="gin",
              postgresql_ops={"metadata": "jsonb_path_ops"}),
        Index("ix_conversations_idle", "last_activity_at",
              postgresql_where=sql_text("status = 'open'")),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(200), nullable=False)
    flow_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    agent_version_id: Mapped[str | None] = mapped_column(
        String(40), ForeignKey("agent_versions.id", ondelete="SET NULL"), nullable=True
    )
    destination: Mapped[str] = mapped_column(String(100), nullable=False, default="AI")
    status: Mapped[str] = mapped_column(String(10), nullable=False, default=STATUS_OPEN)
    metadata_: Mapped[dict] = mapped_column(
        "metadata", JSONB, nullable=False, default=dict, server_default=sql_text("'{}'::jsonb")
    )
    undeflected: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    summary: Mapped[str | None] = mapped_column(Text, nullable=True)
    resolution: Mapped[str | None] = mapped_column(Text, nullable=True)
    csat_rating: Mapped[int | None] = mapped_column(Integer, nullable=True)
    csat_role: Mapped[str | None] = mapped_column(String(20), nullable=True)
    notes: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The built-in engine's state between turns (running procedure, fallbacks in a row).
    engine_state: Mapped[dict] = mapped_column(
        JSONB, nullable=False, default=dict, server_default=sql_text("'{}'::jsonb")
    )
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = created_at_column()
    last_activity_at: Mapped[datetime] = created_at_column()
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Message(TeamOwned, Base):
    """A message of a conversation; AI/AGENT messages are unread until the user sees them."""

    __tablename__ = "messages"
    __table_args__ = (
        CheckConstraint("role IN ('USER', 'AI', 'AGENT')", name="role_values"),
        Index("ix_messages_conversation", "conversation_id", "seq"),
        Index("ix_messages_unread", "team_id", "user_id",
              postgresql_where=sql_text("seen_at IS NULL AND role <> 'USER'")),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    # Global, increasing: orders messages within a conversation without timestamp ties.
    seq: Mapped[int] = mapped_column(BigInteger, Identity(always=False), nullable=False,
                                     unique=True)
    conversation_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False
    )
    user_id: Mapped[str] = mapped_column(String(200), nullable=False)
    role: Mapped[str] = mapped_column(String(10), nullable=False)
    text: Mapped[str] = mapped_column(Text, nullable=False)
    sources: Mapped[list] = mapped_column(
        JSONB, nullable=False, default=list, server_default=sql_text("'[]'::jsonb")
    )
    created_at: Mapped[datetime] = created_at_column()
    seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ConversationTag(TeamOwned, Base):
    """A tag of the team's taxonomy applied to a conversation."""

    __tablename__ = "conversation_tags"

    conversation_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("conversations.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    level: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    created_at: Mapped[datetime] = created_at_column()


class AuditLog(TeamOwned, Base):
    """An agent decision or event: version chosen, procedure, tool call, handoff, CSAT, close."""

    __tablename__ = "audit_logs"
    __table_args__ = (Index("ix_audit_logs_conversation", "conversation_id", "id"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    conversation_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False
    )
    text: Mapped[str] = mapped_column(Text, nullable=False)
    payload: Mapped[dict] = mapped_column(JSONB, nullable=False, default=dict)
    created_at: Mapped[datetime] = created_at_column()
