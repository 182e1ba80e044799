"""What a running node holds: settings, the database engine, sessions and the job app."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from helpline.settings import Settings

if TYPE_CHECKING:
    from procrastinate import App

    from helpline.agent.service import AgentServices


@dataclass
class Runtime:
    """Shared by routes (``request.app.state.runtime``) and jobs (worker context)."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    jobs: App
    extras: dict[str, Any] = field(default_factory=dict)
    _agent: AgentServices | None = None

    @property
    def agent(self) -> AgentServices:
        """The agent's HTTP client and caches, created on first use."""
        if self._agent is None:
            from helpline.agent.service import AgentServices

            self._agent = AgentServices.create()
        return self._agent

    async def aclose(self) -> None:
        """Release what the runtime opened (the database engine is disposed by its owner)."""
        if self._agent is not None:
            await self._agent.aclose()
            self._agent = None
