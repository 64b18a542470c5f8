"""Strings as UTF-8 can encode them. A Python string can hold a lone surrogate, which UTF-8
cannot: ``json.loads('"\\ud800"')`` makes one, ``os.fsdecode`` and ``os.environ`` make them of
bytes that are not UTF-8, and a surrogate pair split across two streamed chunks leaves two. One
such string in a span made the store's writer and the OTLP exporter (which encodes a whole
batch at once) lose every span handled with it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, Status


def valid_text(text: str) -> str:
    """``text`` as UTF-8 can encode it: each lone surrogate becomes U+FFFD (a surrogate pair
    the character it stands for), as the Collector's exporter stores bytes that are not UTF-8."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _encodes(text: str) -> bool:
    if text.isascii():  # (a flag CPython keeps: most strings are decided without a scan)
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _value(value: Any) -> Any:
    if isinstance(value, str):
        return value if _encodes(value) else valid_text(value)
    if isinstance(value, Sequence) and not isinstance(value, bytes):
        return tuple(_value(item) for item in value)
    return value


def _attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {_value(key): _value(value) for key, value in (attributes or {}).items()}


def _bad(value: Any) -> bool:
    if isinstance(value, str):
        return not _encodes(value)
    if isinstance(value, Sequence) and not isinstance(value, bytes):
        return any(_bad(item) for item in value)
    return False


def _bad_attributes(attributes: Mapping[str, Any] | None) -> bool:
    return any(_bad(key) or _bad(value) for key, value in (attributes or {}).items())


def _needs_repair(span: ReadableSpan) -> bool:
    scope = span.instrumentation_scope
    return (
        _bad(span.name)
        or (scope is not None and (_bad(scope.name) or _bad(scope.version or "")))
        or _bad(span.status.description or "")
        or _bad_attributes(span.attributes)
        or _bad_attributes(span.resource.attributes)
        or any(_bad(event.name) or _bad_attributes(event.attributes) for event in span.events)
        or any(_bad_attributes(link.attributes) for link in span.links)
    )


def _repaired(span: ReadableSpan) -> ReadableSpan:
    status = span.status
    description = status.description
    return ReadableSpan(
        name=_value(span.name),
        context=span.context,
        parent=span.parent,
        resource=Resource(_attributes(span.resource.attributes), span.resource.schema_url),
        attributes=_attributes(span.attributes),
        events=[
            Event(_value(event.name), _attributes(event.attributes), event.timestamp)
            for event in span.events
        ],
        links=[Link(link.context, _attributes(link.attributes)) for link in span.links],
        kind=span.kind,
        status=Status(status.status_code, _value(description) if description else description),
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=_scope(span.instrumentation_scope),
    )


def _scope(scope: InstrumentationScope | None) -> InstrumentationScope | None:
    if scope is None:
        return None
    version = _value(scope.version) if scope.version else scope.version
    return InstrumentationScope(_value(scope.name), version, scope.schema_url, scope.attributes)


def encodable(spans: Sequence[ReadableSpan]) -> list[ReadableSpan] | None:
    """``spans`` with every string UTF-8 can encode (copies of those that held one it
    cannot); ``None`` when they all could already."""
    if not any(_needs_repair(span) for span in spans):
        return None
    return [_repaired(span) if _needs_repair(span) else span for span in spans]
