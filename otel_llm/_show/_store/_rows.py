"""Finished spans as ``otel_traces`` rows, and the one INSERT that writes a batch of them."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from otel_llm import _semconv as sc
from otel_llm._encodable import valid_text
from otel_llm._show._sql._table import (
    BASE_COLUMNS,
    CHUNK_COLUMNS,
    CHUNK_GAP_COLUMN,
    CHUNK_INDEX_COLUMN,
    CHUNK_OFFSET_COLUMN,
    ERROR_STATUSES,
    TYPED_COLUMNS,
)

KIND_NAMES: Final = {
    SpanKind.INTERNAL: "Internal",
    SpanKind.SERVER: "Server",
    SpanKind.CLIENT: "Client",
    SpanKind.PRODUCER: "Producer",
    SpanKind.CONSUMER: "Consumer",
}
STATUS_NAMES: Final = {
    StatusCode.UNSET: "Unset",
    StatusCode.OK: "Ok",
    StatusCode.ERROR: ERROR_STATUSES[0],
}

_SQL_TYPES: Final = {
    **dict(BASE_COLUMNS),
    **{c.name: c.sql_type for c in TYPED_COLUMNS},
    **{name: "BIGINT[]" for name, _ in CHUNK_COLUMNS},
    CHUNK_OFFSET_COLUMN: "BIGINT[]",
}


def _render_sequence(value: Any) -> str:
    text = json.dumps(list(value), separators=(",", ":"), default=_inside_a_sequence)
    if "\\ud" not in text:  # (JSON writes surrogates, lone or paired, as \udXXX)
        return text
    items = [valid_text(item) if isinstance(item, str) else item for item in value]
    return json.dumps(items, separators=(",", ":"), default=_inside_a_sequence)


def _inside_a_sequence(value: Any) -> str:
    """What JSON has no form for, inside an array: bytes as the JSON string of their hex, as
    the Collector's exporter writes them (an SDK never holds bytes in an array, an OTLP
    request may); anything else as its text."""
    return value.hex() if isinstance(value, bytes | bytearray) else str(value)


RENDER: Final[dict[type, Callable[[Any], str]]] = {
    str: str.__str__,
    bool: lambda value: "true" if value else "false",
    int: int.__repr__,
    float: float.__repr__,
    bytes: bytes.hex,
    tuple: _render_sequence,
    list: _render_sequence,
}
"""Renderers by exact type: the attribute values the SDK stores (it keeps sequences as tuples)."""


def attribute_string(value: Any) -> str:
    """An attribute value as the Collector renders it into a ``Map(String, String)``."""
    render = RENDER.get(type(value))
    if render is not None:
        return render(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Sequence):
        return _render_sequence(value)
    return str(value)


def plain_attributes(attributes: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``attributes`` without the SDK's per-key Python calls: a ``BoundedAttributes`` keeps a
    plain dict (read here without its lock: a finished span's attributes no longer change)."""
    if not attributes:
        return {}
    inner = getattr(attributes, "_dict", None)
    return inner if isinstance(inner, dict) else attributes


def _string_map(attributes: Mapping[str, Any] | None) -> dict[str, str]:
    render = RENDER.get
    return {
        key: (r(value) if (r := render(type(value))) is not None else attribute_string(value))
        for key, value in plain_attributes(attributes).items()
    }


def _as_bool(value: Any) -> Any:
    return value if type(value) is bool else None


def as_int(value: Any) -> Any:
    """``value`` when it fits a BIGINT, else ``None`` (a bool is not an int here)."""
    if type(value) is int or (isinstance(value, int) and type(value) is not bool):
        return value if -(2**63) <= value < 2**63 else None
    return None


def _as_int32(value: Any) -> Any:
    value = as_int(value)
    return value if value is None or -(2**31) <= value < 2**31 else None


def _as_int_list(value: Any) -> Any:
    """``value`` as a list when it is a sequence of BIGINTs, else ``None``."""
    if type(value) not in (tuple, list):
        return None
    values = list(map(as_int, value))
    return None if None in values else values


def as_text(value: Any) -> Any:
    return value if type(value) is str else attribute_string(value)


