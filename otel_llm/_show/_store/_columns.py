"""Finished spans as Arrow columns in the ``otel_traces`` layout, built without a dict per row.

Converting a row of Python dicts into Arrow costs ~190 µs per span with 30 chunk events (Arrow
walks every dict); here every map and list is appended flat, with its offsets, and becomes an
Arrow array in one call. :meth:`SegmentColumns.append_packed` takes a span as the store's writer
queues it (:mod:`otel_llm._show._store._records`), :meth:`SegmentColumns.append_span` a finished
``ReadableSpan``; :meth:`SegmentColumns.append_row` takes a row as
:func:`otel_llm._show._store._rows.span_row` returns it (the Collector's spans arrive that way); all
give the same table.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.sdk.trace import ReadableSpan

from otel_llm import _semconv as sc
from otel_llm._encodable import valid_text
from otel_llm._show._sql._schema import (
    ALL_COLUMNS,
    BASE_COLUMNS,
    CHUNK_COLUMNS,
    CHUNK_OFFSET_COLUMN,
    TYPED_COLUMNS,
)
from otel_llm._show._sql._table import CHUNK_GAP_COLUMN, CHUNK_INDEX_COLUMN
from otel_llm._show._store._chunk_columns import ChunkColumns, counted
from otel_llm._show._store._records import (
    PackedSpan,
    RawSpan,
    SpanRecord,
    chunk_parts,
    keys_of,
    pack,
    plain_events,
    raw,
)
from otel_llm._show._store._rows import (
    KIND_NAMES,
    STATUS_NAMES,
    TYPED_PLAN,
    as_int,
    as_text,
    attribute_string,
    plain_attributes,
)

if TYPE_CHECKING:
    import pyarrow as pa

_MAP_COLUMNS: Final = ("ResourceAttributes", "SpanAttributes")
_LIST_COLUMNS: Final = ("Links.TraceId", "Links.SpanId", "Links.TraceState")
_TYPED_NAMES: Final = tuple(name for name, _, _, _ in TYPED_PLAN)
_TYPED_ATTRIBUTES: Final = tuple(attribute for _, attribute, _, _ in TYPED_PLAN)
_KINDS: Final = {kind.value: name for kind, name in KIND_NAMES.items()}
_STATUSES: Final = {code.value: name for code, name in STATUS_NAMES.items()}
_SCALARS: Final = tuple(
    name
    for name in ALL_COLUMNS
    if name not in _TYPED_NAMES
    and name not in _MAP_COLUMNS
    and name not in _LIST_COLUMNS
    and not name.startswith(("Events.", "Links."))
    and name not in (CHUNK_INDEX_COLUMN, CHUNK_GAP_COLUMN, CHUNK_OFFSET_COLUMN)
)
"""Columns holding one value per span."""


class _Maps:
    """A column of ``Map(String, String)`` values, or of lists of them, kept flat."""

    __slots__ = ("keys", "list_offsets", "offsets", "values")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.values: list[str] = []
        self.offsets: list[int] = [0]
        self.list_offsets: list[int] = [0]

    def add(self, mapping: Mapping[str, Any]) -> None:
        self.keys.extend(mapping)
        self.values.extend(
            [
                v if type(v) is str else str(v) if type(v) is int else attribute_string(v)
                for v in mapping.values()
            ]
        )
        self.offsets.append(len(self.keys))

    def add_rendered(self, keys: Sequence[str], values: Sequence[Any]) -> None:
        """A mapping given as its keys and its values (rendered here)."""
        self.keys.extend(keys)
        self.values.extend(
            [
                v if type(v) is str else str(v) if type(v) is int else attribute_string(v)
                for v in values
            ]
        )
        self.offsets.append(len(self.keys))


class SegmentColumns:
    """Spans appended column by column; :meth:`table` makes the Arrow table of them."""

    def __init__(self) -> None:
        self._scalars: dict[str, list[Any]] = {name: [] for name in _SCALARS}
        self._maps = {name: _Maps() for name in _MAP_COLUMNS}
        self._links: dict[str, list[str]] = {name: [] for name in _LIST_COLUMNS}
        self._link_maps = _Maps()
        self._event_stamps: list[int] = []
        self._event_names: list[str] = []
        self._event_maps = _Maps()
        self._chunks: dict[str, list[Any]] = {
            name: [] for name in (CHUNK_INDEX_COLUMN, CHUNK_GAP_COLUMN, CHUNK_OFFSET_COLUMN)
        }
        self._chunk_offsets: list[int] = [0]
        self._chunk_form = ChunkColumns()
        """Chunk events packed as integers (the rest of the events are in the lists above)."""
        self._typed_rows: list[tuple[Any, ...]] = []
        self._ours: list[bool] = []
        self._resources: dict[int, tuple[object, tuple[str, ...], list[str], str]] = {}
        self._count = 0
        self._every = self._lists()

    def __len__(self) -> int:
        return self._count

    # --- appending ------------------------------------------------------------------------------

    def _lists(self) -> list[list[Any]]:
        """Every list a span appends to (their identities never change)."""
        found: list[list[Any]] = [*self._scalars.values(), *self._links.values()]
        for maps in (*self._maps.values(), self._link_maps, self._event_maps):
            found += [maps.keys, maps.values, maps.offsets, maps.list_offsets]
        found += [self._event_stamps, self._event_names, *self._chunks.values()]
        found += [self._chunk_offsets, self._typed_rows, self._ours]
        return found

    def append_span(self, span: ReadableSpan) -> None:
        """Append one finished span (the same values :func:`span_row` gives)."""
        self.append_packed(pack(span))

    def append_packed(self, packed: PackedSpan) -> None:
        """Append one span as the store's writer queue holds it — all of it, or nothing: a
        span that cannot be converted raises and leaves the columns as they were."""
        span = raw(packed)
        parts = chunk_parts(span.events)
        if not span.links and (parts is not None or span.events is None):
            self._append_packed(packed, span, parts)  # fails, if at all, before appending
            return
        undo = self._undo_point()
        try:
            self._append_packed(packed, span, parts)
        except BaseException:
            self._undo(undo)
            raise

    def append_record(self, record: SpanRecord) -> None:
        """Append one unpacked span — all of it, or nothing (as :meth:`append_packed`)."""
        undo = self._undo_point()
        try:
            self._append_record(record)
        except BaseException:
            self._undo(undo)
            raise

    def _undo_point(self) -> tuple[list[int], tuple[int, ...]]:
        return list(map(len, self._every)), self._chunk_form.mark()

    def _undo(self, point: tuple[list[int], tuple[int, ...]]) -> None:
        lengths, chunk_mark = point
        for values, length in zip(self._every, lengths, strict=True):
            del values[length:]
        self._chunk_form.truncate(chunk_mark)

    def _append_packed(
        self,
        packed: PackedSpan,
        span: RawSpan,
        parts: tuple[bool, bytes, int | bytes, bytes] | None,
    ) -> None:
        """:meth:`_append_record` of the packed values, without a dict per span or a Python
        object per chunk event. Everything that can fail on a span without links or events
        other than chunk events is worked out before the first value is appended."""
        start = span.start
        duration = max(0, span.end - start)
        _check_span_times(start, duration)
        trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
        ids = (
            "" if trace_id is None else format(trace_id, "032x"),
            "" if span_id is None else format(span_id, "016x"),
            "" if parent is None else format(parent, "016x"),
        )
        resource_keys, resource_values, service = self._resource(packed.resource)
        scope = packed.scope
        scope_name, scope_version = (scope.name, scope.version or "") if scope else ("", "")
        keys = keys_of(span.shape)
        values = span.values
        rendered = [
            v if type(v) is str else str(v) if type(v) is int else attribute_string(v)
            for v in values
        ]
        typed, ours = _typed_plan(span.shape, keys)
        typed_values = typed(values)
        s = self._scalars
        s["Timestamp"].append(start)
        s["TraceId"].append(ids[0])
        s["SpanId"].append(ids[1])
        s["ParentSpanId"].append(ids[2])
        s["TraceState"].append(span.trace_state)
        s["SpanName"].append(span.name)
        s["SpanKind"].append(_KINDS.get(span.kind, "Unspecified"))
        s["ServiceName"].append(service)
        s["ScopeName"].append(scope_name)
        s["ScopeVersion"].append(scope_version)
        s["Duration"].append(duration)
        s["StatusCode"].append(_STATUSES.get(span.status, "Unset"))
        s["StatusMessage"].append(span.status_message)
        resource_maps = self._maps["ResourceAttributes"]
        resource_maps.keys.extend(resource_keys)
        resource_maps.values.extend(resource_values)
        resource_maps.offsets.append(len(resource_maps.keys))
        attribute_maps = self._maps["SpanAttributes"]
        attribute_maps.keys.extend(keys)
        attribute_maps.values.extend(rendered)
        attribute_maps.offsets.append(len(attribute_maps.keys))
        self._typed_rows.append(typed_values)
        self._ours.append(ours)
        for link_trace, link_span, link_state, link_shape, link_values in span.links:
            self._links["Links.TraceId"].append(format(link_trace, "032x"))
            self._links["Links.SpanId"].append(format(link_span, "016x"))
            self._links["Links.TraceState"].append(link_state)
            self._link_maps.add_rendered(keys_of(link_shape), link_values)
        self._link_maps.list_offsets.append(len(self._link_maps.offsets) - 1)
        if parts is not None:
            self._chunk_form.add_packed(start, *parts)
        else:
            self._chunk_form.skip(start)
            self._events_one_by_one(plain_events(span.events), start)
        self._event_maps.list_offsets.append(len(self._event_maps.offsets) - 1)
        self._chunk_offsets.append(len(self._chunks[CHUNK_INDEX_COLUMN]))
        self._count += 1

    def _resource(self, resource: Any) -> tuple[tuple[str, ...], list[str], str]:
        """A resource's keys, rendered values and service name (worked out once a resource)."""
        known = self._resources.get(id(resource))
        if known is not None and known[0] is resource:
            return known[1], known[2], known[3]
        attributes = plain_attributes(resource.attributes) if resource is not None else {}
        keys = tuple(attributes)
        values = [attribute_string(v) if type(v) is not str else v for v in attributes.values()]
        service = attribute_string(attributes.get("service.name", ""))
        self._resources[id(resource)] = (resource, keys, values, service)
        return keys, values, service

    def _append_record(self, record: SpanRecord) -> None:
        start = record.start
        duration = max(0, record.end - start)
        _check_span_times(start, duration)
        if record.chunks is not None:
            stamps = record.chunks[0]
            _check_event_times(stamps, [stamp - start for stamp in stamps])
        resource = record.resource
        s = self._scalars
        s["Timestamp"].append(start)
        trace_id, span_id, parent = record.trace_id, record.span_id, record.parent_span_id
        s["TraceId"].append("" if trace_id is None else format(trace_id, "032x"))
        s["SpanId"].append("" if span_id is None else format(span_id, "016x"))
        s["ParentSpanId"].append("" if parent is None else format(parent, "016x"))
        s["TraceState"].append(record.trace_state)
        s["SpanName"].append(record.name)
        s["SpanKind"].append(_KINDS.get(record.kind, "Unspecified"))
        s["ServiceName"].append(attribute_string(resource.get("service.name", "")))
        s["ScopeName"].append(record.scope_name)
        s["ScopeVersion"].append(record.scope_version)
        s["Duration"].append(duration)
        s["StatusCode"].append(_STATUSES.get(record.status, "Unset"))
        s["StatusMessage"].append(record.status_message)
        self._maps["ResourceAttributes"].add(resource)
        self._maps["SpanAttributes"].add(record.attributes)
        self._typed(record.attributes)
        for link_trace, link_span, link_state, link_attributes in record.links:
            self._links["Links.TraceId"].append(format(link_trace, "032x"))
            self._links["Links.SpanId"].append(format(link_span, "016x"))
            self._links["Links.TraceState"].append(link_state)
            self._link_maps.add(link_attributes)
        self._link_maps.list_offsets.append(len(self._link_maps.offsets) - 1)
        if record.chunks is not None:
            self._chunk_form.add_lists(start, *record.chunks)
        else:
            self._chunk_form.skip(start)
            self._events_one_by_one(record.events, start)
        self._event_maps.list_offsets.append(len(self._event_maps.offsets) - 1)
        self._chunk_offsets.append(len(self._chunks[CHUNK_INDEX_COLUMN]))
        self._count += 1

    def _typed(self, attributes: Mapping[str, Any]) -> None:
        """The typed columns' raw values; typed per column in :meth:`table`."""
        self._typed_rows.append(tuple(map(attributes.get, _TYPED_ATTRIBUTES)))
        self._ours.append(sc.SPAN_ROLE in attributes)  # defaults speak for otel-llm's spans only

    def _events_one_by_one(self, events: list[tuple[str, int, dict[str, Any]]], start: int) -> None:
        maps = self._event_maps
        indexes = self._chunks[CHUNK_INDEX_COLUMN]
        gaps = self._chunks[CHUNK_GAP_COLUMN]
        arrivals = self._chunks[CHUNK_OFFSET_COLUMN]
        stamps_from, arrivals_from = len(self._event_stamps), len(arrivals)
        for name, stamp, attributes in events:
            self._event_stamps.append(stamp)
            self._event_names.append(name)
            if name == sc.CHUNK_EVENT:
                indexes.append(as_int(attributes.get(sc.CHUNK_INDEX)))
                gaps.append(as_int(attributes.get(sc.CHUNK_GAP_NS)))
                arrivals.append(stamp - start)
            maps.add(attributes)
        if events:  # (the caller undoes the appends when this raises)
            _check_event_times(self._event_stamps[stamps_from:], arrivals[arrivals_from:])

    def append_row(self, row: Mapping[str, Any]) -> None:
        """Append one row keyed by column name, as :func:`span_row` returns it."""
        for name in _SCALARS:
            self._scalars[name].append(row.get(name))
        self._typed_rows.append(tuple(row.get(name) for name in _TYPED_NAMES))
        self._ours.append(False)  # the row's defaults are applied already
        for name in _MAP_COLUMNS:
            self._maps[name].add(row.get(name) or {})
        for name in _LIST_COLUMNS:
            self._links[name].extend(row.get(name) or ())
        for mapping in row.get("Links.Attributes") or ():
            self._link_maps.add(mapping)
        self._link_maps.list_offsets.append(len(self._link_maps.offsets) - 1)
        self._event_stamps.extend(row.get("Events.Timestamp") or ())
        self._event_names.extend(row.get("Events.Name") or ())
        for mapping in row.get("Events.Attributes") or ():
            self._event_maps.add(mapping)
        self._event_maps.list_offsets.append(len(self._event_maps.offsets) - 1)
        for name in (CHUNK_INDEX_COLUMN, CHUNK_GAP_COLUMN, CHUNK_OFFSET_COLUMN):
            self._chunks[name].extend(row.get(name) or ())
        self._chunk_offsets.append(len(self._chunks[CHUNK_INDEX_COLUMN]))
        self._chunk_form.skip(row.get("Timestamp") or 0)
        self._count += 1

    # --- the table ------------------------------------------------------------------------------

    def table(self, pause: Callable[[], None] = lambda: None) -> pa.Table:
        """The appended spans as one Arrow table with :func:`arrow_schema`; ``pause`` is
        called between columns (the writer lets other threads run there)."""
        import pyarrow as pa

        schema = arrow_schema()
        arrays: dict[str, pa.Array[Any]] = {}
        for name in _SCALARS:
            arrays[name] = _array(self._scalars[name], schema.field(name).type)
        pause()
        raw = list(zip(*self._typed_rows, strict=True)) or [()] * len(TYPED_PLAN)
        for values, (name, _, default, typed) in zip(raw, TYPED_PLAN, strict=True):
            if default is not None and None in values:
                values = tuple(
                    default if value is None and ours else value
                    for value, ours in zip(values, self._ours, strict=True)
                )
            arrays[name] = _typed_array(values, typed, schema.field(name).type)
        pause()
        for name in _MAP_COLUMNS:
            arrays[name] = _map_array(self._maps[name])
            pause()
        link_counts = self._link_maps.list_offsets
        for name in _LIST_COLUMNS:
            arrays[name] = pa.ListArray.from_arrays(
                pa.array(link_counts, pa.int32()), _array(self._links[name], pa.string())
            )
        arrays["Links.Attributes"] = _list_of_maps(self._link_maps)
        arrays.update(self._event_arrays(pause))
        return pa.Table.from_arrays([arrays[name] for name in ALL_COLUMNS], schema=schema)

    def _event_arrays(self, pause: Callable[[], None]) -> dict[str, pa.Array[Any]]:
        """The event and chunk columns: of the rows whose events are in the general lists,
        and of those whose chunk events are packed, each row taken from the one it is in."""
        import pyarrow as pa
        import pyarrow.compute as pc

        general: dict[str, pa.Array[Any]] = {}
        if self._event_stamps or not len(self._chunk_form):
            event_offsets = pa.array(self._event_maps.list_offsets, pa.int32())
            general["Events.Timestamp"] = pa.ListArray.from_arrays(
                event_offsets, pa.array(self._event_stamps, pa.timestamp("ns"))
            )
            general["Events.Name"] = pa.ListArray.from_arrays(
                event_offsets, _array(self._event_names, pa.string())
            )
            pause()
            general["Events.Attributes"] = _list_of_maps(self._event_maps)
            pause()
            chunk_offsets = pa.array(self._chunk_offsets, pa.int32())
            for name, numbers in self._chunks.items():
                general[name] = pa.ListArray.from_arrays(
                    chunk_offsets, pa.array(numbers, pa.int64())
                )
            if not len(self._chunk_form):
                return general
        packed = self._chunk_form.arrays()
        pause()
        named = {
            "Events.Timestamp": packed["stamps"],
            "Events.Name": packed["names"],
            "Events.Attributes": packed["maps"],
            CHUNK_INDEX_COLUMN: packed["index"],
            CHUNK_GAP_COLUMN: packed["gap"],
            CHUNK_OFFSET_COLUMN: packed["offset"],
        }
        if not general:
            return named
        rows = self._count
        ends = pa.array(self._chunk_form.row_ends, pa.int32())
        has_packed = pc.greater(pc.subtract(ends[1:], ends[:-1]), pa.scalar(0, pa.int32()))
        row_numbers = counted(rows)
        which = pc.if_else(has_packed, pc.add(row_numbers, rows), row_numbers)
        return {name: pa.concat_arrays([general[name], named[name]]).take(which) for name in named}


