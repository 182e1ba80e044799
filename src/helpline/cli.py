"""The ``helpline`` command line: serve, worker, db, teams, keys, agent, demo."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from helpline.logging import configure_logging
from helpline.settings import Settings

app = typer.Typer(help="helpline: a self-hostable AI customer-support agent service.",
                  no_args_is_help=True)
db_app = typer.Typer(help="Database commands.", no_args_is_help=True)
teams_app = typer.Typer(help="Manage teams (customer companies).", no_args_is_help=True)
keys_app = typer.Typer(help="Manage API keys.", no_args_is_help=True)
agent_app = typer.Typer(help="Manage a team's agent repository.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(teams_app, name="teams")
app.add_typer(keys_app, name="keys")
app.add_typer(agent_app, name="agent")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def _settings() -> Settings:
    settings = Settings()
    configure_logging(settings.log_level, as_json=settings.log_json)
    return settings


def _print(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(data))
    else:
        for key, value in data.items():
            typer.echo(f"{key}: {value}")


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface to bind.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    worker: Annotated[bool, typer.Option("--worker/--no-worker",
                                         help="Run a job worker in this process.")] = True,
) -> None:
    """Serve the API, chat page and git endpoint (migrating the database first)."""
    import uvicorn

    from helpline.api.app import create_app
    from helpline.db.resolve import database

    settings = _settings()
    overrides: dict[str, Any] = {"run_worker": worker and settings.run_worker}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    settings = settings.model_copy(update=overrides)
    with database(settings) as resolved:
        uvicorn.run(
            create_app(resolved),
            host=resolved.host,
            port=resolved.port,
            log_config=None,
            proxy_headers=True,
        )


@app.command("worker")
def worker_command(
    concurrency: Annotated[int | None, typer.Option(help="Jobs run at once.")] = None,
) -> None:
    """Run a standalone job worker (no HTTP) until SIGINT/SIGTERM."""
    from helpline.api.runtime import Runtime
    from helpline.db.engine import create_engine, create_session_factory
    from helpline.db.resolve import database
    from helpline.jobs.app import create_job_app, run_worker

    settings = _settings()

    async def main(resolved: Settings) -> None:
        url = resolved.require_database_url()
        engine = create_engine(url, pool_size=resolved.db_pool_size)
        jobs = create_job_app(url)
        runtime = Runtime(settings=resolved, engine=engine,
                          sessions=create_session_factory(engine), jobs=jobs)
        await jobs.open_async()
        task = asyncio.create_task(
            run_worker(runtime, concurrency=concurrency or resolved.worker_concurrency)
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        finally:
            await jobs.close_async()
            await runtime.aclose()
            await engine.dispose()

    with database(settings) as resolved:
        asyncio.run(main(resolved))


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply the database migrations up to head."""
    from helpline.db import migrate
    from helpline.db.resolve import database

    with database(_settings()) as resolved:
        revision = migrate.current_revision(resolved.require_database_url())
        typer.echo(f"database at revision {revision}")


def _run(settings: Settings, work: Any) -> Any:
    """Run ``work(session)`` in one transaction against the resolved database."""
    from helpline.db.engine import create_engine, create_session_factory, transaction
    from helpline.db.resolve import database

    async def main(url: str) -> Any:
        engine = create_engine(url, pool_size=2)
        try:
            async with transaction(create_session_factory(engine)) as session:
                return await work(session)
        finally:
            await engine.dispose()

    with database(settings) as resolved:
        return asyncio.run(main(resolved.require_database_url()))


def _run_and_print(work: Any, as_json: bool) -> None:
    """Run ``work(session)`` in one transaction and print its result; domain errors exit 1."""
    from helpline.errors import HelplineError

    try:
        _print(_run(_settings(), work), as_json)
    except HelplineError as exc:
        _fail(exc.message)


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=1)


@teams_app.command("create")
def teams_create(
    slug: Annotated[str, typer.Option(help="URL name, used in /mobile/<slug>.")],
    name: Annotated[str, typer.Option(help="Display name.")],
    as_json: JsonFlag = False,
) -> None:
    """Create a team and its first API key (the key is shown only here)."""
    from helpline.teams import service

    async def work(session: Any) -> dict[str, Any]:
        team = await service.create_team(session=session, slug=slug, name=name)
        _, api_key = await service.create_api_key(session=session, team_id=team.id)
        return {"id": team.id, "slug": team.slug, "name": team.name, "api_key": api_key,
                "chat_secret": team.chat_secret}

    _run_and_print(work, as_json)


