"""The command line: teams, keys and the demo, against the test database."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from helpline.cli import app

runner = CliRunner()


@pytest.fixture
def cli_env(database_url, tmp_path):
    return {"HELPLINE_DATABASE_URL": database_url, "HELPLINE_DATA_DIR": str(tmp_path)}


def _invoke(args, env):
    return runner.invoke(app, args, env=env)


async def _ainvoke(args, env):
    """The CLI runs its own event loop: call it from a thread inside async tests."""
    return await asyncio.to_thread(_invoke, args, env)


async def test_teams_create_keys_create_and_revoke(cli_env, client):
    result = await _ainvoke(["teams", "create", "--slug", "initech", "--name", "Initech", "--json"],
                     cli_env)
    assert result.exit_code == 0, result.output
    created = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(created) == {"id", "slug", "name", "api_key", "chat_secret"}
    assert created["api_key"].startswith("hl_") and len(created["api_key"]) >= 35

    result = await _ainvoke(["keys", "create", "--team", "initech", "--json"], cli_env)
    assert result.exit_code == 0, result.output
    second = json.loads(result.stdout.strip().splitlines()[-1])["api_key"]

    for key in (created["api_key"], second):
        response = await client.get("/v1/team/settings",
                                    headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 200

    result = await _ainvoke(["keys", "revoke", second, "--team", "initech"], cli_env)
    assert result.exit_code == 0, result.output
    response = await client.get("/v1/team/settings", headers={"Authorization": f"Bearer {second}"})
    assert response.status_code == 401


def test_duplicate_slug_fails_cleanly(cli_env):
    assert _invoke(["teams", "create", "--slug", "dup", "--name", "A"], cli_env).exit_code == 0
    result = _invoke(["teams", "create", "--slug", "dup", "--name", "B"], cli_env)
    assert result.exit_code == 1
    assert "already exists" in result.output


def test_keys_for_unknown_team_fail(cli_env):
    result = _invoke(["keys", "create", "--team", "nobody"], cli_env)
    assert result.exit_code == 1
    assert "no team" in result.output


async def test_demo_is_created_once_and_reprints_a_working_key(cli_env, client):
    first = await _ainvoke(["demo", "--json"], cli_env)
    assert first.exit_code == 0, first.output
    info = json.loads(first.stdout.strip().splitlines()[-1])
    assert info["created"] is True
    assert info["chat_page_url"].endswith("/mobile/acme?userId=demo-user")
    again_run = await _ainvoke(["demo", "--json"], cli_env)
    again = json.loads(again_run.stdout.strip().splitlines()[-1])
    assert again["created"] is False
    assert again["api_key"] == info["api_key"]
    response = await client.get("/readyz", headers={"Authorization": f"Bearer {info['api_key']}"})
    assert response.status_code == 200


async def test_demo_publishes_main_when_it_already_holds_the_demo_agent(cli_env, sessions):
    from helpline.agentconfig import service as repository
    from helpline.db.engine import transaction
    from helpline.demo.seed import demo_agent_files
    from helpline.settings import Settings
    from helpline.teams import service as teams

    async with transaction(sessions) as session:
        team = await teams.create_team(session=session, slug="acme", name="Acme")
        sha = await repository.create_commit(
            session=session, team_id=team.id, branch="main", replace_all=True, message="pushed",
            files=demo_agent_files(Settings().public_base_url()))
    result = await _ainvoke(["demo", "--json"], cli_env)
    assert result.exit_code == 0, result.output
    async with sessions() as session:
        from sqlalchemy import select

        from helpline.versions.models import AgentVersion
        published = (await session.execute(select(AgentVersion.commit_sha))).scalars().all()
    assert published == [sha]
