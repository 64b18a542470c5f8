"""OTLP trace messages (``ExportTraceServiceRequest``) as ``otel_traces`` rows.

The Collector's file exporter writes what it received as OTLP protobuf;
:func:`rows_from_export_request` turns each span of such a message into exactly the row
:func:`otel_llm._show._store._rows.span_row` makes of the same span inside the SDK: the same
keys, the same rendering of attribute values (:data:`~otel_llm._show._store._rows.RENDER`, then
:func:`~otel_llm._show._store._rows.attribute_string`), the same typed columns
(:func:`~otel_llm._show._store._rows.typed_columns`, shared by both) and chunk arrays. A resource's
attributes are converted once per resource, not once per span.

One difference comes from the sender, not from here: the SDK's OTLP exporter does not send a
link's trace state, so ``Links.TraceState`` of a span that went through OTLP is empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.trace import SpanKind

from otel_llm import _semconv as sc
from otel_llm._show._ingest._otlp_wire import WireRequest, any_value, value_of
from otel_llm._show._sql._table import CHUNK_GAP_COLUMN, CHUNK_INDEX_COLUMN, CHUNK_OFFSET_COLUMN
from otel_llm._show._store._columns import SegmentColumns
from otel_llm._show._store._rows import (
    KIND_NAMES,
    STATUS_NAMES,
    TYPED_PLAN,
    as_int,
    attribute_string,
    put_event_columns,
    typed_columns,
)

_PROTO_KINDS: Final = {
    Span.SPAN_KIND_INTERNAL: SpanKind.INTERNAL,
    Span.SPAN_KIND_SERVER: SpanKind.SERVER,
    Span.SPAN_KIND_CLIENT: SpanKind.CLIENT,
    Span.SPAN_KIND_PRODUCER: SpanKind.PRODUCER,
    Span.SPAN_KIND_CONSUMER: SpanKind.CONSUMER,
}
_KIND_BY_NUMBER: Final = {number: KIND_NAMES[kind] for number, kind in _PROTO_KINDS.items()}
_STATUS_BY_NUMBER: Final = {code.value: name for code, name in STATUS_NAMES.items()}


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
    :func:`otel_llm._show._store._rows.span_row` fills them; ~30 chunk events a span, so the
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
            indexes.append(as_int(values.get(sc.CHUNK_INDEX)))
            gaps.append(as_int(values.get(sc.CHUNK_GAP_NS)))
            offsets.append(stamp - start)
    put_event_columns(row, stamps, names, maps, (indexes, gaps, offsets))


# --- straight into the store's columns ------------------------------------------------------------


def _wire_values_and_strings(attributes: Iterable[Any]) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    strings: dict[str, str] = {}
    for kv in attributes:
        key = kv.key
        values[key], strings[key] = value_of(kv.value)
    return values, strings


def append_export_request(columns: SegmentColumns, data: bytes | memoryview) -> int:
    """Append every span of the encoded ``ExportTraceServiceRequest`` ``data`` to ``columns``:
    the values :func:`rows_from_export_request` gives, without a dict per row or per event and
    with each distinct attribute value decoded once (:mod:`otel_llm._show._ingest._otlp_wire`) — the
    ingest's fast path. The number of spans appended; ``DecodeError`` for bytes that are not
    such a message.

    It fills :class:`~otel_llm._show._store._columns.SegmentColumns`' flat lists the way its
    ``append_span`` does for SDK spans; ``tests/show/ingest/test_collector_rows.py`` proves the
    table equal to the one built from the rows. A key sent twice in one attribute list, which
    OTLP forbids, is one map entry in both: its first place, its last value."""
    request = WireRequest.FromString(data)
    appended = 0
    for resource_spans in request.resource_spans:
        resource, strings = _wire_values_and_strings(resource_spans.resource.attributes)
        service = attribute_string(resource.get("service.name", ""))
        resource_keys = list(strings)
        resource_values = list(strings.values())
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            for span in scope_spans.spans:
                _append_span(
                    columns,
                    span,
                    resource_keys,
                    resource_values,
                    service,
                    scope.name,
                    scope.version,
                )
                appended += 1
    return appended


def _append_span(
    columns: SegmentColumns,
    span: Any,
    resource_keys: list[str],
    resource_values: list[str],
    service: str,
    scope_name: str,
    scope_version: str,
) -> None:
    start = span.start_time_unix_nano
    end = span.end_time_unix_nano
    status = span.status
    parent = span.parent_span_id
    s = columns._scalars
    s["Timestamp"].append(start)
    s["TraceId"].append(span.trace_id.hex())
    s["SpanId"].append(span.span_id.hex())
    s["ParentSpanId"].append(parent.hex() if parent else "")
    s["TraceState"].append(span.trace_state)
    s["SpanName"].append(span.name)
    s["SpanKind"].append(_KIND_BY_NUMBER.get(span.kind, "Unspecified"))
    s["ServiceName"].append(service)
    s["ScopeName"].append(scope_name)
    s["ScopeVersion"].append(scope_version)
    s["Duration"].append(max(0, end - start))
    s["StatusCode"].append(_STATUS_BY_NUMBER.get(status.code, "Unset"))
    s["StatusMessage"].append(status.message)
    maps = columns._maps["ResourceAttributes"]
    maps.keys.extend(resource_keys)
    maps.values.extend(resource_values)
    maps.offsets.append(len(maps.keys))
    attributes, strings = _wire_values_and_strings(span.attributes)
    maps = columns._maps["SpanAttributes"]
    maps.keys.extend(strings)
    maps.values.extend(strings.values())
    maps.offsets.append(len(maps.keys))
    if sc.SPAN_ROLE in attributes and None in attributes.values():
        # an attribute sent with no value on otel-llm's span: its column is NULL, as the rows
        # (and the Collector's exporter) have it, where the columns' own typing would fill
        # the column's default; typed here, the defaults taken as applied
        typed: dict[str, Any] = {}
        typed_columns(attributes, typed)
        columns._typed_rows.append(tuple(typed[name] for name, _, _, _ in TYPED_PLAN))
        columns._ours.append(False)
    else:
        columns._typed(attributes)
    links = columns._links
    link_maps = columns._link_maps
    for link in span.links:
        links["Links.TraceId"].append(link.trace_id.hex())
        links["Links.SpanId"].append(link.span_id.hex())
        links["Links.TraceState"].append(link.trace_state)
        link_maps.add(_wire_values_and_strings(link.attributes)[1])
    link_maps.list_offsets.append(len(link_maps.offsets) - 1)
    _append_events(columns, span, start)
    columns._count += 1


def _append_events(columns: SegmentColumns, span: Any, start: int) -> None:
    event_maps = columns._event_maps
    keys, texts, offsets = event_maps.keys, event_maps.values, event_maps.offsets
    chunks = columns._chunks
    indexes = chunks[CHUNK_INDEX_COLUMN]
    add_stamp = columns._event_stamps.append
    add_name = columns._event_names.append
    add_key, add_text, add_offset = keys.append, texts.append, offsets.append
    add_index, add_gap = indexes.append, chunks[CHUNK_GAP_COLUMN].append
    add_arrival = chunks[CHUNK_OFFSET_COLUMN].append
    chunk_event = sc.CHUNK_EVENT
    decoded = value_of
    for event in span.events:
        stamp = event.time_unix_nano
        name = event.name
        add_stamp(stamp)
        add_name(name)
        attributes = event.attributes
        if name != chunk_event:
            for kv in attributes:
                add_key(kv.key)
                add_text(decoded(kv.value)[1])
            if (count := len(attributes)) > 1 and _sent_twice(keys, count):
                _fold(keys, texts, count)
            add_offset(len(keys))
            continue
        index: Any = None
        gap: Any = None
        for kv in attributes:
            key = kv.key
            python, text = decoded(kv.value)
            add_key(key)
            add_text(text)
            if key == sc.CHUNK_INDEX:
                index = python
            elif key == sc.CHUNK_GAP_NS:
                gap = python
        if (count := len(attributes)) > 1 and _sent_twice(keys, count):
            _fold(keys, texts, count)
        add_offset(len(keys))
        # an int here came from an int64 on the wire: it fits a BIGINT, as_int would keep it
        add_index(index if type(index) is int else as_int(index))
        add_gap(gap if type(gap) is int else as_int(gap))
        add_arrival(stamp - start)
    event_maps.list_offsets.append(len(offsets) - 1)
    columns._chunk_offsets.append(len(indexes))
    columns._chunk_form.skip(start)


def _sent_twice(keys: list[str], count: int) -> bool:
    """Whether the last ``count`` (> 1) keys of a map hold one key twice (OTLP forbids it, the
    Collector passes it on): a Parquet map holding a key twice cannot be read by DuckDB."""
    if count == 2:  # a chunk event's index and gap: no set to build
        return keys[-1] == keys[-2]
    return len(set(keys[-count:])) < count


def _fold(keys: list[str], texts: list[str], count: int) -> None:
    """The last ``count`` entries of a map with each key once, at its first place with its
    last value, as a dict keeps it."""
    start = len(keys) - count
    folded = dict(zip(keys[start:], texts[start:], strict=True))
    del keys[start:], texts[start:]
    keys.extend(folded)
    texts.extend(folded.values())
