"""The deriving processor fed spans otel-llm did not make: hand-made attempt spans whose chunk
events carry times that cannot be true get no figures (``incomplete:impossible_timing``),
never wrong ones labelled exact; and whatever a span carries, the figures of an ``exact`` one
hold together (within its wall time, no negatives, ``wall = generation + stall``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan

from otel_llm import _semconv as sc
from otel_llm._measure._spans import AttemptSpan
from otel_llm._measure._stalls import NS_PER_MS
from otel_llm.testing import Spans, figures_of

MS = NS_PER_MS
START = 1_000 * MS
END = 2_000 * MS


def _chunk(index: int, gap: int | None = None) -> dict[str, Any]:
    return {sc.CHUNK_INDEX: index} if gap is None else {sc.CHUNK_INDEX: index, sc.CHUNK_GAP_NS: gap}


def _attempt(
    spans: Spans,
    events: list[tuple[int, dict[str, Any]]],
    *,
    start: int = START,
    end: int = END,
    total: int | None = None,
    floor_ms: int = 100,
    call: Any = None,
    **extra: Any,
) -> ReadableSpan:
    """A hand-made streamed attempt span, as another instrumentation (or a damaged one) might
    write it, ended through the deriving processor."""
    attributes: dict[str, Any] = {
        sc.SPAN_ROLE: sc.SPAN_ROLE_ATTEMPT,
        sc.GEN_AI_REQUEST_STREAM: True,
        sc.CHUNK_COUNT_RECORDED: len(events) if total is None else total,
        sc.CHUNK_EVENTS_RECORDED: len(events),
        sc.CHUNK_EVENTS_FLOOR_MS: floor_ms,
        sc.STALL_THRESHOLD_MS: 1000,
        sc.ATTEMPT_OUTCOME: sc.OUTCOME_OK,
        sc.ATTEMPT_NUMBER: 1,
        **extra,
    }
    context = None
    if call is not None:
        from opentelemetry import trace

        context = trace.set_span_in_context(call)
    span = spans.tracer.start_span(
        "chat x", context=context, start_time=start, attributes=attributes
    )
    for timestamp, chunk in events:
        span.add_event(sc.CHUNK_EVENT, chunk, timestamp=timestamp)
    span.end(end_time=end)
    (ended,) = [s for s in spans.attempts() if s.context == span.get_span_context()]
    return ended


IMPOSSIBLE = [
    pytest.param([(500 * MS, _chunk(0)), (600 * MS, _chunk(1, 100 * MS))], {}, id="before-start"),
    pytest.param(
        [(1_500 * MS, _chunk(0)), (3_500 * MS, _chunk(1, 2_000 * MS))], {}, id="after-end"
    ),
    pytest.param(
        [(1_500 * MS, _chunk(0)), (1_400 * MS, _chunk(1, -100 * MS))], {}, id="negative-gap"
    ),
    pytest.param(
        [(1_500 * MS, _chunk(0)), (1_400 * MS, _chunk(1, 100 * MS))], {}, id="time-backwards"
    ),
    pytest.param(
        [(1_500 * MS, _chunk(0)), (1_600 * MS, _chunk(1, 10**15))],
        {},
        id="gap-longer-than-its-time",
    ),
    pytest.param(
        [
            (1_100 * MS, _chunk(0)),
            (1_120 * MS, _chunk(2, 50 * MS)),
            (1_150 * MS, _chunk(1, 50 * MS)),
        ],
        {"total": 3},
        id="out-of-order-events-times-backwards",
    ),
    pytest.param(
        [(1_100 * MS, _chunk(0)), (1_200 * MS, _chunk(1, 100 * MS))],
        {"floor_ms": 5_000, sc.CHUNK_STALL_NS: -5, sc.CHUNK_STALL_COUNT: -1},
        id="negative-exact-stall",
    ),
    pytest.param(
        [(1_100 * MS, _chunk(0)), (1_200 * MS, _chunk(1, 100 * MS))],
        {"floor_ms": 5_000, sc.CHUNK_STALL_NS: 10**18, sc.CHUNK_STALL_COUNT: 1},
        id="exact-stall-longer-than-the-stream",
    ),
    pytest.param(
        [(1_100 * MS, _chunk(0)), (1_200 * MS, _chunk(1, 100 * MS))],
        {"floor_ms": 5_000, sc.CHUNK_STALL_NS: 50 * MS, sc.CHUNK_STALL_COUNT: 1},
        id="exact-stall-shorter-than-the-threshold",
    ),
    pytest.param(
        [(1_100 * MS, _chunk(0)), (1_200 * MS, _chunk(1, 100 * MS))],
        {"floor_ms": 5_000, sc.CHUNK_STALL_NS: 50 * MS, sc.CHUNK_STALL_COUNT: 0},
        id="exact-stall-time-without-a-stall",
    ),
]


@pytest.mark.parametrize(("events", "extra"), IMPOSSIBLE)
def test_impossible_times_are_not_exact(
    events: list[tuple[int, dict[str, Any]]], extra: dict[str, Any]
) -> None:
    """Chunk events whose times cannot be true — a chunk before the span's start or after its
    end, a negative gap, times running backwards in chunk order, a gap longer than the time
    since the chunk before it, an exact stall sum no gaps could make — give the span its wall
    time and ``incomplete:impossible_timing``, no figures (they would be negative, or longer
    than the span, and labelled exact)."""
    spans = Spans()
    span = _attempt(spans, events, **extra)
    attributes = span.attributes or {}
    assert attributes[sc.METERING_STATUS] == sc.METERING_INCOMPLETE_TIMING
    assert attributes[sc.WALL_MS] == 1_000
    for name in (sc.TTFT_MS, sc.STALL_MS, sc.STALL_COUNT, sc.GENERATION_MS, sc.CHUNK_COUNT):
        assert name not in attributes


def test_an_end_before_the_start_has_no_wall_time() -> None:
    """A span that ends before it starts has no wall time (it would be negative), streamed or
    not, whatever its outcome."""
    spans = Spans()
    streamed = _attempt(spans, [], start=END, end=START)
    assert (streamed.attributes or {})[sc.METERING_STATUS] == sc.METERING_INCOMPLETE_TIMING
    assert sc.WALL_MS not in (streamed.attributes or {})
    span = spans.tracer.start_span(
        "chat y",
        start_time=END,
        attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_ATTEMPT, sc.ATTEMPT_OUTCOME: sc.OUTCOME_CANCELLED},
    )
    span.end(end_time=START)
    (cancelled,) = [s for s in spans.attempts() if s.name == "chat y"]
    assert sc.WALL_MS not in (cancelled.attributes or {})


def test_possible_edge_times_are_exact() -> None:
    """Times at the edges of what can be true stay exact: a chunk at the very start and one at
    the very end, two chunks at the same nanosecond (a gap of 0), and a gap shorter than the
    time between its events (a wrapped stream's gaps leave out the application's holds)."""
    spans = Spans()
    events = [
        (START, _chunk(0)),
        (START, _chunk(1, 0)),
        (1_500 * MS, _chunk(2, 300 * MS)),
        (END, _chunk(3, 500 * MS)),
    ]
    attributes = _attempt(spans, events).attributes or {}
    assert attributes[sc.METERING_STATUS] == sc.METERING_EXACT
    assert (attributes[sc.TTFT_MS], attributes[sc.WALL_MS]) == (0, 1_000)
    assert (attributes[sc.MAX_INTER_CHUNK_MS], attributes[sc.CHUNK_COUNT]) == (500, 4)


def test_a_call_does_not_carry_an_impossible_winner() -> None:
    """The call span of an attempt with impossible times carries no figures of it."""
    spans = Spans()
    call = spans.tracer.start_span(
        "chat x", attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_CALL, sc.CALL_WINNER_ATTEMPT: 1}
    )
    _attempt(spans, [(500 * MS, _chunk(0)), (600 * MS, _chunk(1, 100 * MS))], call=call)
    call.end()
    (ended,) = spans.calls()
    assert sc.TTFT_MS not in (ended.attributes or {})


def test_arrivals_marked_ahead_of_the_end_keep_the_span_possible() -> None:
    """Arrivals marked ahead of the clock (a replay, a test's fake timeline) end the attempt's
    span no earlier than its last chunk: its times stay possible, so the processor derives
    what the client measured (exact), instead of flagging otel-llm's own span."""
    spans = Spans()
    attempt = AttemptSpan(
        spans.tracer, "chat sim", attributes={}, threshold_ms=1000, streamed=True, start_ns=0
    )
    for offset_ms in (10, 20, 1_520, 1_530):
        attempt.clock.mark_at(offset_ms * MS)
    client = attempt.finish(sc.OUTCOME_OK, end_ns=5 * MS)
    (span,) = spans.attempts()
    assert (span.attributes or {})[sc.METERING_STATUS] == sc.METERING_EXACT
    assert figures_of(span) == client
    assert (client.wall_ms, client.stall_ms, client.generation_ms) == (1_530, 1_500, 30)


# --- property: whatever a span carries, an exact one's figures hold together -----------------


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _logged() -> Iterator[list[logging.LogRecord]]:
    """Everything otel-llm logs inside the block, debug lines included: a failure reported
    once per process (a warning, then debug lines) is seen however often it came before."""
    handler = _Records()
    logger = logging.getLogger("otel_llm")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler.records
    finally:
        logger.setLevel(level)
        logger.removeHandler(handler)


_INTS = st.one_of(
    st.integers(min_value=-3 * MS, max_value=3 * MS),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=0, max_value=1_200 * MS),
)
_VALUES = st.one_of(
    _INTS,
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
)


