"""Chunk-event selection and read-back: exact at every threshold at or above the floor."""

from __future__ import annotations

import random
from itertools import accumulate, pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_llm import _semconv as sc
from otel_llm._measure._events import (
    ChunkEventPlan,
    RecordedChunks,
    choose_event_indices,
    chunk_event_attributes,
    event_attributes,
    plan_chunk_events,
    read_chunk_events,
)
from otel_llm._measure._stalls import NS_PER_MS, Timeline, meter

MS = NS_PER_MS


def offsets_for(ttft: int, gaps: list[int]) -> list[int]:
    return list(accumulate([ttft, *gaps]))


def read_back(
    ttft: int, gaps: list[int], *, floor_ms: int, budget: int, tail: int = 0
) -> tuple[ChunkEventPlan, RecordedChunks]:
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


# --- the column-wise choice and read-back equal the per-event rules they replaced ------------


def _reference_indices(gaps: list[int], *, floor_ms: int, budget: int) -> tuple[list[int], int]:
    """The per-event selection as first written (the oracle for ``choose_event_indices``)."""
    n = len(gaps) + 1
    chosen = {0, n - 1}
    if n >= 2:
        chosen.add(gaps.index(max(gaps)) + 1)
    room = budget - len(chosen)
    floor_ns = floor_ms * MS
    candidates = [i for i, gap in enumerate(gaps, start=1) if gap > floor_ns and i not in chosen]
    if len(candidates) > room:
        candidates.sort(key=lambda i: gaps[i - 1], reverse=True)
        floor_ms = -(-gaps[candidates[room] - 1] // MS)
        candidates = [i for i in candidates if gaps[i - 1] > floor_ms * MS]
    chosen.update(candidates)
    return sorted(chosen), floor_ms


def _reference_read(
    attributes: dict[str, object], events: list[tuple[str, int, Any]], *, start_ns: int, end_ns: int
) -> tuple[Timeline | None, str]:
    """The per-event read-back (the oracle for ``read_chunk_events``): as first written, with
    the types otel-llm writes (an ``int``, never a ``bool``) and the times checked."""
    wall_ns = end_ns - start_ns
    if wall_ns < 0:
        return None, sc.METERING_INCOMPLETE_TIMING
    total = attributes.get(sc.CHUNK_COUNT_RECORDED)
    expected = attributes.get(sc.CHUNK_EVENTS_RECORDED)
    assert isinstance(total, int)
    assert isinstance(expected, int)
    chunk_events = [(ts, attrs or {}) for name, ts, attrs in events if name == sc.CHUNK_EVENT]
    if len(chunk_events) != expected:
        return None, sc.METERING_INCOMPLETE_DROPPED
    if total == 0:
        return Timeline(wall_ns=wall_ns, streamed=True), sc.METERING_EXACT
    by_index: dict[int, tuple[int, Any]] = {}
    for ts, attrs in chunk_events:
        index, gap = attrs.get(sc.CHUNK_INDEX), attrs.get(sc.CHUNK_GAP_NS)
        if type(index) is not int or index < 0 or index in by_index:
            return None, sc.METERING_INCOMPLETE_MISSING
        if (type(gap) is not int) if index > 0 else (gap is not None):
            return None, sc.METERING_INCOMPLETE_MISSING
        by_index[index] = (ts, gap)
    if 0 not in by_index or total - 1 not in by_index or max(by_index) >= total:
        return None, sc.METERING_INCOMPLETE_MISSING
    ordered = [by_index[index] for index in sorted(by_index)]
    if not start_ns <= ordered[0][0] <= ordered[-1][0] <= end_ns:
        return None, sc.METERING_INCOMPLETE_TIMING
    for (before, _), (ts, gap) in pairwise(ordered):
        if not 0 <= gap <= ts - before:
            return None, sc.METERING_INCOMPLETE_TIMING
    gaps = [gap for _, gap in ordered[1:]]
    timeline = Timeline(
        wall_ns=wall_ns,
        streamed=True,
        chunk_count=total,
        ttft_ns=ordered[0][0] - start_ns,
        gaps_ns=gaps,
        max_gap_ns=max(gaps) if gaps else None,
        complete_above_ms=100,
    )
    return timeline, sc.METERING_EXACT


_GAPS = st.lists(
    st.one_of(
        st.integers(min_value=0, max_value=200 * MS),
        st.integers(min_value=90 * MS, max_value=110 * MS),
        st.integers(min_value=500 * MS, max_value=90_000 * MS),
    ),
    max_size=300,
)


@settings(max_examples=300)
@given(gaps=_GAPS, budget=st.integers(min_value=3, max_value=130))
def test_choice_equals_the_per_event_rule(gaps: list[int], budget: int) -> None:
    """The chosen indices and floor equal the per-event selection's, thinned or not; the
    events of a plan are those indices."""
    chosen = choose_event_indices(len(gaps) + 1, gaps, floor_ms=100, budget=budget)
    assert chosen == _reference_indices(gaps, floor_ms=100, budget=budget)
    plan = plan_chunk_events(offsets_for(0, gaps), gaps, floor_ms=100, budget=budget)
    assert [event.index for event in plan.events] == chosen[0]
    assert plan.floor_ms == chosen[1]


@settings(max_examples=200)
@given(gaps=_GAPS, budget=st.integers(min_value=3, max_value=130))
def test_batched_attributes_equal_each_events(gaps: list[int], budget: int) -> None:
    """chunk_event_attributes() of a plan's indices is event_attributes() of each event."""
    plan = plan_chunk_events(offsets_for(7, gaps), gaps, floor_ms=100, budget=budget)
    indices = [event.index for event in plan.events]
    assert chunk_event_attributes(indices, gaps) == [event_attributes(e) for e in plan.events]


def test_choice_equals_the_per_event_rule_when_thinned() -> None:
    """Streams with many more long gaps than the budget choose what the per-event rule does."""
    rng = random.Random(11)
    for budget in (3, 4, 10, 60, 120):
        for _ in range(20):
            gaps = [rng.randrange(0, 3000 * MS) for _ in range(rng.randrange(1, 400))]
            chosen = choose_event_indices(len(gaps) + 1, gaps, floor_ms=100, budget=budget)
            assert chosen == _reference_indices(gaps, floor_ms=100, budget=budget)


_VALUES = st.one_of(
    st.integers(min_value=-2, max_value=8),
    st.booleans(),
    st.none(),
    st.just(2.0),
    st.just("3"),
)
_CHANGES = st.lists(
    st.tuples(
        st.sampled_from(["set", "delete", "duplicate", "other-event", "no-attributes", "time"]),
        st.integers(min_value=0, max_value=7),
        st.sampled_from([sc.CHUNK_INDEX, sc.CHUNK_GAP_NS]),
        _VALUES,
    ),
    max_size=2,
)


def _changed(
    events: list[tuple[str, int, Any]], changes: list[tuple[str, int, str, Any]]
) -> list[tuple[str, int, Any]]:
    """``events`` with each change applied (a value set or deleted, an event repeated, …)."""
    events = [(name, ts, dict(attrs)) for name, ts, attrs in events]
    for change, position, key, value in changes:
        if not events:
            break
        name, ts, attrs = events[position % len(events)]
        if attrs is None:
            continue
        if change == "set":
            attrs[key] = value
        elif change == "delete":
            attrs.pop(key, None)
        elif change == "duplicate":
            events.append((name, ts + 1, dict(attrs)))
        elif change == "time":  # moved by a few nanoseconds, or to before the span
            moved = ts + value if isinstance(value, int) and not isinstance(value, bool) else 0
            events[position % len(events)] = (name, moved, attrs)
        elif change == "other-event":
            events.insert(position % (len(events) + 1), ("exception", ts, {key: value}))
        else:
            events[position % len(events)] = (name, ts, None)
    return events


@settings(max_examples=1500)
@given(
    total=st.integers(min_value=0, max_value=7),
    gaps=st.lists(st.integers(min_value=0, max_value=5), min_size=6, max_size=6),
    changes=_CHANGES,
    order=st.permutations(range(7)),
    shuffled=st.booleans(),
    expected_offset=st.sampled_from([0, 0, 0, -1, 1]),
    tail=st.sampled_from([0, 1, 10**7]),
)
def test_read_back_equals_the_per_event_rule(
    total: int,
    gaps: list[int],
    changes: list[tuple[str, int, str, Any]],
    order: list[int],
    shuffled: bool,
    expected_offset: int,
    tail: int,
) -> None:
    """On well-formed chunk events, out of order or not, and on ones made malformed in every
    way (values of the wrong type, keys missing, repeated events, other events, no attributes,
    times moved so that they cannot be true), the column-wise read-back gives the per-event
    rule's timeline and verdict."""
    gaps = gaps[: max(total - 1, 0)]
    attrs = chunk_event_attributes(list(range(total)), gaps)
    stamps = offsets_for(10, gaps)
    events: list[tuple[str, int, Any]] = [
        (sc.CHUNK_EVENT, ts, a) for ts, a in zip(stamps, attrs, strict=False)
    ]
    if shuffled:
        events = [events[i] for i in order if i < len(events)]
    events = _changed(events, changes)
    count = sum(name == sc.CHUNK_EVENT for name, _, _ in events)
    attributes = {**_attrs(total, max(count + expected_offset, 0)), sc.STALL_THRESHOLD_MS: 1}
    end = (stamps[-1] if stamps else 10) + tail - 1
    expected = _reference_read(attributes, events, start_ns=3, end_ns=end)
    recorded = read_chunk_events(attributes, events, start_ns=3, end_ns=end, dropped_events=0)
    assert (recorded.timeline, recorded.status) == expected


@settings(max_examples=150, deadline=None)
@given(
    gaps_ms=st.lists(
        st.one_of(
            st.integers(min_value=0, max_value=30), st.integers(min_value=90, max_value=3000)
        ),
        max_size=200,
    ),
    max_events=st.sampled_from([None, 8, 40]),
    threshold_ms=st.sampled_from([100, 250, 1000]),
    ttft_ms=st.integers(min_value=0, max_value=2000),
    tail_ms=st.integers(min_value=0, max_value=50),
    failed=st.booleans(),
)
def test_the_run_read_equals_the_column_read(
    gaps_ms: list[int],
    max_events: int | None,
    threshold_ms: int,
    ttft_ms: int,
    tail_ms: int,
    failed: bool,
) -> None:
    """otel-llm's own attempt spans are read from the run of chunk events they carry, not event
    by event: the verdict and timeline equal the column-wise read of the same events, thinned
    or not, with an exact stall sum or not, and with a failed attempt's exception event after
    the run (such spans took the column-wise read, at 1.4 times its cost)."""
    from opentelemetry.sdk.trace import ReadableSpan

    from otel_llm._measure._events import read_chunk_columns, read_chunk_run
    from otel_llm._measure._span_events import leading_chunk_run
    from otel_llm._measure._spans import AttemptSpan
    from otel_llm.testing import Spans

    spans = Spans(max_events=max_events)
    attempt = AttemptSpan(
        spans.tracer, "chat x", attributes={}, threshold_ms=threshold_ms, streamed=True, start_ns=0
    )
    offset = ttft_ms
    for gap in [0, *gaps_ms]:
        offset += gap
        attempt.clock.mark_at(offset * MS)
    end_ns = (offset + tail_ms) * MS
    if failed:
        attempt.finish(sc.OUTCOME_ERROR, error=RuntimeError("cut short"), end_ns=end_ns)
    else:
        attempt.finish(sc.OUTCOME_OK, end_ns=end_ns)
    span = attempt.span
    assert isinstance(span, ReadableSpan)
    assert [event.name for event in span.events].count("exception") == (1 if failed else 0)
    run = leading_chunk_run(span.events, sc.CHUNK_EVENT)
    assert run is not None
    attributes = span.attributes or {}
    start, end = span.start_time or 0, span.end_time or 0
    by_run = read_chunk_run(attributes, run, start_ns=start, end_ns=end)
    by_columns = read_chunk_columns(
        attributes,
        [event.name for event in span.events],
        [event.attributes for event in span.events],
        [event.timestamp for event in span.events],
        start_ns=start,
        end_ns=end,
        dropped_events=span.dropped_events,
    )
    assert by_run == by_columns
    assert by_run.status == sc.METERING_EXACT
