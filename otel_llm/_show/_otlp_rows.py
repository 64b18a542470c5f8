"""OTLP trace messages (``ExportTraceServiceRequest``) as ``otel_traces`` rows.

The Collector's file exporter writes what it received as OTLP protobuf;
:func:`rows_from_export_request` turns each span of such a message into exactly the row
:func:`otel_llm._show._rows.span_row` makes of the same span inside the SDK: the same keys, the
same rendering of attribute values (:data:`~otel_llm._show._rows.RENDER`, then
:func:`~otel_llm._show._rows.attribute_string`), the same typed columns
(:func:`~otel_llm._show._rows.typed_columns`, shared by both) and chunk arrays. A resource's
attributes are converted once per resource, not once per span.

One difference comes from the sender, not from here: the SDK's OTLP exporter does not send a
link's trace state, so ``Links.TraceState`` of a span that went through OTLP is empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.trace import SpanKind

from otel_llm import _semconv as sc
from otel_llm._show._rows import (
    KIND_NAMES,
    STATUS_NAMES,
    attribute_string,
    typed_columns,
)
from otel_llm._show._schema import CHUNK_COLUMNS, CHUNK_OFFSET_COLUMN

_PROTO_KINDS: Final = {
    Span.SPAN_KIND_INTERNAL: SpanKind.INTERNAL,
    Span.SPAN_KIND_SERVER: SpanKind.SERVER,
    Span.SPAN_KIND_CLIENT: SpanKind.CLIENT,
    Span.SPAN_KIND_PRODUCER: SpanKind.PRODUCER,
    Span.SPAN_KIND_CONSUMER: SpanKind.CONSUMER,
}
_KIND_BY_NUMBER: Final = {number: KIND_NAMES[kind] for number, kind in _PROTO_KINDS.items()}
_STATUS_BY_NUMBER: Final = {code.value: name for code, name in STATUS_NAMES.items()}
(_CHUNK_INDEX_COLUMN, _CHUNK_INDEX), (_CHUNK_GAP_COLUMN, _CHUNK_GAP) = CHUNK_COLUMNS


def _array(value: AnyValue) -> tuple[Any, ...]:
    return tuple(any_value(item) for item in value.array_value.values)


def _kvlist(value: AnyValue) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}


_GETTERS: Final[dict[str | None, Callable[[AnyValue], Any]]] = {
    "string_value": lambda v: v.string_value,
    "int_value": lambda v: v.int_value,
    "bool_value": lambda v: v.bool_value,
    "double_value": lambda v: v.double_value,
    "bytes_value": lambda v: v.bytes_value,
    "array_value": _array,
    "kvlist_value": _kvlist,
}


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as the Python value the SDK held (arrays as tuples; unset: None)."""
    getter = _GETTERS.get(value.WhichOneof("value"))
    return None if getter is None else getter(value)


def _values_and_strings(attributes: Iterable[KeyValue]) -> tuple[dict[str, Any], dict[str, str]]:
    """OTLP key-values as Python values and as the strings of a ``Map(String, String)``, in one
    pass (a later duplicate key wins, as in the SDK); the common kinds written out."""
    values: dict[str, Any] = {}
    strings: dict[str, str] = {}
    for kv in attributes:
        key = kv.key
        value = kv.value
        kind = value.WhichOneof("value")
        if kind == "string_value":
            values[key] = strings[key] = value.string_value
        elif kind == "int_value":
            number = value.int_value
            values[key] = number
            strings[key] = str(number)  # attribute_string's rendering: repr(int) == str(int)
        else:
            python = any_value(value)
            values[key] = python
            strings[key] = attribute_string(python)
    return values, strings


def rows_from_export_request(request: ExportTraceServiceRequest) -> list[dict[str, Any]]:
    """One ``otel_traces`` row per span of ``request``, keyed by column name."""
    rows: list[dict[str, Any]] = []
    for resource_spans in request.resource_spans:
        resource, resource_strings = _values_and_strings(resource_spans.resource.attributes)
        service = attribute_string(resource.get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            for span in scope_spans.spans:
                rows.append(_span_row(span, resource_strings, service, scope.name, scope.version))
    return rows


def _span_row(
    span: Span,
    resource_strings: dict[str, str],
    service: str,
    scope_name: str,
    scope_version: str,
) -> dict[str, Any]:
    start = span.start_time_unix_nano
    end = span.end_time_unix_nano
    attributes, attribute_strings = _values_and_strings(span.attributes)
    links = span.links
    status = span.status
    parent = span.parent_span_id
    row: dict[str, Any] = {
        "Timestamp": start,
        "TraceId": span.trace_id.hex(),
        "SpanId": span.span_id.hex(),
        "ParentSpanId": parent.hex() if parent else "",
        "TraceState": span.trace_state,
        "SpanName": span.name,
        "SpanKind": _KIND_BY_NUMBER.get(span.kind, "Unspecified"),
        "ServiceName": service,
        "ResourceAttributes": dict(resource_strings),
        "ScopeName": scope_name,
        "ScopeVersion": scope_version,
        "SpanAttributes": attribute_strings,
        "Duration": max(0, end - start),
        "StatusCode": _STATUS_BY_NUMBER.get(status.code, "Unset"),
        "StatusMessage": status.message,
        "Links.TraceId": [link.trace_id.hex() for link in links],
        "Links.SpanId": [link.span_id.hex() for link in links],
        "Links.TraceState": [link.trace_state for link in links],
        "Links.Attributes": [_values_and_strings(link.attributes)[1] for link in links],
    }
    typed_columns(attributes, row)
    _event_columns(span, start, row)
    return row


def _event_columns(span: Span, start: int, row: dict[str, Any]) -> None:
    """The event arrays and the typed chunk arrays, in one pass over the events (as
    :func:`otel_llm._show._rows.span_row` fills them; ~30 chunk events a span, so the
    attribute loop of :func:`_values_and_strings` is written out once more here)."""
    stamps: list[int] = []
    names: list[str] = []
    maps: list[dict[str, str]] = []
    indexes: list[Any] = []
    gaps: list[Any] = []
    offsets: list[int] = []
    chunk_event = sc.CHUNK_EVENT
    for event in span.events:
        stamp = event.time_unix_nano
        name = event.name
        values: dict[str, Any] = {}
        strings: dict[str, str] = {}
        for kv in event.attributes:
            key = kv.key
            value = kv.value
            kind = value.WhichOneof("value")
            if kind == "int_value":
                number = value.int_value
                values[key] = number
                strings[key] = str(number)
            elif kind == "string_value":
                values[key] = strings[key] = value.string_value
            else:
                python = any_value(value)
                values[key] = python
                strings[key] = attribute_string(python)
        stamps.append(stamp)
        names.append(name)
        maps.append(strings)
        if name == chunk_event:
            indexes.append(values.get(_CHUNK_INDEX))
            gaps.append(values.get(_CHUNK_GAP))
            offsets.append(stamp - start)
    row["Events.Timestamp"] = stamps
    row["Events.Name"] = names
    row["Events.Attributes"] = maps
    row[_CHUNK_INDEX_COLUMN] = indexes
    row[_CHUNK_GAP_COLUMN] = gaps
    row[CHUNK_OFFSET_COLUMN] = offsets