_INT64: Final = 2**63


def _check_span_times(start: Any, duration: Any) -> None:
    """Raise now what Arrow would raise for this span's ``Timestamp`` or ``Duration`` when
    the table is made (a time past 64 bits): the span alone is refused, not the table."""
    ints = type(start) is int and type(duration) is int
    if ints and -_INT64 <= start < _INT64 and duration < 2 * _INT64:
        return
    import pyarrow as pa

    pa.array([start], pa.timestamp("ns"))
    pa.array([duration], pa.uint64())


def _check_event_times(stamps: Sequence[Any], offsets: Sequence[Any]) -> None:
    """As :func:`_check_span_times`, for a span's event times and chunk offsets."""
    if all(type(v) is int and -_INT64 <= v < _INT64 for v in (*stamps, *offsets)):
        return
    import pyarrow as pa

    pa.array(stamps, pa.timestamp("ns"))
    pa.array(offsets, pa.int64())


_PLANS: dict[int | tuple[str, ...], tuple[Callable[[tuple[Any, ...]], tuple[Any, ...]], bool]] = {}
"""Per attribute shape (:mod:`._records`' number for a key tuple, or the tuple): how its values
give the typed columns' raw values, and whether the span is otel-llm's (a few shapes a
process; the packer caps their number)."""


