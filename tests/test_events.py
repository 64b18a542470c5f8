"""Chunk-event selection and read-back: exact at every threshold at or above the floor."""

from __future__ import annotations

from itertools import accumulate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_llm import _semconv as sc
from otel_llm._measure._events import event_attributes, plan_chunk_events, read_chunk_events
from otel_llm._measure._stalls import NS_PER_MS, Timeline, meter

MS = NS_PER_MS


def offsets_for(ttft: int, gaps: list[int]) -> list[int]:
    return list(accumulate([ttft, *gaps]))


def read_back(ttft: int, gaps: list[int], *, floor_ms: int, budget: int, tail: int = 0):
    offsets = offsets_for(ttft, gaps)
    plan = plan_chunk_events(offsets, gaps, floor_ms=floor_ms, budget=budget)
    attributes = {
        sc.GEN_AI_REQUEST_STREAM: True,
        sc.CHUNK_COUNT_RECORDED: len(offsets),
        sc.CHUNK_EVENTS_RECORDED: len(plan.events),
        sc.CHUNK_EVENTS_FLOOR_MS: plan.floor_ms,
    }
    start = 1_700_000_000 * 10**9
    events = [(sc.CHUNK_EVENT, start + ev.offset_ns, event_attributes(ev)) for ev in plan.events]
    end = start + (offsets[-1] if offsets else 0) + tail
    return plan, read_chunk_events(attributes, events, start_ns=start, end_ns=end, dropped_events=0)


def test_plan_keeps_first_last_and_longest() -> None:
    """The first chunk, the last chunk and the longest gap always have events."""
    gaps = [10 * MS, 50 * MS, 20 * MS, 10 * MS]
    plan = plan_chunk_events(offsets_for(0, gaps), gaps, floor_ms=100, budget=10)
    assert [e.index for e in plan.events] == [0, 2, 4]
    assert plan.events[0].gap_ns is None
    assert plan.events[1].gap_ns == 50 * MS


def test_plan_records_every_gap_above_floor() -> None:
    """Every gap strictly above the floor gets an event; one equal to it does not need one."""
    gaps = [5 * MS, 100 * MS, 101 * MS, 5 * MS, 300 * MS, 5 * MS, 5 * MS]
    plan = plan_chunk_events(offsets_for(0, gaps), gaps, floor_ms=100, budget=20)
    assert [e.index for e in plan.events] == [0, 3, 5, 7]
    assert plan.floor_ms == 100


def test_plan_raises_floor_when_over_budget() -> None:
    """With more long gaps than the budget, the floor rises so its promise stays true."""
    gaps = [(200 + i) * MS for i in range(50)]
    plan = plan_chunk_events(offsets_for(0, gaps), gaps, floor_ms=100, budget=10)
    assert len(plan.events) <= 10
    recorded = {e.index for e in plan.events}
    for index, gap in enumerate(gaps, start=1):
        if gap > plan.floor_ms * MS:
            assert index in recorded
    assert plan.floor_ms > 100


def test_plan_rejects_tiny_budget() -> None:
    """A budget below three events cannot hold first, last and longest."""
    with pytest.raises(ValueError, match="at least 3"):
        plan_chunk_events([0, 1], [1], floor_ms=1, budget=2)


def test_empty_stream_has_no_events() -> None:
    """A stream without incremental chunks records no chunk events."""
    plan = plan_chunk_events([], [], floor_ms=100, budget=10)
    assert plan.events == ()


@settings(max_examples=300)
@given(
    ttft=st.integers(min_value=0, max_value=30_000 * MS),
    gaps=st.lists(
        st.one_of(
            st.integers(min_value=0, max_value=200 * MS),
            st.integers(min_value=500 * MS, max_value=90_000 * MS),
        ),
        max_size=400,
    ),
    tail=st.integers(min_value=0, max_value=2_000 * MS),
    budget=st.integers(min_value=3, max_value=130),
    thresholds=st.lists(st.integers(min_value=1, max_value=100_000), min_size=1, max_size=5),
)
def test_round_trip_is_exact_at_or_above_floor(
    ttft: int, gaps: list[int], tail: int, budget: int, thresholds: list[int]
) -> None:
    """Figures read back from the events equal figures from every arrival, at any threshold
    at or above the recorded floor."""
    plan, recorded = read_back(ttft, gaps, floor_ms=100, budget=budget, tail=tail)
    assert recorded.status == sc.METERING_EXACT
    assert recorded.timeline is not None
    full = Timeline.from_gaps(wall_ns=ttft + sum(gaps) + tail, ttft_ns=ttft, gaps_ns=gaps)
    for threshold in thresholds:
        if threshold >= plan.floor_ms:
            assert meter(recorded.timeline, threshold) == meter(full, threshold)
        else:
            with pytest.raises(ValueError, match="below the floor"):
                meter(recorded.timeline, threshold)


