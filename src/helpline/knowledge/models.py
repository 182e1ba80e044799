"""Knowledge-base articles: a live body that serves traffic and an optional draft."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from helpline.db.base import Base, TeamOwned, created_at_column


class Article(TeamOwned, Base):
    """One article; ``live_*`` is what customers get, ``draft_*`` what authors are editing."""

    __tablename__ = "knowledge_articles"
    __table_args__ = (
        UniqueConstraint("team_id", "slug", name="uq_knowledge_articles_team_id_slug"),
        Index("ix_knowledge_articles_team_order", "team_id", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    slug: Mapped[str] = mapped_column(String(100), nullable=False)
    live_title: Mapped[str | None] = mapped_column(String(300), nullable=True)
    live_body: Mapped[str | None] = mapped_column(Text, nullable=True)
    draft_title: Mapped[str | None] = mapped_column(String(300), nullable=True)
    draft_body: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Bumped on every change: lets nodes cache retrieval indexes and notice edits cheaply.
    revision: Mapped[int] = mapped_column(BigInteger, nullable=False, default=1)
    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = created_at_column()
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
