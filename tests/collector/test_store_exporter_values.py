"""Hostile OTLP into the Collector's otelllm_store exporter: spans built straight as protobuf
(every kind of attribute value OTLP has, unicode of every plane, extreme numbers, duplicate
keys, odd ids and kinds) give the rows the Python ingest of the same request gives, column for
column — the Go exporter renders and types values exactly as otel-llm's Python does."""

from __future__ import annotations

import math
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from otel_llm import _env as env
from otel_llm._show._ingest._otlp_rows import rows_from_export_request
from otel_llm._show._store._access import open_store, prepare_for_writing
from otel_llm.cli._collector import CollectorRun, Ports, collector_dir
from tests.conftest import require

KEYS = (
    "otel_llm.span",
    "gen_ai.request.model",
    "gen_ai.request.stream",
    "otel_llm.attempt.number",
    "otel_llm.stall_count",
    "otel_llm.call.hedge_won",
    "service.name",
    "k",
    "ключ",
)
"""Typed attributes (so the typed columns see every kind of value), and plain ones."""

text = st.text(st.characters(codec="utf-8", exclude_categories=["Cn"]), max_size=6)
"""Any character but those this Python's Unicode does not know: inside an array or a kvlist a
character renders as Python's ``repr`` does, escaped where it is not printable, and Python 3.11
(Unicode 14) escapes what Go's tables (Unicode 15) print, such as U+31350 (see the docs)."""
scalars = st.one_of(
    text.map(lambda s: AnyValue(string_value=s)),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: AnyValue(int_value=n)),
    st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, -(2**31) - 1]).map(
        lambda n: AnyValue(int_value=n)
    ),
    st.booleans().map(lambda b: AnyValue(bool_value=b)),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: AnyValue(double_value=f)),
    st.binary(max_size=6).map(lambda b: AnyValue(bytes_value=b)),
    st.just(AnyValue()),
)
"""Python renders a bytes value inside an array by raising, so arrays hold no bytes."""
in_arrays = st.one_of(
    text.map(lambda s: AnyValue(string_value=s)),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: AnyValue(int_value=n)),
    st.booleans().map(lambda b: AnyValue(bool_value=b)),
    st.floats().map(lambda f: AnyValue(double_value=f)),
    st.just(AnyValue()),
)
arrays = st.lists(in_arrays, max_size=4).map(
    lambda values: AnyValue(array_value=ArrayValue(values=values))
)
kvlists = st.lists(st.tuples(text, st.one_of(scalars, arrays)), max_size=2).map(
    lambda pairs: AnyValue(
        kvlist_value=KeyValueList(values=[KeyValue(key=k, value=v) for k, v in pairs])
    )
)
values = st.one_of(scalars, arrays, kvlists)
attributes = st.lists(st.tuples(st.one_of(st.sampled_from(KEYS), text), values), max_size=4).map(
    lambda pairs: [KeyValue(key=k, value=v) for k, v in pairs]
)


def ids(size: int) -> st.SearchStrategy[bytes]:
    """Ids as SDKs send them: never all zeros (the Collector's data model cannot tell those
    from an id not sent, which the Python ingest renders as "")."""
    return st.binary(min_size=size, max_size=size).filter(any)


@st.composite
def spans(draw: st.DrawFn, number: int) -> Span:
    start = draw(st.integers(10**9, 2**62))
    events = []
    for n in range(draw(st.integers(0, 3))):
        chunk = draw(st.booleans())
        events.append(
            Span.Event(
                time_unix_nano=start + draw(st.integers(0, 10**9)),
                name="otel_llm.chunk" if chunk else draw(text),
                attributes=[
                    KeyValue(key="otel_llm.chunk.index", value=AnyValue(int_value=n)),
                    KeyValue(key="otel_llm.chunk.gap_ns", value=draw(scalars)),
                ]
                if chunk
                else draw(attributes),
            )
        )
    links = [
        Span.Link(
            trace_id=draw(ids(16)),
            span_id=draw(ids(8)),
            trace_state=draw(st.sampled_from(["", "a=1"])),
            attributes=draw(attributes),
        )
        for _ in range(draw(st.integers(0, 1)))
    ]
    return Span(
        trace_id=draw(ids(16)),
        span_id=number.to_bytes(8, "big"),  # distinct: rows are compared in SpanId order
        parent_span_id=draw(st.sampled_from([b"", b"\x01" * 8])),
        trace_state=draw(st.sampled_from(["", "vendor=x"])),
        name=draw(text),
        kind=draw(st.integers(0, 6)),
        start_time_unix_nano=start,
        end_time_unix_nano=start + draw(st.integers(-(10**9), 10**9)),
        attributes=draw(attributes),
        events=events,
        links=links,
        status=Status(code=draw(st.integers(0, 3)), message=draw(text)),
    )


