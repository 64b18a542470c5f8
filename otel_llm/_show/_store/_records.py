"""Finished spans packed small while they wait for the store's writer.

A finished SDK span of a streamed attempt (30 chunk events) holds ~15 KB of Python objects: its
events, a mapping per event, the span's own mapping. The writer's queue holds spans by the
thousand when the disk is slow or the machine busy, so it holds them packed instead: the
values of one span in one ``marshal`` blob (~0.7 KB), taken apart only when the writer turns
them into Arrow columns. Packing runs in C but for one short Python walk over the span, and a
blob is a single object the garbage collector never has to visit.

Two things keep a blob small:

- **Attribute keys are numbered.** The spans of one application carry the same few key tuples
  (an attempt span's 24 keys, a call span's); each distinct tuple is numbered once per process
  (:class:`_Shapes`, at most :data:`_SHAPES_CAP` of them, beyond which keys travel inline), and
  a blob carries the number and the values.
- **Chunk events are three integer arrays.** Events that are all well-formed chunk events (an
  integer index and, but for the first, an integer gap, in that order) are kept as their
  arrival times (each as the distance from the one before), their gaps and their indexes (just
  the first when they count up by one), in 4-byte integers where the values fit. otel-llm's
  own chunk events are of their own class (built where their attributes are made), so they are
  read without those checks.

:func:`unpack` gives back a :class:`SpanRecord`, the plain values
:class:`~otel_llm._show._store._columns.SegmentColumns` appends.
"""

from __future__ import annotations

import marshal
import os
import sys
import threading
from array import array
from collections.abc import Mapping, Sequence
from itertools import accumulate
from operator import attrgetter, itemgetter, sub
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from otel_llm import _semconv as sc
from otel_llm._measure._span_events import chunk_event_class, chunk_run
from otel_llm._show._store._rows import attribute_string, plain_attributes

_MARSHAL_VERSION: Final = 4
"""Shares repeated interned strings (event names, inline keys) inside a blob."""
_SHAPES_CAP: Final = 4096
"""Distinct attribute key tuples numbered per process; more travel with their keys inline."""
_INT64: Final = 2**63
_CHUNKS: Final = 1
_NARROW: Final = ord("i")
"""The typecode :func:`_ints` gives integers that fit 4 bytes."""
_EVENTS: Final = 2
_FIRST_KEY: Final = {sc.CHUNK_INDEX}
_GET_INDEX: Final = itemgetter(sc.CHUNK_INDEX)
_GET_GAP: Final = itemgetter(sc.CHUNK_GAP_NS)
_INNER: Final = attrgetter("_dict")
"""The plain dict inside an SDK ``BoundedAttributes``."""


def _event_fields() -> tuple[str, str, str]:
    """The fields holding an SDK event's name, timestamp and attributes: its slots when this
    SDK version keeps them there (read in one C call), else the public properties."""
    probe = Event("probe", {"k": 1}, timestamp=1)
    private = ("_name", "_timestamp", "_attributes")
    try:
        if attrgetter(*private)(probe)[:2] == ("probe", 1):
            return private
    except AttributeError:
        pass
    return ("name", "timestamp", "attributes")


_FIELDS: Final = _event_fields()
_EVENT_FIELDS: Final = attrgetter(*_FIELDS)
_NAME_OF: Final = attrgetter(_FIELDS[0])
_STAMP_OF: Final = attrgetter(_FIELDS[1])
_ATTRIBUTES_OF: Final = attrgetter(_FIELDS[2])
_OURS: Final = {chunk_event_class()}
"""Chunk events otel-llm built (their attributes need no checking)."""


