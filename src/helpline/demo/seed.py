"""The demo team that ``make run`` creates once and reuses afterwards."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from helpline.errors import InvalidRequest
from helpline.knowledge import service as knowledge
from helpline.knowledge.models import Article
from helpline.settings import Settings
from helpline.teams import service as teams
from helpline.versions.models import AgentVersion

DEMO_SLUG = "acme"
DEMO_NAME = "Acme (demo)"
CREDENTIALS_FILE = "demo-credentials.json"


def _read_saved_key(path: Path) -> str | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    key = data.get("api_key") if isinstance(data, dict) else None
    return key if isinstance(key, str) else None


def _save_key(path: Path, api_key: str) -> None:
    """Keep the demo key in the data dir (mode 0600) so later runs can show it again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"team": DEMO_SLUG, "api_key": api_key}, handle)


# The demo repository's tools call the demo order API on the default local address.
DEMO_TOOL_BASE = "http://127.0.0.1:8000"


def demo_agent_files(base_url: str) -> dict[str, str]:
    """The demo agent repository, its tools pointed at this node's demo order API."""
    root = resources.files("helpline.demo") / "agent"
    files: dict[str, str] = {}

    def walk(folder: Any, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif entry.is_file():
                files[prefix + entry.name] = entry.read_text().replace(DEMO_TOOL_BASE, base_url)

    walk(root, "")
    return files


def demo_articles() -> list[tuple[str, str, str]]:
    """(slug, title, body) of the demo knowledge base."""
    articles = []
    for entry in sorted((resources.files("helpline.demo") / "knowledge").iterdir(),
                        key=lambda e: e.name):
        if entry.name.endswith(".md"):
            first, _, body = entry.read_text().partition("\n")
            articles.append((entry.name[:-3], first.lstrip("#").strip(), body.strip()))
    return articles


async def seed_agent(*, session: AsyncSession, team_id: str, settings: Settings) -> None:
    """Give a team the demo agent (committed to main and published) and the demo knowledge."""
    from helpline.agentconfig import service as repository
    from helpline.versions import service as versions

    has_version = (await session.execute(
        select(func.count()).where(AgentVersion.team_id == team_id))).scalar_one()
    if not has_version:
        try:
            sha = await repository.create_commit(
                session=session, team_id=team_id, branch="main", replace_all=True,
                message="Demo agent: Acme support",
                files=demo_agent_files(settings.public_base_url()),
            )
        except InvalidRequest as exc:
            if exc.code != "no_changes":
                raise
            # main already holds exactly the demo agent: publish that commit.
            head = await repository.find_branch_head(session=session, team_id=team_id,
                                                     branch="main")
            if head is None:
                raise
            sha = head
        await versions.publish_version(session=session, team_id=team_id, commit_sha=sha,
                                       description="Demo agent: Acme support")
    has_articles = (await session.execute(
        select(func.count()).where(Article.team_id == team_id))).scalar_one()
    if not has_articles:
        for slug, title, body in demo_articles():
            await knowledge.put_article(session=session, team_id=team_id, slug=slug,
                                        title=title, body=body)
            await knowledge.publish_article(session=session, team_id=team_id, slug=slug)


async def seed_demo(*, session: AsyncSession, settings: Settings) -> dict[str, Any]:
    """Create the demo team if missing, make sure a known key works, and describe the demo."""
    credentials = settings.data_dir / CREDENTIALS_FILE
    team = await teams.find_team_by_slug(session=session, slug=DEMO_SLUG)
    created = team is None
    if team is None:
        team = await teams.create_team(session=session, slug=DEMO_SLUG, name=DEMO_NAME)
    api_key = _read_saved_key(credentials)
    identity = await teams.authenticate(session=session, api_key=api_key) if api_key else None
    if api_key is None or identity is None or identity.team_id != team.id:
        _, api_key = await teams.create_api_key(session=session, team_id=team.id)
        _save_key(credentials, api_key)
    await seed_agent(session=session, team_id=team.id, settings=settings)
    return {
        "team": team.slug,
        "created": created,
        "api_key": api_key,
        "base_url": settings.public_base_url(),
        "chat_page_url": f"{settings.public_chat_url()}/mobile/{team.slug}?userId=demo-user",
    }
