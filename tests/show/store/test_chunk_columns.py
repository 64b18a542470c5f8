"""The store writer's packed chunk columns: the same table as the row path for any mix of spans."""

from __future__ import annotations

import logging
from array import array
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link

from otel_llm import SegmentSpanExporter
from otel_llm import _semconv as sc
from otel_llm._measure._events import chunk_event_attributes
from otel_llm._measure._span_events import ChunkRun, add_events, chunk_run
from otel_llm._show._store import _chunk_columns
from otel_llm._show._store._columns import SegmentColumns
from otel_llm._show._store._records import pack, unpack
from otel_llm._show._store._rows import span_row
from tests.support.duckdb_store import lockless_count

_STEP = st.one_of(
    st.integers(min_value=0, max_value=2**20),
    st.integers(min_value=2**31, max_value=2**40),  # an 8-byte step
)
_GAP = st.one_of(
    st.integers(min_value=0, max_value=2**20),
    st.integers(min_value=2**31, max_value=2**50),  # an 8-byte gap
)
_RUN = st.tuples(
    st.lists(st.tuples(_STEP, _GAP), min_size=1, max_size=5),
    st.booleans(),  # the first chunk is chunk 0 (no gap)
    st.integers(min_value=0, max_value=2**40),  # the first index otherwise
    st.booleans(),  # indexes that count up by one (else by two)
)
_KIND = st.sampled_from(["run", "run+after", "before+run", "plain", "other", "none", "row"])
_SPAN = st.tuples(
    _KIND,
    _RUN,
    st.integers(min_value=0, max_value=2**62),  # start
    st.booleans(),  # a link
)


def _provider(max_events: int | None) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    limits = SpanLimits(max_events=max_events) if max_events is not None else None
    provider = TracerProvider(span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _add_run(span: Any, start: int, run: tuple[Any, ...], plain: bool) -> None:
    """Chunk events as the attempt span adds them (a ``ChunkRun`` on the first), or the same
    events one ``add_event`` at a time (``plain``)."""
    pairs, from_zero, first, counting = run
    step = 1 if counting else 2
    first = 0 if from_zero else first + 1
    indices = [first + step * number for number in range(len(pairs))]
    gaps_ns = [0] * (indices[-1] + 1) if indices[-1] < 64 else None
    stamps: list[int] = []
    now = start
    for step_ns, _ in pairs:
        now += step_ns
        stamps.append(now)
    gaps = [gap for _, gap in pairs]
    if gaps_ns is None:  # indices far up: a mapping standing in for the meter's gap list
        by_index = {index - 1: gap for index, gap in zip(indices, gaps, strict=True)}
        attributes = [{sc.CHUNK_INDEX: i, sc.CHUNK_GAP_NS: by_index[i - 1]} for i in indices]
    else:
        for index, gap in zip(indices, gaps, strict=True):
            if index:
                gaps_ns[index - 1] = gap
        attributes = chunk_event_attributes(indices, gaps_ns)
    first_alone = indices[0] == 0
    run_gaps = [a[sc.CHUNK_GAP_NS] for a in attributes[first_alone:]]
    if plain:
        for stamp, attrs in zip(stamps, attributes, strict=True):
            span.add_event(sc.CHUNK_EVENT, attrs, timestamp=stamp)
        return
    add_events(
        span,
        sc.CHUNK_EVENT,
        stamps,
        attributes,
        most_attributes=2,
        chunks=ChunkRun(stamps, indices, run_gaps, first_alone),
    )


def _span(provider: TracerProvider, shape: tuple[Any, ...]) -> None:
    kind, run, start, linked = shape
    tracer = provider.get_tracer("t")
    parent = tracer.start_span("p")
    links = [Link(parent.get_span_context(), {"l": 1})] if linked else []
    span = tracer.start_span(
        kind, start_time=start, links=links, attributes={sc.SPAN_ROLE: "attempt"}
    )
    if kind == "before+run":
        span.add_event("gen_ai.other", {"k": "v"}, timestamp=start)
    if kind.startswith(("run", "before+run")):
        _add_run(span, start, run, plain=False)
    if kind in ("plain", "row"):  # a row: appended as its row, chunk events and all
        _add_run(span, start, run, plain=True)
    if kind in ("run+after", "other"):
        span.add_event("gen_ai.other", {"k": 2}, timestamp=start + 5)
    span.end(end_time=start + 2**40)


def _tables(spans: list[ReadableSpan], kinds: list[str]) -> tuple[Any, Any]:
    fast, rows = SegmentColumns(), SegmentColumns()
    for span, kind in zip(spans, kinds, strict=True):
        if kind == "row":
            fast.append_row(span_row(span))
        else:
            fast.append_packed(pack(span))
        rows.append_row(span_row(span))
    return fast.table(), rows.table()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=st.lists(_SPAN, min_size=0, max_size=6),
    max_events=st.one_of(st.none(), st.integers(min_value=1, max_value=6)),
)
def test_a_table_of_any_mix_of_spans_is_the_table_of_their_rows(
    shapes: list[tuple[Any, ...]], max_events: int | None
) -> None:
    """Spans whose chunk events carry their run, plain chunk events, other events, no events,
    links, 4- and 8-byte integers, runs the SDK's limit cut, rows appended as rows: one table
    of them is the table their rows make."""
    provider, exporter = _provider(max_events)
    for shape in shapes:
        _span(provider, shape)
    spans = [s for s in exporter.get_finished_spans() if s.name != "p"]
    kinds = [s.name for s in spans]
    for span in spans:  # a run read whole is what the events hold, whatever the limit cut
        run = chunk_run(span.events)
        if span.name == "run" and not span.dropped_events:
            assert run is not None
        if run is not None:
            attributes = [dict(event.attributes or {}) for event in span.events]
            assert list(run.stamps) == [event.timestamp for event in span.events]
            assert list(run.indexes) == [a[sc.CHUNK_INDEX] for a in attributes]
            assert list(run.gaps) == [a[sc.CHUNK_GAP_NS] for a in attributes if len(a) == 2]
            assert run.first_alone == (len(attributes[0]) == 1)
    fast, rows = _tables(spans, kinds)
    assert fast.equals(rows), (fast.to_pylist(), rows.to_pylist())