def test_hundred_thousand_chunks_fit_and_stay_exact() -> None:
    """A 100,000-chunk stream with a handful of stalls fits the event budget and is exact."""
    gaps = [3 * MS + (i % 7) * 100_000 for i in range(99_999)]
    for position, silence in ((10, 54_900), (50_000, 2_500), (99_000, 1_001)):
        gaps[position] = silence * MS
    plan, recorded = read_back(1_630 * MS, gaps, floor_ms=100, budget=120)
    assert len(plan.events) <= 120
    assert recorded.timeline is not None
    full = Timeline.from_gaps(wall_ns=1_630 * MS + sum(gaps), ttft_ns=1_630 * MS, gaps_ns=gaps)
    for threshold in (100, 1000, 2000, 60_000):
        assert meter(recorded.timeline, threshold) == meter(full, threshold)
    figures = meter(recorded.timeline, 1000)
    assert (figures.stall_count, figures.chunk_count) == (3, 100_000)


def _attrs(total: int, recorded: int) -> dict[str, object]:
    return {
        sc.GEN_AI_REQUEST_STREAM: True,
        sc.CHUNK_COUNT_RECORDED: total,
        sc.CHUNK_EVENTS_RECORDED: recorded,
        sc.CHUNK_EVENTS_FLOOR_MS: 100,
    }


def test_dropped_events_are_flagged() -> None:
    """Fewer chunk events than recorded, or a dropped-events count, is flagged, not derived."""
    events = [(sc.CHUNK_EVENT, 10, {sc.CHUNK_INDEX: 0})]
    fewer = read_chunk_events(_attrs(5, 3), events, start_ns=0, end_ns=100, dropped_events=0)
    assert (fewer.timeline, fewer.status) == (None, sc.METERING_INCOMPLETE_DROPPED)
    dropped = read_chunk_events(_attrs(1, 1), events, start_ns=0, end_ns=100, dropped_events=2)
    assert dropped.status == sc.METERING_INCOMPLETE_DROPPED


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([(sc.CHUNK_EVENT, 10, {sc.CHUNK_INDEX: 4, sc.CHUNK_GAP_NS: 1})], id="no-0"),
        pytest.param([(sc.CHUNK_EVENT, 10, {sc.CHUNK_INDEX: 0})], id="no-last"),
        pytest.param(
            [(sc.CHUNK_EVENT, 10, {sc.CHUNK_INDEX: 0}), (sc.CHUNK_EVENT, 11, {sc.CHUNK_INDEX: 0})],
            id="duplicate",
        ),
        pytest.param(
            [(sc.CHUNK_EVENT, 10, {sc.CHUNK_INDEX: 0}), (sc.CHUNK_EVENT, 20, {sc.CHUNK_INDEX: 4})],
            id="gap-missing",
        ),
        pytest.param(
            [(sc.CHUNK_EVENT, 10, {}), (sc.CHUNK_EVENT, 20, {sc.CHUNK_INDEX: 4})], id="no-index"
        ),
    ],
)
def test_missing_indices_are_flagged(events: list[tuple[str, int, dict[str, int]]]) -> None:
    """Chunk events with missing or inconsistent indices are flagged, not derived."""
    recorded = read_chunk_events(
        _attrs(5, len(events)), events, start_ns=0, end_ns=100, dropped_events=0
    )
    assert (recorded.timeline, recorded.status) == (None, sc.METERING_INCOMPLETE_MISSING)


def test_span_without_chunk_attributes_is_flagged() -> None:
    """A streamed span without the chunk bookkeeping cannot be derived."""
    recorded = read_chunk_events(
        {sc.GEN_AI_REQUEST_STREAM: True}, [], start_ns=0, end_ns=1, dropped_events=0
    )
    assert recorded.status == sc.METERING_INCOMPLETE_MISSING


def test_non_streamed_span_reads_wall_only() -> None:
    """A non-streamed span yields a wall-only timeline."""
    recorded = read_chunk_events({}, [], start_ns=5, end_ns=105, dropped_events=0)
    assert recorded.status == sc.METERING_NOT_STREAMED
    assert recorded.timeline == Timeline(wall_ns=100, streamed=False)
