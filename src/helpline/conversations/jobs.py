"""Conversation jobs: handoff webhook delivery and closing idle conversations."""

from __future__ import annotations

import logging
from datetime import timedelta

import procrastinate

from helpline.conversations import closing, webhooks
from helpline.db.engine import transaction
from helpline.jobs.app import job, runtime_of

log = logging.getLogger(__name__)


@job(name="deliver_webhooks", queue="webhooks", cron="* * * * *")
async def deliver_webhooks(context: procrastinate.JobContext, timestamp: int = 0) -> int:
    """Attempt every webhook delivery that is due (immediately after a handoff, and each minute)."""
    runtime = runtime_of(context)
    attempted = 0
    while True:
        async with transaction(runtime.sessions) as session:
            batch = await webhooks.deliver_due(session=session, client=runtime.agent.http)
        attempted += batch
        if batch == 0:
            return attempted


@job(name="close_idle_conversations", queue="maintenance", cron="* * * * *")
async def close_idle_conversations(context: procrastinate.JobContext, timestamp: int = 0) -> int:
    """Close conversations idle for longer than the configured timeout, with a summary."""
    runtime = runtime_of(context)
    idle = timedelta(minutes=runtime.settings.conversation_idle_minutes)
    closed = 0
    while True:
        async with transaction(runtime.sessions) as session:
            batch = await closing.close_idle(session=session, idle=idle)
        closed += batch
        if batch == 0:
            break
    if closed:
        log.info("idle conversations closed", extra={"action": "conversations_closed",
                                                     "count": closed})
    return closed