_FAR = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.integers(min_value=-(2**62), max_value=2**62),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    start=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    stamps=st.lists(_FAR, min_size=1, max_size=4),
    chunks=st.booleans(),
)
def test_times_past_64_bits_refuse_the_span_alone(
    start: int, stamps: list[int], chunks: bool
) -> None:
    """Event times whose steps fit 64 bits but whose times or offsets from the start do not
    (the running sum would wrap): the span is refused when appended and the columns are as
    they were; a span whose times fit gives the table of its row."""
    provider, exporter = _provider(None)
    tracer = provider.get_tracer("t")
    before = tracer.start_span("before", start_time=1)
    for number, gap in enumerate([None, 2**40]):  # packed, a 4-byte and an 8-byte gap
        pair = (
            {sc.CHUNK_INDEX: number}
            if gap is None
            else {sc.CHUNK_INDEX: number, sc.CHUNK_GAP_NS: gap}
        )
        before.add_event(sc.CHUNK_EVENT, pair, timestamp=2 + 2**33 * number)
    before.end(end_time=2)
    span = tracer.start_span("s", start_time=start)
    for number, stamp in enumerate(stamps):
        if chunks:
            attributes = {sc.CHUNK_INDEX: number, sc.CHUNK_GAP_NS: 7}
            span.add_event(sc.CHUNK_EVENT, attributes, timestamp=stamp)
        else:
            span.add_event("x", {"k": 1}, timestamp=stamp)
    span.end(end_time=start)
    before, finished = exporter.get_finished_spans()
    rows = SegmentColumns()
    rows.append_row(span_row(before))
    alone = rows.table()
    rows.append_row(span_row(finished))
    try:
        expected = rows.table()
    except (OverflowError, ValueError):
        expected = None
    fast, records = SegmentColumns(), SegmentColumns()
    fast.append_packed(pack(before))
    records.append_record(unpack(pack(before)))
    if expected is None:
        with pytest.raises((OverflowError, ValueError)):
            fast.append_packed(pack(finished))
        with pytest.raises((OverflowError, ValueError)):
            records.append_record(unpack(pack(finished)))
        assert fast.table().equals(alone)
        assert records.table().equals(alone)
        fast.append_packed(pack(before))  # the packed chunk columns were left as they were
        assert fast.table().equals(pa.concat_tables([alone, alone]))
    else:
        fast.append_packed(pack(finished))
        records.append_record(unpack(pack(finished)))
        assert fast.table().equals(expected)
        assert records.table().equals(expected)