_TYPED: Final = {
    "BOOLEAN": _as_bool,
    "BIGINT": as_int,
    "TIMESTAMP_NS": as_int,  # ns since the epoch
    "INTEGER": _as_int32,
    "BIGINT[]": _as_int_list,
}
TYPED_PLAN: Final = tuple(
    (column.name, column.attribute, column.default, _TYPED.get(column.sql_type, as_text))
    for column in TYPED_COLUMNS
)
"""Per typed column: name, attribute, default for otel-llm's spans, and the type check."""
CHUNK_PAIR: Final = (sc.CHUNK_INDEX, sc.CHUNK_GAP_NS)
"""The attributes of a chunk event, in the order otel-llm writes them."""


def _event_columns(events: Sequence[Event], start: int, row: dict[str, Any]) -> None:
    """The event arrays of a row, and the typed chunk arrays, in one pass over the events."""
    stamps: list[int] = []
    names: list[str] = []
    maps: list[dict[str, str]] = []
    indexes: list[Any] = []
    gaps: list[Any] = []
    offsets: list[int] = []
    for event in events:
        stamp = event.timestamp
        name = event.name
        stamps.append(stamp)
        names.append(name)
        inner = plain_attributes(event.attributes)
        if name == sc.CHUNK_EVENT:
            index = inner.get(sc.CHUNK_INDEX)
            gap = inner.get(sc.CHUNK_GAP_NS)
            indexes.append(as_int(index))
            gaps.append(as_int(gap))
            offsets.append(stamp - start)
            if tuple(inner) == CHUNK_PAIR and type(index) is int and type(gap) is int:
                maps.append({sc.CHUNK_INDEX: str(index), sc.CHUNK_GAP_NS: str(gap)})
                continue
        maps.append(_string_map(inner))
    put_event_columns(row, stamps, names, maps, (indexes, gaps, offsets))


def put_event_columns(
    row: dict[str, Any],
    stamps: list[int],
    names: list[str],
    maps: list[dict[str, str]],
    chunks: tuple[list[Any], list[Any], list[int]],
) -> None:
    """Put a row's event arrays and typed chunk arrays (index, gap, offset) in place."""
    row["Events.Timestamp"] = stamps
    row["Events.Name"] = names
    row["Events.Attributes"] = maps
    row[CHUNK_INDEX_COLUMN], row[CHUNK_GAP_COLUMN], row[CHUNK_OFFSET_COLUMN] = chunks


def span_row(span: ReadableSpan) -> dict[str, Any]:
    """One ``otel_traces`` row for a finished span, keyed by column name."""
    context = span.context
    start = span.start_time or 0
    end = span.end_time or start
    plain = plain_attributes(span.attributes)
    resource = span.resource.attributes if span.resource else {}
    scope = span.instrumentation_scope
    links = span.links
    row: dict[str, Any] = {
        "Timestamp": start,
        "TraceId": format(context.trace_id, "032x") if context else "",
        "SpanId": format(context.span_id, "016x") if context else "",
        "ParentSpanId": format(span.parent.span_id, "016x") if span.parent else "",
        "TraceState": context.trace_state.to_header() if context else "",
        "SpanName": span.name,
        "SpanKind": KIND_NAMES.get(span.kind, "Unspecified"),
        "ServiceName": attribute_string(resource.get("service.name", "")),
        "ResourceAttributes": _string_map(resource),
        "ScopeName": scope.name if scope else "",
        "ScopeVersion": (scope.version or "") if scope else "",
        "SpanAttributes": _string_map(plain),
        "Duration": max(0, end - start),
        "StatusCode": STATUS_NAMES.get(span.status.status_code, "Unset"),
        "StatusMessage": span.status.description or "",
        "Links.TraceId": [format(link.context.trace_id, "032x") for link in links],
        "Links.SpanId": [format(link.context.span_id, "016x") for link in links],
        "Links.TraceState": [link.context.trace_state.to_header() for link in links],
        "Links.Attributes": [_string_map(link.attributes) for link in links],
    }
    typed_columns(plain, row)
    _event_columns(span.events, start, row)
    return row


def typed_columns(attributes: Mapping[str, Any], row: dict[str, Any]) -> None:
    """The typed columns of a row from the span's attributes (plain Python values): shared by
    SDK spans and OTLP messages (:mod:`otel_llm._show._ingest._otlp_rows`)."""
    ours = sc.SPAN_ROLE in attributes  # a default speaks for otel-llm's spans only
    get = attributes.get
    for name, attribute, default, typed in TYPED_PLAN:
        value = get(attribute, default if ours else None)
        row[name] = None if value is None else typed(value)