def _typed_plan(
    shape: int | tuple[str, ...], keys: tuple[str, ...]
) -> tuple[Callable[[tuple[Any, ...]], tuple[Any, ...]], bool]:
    """The typed columns' raw values of a span whose attribute keys are ``keys`` (``None``
    where an attribute is missing), as :meth:`SegmentColumns._typed` takes them from a dict."""
    plan = _PLANS.get(shape)
    if plan is None:
        where = {key: position for position, key in enumerate(keys)}
        missing = len(keys)  # the ``None`` appended after the values
        pick = itemgetter(*(where.get(attribute, missing) for attribute in _TYPED_ATTRIBUTES))

        def typed(values: tuple[Any, ...]) -> tuple[Any, ...]:
            picked: tuple[Any, ...] = pick((*values, None))
            return picked

        plan = (typed, sc.SPAN_ROLE in where)
        if len(_PLANS) < 8192:
            _PLANS[shape] = plan
    return plan


_PLAIN: Final[dict[Callable[[Any], Any], frozenset[type]]] = {
    as_int: frozenset({int, type(None)}),
    as_text: frozenset({str, type(None)}),
}
"""Per typed column's check: the value types it passes as they are (when Arrow takes them)."""


def _typed_array(
    values: Sequence[Any], typed: Callable[[Any], Any], kind: pa.DataType
) -> pa.Array[Any]:
    """A typed column's Arrow array: ``values`` as they are when they are all of the types
    its check keeps unchanged and Arrow takes them (an integer past 64 bits it refuses), else
    each through the check."""

    plain = _PLAIN.get(typed)
    if plain is not None and plain.issuperset(map(type, values)):
        try:
            return _array(values, kind)
        except OverflowError:
            pass
    return _array(_typed_list(values, typed), kind)