@st.composite
def requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    number = 1
    for _ in range(draw(st.integers(1, 2))):
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(draw(attributes))
        for _ in range(draw(st.integers(1, 2))):
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = draw(text)
            scope_spans.scope.version = draw(text)
            for _ in range(draw(st.integers(1, 3))):
                scope_spans.spans.append(draw(spans(number)))
                number += 1
    return request


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ports, Path]]:
    """One Collector for every example, writing one store."""
    named = os.environ.get(env.OTEL_LLM_COLLECTOR_BIN, "")
    require(bool(named) and Path(named).is_file(), "the collector binary (./dev test builds it)")
    folder = tmp_path_factory.mktemp("hostile")
    store = folder / "store"
    config = folder / "quick-seals.yaml"  # each example waits for one seal: 10 ms, not 250
    shipped = (collector_dir() / "duckdb.yaml").read_text()
    assert shipped.count("seal_interval: 250ms") == 1
    config.write_text(shipped.replace("seal_interval: 250ms", "seal_interval: 10ms"))
    ports = Ports.free()
    run = CollectorRun(Path(named), config, store=store, ports=ports, log=subprocess.DEVNULL)
    run.start()
    yield ports, store
    run.stop()


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN (a DOUBLE never reaches a column; kept for safety)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@settings(
    max_examples=15,  # a seal each; 400 passed when this was written
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=requests())
def test_hostile_requests_give_the_python_ingests_rows(
    collector: tuple[Ports, Path], tmp_path_factory: pytest.TempPathFactory, request: object
) -> None:
    """Any request OTLP allows (bytes inside arrays aside: Python cannot render those): the
    rows the Go exporter stored equal those otel-llm's Python ingest makes of the same bytes."""
    assert isinstance(request, ExportTraceServiceRequest)
    ports, store = collector
    trace_id = os.urandom(16)  # this example's spans apart from the others' in the one store
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                span.trace_id = trace_id
    body = request.SerializeToString()
    post = urllib.request.Request(
        ports.traces_url, data=body, headers={"Content-Type": "application/x-protobuf"}
    )
    with urllib.request.urlopen(post, timeout=60) as answer:
        assert answer.status == 200  # answered: the spans are in a sealed segment
    expected = tmp_path_factory.mktemp("python") / "store"
    prepare_for_writing(expected).write(rows_from_export_request(request))
    sql = f"SELECT * FROM otel_traces WHERE TraceId = '{trace_id.hex()}' ORDER BY SpanId"
    with open_store(store) as conn:
        got = conn.execute(sql).fetchall()
    with open_store(expected) as conn:
        want = conn.execute(sql).fetchall()
    assert len(got) == len(want) > 0
    for got_row, want_row in zip(got, want, strict=True):
        assert all(_same(a, b) for a, b in zip(got_row, want_row, strict=True)), (
            got_row,
            want_row,
        )


def test_strings_that_are_not_utf8_are_stored_as_replacement_characters(
    collector: tuple[Ports, Path],
) -> None:
    """OTLP requires UTF-8 of every string, but the Collector passes on the bytes a client
    sent; stored as they came, they failed every later query over the column ("Invalid string
    encoding"). Each run of invalid bytes is stored as U+FFFD, and the span stays readable."""
    ports, store = collector
    trace_id = os.urandom(16)
    marker = "#BAD#"  # replaced in the encoded request by as many bytes that are not UTF-8
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(
        KeyValue(key="service.name", value=AnyValue(string_value="svc" + marker))
    )
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "otel_llm" + marker
    scope_spans.spans.append(
        Span(
            trace_id=trace_id,
            span_id=b"\x01" * 8,
            name="chat " + marker,
            start_time_unix_nano=10**18,
            end_time_unix_nano=10**18 + 5,
            attributes=[
                KeyValue(key="gen_ai.request.model", value=AnyValue(string_value="m" + marker)),
                KeyValue(key="k" + marker, value=AnyValue(string_value="v" + marker)),
            ],
            events=[Span.Event(time_unix_nano=10**18 + 1, name="e" + marker)],
            status=Status(code=2, message="boom" + marker),
        )
    )
    body = request.SerializeToString().replace(marker.encode(), b"\xff\xfe\xfd\xfc\xfb")
    assert marker.encode() not in body
    assert b"\xff\xfe" in body
    post = urllib.request.Request(
        ports.traces_url, data=body, headers={"Content-Type": "application/x-protobuf"}
    )
    with urllib.request.urlopen(post, timeout=60) as answer:
        assert answer.status == 200
    with open_store(store) as conn:
        # Every column of every span in the store, not only this one: one bad string in a
        # segment fails a query that reads its column.
        assert conn.execute("SELECT * FROM otel_traces").fetchall()
        row = conn.execute(
            "SELECT ServiceName, ScopeName, SpanName, RequestModel, SpanAttributes['k\ufffd'],"
            ' "Events.Name", StatusMessage FROM otel_traces WHERE TraceId = ?',
            [trace_id.hex()],
        ).fetchall()
    r = "\ufffd"
    want = (f"svc{r}", f"otel_llm{r}", f"chat {r}", f"m{r}", f"v{r}", [f"e{r}"], f"boom{r}")
    assert row == [want]
