"""``make bench``: every benchmark, printing figures and ratios (never asserting)."""

from __future__ import annotations

import sys

from bench.agent_eval import run_chat


def main() -> int:
    """Run the benchmarks in turn."""
    return run_chat.main()


if __name__ == "__main__":
    sys.exit(main())
