"""Fixtures for agent tests: a loopback tool server and a team with the demo agent published."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request

from helpline.agentconfig.schema import config_to_snapshot, load_config
from helpline.db.base import utcnow
from helpline.db.engine import transaction
from helpline.demo import api as demo_api
from helpline.ids import new_id
from helpline.knowledge import service as knowledge
from helpline.versions.models import AgentVersion

SRC = Path(__file__).resolve().parents[2] / "src" / "helpline" / "demo"
DEMO_TOOL_BASE = "http://127.0.0.1:8000"


@dataclass
class LoopbackServer:
    """A real HTTP server on 127.0.0.1 recording the requests it got."""

    base_url: str
    requests: list[dict[str, Any]] = field(default_factory=list)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def loopback() -> Iterator[LoopbackServer]:
    """The demo order API plus a webhook sink, served by uvicorn in a thread."""
    app = FastAPI()
    port = _free_port()
    server_state = LoopbackServer(base_url=f"http://127.0.0.1:{port}")

    @app.middleware("http")
    async def record(request: Request, call_next):  # type: ignore[no-untyped-def]
        body = await request.body()
        server_state.requests.append({"method": request.method, "path": request.url.path,
                                      "headers": dict(request.headers), "body": body})
        return await call_next(request)

    @app.post("/hooks/{name}")
    async def hook(name: str) -> dict[str, bool]:
        return {"ok": True}

    @app.post("/broken-hook")
    async def broken() -> None:
        raise RuntimeError("down")

    app.include_router(demo_api.router)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield server_state
    server.should_exit = True
    thread.join(timeout=5)


def demo_agent_files(tool_base: str, **agent_overrides: str) -> dict[str, str]:
    """The demo agent repository with its tools pointed at ``tool_base``."""
    root = SRC / "agent"
    files = {str(p.relative_to(root)): p.read_text().replace(DEMO_TOOL_BASE, tool_base)
             for p in sorted(root.rglob("*")) if p.is_file()}
    for key, value in agent_overrides.items():
        files["agent.yaml"] += f"\n{key}: {value}\n"
    return files


async def publish_config(sessions, team_id: str, files: dict[str, str],
                         percent: int = 100) -> str:
    """Store a validated config as a version with traffic (what publishing produces)."""
    config, errors = load_config(files)
    assert config is not None, errors
    async with transaction(sessions) as session:
        version = AgentVersion(id=new_id("ver"), team_id=team_id, seq=1, label="v1",
                               description="test", commit_sha="0" * 40,
                               percent_traffic=percent,
                               config_snapshot=config_to_snapshot(config), created_at=utcnow())
        session.add(version)
    return version.id


async def load_demo_knowledge(sessions, team_id: str) -> None:
    """Publish the demo knowledge base for the team."""
    async with transaction(sessions) as session:
        for path in sorted((SRC / "knowledge").glob("*.md")):
            lines = path.read_text().splitlines()
            title = lines[0].lstrip("# ").strip()
            body = "\n".join(lines[1:]).strip()
            await knowledge.put_article(session=session, team_id=team_id, slug=path.stem,
                                        title=title, body=body)
            await knowledge.publish_article(session=session, team_id=team_id, slug=path.stem)


@pytest.fixture
async def demo_team(team, sessions, loopback):  # type: ignore[no-untyped-def]
    """The ``team`` fixture with the demo agent published and the demo knowledge live."""
    await publish_config(sessions, team.id, demo_agent_files(loopback.base_url))
    await load_demo_knowledge(sessions, team.id)
    return team


@pytest.fixture
def agent_kit(sessions, loopback):  # type: ignore[no-untyped-def]
    """Helpers for tests that publish their own variant of the demo agent."""

    class Kit:
        @staticmethod
        def files(**overrides: str) -> dict[str, str]:
            return demo_agent_files(loopback.base_url, **overrides)

        @staticmethod
        async def publish(team_id: str, files: dict[str, str]) -> str:
            return await publish_config(sessions, team_id, files)

    return Kit
