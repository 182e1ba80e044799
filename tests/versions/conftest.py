"""Fixtures for version tests: commits in a team's agent repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpline.agentconfig import service as repository
from helpline.db.engine import transaction

DEMO_AGENT = Path(__file__).resolve().parents[2] / "src" / "helpline" / "demo" / "agent"


def demo_files() -> dict[str, str]:
    """The demo agent repository (a valid configuration)."""
    return {
        str(path.relative_to(DEMO_AGENT)): path.read_text()
        for path in sorted(DEMO_AGENT.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def commit(sessions):  # type: ignore[no-untyped-def]
    """``await commit(team, message=..., files=..., branch=...)`` -> the new commit sha."""

    async def make(team, *, message: str = "change", files: dict | None = None,
                   branch: str = "main", replace_all: bool = False,
                   extra: dict | None = None) -> str:
        async with transaction(sessions) as session:
            return await repository.create_commit(
                session=session, team_id=team.id, branch=branch, message=message,
                files=files if files is not None else {**demo_files(), **(extra or {})},
                replace_all=replace_all,
            )

    return make