@st.composite
def _hostile_events(draw: st.DrawFn) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """Chunk events made from a real stream's, then damaged: times moved, indices and gaps
    replaced by anything, events repeated, dropped or reordered."""
    count = draw(st.integers(min_value=0, max_value=8))
    gaps = draw(
        st.lists(st.integers(min_value=0, max_value=300 * MS), min_size=count, max_size=count)
    )
    time = START + draw(st.integers(min_value=0, max_value=200 * MS))
    events: list[tuple[int, dict[str, Any]]] = []
    for index in range(count):
        if index:
            time += gaps[index]
        events.append((time, _chunk(index, gaps[index] if index else None)))
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        if not events:
            break
        at = draw(st.integers(min_value=0, max_value=len(events) - 1))
        timestamp, chunk = events[at]
        change = draw(st.sampled_from(["time", "index", "gap", "repeat", "drop", "swap"]))
        if change == "time":
            events[at] = (timestamp + draw(_INTS), chunk)
        elif change in ("index", "gap"):
            key = sc.CHUNK_INDEX if change == "index" else sc.CHUNK_GAP_NS
            events[at] = (timestamp, {**chunk, key: draw(_VALUES)})
        elif change == "repeat":
            events.append(events[at])
        elif change == "drop":
            del events[at]
        else:
            events[at], events[0] = events[0], events[at]
    total = draw(st.one_of(st.just(count), st.integers(min_value=-1, max_value=10)))
    return events, total


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hostile=_hostile_events(),
    end=st.integers(min_value=-100 * MS, max_value=3_000 * MS),
    floor_ms=st.one_of(st.just(100), _INTS),
    stall=st.one_of(st.none(), st.tuples(_INTS, _INTS)),
)
def test_exact_figures_always_hold_together(
    hostile: tuple[list[tuple[int, dict[str, Any]]], int],
    end: int,
    floor_ms: int,
    stall: tuple[int, int] | None,
) -> None:
    """Over hostile chunk events, the processor never fails (nothing logged) and an ``exact``
    span's figures are possible: none negative, time to first chunk, stalls and the longest
    gap within the wall time, ``wall = generation + stall``, stalls no more than the gaps."""
    events, total = hostile
    extra: dict[str, Any] = {}
    if stall is not None:
        extra = {sc.CHUNK_STALL_NS: stall[0], sc.CHUNK_STALL_COUNT: stall[1]}
    spans = Spans()
    with _logged() as records:
        span = _attempt(spans, events, end=START + end, total=total, floor_ms=floor_ms, **extra)
    assert records == []
    attributes = span.attributes or {}
    status = attributes[sc.METERING_STATUS]
    if status != sc.METERING_EXACT:
        assert str(status).startswith("incomplete:")
        assert sc.STALL_MS not in attributes
        return
    wall = attributes[sc.WALL_MS]
    assert isinstance(wall, int)
    assert wall >= 0
    chunks = attributes[sc.CHUNK_COUNT]
    assert isinstance(chunks, int)
    assert chunks >= 0
    ttft = attributes.get(sc.TTFT_MS)
    assert ttft is None or 0 <= ttft <= wall  # type: ignore[operator]
    stall_ms, stall_count = attributes.get(sc.STALL_MS), attributes.get(sc.STALL_COUNT)
    longest = attributes.get(sc.MAX_INTER_CHUNK_MS)
    if stall_ms is None:
        assert stall_count is None
        assert attributes[sc.GENERATION_MS] == wall
        return
    assert isinstance(stall_ms, int)
    assert isinstance(stall_count, int)
    assert 0 <= stall_ms <= wall
    assert 0 <= stall_count < chunks
    assert attributes[sc.GENERATION_MS] == wall - stall_ms
    assert longest is None or 0 <= longest <= wall  # type: ignore[operator]