class _Shapes:
    """Attribute key tuples, numbered in the order they are first seen (one table a process)."""

    def __init__(self) -> None:
        self._codes: dict[tuple[str, ...], int] = {}
        self._keys: list[tuple[str, ...]] = []
        self._lock = threading.Lock()

    def code(self, keys: tuple[str, ...]) -> int | tuple[str, ...]:
        """The number of ``keys``, or ``keys`` itself once the table is full."""
        code = self._codes.get(keys)
        if code is not None:
            return code
        with self._lock:
            code = self._codes.get(keys)
            if code is None:
                if len(self._keys) >= _SHAPES_CAP:
                    return keys
                code = len(self._keys)
                self._keys.append(keys)
                self._codes[keys] = code
        return code

    def keys(self, code: int | tuple[str, ...]) -> tuple[str, ...]:
        return self._keys[code] if isinstance(code, int) else code

    def forked(self) -> None:
        self._lock = threading.Lock()  # a lock held by another thread at fork stays held


_SHAPES: Final = _Shapes()
os.register_at_fork(after_in_child=_SHAPES.forked)


class PackedSpan(NamedTuple):
    """A finished span as the writer's queue holds it: the resource and scope (shared by every
    span of a tracer) and one blob of everything else."""

    resource: Resource | None
    scope: InstrumentationScope | None
    blob: bytes

    def size(self) -> int:
        """Bytes this span alone holds (the tuple and its blob)."""
        return sys.getsizeof(self) + sys.getsizeof(self.blob)


class SpanRecord(NamedTuple):
    """A finished span's values as plain Python, unpacked for the writer."""

    start: int
    end: int
    trace_id: int | None
    span_id: int | None
    parent_span_id: int | None
    trace_state: str
    name: str
    kind: int
    status: int
    status_message: str
    attributes: dict[str, Any]
    resource: Mapping[str, Any]
    scope_name: str
    scope_version: str
    links: list[tuple[int, int, str, dict[str, Any]]]
    chunks: tuple[list[int], list[int], list[int | None]] | None
    """Arrival times, indexes and gaps of events that are all well-formed chunk events."""
    events: list[tuple[str, int, dict[str, Any]]]
    """Name, time and attributes of each event otherwise."""


# --- packing --------------------------------------------------------------------------------------


def _attributes(
    attributes: Mapping[str, Any] | None,
) -> tuple[int | tuple[str, ...], tuple[Any, ...]]:
    plain = plain_attributes(attributes)
    return _SHAPES.code(tuple(plain)), tuple(plain.values())


def _ints(values: Sequence[int]) -> bytes:
    """``values`` as 4-byte integers where they fit (8-byte otherwise), typecode first; raises
    ``OverflowError`` past 64 bits and ``TypeError`` for a value that is not an integer."""
    try:
        return b"i" + array("i", values).tobytes()
    except OverflowError:
        return b"q" + array("q", values).tobytes()


def _from_ints(packed: bytes) -> list[int]:
    values = array(chr(packed[0]))
    values.frombytes(packed[1:])
    return values.tolist()


def _chunks(
    names: tuple[str, ...], stamps: tuple[int, ...], attributes: tuple[Any, ...], start: int
) -> tuple[Any, ...] | None:
    """The chunk-event form of a span's events, or None when one is not a well-formed chunk
    event (then each event is kept whole)."""
    count = len(names)
    if names.count(sc.CHUNK_EVENT) != count:
        return None
    if type(attributes[0]) is MappingProxyType:  # the SDK's view of a plain dict
        inners: Sequence[Mapping[str, Any]] = attributes
    else:
        try:
            inners = list(map(_INNER, attributes))
        except AttributeError:
            inners = [plain_attributes(a) for a in attributes]
    first_alone = len(inners[0]) == 1  # no gap before the first chunk
    try:
        indexes = list(map(_GET_INDEX, inners))
        gaps = list(map(_GET_GAP, inners[first_alone:]))
    except KeyError:
        return None
    if set(map(len, inners[first_alone:])) - {2}:  # the two keys and no other
        return None
    if set(map(next, map(iter, inners))) != _FIRST_KEY:  # index first: the order they are in
        return None
    if set(map(type, indexes)) != {int} or (gaps and set(map(type, gaps)) != {int}):
        return None  # (a bool is an int to ``array``; not to the store)
    return _packed_chunks(stamps, indexes, gaps, first_alone, start)


