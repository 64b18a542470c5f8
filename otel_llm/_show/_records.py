"""A finished span as one compact record: what the store's writer needs of it, and nothing else.

An SDK ``ReadableSpan`` with 30 chunk events is ~15 KB of Python objects (an ``Event``, a dict
and its view per event); a span queued that way for the writer made the exporter's span cap a
cap of ~1.5 GB, kept every queued span's objects alive through garbage-collector generations
(the oldest generation's passes grew with them) and left pymalloc's arenas fragmented once they
went. :func:`span_record` reads a span into a tuple of plain values — attribute keys and the
recurring strings as small integers of a :class:`Vocabulary`, the resource by reference, chunk
events as three lists of integers — and :func:`pack` makes that one ``bytes`` object (marshal:
C code, a few µs), a few hundred bytes that the garbage collector never looks at. The writer
thread unpacks it into :class:`~otel_llm._show._columns.SegmentColumns`, which builds every
span it appends through a record, so both paths give the same columns.
"""

from __future__ import annotations

import marshal
import threading
from array import array
from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter, sub
from types import MappingProxyType
from typing import Any, Final

from opentelemetry.sdk.trace import Event, ReadableSpan

from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm._show._rows import CHUNK_PAIR, KIND_NAMES, STATUS_NAMES, plain_attributes

Record = tuple[Any, ...]
"""``(start, end, trace_id, span_id, trace_state, parent_id, name, kind, status, message,
scope, resource, attributes, links, events)``; see :func:`span_record`."""

_MARSHAL_VERSION: Final = 4


def _typecode_range(typecode: str) -> tuple[str, int, int]:
    bits = 8 * array(typecode).itemsize
    if typecode.isupper():  # unsigned
        return typecode, 0, 2**bits - 1
    return typecode, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


_ARRAYS: Final = tuple(map(_typecode_range, "BHIq"))
"""Array typecodes from the smallest, with the range each holds."""
_PLAIN: Final = frozenset({str, int, float, bool, bytes, type(None)})
_GET_INDEX: Final = itemgetter(sc.CHUNK_INDEX)
_GET_GAP: Final = itemgetter(sc.CHUNK_GAP_NS)
_INNER: Final = attrgetter("_dict")
"""The plain dict inside an SDK ``BoundedAttributes``."""


def _event_fields() -> attrgetter[Any]:
    """Reads name, timestamp and attributes of an SDK event in one C call: through its slots
    when this SDK version keeps them there, else through the public properties."""
    probe = Event("probe", {"k": 1}, timestamp=1)
    private = attrgetter("_name", "_timestamp", "_attributes")
    try:
        if private(probe)[:2] == ("probe", 1):
            return private
    except AttributeError:
        pass
    return attrgetter("name", "timestamp", "attributes")


EVENT_FIELDS: Final = _event_fields()


class Vocabulary:
    """Strings that recur from span to span (names, scope and kind names) and the key lists
    of attribute mappings as small integers, and resources by reference; bounded: past its caps
    a string stays itself in the record, a mapping keeps its keys and a resource's attributes
    are copied in. Codes are only ever added, so a
    record packed by one thread is read by another without a lock."""

    __slots__ = (
        "_codes",
        "_layouts",
        "_lock",
        "_max_resources",
        "_max_words",
        "_resource_codes",
        "words",
    )

    def __init__(
        self,
        max_words: int = DEFAULTS.export_vocabulary_words,
        max_resources: int = DEFAULTS.export_vocabulary_resources,
    ) -> None:
        self.words: list[Any] = []
        """Code → string; → the keys of a mapping, in order, for a layout's code; → ``(resource,
        its attributes)`` for a resource's code."""
        self._codes: dict[str, int] = {}
        self._layouts: dict[tuple[str, ...], int] = {}
        self._resource_codes: dict[int, int] = {}
        self._max_words = max_words
        self._max_resources = max_resources
        self._lock = threading.Lock()

    def code(self, word: str) -> int | str:
        """``word``'s code, or ``word`` itself once the vocabulary is full."""
        code = self._codes.get(word)
        if code is not None:
            return code
        if type(word) is not str:
            return str(word)
        with self._lock:
            code = self._codes.get(word)
            if code is None:
                if len(self._codes) >= self._max_words:
                    return word
                code = len(self.words)
                self.words.append(word)
                self._codes[word] = code
        return code

    def word(self, code: int | str) -> str:
        """The string a :meth:`code` stands for."""
        word: str = code if type(code) is str else self.words[code]  # type: ignore[index]
        return word

    def resource(self, resource: Any) -> int | tuple[Any, ...] | list[Any]:
        """A resource's code (the resource is kept: its identity is the key), or its attributes
        flattened once the vocabulary holds its most resources."""
        if resource is None:
            return ()
        code = self._resource_codes.get(id(resource))
        if code is not None:
            return code
        attributes = plain_attributes(resource.attributes)
        with self._lock:
            code = self._resource_codes.get(id(resource))
            if code is None:
                if len(self._resource_codes) >= self._max_resources:
                    return self.flat(attributes)
                code = len(self.words)
                self.words.append((resource, attributes))
                self._resource_codes[id(resource)] = code
        return code

    def resource_attributes(self, value: int | tuple[Any, ...] | list[Any]) -> Mapping[str, Any]:
        """The attributes a :meth:`resource` value stands for."""
        if type(value) is int:
            attributes: Mapping[str, Any] = self.words[value][1]
            return attributes
        return self.mapping(value)  # type: ignore[arg-type]

    def flat(self, mapping: Mapping[str, Any]) -> tuple[Any, ...] | list[Any]:
        """``mapping`` as ``[code of its keys in order, its values]`` — spans of one kind
        share their keys, so a record holds only the values — or, once the vocabulary is
        full, as ``(key code, value, key code, value, …)``."""
        if not mapping:
            return ()
        keys = tuple(mapping)
        layout = self._layouts.get(keys)
        if layout is None:
            layout = self._new_layout(keys)
        if layout is not None:
            return [layout, tuple(mapping.values())]
        code = self.code
        return tuple(item for key, value in mapping.items() for item in (code(key), value))

    def _new_layout(self, keys: tuple[str, ...]) -> int | None:
        if not all(type(key) is str for key in keys):
            return None
        with self._lock:
            layout = self._layouts.get(keys)
            if layout is None:
                if len(self._layouts) >= self._max_words:
                    return None
                layout = len(self.words)
                self.words.append(keys)
                self._layouts[keys] = layout
        return layout

    def mapping(self, flat: Sequence[Any]) -> dict[str, Any]:
        """The mapping a :meth:`flat` value stands for."""
        if type(flat) is list:
            return dict(zip(self.words[flat[0]], flat[1], strict=True))
        words = self.words
        keys = [words[k] if type(k) is int else k for k in flat[0::2]]
        return dict(zip(keys, flat[1::2], strict=True))


