"""``/v1/knowledge/articles``: write drafts, publish, read, list, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from helpline.api.deps import SessionDep, TeamDep
from helpline.api.pagination import PageRequest
from helpline.api.responses import JSONBody
from helpline.knowledge import service
from helpline.knowledge.schemas import ArticleWrite

router = APIRouter(prefix="/v1/knowledge/articles", tags=["knowledge"])
Slug = Annotated[str, Path(min_length=1, max_length=100)]


@router.put("/{slug}")
async def put_article(slug: Slug, body: ArticleWrite, session: SessionDep,
                      identity: TeamDep) -> JSONBody:
    """Writes the article's draft (201 when the article is new, 200 otherwise)."""
    article, created = await service.put_article(
        session=session, team_id=identity.team_id, slug=slug, title=body.title, body=body.body
    )
    await session.commit()
    return JSONBody(service.article_dict(article), status_code=201 if created else 200)


@router.post("/{slug}/publish")
async def publish_article(slug: Slug, session: SessionDep, identity: TeamDep) -> JSONBody:
    """Makes the draft live (409 when there is no draft)."""
    article = await service.publish_article(session=session, team_id=identity.team_id, slug=slug)
    await session.commit()
    return JSONBody(service.article_dict(article))


@router.get("/{slug}")
async def get_article(slug: Slug, session: SessionDep, identity: TeamDep) -> JSONBody:
    """One article with its live and draft versions."""
    article = await service.get_article(session=session, team_id=identity.team_id, slug=slug)
    return JSONBody(service.article_dict(article))


@router.get("")
async def list_articles(
    session: SessionDep,
    identity: TeamDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 100,
    before: Annotated[str | None, Query(min_length=1)] = None,
    after: Annotated[str | None, Query(min_length=1)] = None,
) -> JSONBody:
    """Articles newest first, keyset pages (``before``/``after`` take article ids)."""
    page = await service.list_articles(
        session=session, team_id=identity.team_id,
        page=PageRequest(limit=limit, before=before, after=after),
    )
    return JSONBody({"data": [service.article_dict(r) for r in page.rows],
                     "has_more": page.has_more})


@router.delete("/{slug}", status_code=204, response_class=Response)
async def delete_article(slug: Slug, session: SessionDep, identity: TeamDep) -> Response:
    """Deletes an article (live and draft)."""
    await service.delete_article(session=session, team_id=identity.team_id, slug=slug)
    await session.commit()
    return Response(status_code=204)