def _packed_chunks(
    stamps: Sequence[int],
    indexes: Sequence[int],
    gaps: Sequence[int],
    first_alone: bool,
    start: int,
) -> tuple[Any, ...] | None:
    count = len(indexes)
    first = indexes[0]
    try:
        # the columns are a running sum of the steps, exact only where every time and every
        # offset from the start fits 64 bits: elsewhere the events are kept whole (and the
        # writer refuses the span, as the table would)
        steps = _ints([stamps[0] - start, *map(sub, stamps[1:], stamps[:-1])])
        reach = count << 31  # 4-byte steps move the times at most this far from the start
        if not (steps[0] == _NARROW and -_INT64 + reach <= start < _INT64 - reach):
            low, high = min(stamps), max(stamps)
            if min(low, low - start) < -_INT64 or max(high, high - start) >= _INT64:
                return None
        packed_gaps = _ints(gaps) if gaps else b""
        in_range = -_INT64 <= first < _INT64 - count
        counting = in_range and indexes == list(range(first, first + count))
        packed_indexes: int | bytes = first if counting else _ints(indexes)
    except (OverflowError, TypeError):
        return None
    return (_CHUNKS, first_alone, steps, packed_indexes, packed_gaps)


def _our_chunks(events: Sequence[Event], start: int) -> tuple[Any, ...] | None:
    """The chunk-event form of events otel-llm built (:data:`_OURS`): read, not checked."""
    if list(map(_NAME_OF, events)).count(sc.CHUNK_EVENT) != len(events):
        return None
    inners = list(map(_ATTRIBUTES_OF, events))
    first_alone = len(inners[0]) == 1
    indexes = list(map(_GET_INDEX, inners))
    gaps = list(map(_GET_GAP, inners[first_alone:]))
    return _packed_chunks(list(map(_STAMP_OF, events)), indexes, gaps, first_alone, start)


def _events(events: Sequence[Event], start: int) -> tuple[Any, ...] | None:
    if not events:
        return None
    run = chunk_run(events)
    if run is not None:
        packed = _packed_chunks(run.stamps, run.indexes, run.gaps, run.first_alone, start)
        if packed is not None:
            return packed
    if set(map(type, events)) == _OURS and (chunks := _our_chunks(events, start)) is not None:
        return chunks
    names, stamps, attributes = zip(*map(_EVENT_FIELDS, events), strict=True)
    chunks = _chunks(names, stamps, attributes, start)
    if chunks is not None:
        return chunks
    return (
        _EVENTS,
        names,
        stamps,
        tuple(_attributes(a) for a in attributes),
    )


def pack(span: ReadableSpan) -> PackedSpan:
    """``span`` packed (see the module docstring); raises ``ValueError`` for a value that is
    neither an attribute value the SDK keeps nor rendered into one."""
    context = span.context
    parent = span.parent
    start = span.start_time or 0
    status = span.status
    values = (
        start,
        span.end_time or start,
        context.trace_id if context else None,
        context.span_id if context else None,
        parent.span_id if parent else None,
        context.trace_state.to_header() if context else "",
        span.name,
        span.kind.value,
        status.status_code.value,
        status.description or "",
        *_attributes(span.attributes),
        tuple(
            (
                link.context.trace_id,
                link.context.span_id,
                link.context.trace_state.to_header(),
                *_attributes(link.attributes),
            )
            for link in span.links
        ),
        _events(span.events, start),
    )
    try:
        blob = marshal.dumps(values, _MARSHAL_VERSION)
    except ValueError:  # a value marshal cannot hold: rendered as the store renders it anyway
        blob = marshal.dumps(_rendered(values), _MARSHAL_VERSION)
    return PackedSpan(span.resource, span.instrumentation_scope, blob)


