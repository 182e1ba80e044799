"""Knowledge-base articles (draft and live), and the retrieval index built from them."""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, Literal

from sqlalchemy import Row, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from helpline.agent.retrieval import Article as IndexedArticle
from helpline.agent.retrieval import KnowledgeIndex
from helpline.api.pagination import Page, PageRequest, paginate
from helpline.db.base import utcnow
from helpline.errors import Conflict, InvalidRequest, NotFound
from helpline.ids import new_id
from helpline.knowledge.models import Article
from helpline.knowledge.schemas import SLUG_PATTERN
from helpline.teams.models import Team

KnowledgeMode = Literal["live", "draft"]
ARTICLES = Article.__table__
_SLUG = re.compile(SLUG_PATTERN)


def _check_slug(slug: str) -> None:
    if not _SLUG.match(slug):
        raise InvalidRequest(
            "slug must be 1-100 lowercase letters, digits or hyphens, not starting or ending "
            "with a hyphen",
            code="invalid_slug",
        )


def article_dict(row: Row[Any] | Article) -> dict[str, Any]:
    """An article as the API shows it: both versions and their state."""
    return {
        "id": row.id,
        "slug": row.slug,
        "title": row.draft_title if row.draft_title is not None else row.live_title,
        "live": {"title": row.live_title, "body": row.live_body}
        if row.live_body is not None else None,
        "draft": {"title": row.draft_title, "body": row.draft_body}
        if row.draft_body is not None else None,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "published_at": row.published_at,
    }


async def _bump_revision(session: AsyncSession, team_id: str) -> None:
    await session.execute(
        update(Team).where(Team.id == team_id)
        .values(knowledge_revision=Team.knowledge_revision + 1)
    )


async def get_article(*, session: AsyncSession, team_id: str, slug: str) -> Article:
    """The team's article with this slug."""
    article = (
        await session.execute(
            select(Article).where(Article.team_id == team_id, Article.slug == slug)
        )
    ).scalar_one_or_none()
    if article is None:
        raise NotFound(f"no article {slug!r}", code="article_not_found")
    return article


async def put_article(
    *, session: AsyncSession, team_id: str, slug: str, title: str, body: str
) -> tuple[Article, bool]:
    """Write the draft of an article, creating it if needed; returns (article, created)."""
    _check_slug(slug)
    now = utcnow()
    article = (
        await session.execute(
            select(Article).where(Article.team_id == team_id, Article.slug == slug)
            .with_for_update()
        )
    ).scalar_one_or_none()
    created = article is None
    if article is None:
        article = Article(id=new_id("kb"), team_id=team_id, slug=slug, created_at=now,
                          revision=1)
        session.add(article)
    else:
        article.revision += 1
    article.draft_title, article.draft_body, article.updated_at = title, body, now
    await session.flush()
    await _bump_revision(session, team_id)
    return article, created


async def publish_article(*, session: AsyncSession, team_id: str, slug: str) -> Article:
    """Make the draft live (customers see it from now on)."""
    article = await get_article(session=session, team_id=team_id, slug=slug)
    if article.draft_body is None:
        raise Conflict(f"article {slug!r} has no draft to publish", code="no_draft")
    now = utcnow()
    article.live_title, article.live_body = article.draft_title, article.draft_body
    article.draft_title = article.draft_body = None
    article.published_at = article.updated_at = now
    article.revision += 1
    await session.flush()
    await _bump_revision(session, team_id)
    return article


async def delete_article(*, session: AsyncSession, team_id: str, slug: str) -> None:
    """Delete an article, live and draft."""
    article = await get_article(session=session, team_id=team_id, slug=slug)
    await session.delete(article)
    await session.flush()
    await _bump_revision(session, team_id)


async def list_articles(*, session: AsyncSession, team_id: str, page: PageRequest) -> Page:
    """Articles newest first, one keyset page."""
    query = select(ARTICLES).where(ARTICLES.c.team_id == team_id)
    return await paginate(session, query, table=ARTICLES, team_id=team_id, page=page,
                          not_found_message="the before/after id is not an article of this team")


async def load_articles(
    *, session: AsyncSession, team_id: str, mode: KnowledgeMode
) -> list[IndexedArticle]:
    """What retrieval reads: live bodies, or drafts falling back to live in draft mode."""
    rows = (
        await session.execute(
            select(ARTICLES.c.slug, ARTICLES.c.live_title, ARTICLES.c.live_body,
                   ARTICLES.c.draft_title, ARTICLES.c.draft_body)
            .where(ARTICLES.c.team_id == team_id).order_by(ARTICLES.c.slug)
        )
    ).all()
    articles = []
    for row in rows:
        if mode == "draft" and row.draft_body is not None:
            articles.append(IndexedArticle(row.slug, row.draft_title or "", row.draft_body))
        elif row.live_body is not None:
            articles.append(IndexedArticle(row.slug, row.live_title or "", row.live_body))
    return articles


class IndexCache:
    """Retrieval indexes per (team, mode, knowledge revision), least recently used evicted."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, str, int], KnowledgeIndex] = OrderedDict()

    async def get(
        self, *, session: AsyncSession, team_id: str, mode: KnowledgeMode
    ) -> KnowledgeIndex:
        """The index for the team's current knowledge (rebuilt only after a change)."""
        revision = (
            await session.execute(select(Team.knowledge_revision).where(Team.id == team_id))
        ).scalar_one()
        key = (team_id, mode, int(revision))
        index = self._items.get(key)
        if index is not None:
            self._items.move_to_end(key)
            return index
        index = KnowledgeIndex.build(await load_articles(session=session, team_id=team_id,
                                                         mode=mode))
        self._items[key] = index
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)
        return index
