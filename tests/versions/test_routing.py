"""Sticky hash routing over cumulative percentages."""

from __future__ import annotations

from collections import Counter

from helpline.versions.routing import bucket, pick


def test_seventy_thirty_split_lands_within_three_percent():
    allocations = [("v1", 70), ("v2", 30)]
    counts = Counter(pick(allocations, bucket("team_a", f"user-{i}")) for i in range(10_000))
    assert abs(counts["v1"] / 10_000 - 0.70) <= 0.03
    assert abs(counts["v2"] / 10_000 - 0.30) <= 0.03


def test_a_user_always_gets_the_same_version_while_the_split_is_unchanged():
    allocations = [("v1", 50), ("v2", 25), ("v3", 25)]
    for i in range(500):
        first = pick(allocations, bucket("team_a", f"user-{i}"))
        assert all(pick(allocations, bucket("team_a", f"user-{i}")) == first for _ in range(3))


def test_buckets_differ_between_teams_and_cover_the_range():
    seen = {bucket("team_a", f"u{i}") for i in range(5000)}
    assert seen == set(range(100))
    same = sum(bucket("team_a", f"u{i}") == bucket("team_b", f"u{i}") for i in range(1000))
    assert same < 50  # about 1 % expected by chance


def test_growing_a_share_moves_only_users_into_the_new_range():
    before = [("v1", 90), ("v2", 10)]
    after = [("v1", 80), ("v2", 20)]
    for i in range(2000):
        b = bucket("t", f"user-{i}")
        old, new = pick(before, b), pick(after, b)
        if old == "v2":
            assert new == "v2"  # users already on v2 stay there


def test_nothing_routed_without_traffic():
    assert pick([], 10) is None
    assert pick([("v1", 0)], 0) is None
    assert pick([("v1", 100)], 99) == "v1"
