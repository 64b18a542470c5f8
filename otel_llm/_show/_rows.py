"""Finished spans as ``otel_traces`` rows, and the one INSERT that writes a batch of them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from otel_llm import _semconv as sc
from otel_llm._show._schema import (
    ALL_COLUMNS,
    BASE_COLUMNS,
    CHUNK_COLUMNS,
    CHUNK_OFFSET_COLUMN,
    TABLE,
    TYPED_COLUMNS,
)

_KIND_NAMES: Final = {
    SpanKind.INTERNAL: "Internal",
    SpanKind.SERVER: "Server",
    SpanKind.CLIENT: "Client",
    SpanKind.PRODUCER: "Producer",
    SpanKind.CONSUMER: "Consumer",
}
_STATUS_NAMES: Final = {StatusCode.UNSET: "Unset", StatusCode.OK: "Ok", StatusCode.ERROR: "Error"}

_SQL_TYPES: Final = {
    **dict(BASE_COLUMNS),
    **{c.name: c.sql_type for c in TYPED_COLUMNS},
    **{name: "BIGINT[]" for name, _ in CHUNK_COLUMNS},
    CHUNK_OFFSET_COLUMN: "BIGINT[]",
}


def attribute_string(value: Any) -> str:
    """An attribute value as the Collector renders it into a ``Map(String, String)``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Sequence):
        return json.dumps(list(value), separators=(",", ":"))
    return str(value)


def _string_map(attributes: Mapping[str, Any] | None) -> dict[str, str]:
    return {key: attribute_string(value) for key, value in (attributes or {}).items()}


def _typed(value: Any, sql_type: str) -> Any:
    if value is None:
        return None
    if sql_type == "BOOLEAN":
        return value if isinstance(value, bool) else None
    if sql_type in ("BIGINT", "INTEGER"):
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return value if isinstance(value, str) else attribute_string(value)


def span_row(span: ReadableSpan) -> dict[str, Any]:
    """One ``otel_traces`` row for a finished span, keyed by column name."""
    context = span.context
    start = span.start_time or 0
    end = span.end_time or start
    attributes = span.attributes or {}
    resource = span.resource.attributes if span.resource else {}
    scope = span.instrumentation_scope
    events = span.events
    chunk_events = [event for event in events if event.name == sc.CHUNK_EVENT]
    row: dict[str, Any] = {
        "Timestamp": start,
        "TraceId": format(context.trace_id, "032x") if context else "",
        "SpanId": format(context.span_id, "016x") if context else "",
        "ParentSpanId": format(span.parent.span_id, "016x") if span.parent else "",
        "TraceState": context.trace_state.to_header() if context else "",
        "SpanName": span.name,
        "SpanKind": _KIND_NAMES.get(span.kind, "Unspecified"),
        "ServiceName": attribute_string(resource.get("service.name", "")),
        "ResourceAttributes": _string_map(resource),
        "ScopeName": scope.name if scope else "",
        "ScopeVersion": (scope.version or "") if scope else "",
        "SpanAttributes": _string_map(attributes),
        "Duration": max(0, end - start),
        "StatusCode": _STATUS_NAMES.get(span.status.status_code, "Unset"),
        "StatusMessage": span.status.description or "",
        "Events.Timestamp": [event.timestamp for event in events],
        "Events.Name": [event.name for event in events],
        "Events.Attributes": [_string_map(event.attributes) for event in events],
        "Links.TraceId": [format(link.context.trace_id, "032x") for link in span.links],
        "Links.SpanId": [format(link.context.span_id, "016x") for link in span.links],
        "Links.TraceState": [link.context.trace_state.to_header() for link in span.links],
        "Links.Attributes": [_string_map(link.attributes) for link in span.links],
    }
    chunks = [(event.timestamp, event.attributes or {}) for event in chunk_events]
    add_typed_columns(row, attributes, chunks, start)
    return row


def add_typed_columns(
    row: dict[str, Any],
    attributes: Mapping[str, Any],
    chunk_events: Sequence[tuple[int, Mapping[str, Any]]],
    start: int,
) -> None:
    """Fill ``row``'s typed columns from the span's attributes and its chunk arrays from its
    ``otel_llm.chunk`` events, given as (timestamp, attributes) — the part of a row every
    source of spans (SDK spans, OTLP messages) derives alike."""
    ours = sc.SPAN_ROLE in attributes  # a default speaks for otel-llm's spans only
    for column in TYPED_COLUMNS:
        value = attributes.get(column.attribute, column.default if ours else None)
        row[column.name] = _typed(value, column.sql_type)
    for name, attribute in CHUNK_COLUMNS:
        row[name] = [chunk.get(attribute) for _, chunk in chunk_events]
    row[CHUNK_OFFSET_COLUMN] = [timestamp - start for timestamp, _ in chunk_events]


def _json_type(sql_type: str) -> str:
    if sql_type == "TIMESTAMP_NS":
        return "BIGINT"
    if sql_type == "TIMESTAMP_NS[]":
        return "BIGINT[]"
    return sql_type


def _select_expression(index: int, name: str) -> str:
    ref = f"r.c{index}"
    sql_type = _SQL_TYPES[name]
    if sql_type == "TIMESTAMP_NS":
        expr = f"make_timestamp_ns({ref})"
    elif sql_type == "TIMESTAMP_NS[]":
        expr = f"list_transform({ref}, lambda x: make_timestamp_ns(x))"
    else:
        expr = ref
    return f'{expr} AS "{name}"'


def insert_sql(columns: Sequence[str] = ALL_COLUMNS) -> str:
    """One INSERT that takes a whole batch as a single JSON array parameter."""
    structure = json.dumps(
        {f"c{i}": _json_type(_SQL_TYPES[name]) for i, name in enumerate(columns)}
    )
    selects = ",\n    ".join(_select_expression(i, name) for i, name in enumerate(columns))
    return (
        f"INSERT INTO {TABLE} BY NAME\nSELECT\n    {selects}\n"
        f"FROM (SELECT unnest(from_json(?::JSON, '[{structure}]')) AS r)"
    )


def batch_json(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = ALL_COLUMNS) -> str:
    """The JSON parameter of :func:`insert_sql` for ``rows``."""
    return json.dumps(
        [{f"c{i}": row.get(name) for i, name in enumerate(columns)} for row in rows],
        separators=(",", ":"),
    )
