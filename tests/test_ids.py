"""Prefixed random ids."""

from __future__ import annotations

import re

from helpline.ids import new_id


def test_ids_are_prefixed_random_and_unique():
    ids = [new_id("ver") for _ in range(2000)]
    assert len(set(ids)) == 2000
    assert all(re.fullmatch(r"ver_[0-9a-z]{24}", i) for i in ids)
    # Not sequential: sorted order is unrelated to creation order.
    assert ids != sorted(ids)