def warm_table() -> pa.Table:
    """A table of one made-up span with chunk events, built as every table is: what the
    store's writer builds (and encodes) once, first thing, so that the imports and first calls
    of every Arrow function a real segment needs are behind it before a span waits on them."""
    record = SpanRecord(
        start=1,
        end=3,
        trace_id=1,
        span_id=1,
        parent_span_id=None,
        trace_state="",
        name="warm",
        kind=0,
        status=0,
        status_message="",
        attributes={},
        resource={},
        scope_name="",
        scope_version="",
        links=[],
        chunks=([1, 2], [0, 1], [None, 1]),
        events=[],
    )
    columns = SegmentColumns()
    columns.append_record(record)
    return columns.table()


def _typed_list(values: Sequence[Any], typed: Callable[[Any], Any]) -> list[Any]:
    """``values`` through a typed column's check, the common cases inline."""
    if typed is as_int:
        return [
            v if type(v) is int and -(2**63) <= v < 2**63 else None if v is None else as_int(v)
            for v in values
        ]
    if typed is as_text:
        return [v if v is None or type(v) is str else as_text(v) for v in values]
    return [None if v is None else typed(v) for v in values]


def _map_array(maps: _Maps) -> pa.Array[Any]:
    import pyarrow as pa

    key_list, value_list, offsets = maps.keys, maps.values, maps.offsets
    try:
        keys = pa.array(key_list, pa.string())
    except UnicodeEncodeError:  # keys equal once stored (see _array) must be one key
        key_list, value_list, offsets = _folded(maps)
        keys = pa.array(key_list, pa.string())
    values = _array(value_list, pa.string())
    array: pa.Array[Any] = pa.MapArray.from_arrays(  # type: ignore[call-overload]
        pa.array(offsets, pa.int32()), keys, values
    )
    return array


