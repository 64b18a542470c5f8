"""The store writer's packed spans: small while they wait, and the same span when unpacked."""

from __future__ import annotations

import gc
import logging
import tracemalloc
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import Event, ReadableSpan

from benchmarks.store.throughput import attempt_spans
from otel_llm import SegmentSpanExporter
from otel_llm import _semconv as sc
from otel_llm._measure._span_events import chunk_event_class, chunk_run
from otel_llm._show._store._breakdown import run_query
from otel_llm._show._store._columns import SegmentColumns
from otel_llm._show._store._records import pack, unpack
from otel_llm._show._store._rows import span_row
from otel_llm.testing import Spans

KIB = 1024


def _attempt_spans(count: int) -> list[ReadableSpan]:
    """Attempt spans of streamed calls with 31 chunk events each, as the store benchmark
    makes them (through the real processor and attempt span)."""
    spans: list[ReadableSpan] = attempt_spans(count)
    return spans


def test_an_attempt_span_packs_under_a_kilobyte_and_unpacks_to_itself() -> None:
    spans = _attempt_spans(50)
    assert all(len(span.events) == 31 for span in spans)
    sizes = [pack(span).size() for span in spans]
    assert max(sizes) < KIB, sizes
    record = unpack(pack(spans[0]))
    assert record.chunks is not None  # the chunk events took the compact form
    stamps, indexes, gaps = record.chunks
    assert stamps == [event.timestamp for event in spans[0].events]
    assert indexes == [event.attributes[sc.CHUNK_INDEX] for event in spans[0].events]
    assert gaps == [(event.attributes or {}).get(sc.CHUNK_GAP_NS) for event in spans[0].events]
    assert record.attributes == dict(spans[0].attributes or {})


def test_our_chunk_events_are_read_unchecked_to_the_same_record() -> None:
    """otel-llm's chunk events are of their own class and skip the packer's checks; the same
    events as plain SDK events go through the checks: both give the same record."""
    (span,) = _attempt_spans(1)
    ours = chunk_event_class()
    assert {type(event) for event in span.events} == {ours}
    plain = [Event(e.name, e.attributes, e.timestamp) for e in span.events]
    assert {type(event) for event in plain} == {Event}
    checked = unpack(pack(_with_events(span, plain)))
    fast = unpack(pack(span))
    assert fast == checked
    assert fast.chunks is not None


def _with_events(span: ReadableSpan, events: list[Event]) -> ReadableSpan:
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=span.attributes,
        events=events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def test_queued_spans_hold_under_a_kilobyte_each_and_all_reach_the_store(tmp_path: Path) -> None:
    """Measured by the allocator: what the queue holds once the SDK spans are gone."""
    spans = _attempt_spans(2000)
    exporter = SegmentSpanExporter(  # the writer waits: every span stays queued
        tmp_path / "store", flush_interval_s=3600, segment_spans=1_000_000
    )
    try:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        exporter.export(spans)
        del spans
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert exporter.stats.pending == 2000
        assert held / 2000 < KIB, f"{held / 2000:.0f} bytes per queued span"
        assert exporter.force_flush(60_000)
    finally:
        exporter.shutdown()
    assert exporter.stats.written == 2000
    assert exporter.stats.dropped == 0
    rows = run_query(
        tmp_path / "store",
        'SELECT count(*), count(DISTINCT "SpanId"), sum(len("Events.Timestamp")) FROM otel_traces',
    ).rows
    assert rows == [(2000, 2000, 2000 * 31)]


def test_a_span_that_cannot_be_packed_is_counted_as_dropped(tmp_path: Path) -> None:
    class Broken:
        name = "broken"

        def __getattr__(self, item: str) -> object:
            raise RuntimeError("no such span")

    exporter = SegmentSpanExporter(tmp_path / "store")
    try:
        good = _attempt_spans(1)
        logging.getLogger("otel_llm").disabled = True
        try:
            exporter.export([Broken(), *good])  # type: ignore[list-item]
        finally:
            logging.getLogger("otel_llm").disabled = False
        assert exporter.force_flush(60_000)
        assert exporter.stats.dropped == 1
        assert exporter.stats.written == 1
    finally:
        exporter.shutdown()


_INTS = st.one_of(
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=2**63, max_value=2**70),
    st.booleans(),
)


