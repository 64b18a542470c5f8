"""Mirror messages of OTLP's trace protobuf in which every attribute value stays raw bytes.

Reading an ``AnyValue`` through the protobuf runtime costs a wrapper object and two calls per
attribute (~0.5 µs each; a span with 30 chunk events has ~100 of them). These messages have the
wire layout of ``ExportTraceServiceRequest`` field for field, except that ``KeyValue.value``
is declared ``bytes``: it parses to the value's encoded bytes, and the same bytes recur (a model
name, a chunk index, a status), so :func:`value_of` decodes each distinct small one once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from google.protobuf import (  # type: ignore[import-untyped]
    descriptor_pb2,
    descriptor_pool,
    message_factory,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from otel_llm._show._store._rows import attribute_string

_T = descriptor_pb2.FieldDescriptorProto
_REPEATED, _OPTIONAL = _T.LABEL_REPEATED, _T.LABEL_OPTIONAL
_FIELDS: Final[dict[str, tuple[tuple[str, int, int, str | None, bool], ...]]] = {
    # message: (field, number, type, message type, repeated)
    "KV": (("key", 1, _T.TYPE_STRING, None, False), ("value", 2, _T.TYPE_BYTES, None, False)),
    "Scope": (
        ("name", 1, _T.TYPE_STRING, None, False),
        ("version", 2, _T.TYPE_STRING, None, False),
    ),
    "Resource": (("attributes", 1, _T.TYPE_MESSAGE, "KV", True),),
    "Status": (
        ("message", 2, _T.TYPE_STRING, None, False),
        ("code", 3, _T.TYPE_INT32, None, False),
    ),
    "Event": (
        ("time_unix_nano", 1, _T.TYPE_FIXED64, None, False),
        ("name", 2, _T.TYPE_STRING, None, False),
        ("attributes", 3, _T.TYPE_MESSAGE, "KV", True),
    ),
    "Link": (
        ("trace_id", 1, _T.TYPE_BYTES, None, False),
        ("span_id", 2, _T.TYPE_BYTES, None, False),
        ("trace_state", 3, _T.TYPE_STRING, None, False),
        ("attributes", 4, _T.TYPE_MESSAGE, "KV", True),
    ),
    "Span": (
        ("trace_id", 1, _T.TYPE_BYTES, None, False),
        ("span_id", 2, _T.TYPE_BYTES, None, False),
        ("trace_state", 3, _T.TYPE_STRING, None, False),
        ("parent_span_id", 4, _T.TYPE_BYTES, None, False),
        ("name", 5, _T.TYPE_STRING, None, False),
        ("kind", 6, _T.TYPE_INT32, None, False),
        ("start_time_unix_nano", 7, _T.TYPE_FIXED64, None, False),
        ("end_time_unix_nano", 8, _T.TYPE_FIXED64, None, False),
        ("attributes", 9, _T.TYPE_MESSAGE, "KV", True),
        ("events", 11, _T.TYPE_MESSAGE, "Event", True),
        ("links", 13, _T.TYPE_MESSAGE, "Link", True),
        ("status", 15, _T.TYPE_MESSAGE, "Status", False),
    ),
    "ScopeSpans": (
        ("scope", 1, _T.TYPE_MESSAGE, "Scope", False),
        ("spans", 2, _T.TYPE_MESSAGE, "Span", True),
    ),
    "ResourceSpans": (
        ("resource", 1, _T.TYPE_MESSAGE, "Resource", False),
        ("scope_spans", 2, _T.TYPE_MESSAGE, "ScopeSpans", True),
    ),
    "Request": (("resource_spans", 1, _T.TYPE_MESSAGE, "ResourceSpans", True),),
}
"""The fields the rows need; the others (dropped counts, flags, schema URLs) are skipped by
the parser as unknown fields, as OTLP allows."""
_PACKAGE: Final = "otel_llm.otlp_wire"


def _message_classes() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(
        name="otel_llm/otlp_wire.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields in _FIELDS.items():
        message = file.message_type.add(name=name)
        for field_name, number, kind, type_name, repeated in fields:
            message.field.add(
                name=field_name,
                number=number,
                type=kind,
                label=_REPEATED if repeated else _OPTIONAL,
                type_name=f".{_PACKAGE}.{type_name}" if type_name else None,
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _FIELDS
    }


_CLASSES: Final = _message_classes()
WireRequest: Final[Any] = _CLASSES["Request"]
"""Parses the bytes of an ``ExportTraceServiceRequest`` (``WireRequest.FromString(data)``)."""

_CACHE_LIMIT: Final = 1 << 16
_CACHED_BYTES: Final = 256
"""Only values this small are kept: the ones that recur (a model's name, a chunk's index, a
status) are; captured content is not, and kept it cost twice its size for as long as the
process ran (100 KB prompts: 1.3 GB after 5,000 spans, ~13 GB at the limit)."""
_decoded: dict[bytes, tuple[Any, str]] = {}


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


def _decode(raw: bytes) -> tuple[Any, str]:
    value = AnyValue.FromString(raw)
    kind = value.WhichOneof("value")
    if kind == "int_value":
        number = value.int_value
        return number, str(number)  # attribute_string's rendering: repr(int) == str(int)
    if kind == "string_value":
        text = value.string_value
        return text, text
    python = any_value(value)
    return python, attribute_string(python)


def value_of(raw: bytes) -> tuple[Any, str]:
    """The Python value and the ``Map(String, String)`` rendering of an encoded ``AnyValue``
    (a small one decoded once per distinct bytes; the memo is bounded in count and size)."""
    found = _decoded.get(raw)
    if found is None:
        found = _decode(raw)
        if len(raw) <= _CACHED_BYTES:
            if len(_decoded) >= _CACHE_LIMIT:
                _decoded.clear()
            _decoded[raw] = found
    return found
