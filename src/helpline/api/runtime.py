"""What a running node holds: settings, the database engine, sessions and the job app."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from helpline.settings import Settings

if TYPE_CHECKING:
    from procrastinate import App


@dataclass
class Runtime:
    """Shared by routes (``request.app.state.runtime``) and jobs (worker context)."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    jobs: App
    extras: dict[str, Any] = field(default_factory=dict)
