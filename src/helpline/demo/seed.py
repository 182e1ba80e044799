"""The demo team that ``make run`` creates once and reuses afterwards."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from helpline.settings import Settings
from helpline.teams import service as teams

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
    return {
        "team": team.slug,
        "created": created,
        "api_key": api_key,
        "base_url": settings.public_base_url(),
        "chat_page_url": f"{settings.public_chat_url()}/mobile/{team.slug}?userId=demo-user",
    }
