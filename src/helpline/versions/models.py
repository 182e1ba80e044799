"""Published agent versions: a frozen, validated config snapshot and a share of traffic."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, DateTime, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from helpline.db.base import Base, TeamOwned, created_at_column


class AgentVersion(TeamOwned, Base):
    """One published version of a team's agent."""

    __tablename__ = "agent_versions"
    __table_args__ = (
        UniqueConstraint("team_id", "seq", name="uq_agent_versions_team_id_seq"),
        CheckConstraint("percent_traffic BETWEEN 0 AND 100", name="percent_traffic_range"),
        CheckConstraint("archived_at IS NULL OR percent_traffic = 0", name="archived_no_traffic"),
        Index("ix_agent_versions_team_order", "team_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    label: Mapped[str] = mapped_column(String(20), nullable=False)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    commit_sha: Mapped[str] = mapped_column(String(40), nullable=False)
    percent_traffic: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    config_snapshot: Mapped[dict] = mapped_column(JSONB, nullable=False)
    created_at: Mapped[datetime] = created_at_column()
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