# --- spans handed to the processor by hand, with values the SDK would not keep ---------------


def _replayed(
    attributes: dict[str, Any], events: list[Any], *, span_id: int, parent: int | None = None
) -> ReadableSpan:
    """A finished span built by hand, as a pipeline that converts or replays spans hands it
    to its processors: its values are whatever it says (lists, dicts), not what the SDK keeps."""
    from opentelemetry.trace import SpanContext, TraceFlags

    sampled = TraceFlags(TraceFlags.SAMPLED)
    return ReadableSpan(
        name="chat x",
        context=SpanContext(7, span_id, False, sampled),
        parent=None if parent is None else SpanContext(7, parent, False, sampled),
        attributes=attributes,
        events=events,
        start_time=START,
        end_time=END,
    )


def test_values_the_sdk_would_not_keep_cost_no_traceback() -> None:
    """An outcome, attempt number or winner that is a list or a dict, or a chunk event whose
    attributes are not a mapping, on a span built by hand: the processor forwards it without
    figures it cannot trust, logging nothing (it logged a TypeError's traceback per span)."""
    from opentelemetry.sdk.trace import Event

    spans = Spans()
    chunks = [
        Event(sc.CHUNK_EVENT, _chunk(0), timestamp=1_100 * MS),
        Event(sc.CHUNK_EVENT, _chunk(1, 100 * MS), timestamp=1_200 * MS),
    ]
    attempt = {
        sc.SPAN_ROLE: sc.SPAN_ROLE_ATTEMPT,
        sc.GEN_AI_REQUEST_STREAM: True,
        sc.CHUNK_COUNT_RECORDED: 2,
        sc.CHUNK_EVENTS_RECORDED: 2,
        sc.ATTEMPT_OUTCOME: sc.OUTCOME_OK,
        sc.ATTEMPT_NUMBER: 1,
    }
    hostile = [
        _replayed({**attempt, sc.ATTEMPT_OUTCOME: ["ok"]}, chunks, span_id=11, parent=1),
        _replayed({**attempt, sc.ATTEMPT_OUTCOME: {"ok": 1}}, chunks, span_id=12, parent=2),
        _replayed({**attempt, sc.ATTEMPT_NUMBER: [1]}, chunks, span_id=13, parent=3),
        _replayed(attempt, [chunks[0], Event(sc.CHUNK_EVENT, [1, 2], 1_200 * MS)], span_id=14),
        _replayed(attempt, [Event(sc.CHUNK_EVENT, "ab", 1_100 * MS), chunks[1]], span_id=15),
        _replayed({sc.SPAN_ROLE: sc.SPAN_ROLE_CALL, sc.CALL_WINNER_ATTEMPT: [1]}, [], span_id=1),
        _replayed({sc.SPAN_ROLE: sc.SPAN_ROLE_CALL, sc.CALL_WINNER_ATTEMPT: {}}, [], span_id=2),
    ]
    with _logged() as records:
        for span in hostile:
            spans.processor.on_end(span)
    assert records == []
    by_id = {span.context.span_id: dict(span.attributes or {}) for span in spans.finished()}
    assert sorted(by_id) == [1, 2, 11, 12, 13, 14, 15]
    for span_id in (11, 12):  # an outcome otel-llm never writes: the figures of its events
        assert by_id[span_id][sc.METERING_STATUS] == sc.METERING_EXACT
    for span_id in (14, 15):
        assert by_id[span_id][sc.METERING_STATUS] == sc.METERING_INCOMPLETE_MISSING
    for span_id in (1, 2):  # a winner that is no attempt number: no winner's figures
        assert sc.TTFT_MS not in by_id[span_id]