_CHUNK = st.tuples(
    st.integers(min_value=0, max_value=2**62),  # the event's time
    _INTS,  # its index
    st.one_of(st.none(), _INTS),  # its gap (none: the key is left out)
    st.booleans(),  # keys in the other order
)
_SPAN = st.tuples(
    st.integers(min_value=0, max_value=2**62),  # the span's start
    st.lists(_CHUNK, max_size=6),
    st.booleans(),  # indexes that count up from 0
    st.booleans(),  # one more event that is not a chunk event
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=st.lists(_SPAN, min_size=1, max_size=5))
def test_chunk_events_of_any_shape_unpack_to_the_row_of_the_span(
    shapes: list[tuple[int, list[tuple[int, int, int | None, bool]], bool, bool]],
) -> None:
    """Times out of order, indexes that count or not, gaps past 64 bits, booleans, keys in
    the other order, spans whose events are packed beside spans whose are not, in any order:
    the packed spans give the table their rows give, and so do their unpacked records."""
    spans = Spans()
    for start, chunks, counting, other in shapes:
        span = spans.tracer.start_span("s", start_time=start)
        for number, (stamp, index, gap, swapped) in enumerate(chunks):
            pair: dict[str, object] = {sc.CHUNK_INDEX: number if counting else index}
            if gap is not None:
                pair[sc.CHUNK_GAP_NS] = gap
            if swapped:
                pair = dict(reversed(pair.items()))
            span.add_event(sc.CHUNK_EVENT, pair, timestamp=stamp)  # type: ignore[arg-type]
        if other:
            span.add_event("gen_ai.other", {"k": 1}, timestamp=start)
        span.end(end_time=2**62)
    finished = spans.finished()
    packed, records, rows = SegmentColumns(), SegmentColumns(), SegmentColumns()
    for span in finished:
        packed.append_packed(pack(span))
        records.append_record(unpack(pack(span)))
        rows.append_row(span_row(span))
    expected = rows.table()
    assert packed.table().equals(expected)
    assert records.table().equals(expected)


def test_a_subclass_of_a_value_type_keeps_its_value() -> None:
    """The SDK keeps an ``IntEnum`` or a ``float`` subclass as given; marshal cannot hold them,
    so the packer keeps their values: the typed column and the map both get the number."""
    import enum

    class Status(enum.IntEnum):
        OK = 200

    class Ratio(float):
        pass

    spans = Spans()
    attributes = {sc.SPAN_ROLE: sc.SPAN_ROLE_ATTEMPT, sc.ATTEMPT_NUMBER: Status.OK, "r": Ratio(0.5)}
    spans.tracer.start_span("s", attributes=attributes).end()  # type: ignore[arg-type]
    (finished,) = spans.finished()
    record = unpack(pack(finished))
    assert record.attributes[sc.ATTEMPT_NUMBER] == 200
    assert type(record.attributes[sc.ATTEMPT_NUMBER]) is int
    assert record.attributes["r"] == 0.5


def test_a_run_of_chunk_events_is_read_whole_or_not_at_all() -> None:
    """The attempt span's chunk events carry their integers (the run) on the first; a span
    holding anything else too — an event added after them, or fewer of them than were added
    (the SDK's limit dropped the oldest) — is read event by event: the same record either way."""
    (span,) = _attempt_spans(1)
    assert chunk_run(span.events) is not None
    walked = unpack(
        pack(_with_events(span, [Event(e.name, e.attributes, e.timestamp) for e in span.events]))
    )
    assert unpack(pack(span)) == walked
    extra = Event("gen_ai.other", {"k": 1}, span.events[-1].timestamp)
    more = _with_events(span, [*span.events, extra])
    assert chunk_run(more.events) is None
    record = unpack(pack(more))
    assert [name for name, _, _ in record.events][-1] == "gen_ai.other"
    assert len(record.events) == 32
    fewer = _with_events(span, list(span.events[1:]))
    assert chunk_run(fewer.events) is None
    record = unpack(pack(fewer))
    assert record.chunks is not None
    assert record.chunks[1] == walked.chunks[1][1:]  # type: ignore[index]


def test_chunk_events_a_few_steps_past_64_bits_are_not_packed() -> None:
    """Small steps from a start just below 2**63 still carry the times past it: the events
    are kept whole (the writer then refuses the span) rather than packed to wrap around."""
    spans = Spans()
    start = 2**63 - 10
    span = spans.tracer.start_span("s", start_time=start)
    for number, offset in enumerate((1, 20)):
        pair = {sc.CHUNK_INDEX: number, sc.CHUNK_GAP_NS: 5} if number else {sc.CHUNK_INDEX: 0}
        span.add_event(sc.CHUNK_EVENT, pair, timestamp=start + offset)
    span.end(end_time=start)
    (finished,) = spans.finished()
    assert unpack(pack(finished)).chunks is None
    low = Spans()
    span = low.tracer.start_span("s", start_time=2**62)
    span.add_event(sc.CHUNK_EVENT, {sc.CHUNK_INDEX: 0}, timestamp=2**62 + 1)
    span.end(end_time=2**62 + 2)
    (finished,) = low.finished()
    assert unpack(pack(finished)).chunks is not None