def _folded(maps: _Maps) -> tuple[list[str], list[str], list[int]]:
    """``maps`` with their keys as :func:`valid_text` stores them, each map's keys that became
    equal folded into one (its first place, its last value, as a dict built from them keeps)."""
    keys: list[str] = []
    values: list[str] = []
    offsets = [0]
    for start, end in itertools.pairwise(maps.offsets):
        folded = dict(
            zip(map(valid_text, maps.keys[start:end]), maps.values[start:end], strict=True)
        )
        keys.extend(folded)
        values.extend(folded.values())
        offsets.append(len(keys))
    return keys, values, offsets


def _array(values: Sequence[Any], kind: pa.DataType) -> pa.Array[Any]:
    """``values`` as an Arrow array of ``kind``. A Python string can hold a lone surrogate
    (``json.loads`` and ``os.fsdecode`` make them), which UTF-8 cannot encode: then the strings
    are stored as :func:`valid_text` makes them, where the one string would have cost every
    span converted with it."""
    import pyarrow as pa

    try:
        return pa.array(values, type=kind)
    except UnicodeEncodeError:
        return pa.array([valid_text(v) if type(v) is str else v for v in values], type=kind)


def _list_of_maps(maps: _Maps) -> pa.Array[Any]:
    import pyarrow as pa

    return pa.ListArray.from_arrays(pa.array(maps.list_offsets, pa.int32()), _map_array(maps))


