"""Which segments a merge takes: tiers from a table, and a bounded segment count over any long
run of writes (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_llm._show._store._merge_plan import Candidate, choose, tier

MIB = 1024 * 1024
SMALL, MIN, FANOUT, MAX = 8 * MIB, 16, 4, 256 * MIB


@pytest.mark.parametrize(
    ("size", "expected"),
    [(0, 0), (SMALL - 1, 0), (SMALL, 1), (4 * SMALL - 1, 1), (4 * SMALL, 2), (16 * SMALL, 3)],
)
def test_tiers_are_fanout_times_wider_each(size: int, expected: int) -> None:
    assert tier(size, small_bytes=SMALL, fanout=FANOUT) == expected


def _choose(candidates: list[Candidate]) -> list[Candidate]:
    return choose(candidates, small_bytes=SMALL, min_segments=MIN, max_bytes=MAX, fanout=FANOUT)


def test_small_segments_wait_for_the_minimum_then_merge_oldest_first() -> None:
    small = [Candidate(f"{i:020d}", 1000) for i in range(MIN - 1)]
    assert _choose(small) == []
    small.append(Candidate(f"{MIN - 1:020d}", 1000))
    assert _choose(list(reversed(small))) == small


def test_a_full_tier_merges_its_oldest_fanout() -> None:
    mid = [Candidate(f"{i:020d}", 10 * MIB) for i in range(FANOUT + 1)]
    assert _choose(mid) == mid[:FANOUT]
    assert _choose(mid[: FANOUT - 1]) == []


def test_segments_too_large_to_merge_again_are_left_alone() -> None:
    big = [Candidate(f"{i:020d}", MAX // 2 + 1) for i in range(8)]
    assert _choose(big) == []


@settings(max_examples=60, deadline=None)
@given(
    writes=st.lists(st.integers(min_value=100, max_value=3 * MIB), min_size=1, max_size=3000),
    every=st.integers(min_value=1, max_value=40),
)
def test_the_segment_count_stays_bounded_over_any_run(writes: list[int], every: int) -> None:
    """Whatever sizes are written and however often merges run (one merge per run, as a writer
    does), the store never holds more than the small segments' minimum, a tier's fanout per
    tier, and the segments too large to merge again, plus what was written since the last
    merge."""
    segments: list[Candidate] = []
    written_since = 0
    worst_excess = 0
    for index, size in enumerate(writes):
        segments.append(Candidate(f"{index:020d}-w", size))
        written_since += 1
        if index % every == 0:
            for _ in range(4):  # a few merges in a row catch up on a burst
                chosen = _choose(segments)
                if not chosen:
                    break
                names = {c.name for c in chosen}
                segments = [c for c in segments if c.name not in names]
                segments.append(Candidate(chosen[0].name + "m", sum(c.size for c in chosen)))
            written_since = 0
        too_large = sum(1 for c in segments if 2 * c.size > MAX)
        tiers = {tier(c.size, small_bytes=SMALL, fanout=FANOUT) for c in segments}
        bound = MIN + FANOUT * len(tiers) + too_large + written_since
        worst_excess = max(worst_excess, len(segments) - bound)
    assert worst_excess <= 0