def span_record(span: ReadableSpan, vocabulary: Vocabulary) -> Record:
    """The record of a finished span (see :data:`Record`). Chunk events that are all
        well-formed (an integer index and, but for the first chunk, an integer gap, in this order)
        become ``(first_alone, index steps, gaps, arrival deltas)``, each packed into a machine
    array (:func:`unpacked` reads them); any other events a list of
        ``(name, offset from the start, flat attributes)``."""
    code = vocabulary.code
    context = span.context
    start = span.start_time or 0
    end = span.end_time or start
    parent = span.parent
    scope = span.instrumentation_scope
    status = span.status
    return (
        start,
        end,
        context.trace_id if context else None,
        context.span_id if context else 0,
        context.trace_state.to_header() if context else "",
        parent.span_id if parent else None,
        code(span.name),
        code(KIND_NAMES.get(span.kind, "Unspecified")),
        code(STATUS_NAMES.get(status.status_code, "Unset")),
        status.description or "",
        (code(scope.name), code(scope.version or "")) if scope else None,
        vocabulary.resource(span.resource),
        vocabulary.flat(plain_attributes(span.attributes)),
        tuple(
            (
                link.context.trace_id,
                link.context.span_id,
                link.context.trace_state.to_header(),
                vocabulary.flat(plain_attributes(link.attributes)),
            )
            for link in span.links
        ),
        _events(span.events, start, vocabulary),
    )


def _events(events: Sequence[Event], start: int, vocabulary: Vocabulary) -> Any:
    if not events:
        return ()
    names, stamps, attributes = zip(*map(EVENT_FIELDS, events), strict=True)
    offsets = list(map(sub, stamps, repeat(start, len(stamps))))
    chunks = _chunk_events(names, attributes, offsets)
    if chunks is not None:
        return chunks
    code, flat = vocabulary.code, vocabulary.flat
    return [
        (code(name), offset, flat(plain_attributes(a)))
        for name, offset, a in zip(names, offsets, attributes, strict=True)
    ]


def _chunk_events(
    names: Sequence[str], attributes: Sequence[Any], offsets: list[int]
) -> tuple[bool, Any, Any, Any] | None:
    """``(first_alone, index steps, gaps, arrival deltas)`` of well-formed chunk events (each
    packed), or None."""
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
    first_alone = tuple(inners[0]) == CHUNK_PAIR[:1]  # no gap before the first chunk
    if set(map(tuple, inners[first_alone:])) - {CHUNK_PAIR}:  # keys in this order only
        return None
    indexes = list(map(_GET_INDEX, inners))  # every key is there: checked above
    paired = list(map(_GET_GAP, inners[first_alone:]))
    if set(map(type, indexes)) != {int} or (paired and set(map(type, paired)) != {int}):
        return None
    every = indexes + paired
    if min(every) < -(2**63) or max(every) >= 2**63:
        return None
    steps = [indexes[0], *map(sub, indexes[1:], indexes[:-1])]
    deltas = [offsets[0], *map(sub, offsets[1:], offsets[:-1])]
    return first_alone, _packed(steps), _packed(paired), _packed(deltas)


def _packed(values: list[int]) -> Any:
    """Integers in the smallest machine array that holds them all (an index step in a byte, a
    gap under 4.3 s in four), as ``(typecode, bytes)``; an empty list as itself."""
    if not values:
        return values
    low, high = min(values), max(values)
    for typecode, smallest, largest in _ARRAYS:
        if smallest <= low and high <= largest:
            return typecode, array(typecode, values).tobytes()
    return values


def unpacked(values: Any) -> list[int]:
    """The integers :func:`_packed` packed."""
    if type(values) is tuple:
        ints: list[int] = array(values[0], values[1]).tolist()
        return ints
    listed: list[int] = values
    return listed


def pack(record: Record) -> bytes:
    """One record as bytes (values marshal cannot write are rendered as the store would)."""
    try:
        return marshal.dumps(record, _MARSHAL_VERSION)
    except ValueError:
        return marshal.dumps(_plain(record), _MARSHAL_VERSION)


def unpack(data: bytes) -> Record:
    """The record :func:`pack` made."""
    record: Record = marshal.loads(data)
    return record


def _plain(value: Any) -> Any:
    if type(value) in _PLAIN:
        return value
    if type(value) is tuple or type(value) is list:
        return type(value)(map(_plain, value))
    from otel_llm._show._rows import attribute_string

    return attribute_string(value)