def _arrow_type(sql_type: str) -> pa.DataType:
    import pyarrow as pa

    if sql_type.endswith("[]"):
        return pa.list_(_arrow_type(sql_type[:-2]))
    scalars: dict[str, pa.DataType] = {
        "MAP(VARCHAR, VARCHAR)": pa.map_(pa.string(), pa.string()),
        "TIMESTAMP_NS": pa.timestamp("ns"),
        "VARCHAR": pa.string(),
        "UBIGINT": pa.uint64(),
        "BIGINT": pa.int64(),
        "INTEGER": pa.int32(),
        "BOOLEAN": pa.bool_(),
    }
    return scalars[sql_type]


_SQL_TYPES: Final = {
    **dict(BASE_COLUMNS),
    **{c.name: c.sql_type for c in TYPED_COLUMNS},
    **{name: "BIGINT[]" for name, _ in CHUNK_COLUMNS},
    CHUNK_OFFSET_COLUMN: "BIGINT[]",
}


def statistics_columns() -> list[str]:
    """The columns a segment keeps min/max statistics for: those of one value per span (a
    reader skips row groups by them, by ``Timestamp`` above all). Statistics of the list and
    map columns would cost a sixth of the encoding and serve no filter."""
    return [name for name in ALL_COLUMNS if not _SQL_TYPES[name].endswith(("[]", ")"))]


@cache
def arrow_schema() -> pa.Schema:
    """The Arrow schema of a segment: every ``otel_traces`` column with its DuckDB type."""
    import pyarrow as pa

    return pa.schema([pa.field(name, _arrow_type(_SQL_TYPES[name])) for name in ALL_COLUMNS])
