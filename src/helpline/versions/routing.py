"""Sticky traffic routing: a user always lands in the same bucket of 0-99.

The versions with traffic are laid out in a fixed order (oldest first) as cumulative
ranges of buckets; a user's bucket is a hash of (team, user). While the split is unchanged
a user always gets the same version; when it changes, only the users whose bucket moved to
another range switch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def bucket(team_id: str, user_id: str) -> int:
    """The user's bucket, 0-99, stable across processes and releases."""
    digest = hashlib.sha256(f"{team_id}\n{user_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


def pick(allocations: Sequence[tuple[T, int]], user_bucket: int) -> T | None:
    """The item whose cumulative range holds ``user_bucket`` (None when nothing has traffic)."""
    upper = 0
    for item, percent in allocations:
        upper += percent
        if user_bucket < upper:
            return item
    return None
