"""OTLP messages become exactly the rows the embedded path writes
(``otel_llm._show._ingest._otlp_rows`` beside ``otel_llm._show._store._rows.span_row``), for
otel-llm's spans and for anyone else's."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_llm._show._ingest._otlp_rows import (
    any_value,
    append_export_request,
    rows_from_export_request,
)
from otel_llm._show._sql._schema import ALL_COLUMNS
from otel_llm._show._store._columns import SegmentColumns
from otel_llm._show._store._rows import span_row
from tests.collector.test_store_exporter_values import requests as hostile_requests
from tests.support.duckdb_store import MemoryCalls


def _through_otlp(spans: Sequence[ReadableSpan]) -> list[dict[str, object]]:
    """``spans`` as the SDK's OTLP exporter sends them, parsed back, as rows; and (checked
    here for every test) the ingest's columns of the same bytes equal those of the rows."""
    wire = encode_spans(spans).SerializeToString()
    request = ExportTraceServiceRequest()
    request.ParseFromString(wire)
    rows = rows_from_export_request(request)
    from_rows = SegmentColumns()
    for row in rows:
        from_rows.append_row(row)
    direct = SegmentColumns()
    assert append_export_request(direct, wire) == len(rows)
    assert direct.table().equals(from_rows.table())
    return rows


def _by_span(rows: Sequence[dict[str, object]]) -> dict[object, dict[str, object]]:
    return {row["SpanId"]: row for row in rows}


def test_otel_llm_spans_become_the_embedded_rows() -> None:
    """Calls with a cancelled hedge leg, chunk events and derived figures: every OTLP row
    equals span_row of the same span, key for key, with every column of the table."""
    calls = MemoryCalls(Resource.create({"service.name": "svc", "deployment.environment": "t"}))
    for _ in range(3):
        calls.call()
    spans = calls.exporter.get_finished_spans()
    assert len(spans) == 9
    expected = [span_row(span) for span in spans]
    got = _through_otlp(spans)
    assert sorted(got[0]) == sorted(ALL_COLUMNS)
    assert _by_span(got) == _by_span(expected)
    chunky = [row for row in got if row["ChunkIndex"]]
    assert chunky, "the attempts carry chunk events"
    assert all(row["WallMs"] is not None for row in got if row["LlmRole"] == "attempt")


def test_other_spans_and_odd_values_render_alike() -> None:
    """Spans of another library (no otel-llm defaults), every attribute type the SDK accepts,
    links, kinds, an error status and events other than chunks: the same rows both ways."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "other"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("someone-else")
    linked = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
    values = {
        "a.str": "x",
        "a.empty": "",
        "a.int": -7,
        "a.big": 2**62,
        "a.float": 0.1,
        "a.whole_float": 2.0,
        "a.bool": True,
        "a.strs": ("p", "q"),
        "a.ints": (1, 2, 3),
        "a.floats": (1.5, -0.25),
        "a.bools": (True, False),
        "gen_ai.request.stream": True,
        "otel_llm.attempt.number": 3,
    }
    with tracer.start_as_current_span(
        "outer", kind=SpanKind.SERVER, links=[Link(linked, {"why": "retry"})]
    ) as outer:
        outer.set_attributes(values)
        outer.add_event("note", {"n": 1, "f": 2.5, "s": "t", "b": False})
        with tracer.start_as_current_span("inner", kind=SpanKind.CONSUMER) as inner:
            inner.set_status(Status(StatusCode.ERROR, "it broke"))
        with tracer.start_as_current_span("producer", kind=SpanKind.PRODUCER):
            pass
    with tracer.start_as_current_span("client", kind=SpanKind.CLIENT) as client:
        client.set_status(Status(StatusCode.OK))
    spans = exporter.get_finished_spans()
    expected = _by_span([span_row(span) for span in spans])
    got = _by_span(_through_otlp(spans))
    for row in expected.values():  # the SDK's OTLP exporter does not send a link's trace state
        row["Links.TraceState"] = ["" for _ in row["Links.TraceState"]]  # type: ignore[union-attr]
    assert got == expected
    outer_row = got[format(outer.get_span_context().span_id, "016x")]
    assert outer_row["Stream"] is True  # typed from the attribute, not an otel-llm default
    assert outer_row["LlmRole"] is None
    assert outer_row["SpanAttributes"]["a.floats"] == "[1.5,-0.25]"  # type: ignore[index]
    assert trace.get_tracer_provider() is not provider


def test_any_value_reads_every_kind() -> None:
    """Each OTLP value kind comes back as the Python value the SDK held; unset is None."""
    from opentelemetry.proto.common.v1.common_pb2 import (
        AnyValue,
        ArrayValue,
        KeyValue,
        KeyValueList,
    )

    assert any_value(AnyValue()) is None
    assert any_value(AnyValue(bytes_value=b"\x01\xff")) == b"\x01\xff"
    assert any_value(AnyValue(double_value=1.25)) == 1.25
    nested = AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=1), AnyValue()]))
    assert any_value(nested) == (1, None)
    kv = AnyValue(
        kvlist_value=KeyValueList(values=[KeyValue(key="k", value=AnyValue(bool_value=True))])
    )
    assert any_value(kv) == {"k": True}


def test_an_unset_value_on_an_otel_llm_span_types_as_the_rows_do() -> None:
    """A typed attribute sent with no value (an unset ``AnyValue``: no SDK sends one, a request
    may) on otel-llm's span: its column is NULL, as the rows and the Collector's exporter have
    it; the ingest's own path filled the column's default (``Stream`` false)."""
    from otel_llm import _semconv as sc

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id = b"\x01" * 16, b"\x02" * 8
    span.start_time_unix_nano = span.end_time_unix_nano = 1_700_000_000_000_000_000
    span.attributes.add(key=sc.SPAN_ROLE).value.string_value = "attempt"
    span.attributes.add(key="gen_ai.request.stream")  # no value
    direct = SegmentColumns()
    append_export_request(direct, request.SerializeToString())
    [row] = rows_from_export_request(request)
    from_rows = SegmentColumns()
    from_rows.append_row(row)
    assert row["Stream"] is None
    assert direct.table().equals(from_rows.table())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_requests())
def test_hostile_requests_give_the_rows_table(request: ExportTraceServiceRequest) -> None:
    """Requests built as protobuf with every kind of value, unicode, extreme numbers, duplicate
    keys and odd kinds (the Collector exporter's hostile strategy): the ingest's own path gives
    the table the rows give, which the Collector's exporter is held to."""
    direct = SegmentColumns()
    append_export_request(direct, request.SerializeToString())
    from_rows = SegmentColumns()
    for row in rows_from_export_request(request):
        from_rows.append_row(row)
    try:
        expected = from_rows.table()
    except OverflowError:  # a time past 64 bits: the ingest leaves the message out
        return
    assert direct.table().equals(expected)
