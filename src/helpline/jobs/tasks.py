"""Maintenance tasks of the foundation."""

from __future__ import annotations

import logging
from datetime import timedelta

import procrastinate

from helpline.api import idempotency
from helpline.db.engine import transaction
from helpline.jobs.app import job, runtime_of

log = logging.getLogger(__name__)


@job(name="expire_idempotency_keys", queue="maintenance", cron="*/10 * * * *")
async def expire_idempotency_keys(context: procrastinate.JobContext, timestamp: int) -> int:
    """Delete stored Idempotency-Key outcomes older than the configured TTL."""
    runtime = runtime_of(context)
    ttl = timedelta(hours=runtime.settings.idempotency_ttl_hours)
    async with transaction(runtime.sessions) as session:
        removed = await idempotency.expire_keys(session=session, ttl=ttl)
    log.info("idempotency keys expired", extra={"action": "idempotency_keys_expired",
                                                "removed": removed})
    return removed
