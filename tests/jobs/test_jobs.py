"""The job queue: a deferred job runs on a worker; the periodic expiry task is registered."""

from __future__ import annotations

from datetime import timedelta

import psycopg
from sqlalchemy import func, select, update

from helpline.api import idempotency
from helpline.api.models import IdempotencyRecord
from helpline.db.engine import libpq_url
from helpline.jobs.app import run_worker


async def test_deferred_job_runs_on_worker(app, sessions, team, database_url):
    runtime = app.state.runtime
    async with sessions() as session:
        async def work():
            return {"ok": True}

        await idempotency.run_idempotent(
            session=session, team_id=team.id, key="to-expire", request_fingerprint="fp",
            status_code=201, work=work,
        )
        await session.execute(update(IdempotencyRecord).values(
            created_at=IdempotencyRecord.created_at - timedelta(hours=30)))
        await session.commit()

    task = runtime.jobs.tasks["expire_idempotency_keys"]
    job_id = await task.defer_async(timestamp=0)
    await run_worker(runtime, concurrency=1, wait=False)

    async with sessions() as session:
        remaining = (await session.execute(
            select(func.count()).select_from(IdempotencyRecord))).scalar_one()
    assert remaining == 0
    with psycopg.connect(libpq_url(database_url)) as conn:
        row = conn.execute("SELECT status FROM procrastinate_jobs WHERE id = %s",
                           (job_id,)).fetchone()
    # Successful jobs are deleted by the worker; a failed one would remain as 'failed'.
    assert row is None


async def test_expiry_task_is_periodic(app):
    periodic = app.state.runtime.jobs.periodic_registry.periodic_tasks
    crons = {p.task.name: p.cron for p in periodic.values()}
    assert crons["expire_idempotency_keys"] == "*/10 * * * *"
