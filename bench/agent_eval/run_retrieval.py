"""Offline evaluation of the built-in engine's retrieval on the demo knowledge base.

Run: .venv/bin/python bench/agent_eval/run_retrieval.py [--verbose]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import HANDOFF, load_articles, load_questions

from helpline.agent.retrieval import KnowledgeIndex, is_human_request


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _rate(good: int, total: int) -> str:
    return f"{good}/{total} = {100.0 * good / total:.1f} %" if total else "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--verbose", action="store_true", help="print every question")
    args = parser.parse_args()

    articles = load_articles()
    questions = load_questions()
    started = time.perf_counter()
    index = KnowledgeIndex.build(articles)
    build_ms = (time.perf_counter() - started) * 1000

    counts = {"in_scope": [0, 0], "out_of_scope": [0, 0], HANDOFF: [0, 0]}
    false_handoffs = 0
    latencies: list[float] = []
    misses: list[str] = []
    for question in questions:
        started = time.perf_counter()
        handoff = is_human_request(question.text)
        hit = None if handoff else index.best(question.text)
        latencies.append((time.perf_counter() - started) * 1000)
        got = HANDOFF if handoff else (hit.slug if hit else None)
        ok = got == question.expected
        counts[question.kind][0] += ok
        counts[question.kind][1] += 1
        if handoff and question.kind != HANDOFF:
            false_handoffs += 1
        detail = f"{question.text!r}: expected {question.expected}, got {got}"
        if hit:
            detail += f" ({hit.score:.2f})"
        if not ok:
            misses.append(detail)
        if args.verbose:
            print(("ok   " if ok else "MISS ") + detail)

    print(f"articles: {len(articles)}, questions: {len(questions)}, index build: {build_ms:.1f} ms")
    print(f"top-1 correct article (in scope):  {_rate(*counts['in_scope'])}")
    print(f"out of scope declined:             {_rate(*counts['out_of_scope'])}")
    print(f"human requests detected:           {_rate(*counts[HANDOFF])}")
    print(f"false handoffs (non-handoff):      {false_handoffs}")
    print(
        f"latency per query: p50 {_percentile(latencies, 0.5):.3f} ms, "
        f"p99 {_percentile(latencies, 0.99):.3f} ms"
    )
    if misses:
        print(f"\nmisses ({len(misses)}):")
        for miss in misses:
            print("  " + miss)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