def test_a_chunk_offset_past_64_bits_is_not_wrapped() -> None:
    """A span starting at the top of the range whose chunk events go back to -2**62: each step
    fits 64 bits, the offset of the second does not; the span is refused (it was written with
    a wrapped offset of +2**62 + 1)."""
    provider, exporter = _provider(None)
    span = provider.get_tracer("t").start_span("s", start_time=2**63 - 1)
    for number, stamp in enumerate([0, -(2**62)]):
        span.add_event(
            sc.CHUNK_EVENT, {sc.CHUNK_INDEX: number, sc.CHUNK_GAP_NS: 1}, timestamp=stamp
        )
    span.end(end_time=2**63 - 1)
    (finished,) = exporter.get_finished_spans()
    columns = SegmentColumns()
    with pytest.raises(OverflowError):
        columns.append_packed(pack(finished))
    assert len(columns) == 0
    assert columns.table().num_rows == 0


@pytest.mark.parametrize("where", ["event", "start", "end"])
def test_a_time_past_64_bits_costs_only_its_span(tmp_path: Path, where: str) -> None:
    """A span with an event time, a start or an end past 64 bits among good spans in one
    segment: it is dropped and counted, the ten others are written (the whole segment was lost
    when the table of it failed)."""
    provider, exporter = _provider(None)
    tracer = provider.get_tracer("t")
    for index in range(5):
        tracer.start_span(f"good-{index}").end()
    bad = tracer.start_span("bad", start_time=2**64 if where == "start" else 1)
    if where == "event":
        bad.add_event("x", {"k": 1}, timestamp=2**64)
    bad.end(end_time=2**65 if where == "end" else None)
    for index in range(5):
        tracer.start_span(f"more-{index}").end()
    store = SegmentSpanExporter(tmp_path / "store")
    logging.getLogger("otel_llm").disabled = True
    try:
        store.export(exporter.get_finished_spans())
        assert store.force_flush(30_000)
    finally:
        logging.getLogger("otel_llm").disabled = False
        store.shutdown()
    assert (store.stats.written, store.stats.dropped) == (10, 1)
    assert lockless_count(tmp_path / "store") == (10, 10)


def test_the_shared_counting_array_is_read_once_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two writer threads growing the shared 0, 1, 2, … array at once: the one that asked for
    more still gets as many, though the other's shorter array lands right after its own."""
    import pyarrow as pa

    class LateShorter(list[Any]):
        def __setitem__(self, key: Any, value: Any) -> None:
            super().__setitem__(key, value)
            super().__setitem__(key, [pa.array(range(10), pa.int64())])

    monkeypatch.setattr(_chunk_columns, "_COUNTED", LateShorter())
    assert _chunk_columns.counted(20_000).to_pylist() == list(range(20_000))


def test_long_counting_runs_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Packed counting indexes are cached for short runs only: spans of many events each
    (an event limit raised high) leave the cache as small as before."""
    monkeypatch.setattr(_chunk_columns, "_COUNTING", {})
    for count in range(5_000, 5_050):
        packed = _chunk_columns._counting(3, count)
        assert packed[1:] == array("i", range(3, 3 + count)).tobytes()
    assert _chunk_columns._COUNTING == {}
    _chunk_columns._counting(0, 30)
    assert list(_chunk_columns._COUNTING) == [(0, 30)]