def _rendered(value: Any) -> Any:
    """``value`` with what ``marshal`` cannot hold made plain: a subclass of a value type (an
    ``IntEnum``, ``numpy.float64``) as its value — what the OTLP encoding sends for it — and
    anything else as its attribute string."""
    if value is None or type(value) in (str, int, float, bool, bytes):
        return value
    if type(value) is tuple:
        return tuple(_rendered(item) for item in value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)
    return attribute_string(value)


# --- unpacking ------------------------------------------------------------------------------------


def _mapping(code: int | tuple[str, ...], values: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(_SHAPES.keys(code), values, strict=True))


class RawSpan(NamedTuple):
    """A packed span's values as :func:`pack` laid them out, before any is taken apart: what
    the store's writer appends column by column (:func:`unpack` builds a record from it)."""

    start: int
    end: int
    trace_id: int | None
    span_id: int | None
    parent_span_id: int | None
    trace_state: str
    name: str
    kind: int
    status: int
    status_message: str
    shape: int | tuple[str, ...]
    """The attribute keys (:func:`keys_of`)."""
    values: tuple[Any, ...]
    links: tuple[tuple[int, int, str, int | tuple[str, ...], tuple[Any, ...]], ...]
    events: tuple[Any, ...] | None
    """:func:`chunk_parts` or :func:`plain_events` read it."""


def raw(packed: PackedSpan) -> RawSpan:
    """The values of ``packed``, as laid out (see :class:`RawSpan`)."""
    return RawSpan._make(marshal.loads(packed.blob))


def keys_of(shape: int | tuple[str, ...]) -> tuple[str, ...]:
    """The attribute keys a shape stands for."""
    return _SHAPES.keys(shape)


def chunk_parts(events: tuple[Any, ...] | None) -> tuple[bool, bytes, int | bytes, bytes] | None:
    """Packed chunk events as (first without a gap, arrival steps, indexes — the first index
    when they count up by one — and gaps), integers as :func:`_ints` packs them; ``None`` when
    the events are not in that form."""
    if events is None or events[0] != _CHUNKS:
        return None
    _, first_alone, steps, indexes, gaps = events
    return first_alone, steps, indexes, gaps


def plain_events(events: tuple[Any, ...] | None) -> list[tuple[str, int, dict[str, Any]]]:
    """Name, time and attributes of each event not packed as chunk events."""
    if events is None or events[0] != _EVENTS:
        return []
    _, names, stamps, shaped = events
    return [
        (event_name, stamp, _mapping(*attributes))
        for event_name, stamp, attributes in zip(names, stamps, shaped, strict=True)
    ]


def unpack(packed: PackedSpan) -> SpanRecord:
    """The values :func:`pack` packed, as a :class:`SpanRecord`."""
    span = raw(packed)
    start = span.start
    chunks: tuple[list[int], list[int], list[int | None]] | None = None
    parts = chunk_parts(span.events)
    if parts is not None:
        first_alone, steps, packed_indexes, packed_gaps = parts
        stamps = list(accumulate(_from_ints(steps), initial=start))[1:]
        count = len(stamps)
        if type(packed_indexes) is int:
            indexes = list(range(packed_indexes, packed_indexes + count))
        else:
            indexes = _from_ints(packed_indexes)  # type: ignore[arg-type]
        paired = _from_ints(packed_gaps) if packed_gaps else []
        gaps: list[int | None] = [None, *paired] if first_alone else list(paired)
        chunks = (stamps, indexes, gaps)
    resource = packed.resource
    scope = packed.scope
    return SpanRecord(
        start=start,
        end=span.end,
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        trace_state=span.trace_state,
        name=span.name,
        kind=span.kind,
        status=span.status,
        status_message=span.status_message,
        attributes=_mapping(span.shape, span.values),
        resource=plain_attributes(resource.attributes) if resource else {},
        scope_name=scope.name if scope else "",
        scope_version=(scope.version or "") if scope else "",
        links=[(t, s, state, _mapping(code, v)) for t, s, state, code, v in span.links],
        chunks=chunks,
        events=plain_events(span.events),
    )
