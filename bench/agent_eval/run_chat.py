"""The agent evaluation through ``POST /v1/chat/messages``: quality figures and latency.

Seeds a scratch database with the demo team exactly as ``make run`` does (demo agent
repository committed and published, demo knowledge base live), then sends every question of
``questions.yaml`` as a new user and classifies what the agent did. Prints the figures and
their targets; exits non-zero only on errors, never on a missed target.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from typing import Any

from bench.agent_eval.common import HANDOFF, load_questions
from bench.harness import app_client, scratch_database
from helpline.db.engine import transaction
from helpline.demo.seed import seed_agent
from helpline.settings import Settings
from helpline.teams import service as teams

TARGETS = {"top1": 0.85, "declined": 0.90, "handoff": 1.0, "p99_ms": 50.0}


async def _seed(app: Any, base_url: str) -> str:
    runtime = app.state.runtime
    async with transaction(runtime.sessions) as session:
        team = await teams.create_team(session=session, slug="eval", name="Eval")
        _, api_key = await teams.create_api_key(session=session, team_id=team.id)
        await seed_agent(session=session, team_id=team.id,
                         settings=Settings(base_url=base_url, database_url="unused"))
    return api_key


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def evaluate() -> dict[str, Any]:
    """Run the set and return the figures."""
    questions = load_questions()
    with scratch_database() as url:
        async with app_client(url) as (client, app):
            api_key = await _seed(app, "http://127.0.0.1:9")
            headers = {"Authorization": f"Bearer {api_key}"}
            # One warm-up request builds the caches, as on a running node.
            await client.post("/v1/chat/messages", headers=headers,
                              json={"user_id": "warm-up", "text": "hello"})
            latencies, outcomes = [], []
            for number, question in enumerate(questions):
                started = time.perf_counter()
                response = await client.post("/v1/chat/messages", headers=headers, json={
                    "user_id": f"eval-{number}", "text": question.text})
                latencies.append((time.perf_counter() - started) * 1000)
                response.raise_for_status()
                outcomes.append((question, response.json()))
    return _score(outcomes, latencies)


def _answered_with(reply: dict[str, Any]) -> str | None:
    for message in reply["messages"]:
        if message["sources"]:
            return str(message["sources"][0]["slug"])
    return None


def _score(outcomes: list[tuple[Any, dict[str, Any]]], latencies: list[float]) -> dict[str, Any]:
    in_scope = [(q, r) for q, r in outcomes if q.kind == "in_scope"]
    out = [(q, r) for q, r in outcomes if q.kind == "out_of_scope"]
    human = [(q, r) for q, r in outcomes if q.kind == HANDOFF]
    misses = []
    top1 = 0
    for q, r in in_scope:
        if _answered_with(r) == q.expected:
            top1 += 1
        else:
            misses.append((q.text, q.expected, _answered_with(r) or _describe(r)))
    declined = 0
    for q, r in out:
        if _answered_with(r) is None:
            declined += 1
        else:
            misses.append((q.text, None, _answered_with(r)))
    handed = 0
    for q, r in human:
        if r["handoff"]:
            handed += 1
        else:
            misses.append((q.text, HANDOFF, _answered_with(r) or _describe(r)))
    false_handoffs = sum(1 for q, r in outcomes if q.kind != HANDOFF and r["handoff"])
    return {
        "top1": top1 / len(in_scope), "top1_n": (top1, len(in_scope)),
        "declined": declined / len(out), "declined_n": (declined, len(out)),
        "handoff": handed / len(human), "handoff_n": (handed, len(human)),
        "false_handoffs": false_handoffs,
        "p50_ms": statistics.median(latencies), "p99_ms": _percentile(latencies, 0.99),
        "misses": misses,
    }


def _describe(reply: dict[str, Any]) -> str:
    if reply["handoff"]:
        return "handoff"
    text = reply["messages"][0]["text"] if reply["messages"] else ""
    return f"no source: {text[:60]!r}"


def report(figures: dict[str, Any]) -> None:
    """Print the figures next to their targets."""
    def line(label: str, key: str, target: float) -> None:
        hit, total = figures[f"{key}_n"]
        mark = "ok" if figures[key] >= target else "BELOW TARGET"
        print(f"{label:<40} {hit:>3}/{total:<3} = {figures[key]:6.1%}  "
              f"(target >= {target:.0%}) {mark}")

    print("agent evaluation through POST /v1/chat/messages (built-in engine)")
    line("top-1 correct article (in scope)", "top1", TARGETS["top1"])
    line("out of scope declined (fallback/handoff)", "declined", TARGETS["declined"])
    line("requests for a human handed off", "handoff", TARGETS["handoff"])
    print(f"{'false handoffs':<40} {figures['false_handoffs']}")
    p99_mark = "ok" if figures["p99_ms"] <= TARGETS["p99_ms"] else "ABOVE TARGET"
    print(f"{'reply latency p50 / p99':<40} {figures['p50_ms']:.1f} ms / "
          f"{figures['p99_ms']:.1f} ms  (target p99 <= {TARGETS['p99_ms']:.0f} ms) {p99_mark}")
    if figures["misses"]:
        print(f"misses ({len(figures['misses'])}):")
        for text, expected, got in figures["misses"]:
            print(f"  {text!r}: expected {expected}, got {got}")


def main() -> int:
    """Entry point: ``python -m bench.agent_eval.run_chat``."""
    report(asyncio.run(evaluate()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