# --- call and attempt spans ending in any order, from several threads ------------------------


@settings(max_examples=60, deadline=None)
@given(
    plan=st.lists(
        st.tuples(st.integers(min_value=1, max_value=3), st.integers(min_value=1, max_value=3)),
        min_size=1,
        max_size=6,
    ),
    order=st.randoms(use_true_random=False),
)
def test_calls_carry_their_winner_whatever_order_spans_end_in(
    plan: list[tuple[int, int]], order: Any
) -> None:
    """Calls of one to three attempts (each ``ok``) end in any order among their attempts and
    other calls' spans: a call that ends after its winner carries exactly the winner's
    figures, one that ends before it carries none — never another attempt's or call's."""
    from opentelemetry import trace

    spans = Spans()
    steps: list[tuple[str, Any]] = []
    winners: dict[int, tuple[str, int]] = {}
    for number, (attempts, winner) in enumerate(plan):
        winner = min(winner, attempts)
        call = spans.tracer.start_span(
            f"call {number}",
            attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_CALL, sc.CALL_WINNER_ATTEMPT: winner},
        )
        context = trace.set_span_in_context(call)
        for attempt_number in range(1, attempts + 1):
            attempt = AttemptSpan(
                spans.tracer,
                f"attempt {number}.{attempt_number}",
                attributes={sc.ATTEMPT_NUMBER: attempt_number},
                threshold_ms=1000,
                streamed=True,
                start_ns=0,
                context=context,
            )
            for chunk in range(attempt_number + number + 1):  # figures of their own
                attempt.clock.mark_at((chunk + 1) * (number * 10 + attempt_number) * MS)
            steps.append(("attempt", attempt))
        steps.append(("call", call))
        winners[call.get_span_context().span_id] = (f"attempt {number}.{winner}", number)
    order.shuffle(steps)
    ended: set[str] = set()
    for kind, item in steps:
        if kind == "attempt":
            item.finish(sc.OUTCOME_OK)
            ended.add(item.span.name)
        else:
            winner_name, _ = winners[item.get_span_context().span_id]
            item.set_attribute("test.winner_ended_first", winner_name in ended)
            item.end()
    attempts = {span.name: dict(span.attributes or {}) for span in spans.attempts()}
    for call in spans.calls():
        attributes = dict(call.attributes or {})
        winner_name, _ = winners[call.context.span_id]  # type: ignore[union-attr]
        carried = {name: attributes.get(name) for name in sc.DERIVED_FIGURES}
        if attributes["test.winner_ended_first"]:
            assert carried == {name: attempts[winner_name].get(name) for name in sc.DERIVED_FIGURES}
        else:
            assert set(carried.values()) == {None}
    spans.check()


