"""The procrastinate job queue on the service's own PostgreSQL database.

Tasks are declared with :func:`job` at import time (nothing connects then); ``create_job_app``
registers them on a fresh App at run time (one per node, several in a test run). Tasks receive
the node's :class:`Runtime` through the worker's ``additional_context``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import procrastinate

from helpline.db.engine import libpq_url

if TYPE_CHECKING:
    from helpline.api.runtime import Runtime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSpec:
    """A task function and how to register it."""

    func: Callable[..., Awaitable[Any]]
    name: str
    queue: str
    retry: int
    cron: str | None


_SPECS: list[JobSpec] = []


def job(
    *, name: str, queue: str = "default", retry: int = 0, cron: str | None = None
) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    """Declare an async task ``func(context, **kwargs)``; ``cron`` also makes it periodic."""

    def register(func: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        _SPECS.append(JobSpec(func=func, name=name, queue=queue, retry=retry, cron=cron))
        return func

    return register

# Modules that declare tasks on the blueprint; imported when the App is created.
TASK_MODULES = ["helpline.jobs.tasks", "helpline.conversations.jobs"]


def create_job_app(database_url: str, *, pool_size: int = 4) -> procrastinate.App:
    """A procrastinate App bound to the database (opened later with ``open_async``)."""
    for module in TASK_MODULES:
        __import__(module)
    connector = procrastinate.PsycopgConnector(
        conninfo=libpq_url(database_url),
        min_size=1,
        max_size=pool_size,
        json_dumps=lambda obj: orjson.dumps(obj).decode(),
        json_loads=orjson.loads,
    )
    app = procrastinate.App(connector=connector)
    for spec in _SPECS:
        task = app.task(name=spec.name, queue=spec.queue, retry=spec.retry, pass_context=True)(
            spec.func
        )
        if spec.cron is not None:
            app.periodic(cron=spec.cron, periodic_id=spec.name)(task)
    return app


def runtime_of(context: procrastinate.JobContext) -> Runtime:
    """The runtime handed to the worker that runs this job."""
    runtime: Runtime = context.additional_context["runtime"]
    return runtime


async def run_worker(runtime: Runtime, *, concurrency: int, wait: bool = True,
                     **options: Any) -> None:
    """Run a worker for every queue until cancelled (or, with ``wait=False``, until idle)."""
    await runtime.jobs.run_worker_async(
        concurrency=concurrency,
        wait=wait,
        install_signal_handlers=False,
        additional_context={"runtime": runtime},
        delete_jobs="successful",
        **options,
    )


async def defer_quietly(app: procrastinate.App, task_name: str, **kwargs: Any) -> None:
    """Defer a job whose work is also picked up by a periodic sweep: a failure only delays it."""
    try:
        await app.tasks[task_name].defer_async(**kwargs)
    except Exception:
        log.warning("could not defer job; the periodic sweep will pick the work up",
                    extra={"action": "defer_failed", "task": task_name}, exc_info=True)
