"""``helpline agent push``: a local folder committed as a branch's whole tree."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpline.cli import app

runner = CliRunner()


@pytest.fixture
def cli_env(database_url, tmp_path):
    # The CLI installs its own log handler on the runner's temporary stderr: put the test
    # process's handlers back afterwards, so later log lines do not hit a closed stream.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield {"HELPLINE_DATABASE_URL": database_url, "HELPLINE_DATA_DIR": str(tmp_path / "data")}
    root.handlers[:] = handlers
    root.setLevel(level)


async def invoke(args, env):
    """The CLI runs its own event loop: call it from a thread inside async tests."""
    return await asyncio.to_thread(runner.invoke, app, args, env=env)


@pytest.fixture
def demo_dir(tmp_path: Path) -> Path:
    target = tmp_path / "agent"
    with resources.as_file(resources.files("helpline.demo") / "agent") as source:
        shutil.copytree(source, target)
    return target


async def test_push_a_folder_validate_and_replace(cli_env, client, team, demo_dir):
    result = await invoke(["agent", "push", str(demo_dir), "--team", team.slug, "-m", "demo",
                           "--json"], cli_env)
    assert result.exit_code == 0, result.output
    first = json.loads(result.stdout.strip().splitlines()[-1])
    assert first["valid"] is True and first["errors"] == [] and first["changed"] is True
    files = (await client.get("/v1/agent-config/files", headers=team.headers)).json()
    assert files["commit_sha"] == first["commit_sha"]
    assert "agent.yaml" in files["files"]

    again = await invoke(["agent", "push", str(demo_dir), "--team", team.slug, "--json"],
                         cli_env)
    unchanged = json.loads(again.stdout.strip().splitlines()[-1])
    assert again.exit_code == 0 and unchanged["changed"] is False
    assert unchanged["commit_sha"] == first["commit_sha"]

    # the folder is the whole tree: a removed file disappears, a broken one is reported
    for path in (demo_dir / "procedures").iterdir():
        path.unlink()
    (demo_dir / "agent.yaml").write_text("name: [broken\n")
    broken = await invoke(["agent", "push", str(demo_dir), "--team", team.slug], cli_env)
    assert broken.exit_code == 0, broken.output
    assert "INVALID" in broken.stdout and "agent.yaml" in broken.stdout
    files = (await client.get("/v1/agent-config/files", headers=team.headers)).json()["files"]
    assert not any(path.startswith("procedures/") for path in files)
    history = (await client.get("/v1/agent-config/commits", headers=team.headers)).json()
    assert [c["message"] for c in history["data"]] == ["Update the agent configuration", "demo"]


async def test_push_errors(cli_env, team, tmp_path):
    missing = await invoke(["agent", "push", str(tmp_path / "nope"), "--team", team.slug],
                           cli_env)
    assert missing.exit_code == 1 and "not a directory" in missing.output
    (tmp_path / "a.yaml").write_text("x: 1\n")
    unknown = await invoke(["agent", "push", str(tmp_path), "--team", "nobody"], cli_env)
    assert unknown.exit_code == 1 and "no team" in unknown.output
