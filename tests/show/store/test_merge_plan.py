"""Which segments a merge takes: tiers from a table, and a bounded segment count over any long
run of writes (hypothesis)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_llm._defaults import DEFAULTS
from otel_llm._show._store._merge_plan import Candidate, batch_size, choose, tier

MIB = 1024 * 1024
SMALL, MIN, FANOUT, MAX, INPUTS = 8 * MIB, 16, 4, 256 * MIB, 64
WRITE = 1_300_000
"""A write of the long run at the default sizes (no tier bound a multiple of it)."""


@pytest.mark.parametrize(
    ("size", "expected"),
    [(0, 0), (SMALL - 1, 0), (SMALL, 1), (4 * SMALL - 1, 1), (4 * SMALL, 2), (16 * SMALL, 3)],
)
def test_tiers_are_fanout_times_wider_each(size: int, expected: int) -> None:
    assert tier(size, small_bytes=SMALL, fanout=FANOUT) == expected


def _choose(candidates: list[Candidate], *, max_inputs: int = INPUTS) -> list[Candidate]:
    return choose(
        candidates,
        small_bytes=SMALL,
        min_segments=MIN,
        max_bytes=MAX,
        fanout=FANOUT,
        max_inputs=max_inputs,
    )


def test_small_segments_wait_for_the_minimum_then_merge_oldest_first() -> None:
    small = [Candidate(f"{i:020d}", 1000) for i in range(MIN - 1)]
    assert _choose(small) == []
    small.append(Candidate(f"{MIN - 1:020d}", 1000))
    assert _choose(list(reversed(small))) == small


def test_a_backlog_merges_a_bounded_batch_at_a_time_oldest_first() -> None:
    """Two thousand small segments (a store nobody merged for hours): each merge takes the
    oldest ``max_inputs``, and merging on as a compaction does leaves fewer than the minimum."""
    backlog = [Candidate(f"{i:020d}-w", 10_000) for i in range(2000)]
    assert _choose(list(reversed(backlog))) == backlog[:INPUTS]
    segments, merges = list(backlog), 0
    while chosen := _choose(segments):
        assert len(chosen) <= INPUTS
        names = {c.name for c in chosen}
        segments = [c for c in segments if c.name not in names]
        segments.append(Candidate(chosen[0].name + "m", sum(c.size for c in chosen)))
        merges += 1
    assert sum(c.size for c in segments) == 2000 * 10_000
    assert len([c for c in segments if c.size < SMALL]) < MIN
    assert merges >= 2000 // INPUTS


def test_a_batch_smaller_than_the_minimum_is_due_when_full() -> None:
    """``max_inputs`` below ``min_segments``: a full batch merges (small segments would
    otherwise pile up for ever); fewer than two inputs is refused."""
    small = [Candidate(f"{i:020d}", 1000) for i in range(5)]
    assert _choose(small, max_inputs=4) == small[:4]
    assert _choose(small[:3], max_inputs=4) == []
    with pytest.raises(ValueError, match="at least two segments"):
        _choose(small, max_inputs=1)


@pytest.mark.parametrize(
    ("waiting", "max_merges", "expected"),
    [(100, 8, INPUTS), (INPUTS * 8, 8, INPUTS), (INPUTS * 8 + 1, 8, INPUTS + 1),
     (15_500, 8, 1938), (15_500, None, INPUTS), (0, 8, INPUTS)],
)  # fmt: skip
def test_a_compaction_takes_larger_batches_rather_than_fall_behind(
    waiting: int, max_merges: int | None, expected: int
) -> None:
    """``max_inputs`` a merge, unless a compaction's ``max_merges`` merges would then leave
    small segments behind (a writer sealing faster than that would grow the store for ever);
    a compaction that merges until nothing is due keeps to ``max_inputs``."""
    assert batch_size(waiting, max_inputs=INPUTS, max_merges=max_merges) == expected


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


def test_at_the_default_sizes_no_tier_fills_up_over_a_long_run() -> None:
    """At the default sizes the top tier (64-256 MiB) merges too: ``fanout`` of its segments
    never fit in one merge, so two do, into a segment too large to merge again. Over 2,000
    writes of 1.3 MB, merged as a writer merges, fewer than ``fanout`` segments share any tier
    (the top tier kept every merge of the tier below: 31 segments of 64-128 MiB for 2.4 GiB)."""
    settings_ = {
        "small_bytes": DEFAULTS.segment_small_bytes,
        "min_segments": DEFAULTS.segment_merge_min,
        "max_bytes": DEFAULTS.segment_merge_max_bytes,
        "fanout": DEFAULTS.segment_tier_fanout,
        "max_inputs": DEFAULTS.segment_merge_max_inputs,
    }
    segments: list[Candidate] = []
    for index in range(2000):
        segments.append(Candidate(f"{index:020d}-w", WRITE))
        for _ in range(DEFAULTS.segment_merges_per_compact):
            chosen = choose(segments, **settings_)
            if not chosen:
                break
            names = {c.name for c in chosen}
            segments = [c for c in segments if c.name not in names]
            segments.append(Candidate(chosen[0].name + "m", sum(c.size for c in chosen)))
    final = [c for c in segments if 2 * c.size > DEFAULTS.segment_merge_max_bytes]
    per_tier = Counter(
        tier(c.size, small_bytes=DEFAULTS.segment_small_bytes, fanout=DEFAULTS.segment_tier_fanout)
        for c in segments
        if c not in final
    )
    assert max(per_tier.values()) < DEFAULTS.segment_tier_fanout, per_tier
    assert len(final) <= 2000 * WRITE // (DEFAULTS.segment_merge_max_bytes // 2)
    assert sum(c.size for c in segments) == 2000 * WRITE