def test_calls_from_several_threads_carry_their_own_winner() -> None:
    """Calls made at once from several threads each carry their own winner's figures, and the
    processor keeps nothing of them once their calls ended."""
    import threading

    from opentelemetry import trace

    spans = Spans()

    def calls(worker: int) -> None:
        for number in range(50):
            call = spans.tracer.start_span(
                f"call {worker}.{number}",
                attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_CALL, sc.CALL_WINNER_ATTEMPT: 2},
            )
            for attempt_number in (1, 2):
                attempt = AttemptSpan(
                    spans.tracer,
                    f"attempt {worker}.{number}.{attempt_number}",
                    attributes={sc.ATTEMPT_NUMBER: attempt_number},
                    threshold_ms=1000,
                    streamed=True,
                    start_ns=0,
                    context=trace.set_span_in_context(call),
                )
                for chunk in range(2 + number % 3):
                    attempt.clock.mark_at((chunk + 1) * (worker * 10 + attempt_number) * MS)
                attempt.finish(sc.OUTCOME_OK)
            call.end()

    threads = [threading.Thread(target=calls, args=(worker,)) for worker in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    winners = {
        span.parent.span_id: dict(span.attributes or {})  # type: ignore[union-attr]
        for span in spans.attempts()
        if (span.attributes or {})[sc.ATTEMPT_NUMBER] == 2
    }
    called = spans.calls()
    assert len(called) == 200
    for call in called:
        winner = winners[call.context.span_id]  # type: ignore[union-attr]
        for name in sc.DERIVED_FIGURES:
            assert (call.attributes or {}).get(name) == winner.get(name)
    assert len(spans.processor._winners) == 0
    spans.check()
