"""The ASGI application factory."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI

from helpline import __version__
from helpline.api.errors import RequestContextMiddleware, install_error_handlers
from helpline.api.nul import RejectNulMiddleware
from helpline.api.runtime import Runtime
from helpline.db.engine import create_engine, create_session_factory
from helpline.jobs.app import create_job_app, run_worker
from helpline.settings import Settings

log = logging.getLogger(__name__)

API_DESCRIPTION = (
    "helpline runs an AI customer-support agent and exposes this HTTP/JSON interface around it. "
    "Every endpoint under the API base uses `Authorization: Bearer <API_KEY>`."
)


def _include_routers(app: FastAPI) -> None:
    from helpline.agentconfig import githttp
    from helpline.agentconfig import routes as agentconfig_routes
    from helpline.api import health
    from helpline.chat import routes as chat_routes
    from helpline.conversations import routes as conversation_routes
    from helpline.demo import api as demo_api
    from helpline.knowledge import routes as knowledge_routes
    from helpline.teams import routes as team_routes
    from helpline.versions import routes as version_routes

    app.include_router(health.router)
    app.include_router(team_routes.router)
    app.include_router(agentconfig_routes.router)
    app.include_router(githttp.router)
    app.include_router(knowledge_routes.router)
    app.include_router(conversation_routes.router)
    app.include_router(version_routes.router)
    app.include_router(chat_routes.router)
    app.include_router(demo_api.router)


def create_app(settings: Settings, *, run_jobs: bool | None = None) -> FastAPI:
    """Build the app; the database URL must already be resolved (embedded or configured)."""
    database_url = settings.require_database_url()
    with_worker = settings.run_worker if run_jobs is None else run_jobs

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_engine(database_url, pool_size=settings.db_pool_size)
        jobs = create_job_app(database_url)
        runtime = Runtime(
            settings=settings, engine=engine, sessions=create_session_factory(engine), jobs=jobs
        )
        app.state.runtime = runtime
        await jobs.open_async()
        worker: asyncio.Task[None] | None = None
        if with_worker:
            worker = asyncio.create_task(
                run_worker(runtime, concurrency=settings.worker_concurrency), name="job-worker"
            )
        try:
            yield
        finally:
            if worker is not None:
                worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker
            await jobs.close_async()
            await runtime.aclose()
            await engine.dispose()

    app = FastAPI(
        title="helpline",
        version="1.0.0",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.code_version = __version__
    install_error_handlers(app)
    app.add_middleware(RejectNulMiddleware)
    app.add_middleware(RequestContextMiddleware)
    _include_routers(app)
    return app