@keys_app.command("create")
def keys_create(
    team: Annotated[str, typer.Option(help="Team slug.")], as_json: JsonFlag = False
) -> None:
    """Create another API key for a team (shown only here)."""
    from helpline.teams import service

    async def work(session: Any) -> dict[str, Any]:
        found = await service.get_team_by_slug(session=session, slug=team)
        key, api_key = await service.create_api_key(session=session, team_id=found.id)
        return {"api_key": api_key, "key_id": key.id}

    _run_and_print(work, as_json)


@keys_app.command("revoke")
def keys_revoke(
    key: Annotated[str, typer.Argument(help="The API key, or its key_… id.")],
    team: Annotated[str, typer.Option(help="Team slug.")],
    as_json: JsonFlag = False,
) -> None:
    """Revoke an API key: requests with it get 401 from now on."""
    from helpline.teams import service

    async def work(session: Any) -> dict[str, Any]:
        found = await service.get_team_by_slug(session=session, slug=team)
        revoked = await service.revoke_api_key(session=session, team_id=found.id, api_key=key)
        return {"key_id": revoked.id, "revoked_at": revoked.revoked_at.isoformat()
                if revoked.revoked_at else None}

    _run_and_print(work, as_json)


@agent_app.command("push")
def agent_push(
    directory: Annotated[Path, typer.Argument(help="Folder holding agent.yaml, procedures/...")],
    team: Annotated[str, typer.Option(help="Team slug.")],
    branch: Annotated[str, typer.Option(help="Branch to commit to.")] = "main",
    message: Annotated[str, typer.Option("--message", "-m", help="Commit message.")] = (
        "Update the agent configuration"
    ),
    as_json: JsonFlag = False,
) -> None:
    """Commit a folder as the branch's whole tree, then print the SHA and the validation."""
    from helpline.agentconfig import service as repo
    from helpline.agentconfig.schema import load_config
    from helpline.errors import HelplineError, InvalidRequest
    from helpline.teams import service

    try:
        files = repo.read_directory(directory)
    except (OSError, ValueError) as exc:
        _fail(str(exc))

    async def work(session: Any) -> dict[str, Any]:
        found = await service.get_team_by_slug(session=session, slug=team)
        try:
            sha = await repo.create_commit(session=session, team_id=found.id, branch=branch,
                                           message=message, files=files, replace_all=True)
            changed = True
        except InvalidRequest as exc:
            if exc.code != "no_changes":
                raise
            sha, changed = exc.details["commit_sha"], False
        return {"commit_sha": sha, "branch": branch, "changed": changed}

    try:
        result = _run(_settings(), work)
    except HelplineError as exc:
        _fail(exc.message)
    _, errors = load_config(files)
    result["valid"] = not errors
    result["errors"] = [{"file": e.file, "field": e.field, "message": e.message} for e in errors]
    if as_json:
        typer.echo(json.dumps(result))
        return
    state = "committed" if result["changed"] else "unchanged (nothing to commit)"
    typer.echo(f"{result['branch']}: {result['commit_sha']} {state}")
    typer.echo("configuration: valid" if not errors else
               f"configuration: INVALID ({len(errors)} problem(s); it cannot be published)")
    for error in errors:
        typer.echo(f"  {error}")


@app.command()
def demo(as_json: JsonFlag = False) -> None:
    """Create the demo team once (later runs reuse it) and print how to reach it."""
    from helpline.demo.seed import seed_demo

    settings = _settings()

    async def work(session: Any) -> dict[str, Any]:
        return await seed_demo(session=session, settings=settings)

    info = _run(settings, work)
    if as_json:
        typer.echo(json.dumps(info))
        return
    typer.echo("")
    typer.echo("  helpline demo team ready")
    typer.echo(f"  API base URL : {info['base_url']}")
    typer.echo(f"  API key      : {info['api_key']}")
    typer.echo(f"  Chat page    : {info['chat_page_url']}")
    typer.echo(f"  API docs     : {info['base_url']}/docs")
    typer.echo(f"  Try          : curl -H 'Authorization: Bearer {info['api_key']}' "
               f"{info['base_url']}/v1/team/settings")
    typer.echo("")


def main() -> None:
    """Entry point of the ``helpline`` script."""
    app()
