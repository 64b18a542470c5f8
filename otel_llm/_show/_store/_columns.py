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

from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from operator import sub
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.sdk.trace import ReadableSpan

from otel_llm import _semconv as sc
from otel_llm._show._sql._schema import (
    ALL_COLUMNS,
    BASE_COLUMNS,
    CHUNK_COLUMNS,
    CHUNK_OFFSET_COLUMN,
    TYPED_COLUMNS,
)
from otel_llm._show._sql._table import CHUNK_GAP_COLUMN, CHUNK_INDEX_COLUMN
from otel_llm._show._store._records import PackedSpan, SpanRecord, pack, unpack
from otel_llm._show._store._rows import (
    CHUNK_PAIR,
    KIND_NAMES,
    STATUS_NAMES,
    TYPED_PLAN,
    as_int,
    as_text,
    attribute_string,
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
    """A column of ``Map(String, String)`` values, or of lists of them, kept flat.

    Chunk events, nearly all of a span's events, are added coded: their keys as indexes into
    :data:`CHUNK_PAIR` and their integer values as integers (``None`` stands in the string
    lists), so Arrow renders them without a Python string per key and value."""

    __slots__ = ("codes", "keys", "list_offsets", "numbers", "offsets", "values")

    def __init__(self) -> None:
        self.keys: list[str | None] = []
        self.values: list[str | None] = []
        self.codes: list[int] = []
        self.numbers: list[int] = []
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
        if self.codes:
            self.codes.extend([0] * len(mapping))
            self.numbers.extend([0] * len(mapping))
        self.offsets.append(len(self.keys))

    def add_coded(self, codes: list[int], numbers: list[int], offsets: range) -> None:
        """Entries whose keys are ``CHUNK_PAIR[code]`` and whose values are ``numbers``."""
        if not self.codes and self.keys:
            self.codes.extend([0] * len(self.keys))
            self.numbers.extend([0] * len(self.keys))
        self.keys.extend([None] * len(codes))
        self.values.extend([None] * len(codes))
        self.codes.extend(codes)
        self.numbers.extend(numbers)
        self.offsets.extend(offsets)


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
        self._typed_rows: list[tuple[Any, ...]] = []
        self._ours: list[bool] = []
        self._count = 0
        self._every = self._lists()

    def __len__(self) -> int:
        return self._count

    # --- appending ------------------------------------------------------------------------------

    def _lists(self) -> list[list[Any]]:
        """Every list a span appends to (their identities never change)."""
        found: list[list[Any]] = [*self._scalars.values(), *self._links.values()]
        for maps in (*self._maps.values(), self._link_maps, self._event_maps):
            found += [maps.keys, maps.values, maps.codes, maps.numbers]
            found += [maps.offsets, maps.list_offsets]
        found += [self._event_stamps, self._event_names, *self._chunks.values()]
        found += [self._chunk_offsets, self._typed_rows, self._ours]
        return found

    def append_span(self, span: ReadableSpan) -> None:
        """Append one finished span (the same values :func:`span_row` gives)."""
        self.append_record(unpack(pack(span)))

    def append_packed(self, packed: PackedSpan) -> None:
        """Append one span as the store's writer queue holds it."""
        self.append_record(unpack(packed))

    def append_record(self, record: SpanRecord) -> None:
        """Append one unpacked span — all of it, or nothing: a span that cannot be converted
        raises and leaves the columns as they were."""
        lengths = list(map(len, self._every))
        try:
            self._append_record(record)
        except BaseException:
            for values, length in zip(self._every, lengths, strict=True):
                del values[length:]
            raise

    def _append_record(self, record: SpanRecord) -> None:
        start = record.start
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
        s["Duration"].append(max(0, record.end - start))
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
            self._chunk_events(*record.chunks, start)
        else:
            self._events_one_by_one(record.events, start)
        self._event_maps.list_offsets.append(len(self._event_maps.offsets) - 1)
        self._chunk_offsets.append(len(self._chunks[CHUNK_INDEX_COLUMN]))
        self._count += 1

    def _typed(self, attributes: Mapping[str, Any]) -> None:
        """The typed columns' raw values; typed per column in :meth:`table`."""
        self._typed_rows.append(tuple(map(attributes.get, _TYPED_ATTRIBUTES)))
        self._ours.append(sc.SPAN_ROLE in attributes)  # defaults speak for otel-llm's spans only

    def _chunk_events(
        self, stamps: list[int], indexes: list[int], gaps: list[int | None], start: int
    ) -> None:
        """Append well-formed chunk events (checked by the packer) a list at a time."""
        count = len(stamps)
        self._event_stamps.extend(stamps)
        self._event_names.extend(repeat(sc.CHUNK_EVENT, count))
        self._chunks[CHUNK_INDEX_COLUMN].extend(indexes)
        self._chunks[CHUNK_GAP_COLUMN].extend(gaps)
        self._chunks[CHUNK_OFFSET_COLUMN].extend(map(sub, stamps, repeat(start, count)))
        first_alone = bool(gaps) and gaps[0] is None  # no gap before the first chunk
        pairs = count - first_alone
        numbers: list[int] = [0] * (2 * pairs)
        numbers[0::2] = indexes[first_alone:]
        numbers[1::2] = gaps[first_alone:]  # type: ignore[assignment]  # ints past the first
        maps = self._event_maps
        base = len(maps.keys)
        if first_alone:
            maps.add_coded([0], indexes[:1], range(base + 1, base + 2))
            base += 1
        maps.add_coded([0, 1] * pairs, numbers, range(base + 2, base + 2 * pairs + 1, 2))

    def _events_one_by_one(self, events: list[tuple[str, int, dict[str, Any]]], start: int) -> None:
        maps = self._event_maps
        indexes = self._chunks[CHUNK_INDEX_COLUMN]
        gaps = self._chunks[CHUNK_GAP_COLUMN]
        arrivals = self._chunks[CHUNK_OFFSET_COLUMN]
        for name, stamp, attributes in events:
            self._event_stamps.append(stamp)
            self._event_names.append(name)
            if name == sc.CHUNK_EVENT:
                indexes.append(as_int(attributes.get(sc.CHUNK_INDEX)))
                gaps.append(as_int(attributes.get(sc.CHUNK_GAP_NS)))
                arrivals.append(stamp - start)
            maps.add(attributes)

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
        self._count += 1

    # --- the table ------------------------------------------------------------------------------

    def table(self, pause: Callable[[], None] = lambda: None) -> pa.Table:
        """The appended spans as one Arrow table with :func:`arrow_schema`; ``pause`` is
        called between columns (the writer lets other threads run there)."""
        import pyarrow as pa

        schema = arrow_schema()
        arrays: dict[str, pa.Array[Any]] = {}
        for name in _SCALARS:
            arrays[name] = pa.array(self._scalars[name], type=schema.field(name).type)
        pause()
        raw = list(zip(*self._typed_rows, strict=True)) or [()] * len(TYPED_PLAN)
        for values, (name, _, default, typed) in zip(raw, TYPED_PLAN, strict=True):
            if default is not None:
                values = tuple(
                    default if value is None and ours else value
                    for value, ours in zip(values, self._ours, strict=True)
                )
            arrays[name] = pa.array(_typed_list(values, typed), type=schema.field(name).type)
        pause()
        for name in _MAP_COLUMNS:
            arrays[name] = _map_array(self._maps[name])
            pause()
        link_counts = self._link_maps.list_offsets
        for name in _LIST_COLUMNS:
            arrays[name] = pa.ListArray.from_arrays(
                pa.array(link_counts, pa.int32()), pa.array(self._links[name], pa.string())
            )
        arrays["Links.Attributes"] = _list_of_maps(self._link_maps)
        event_offsets = pa.array(self._event_maps.list_offsets, pa.int32())
        arrays["Events.Timestamp"] = pa.ListArray.from_arrays(
            event_offsets, pa.array(self._event_stamps, pa.timestamp("ns"))
        )
        arrays["Events.Name"] = pa.ListArray.from_arrays(
            event_offsets, pa.array(self._event_names, pa.string())
        )
        pause()
        arrays["Events.Attributes"] = _list_of_maps(self._event_maps)
        pause()
        chunk_offsets = pa.array(self._chunk_offsets, pa.int32())
        for name, numbers in self._chunks.items():
            arrays[name] = pa.ListArray.from_arrays(chunk_offsets, pa.array(numbers, pa.int64()))
        return pa.Table.from_arrays([arrays[name] for name in ALL_COLUMNS], schema=schema)


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
    import pyarrow.compute as pc

    keys = pa.array(maps.keys, pa.string())
    values = pa.array(maps.values, pa.string())
    if maps.codes:  # fill the coded entries in, vectorised
        coded = pc.is_null(keys)
        named = pc.take(pa.array(CHUNK_PAIR, pa.string()), pa.array(maps.codes, pa.int8()))
        keys = pc.if_else(coded, named, keys)
        rendered = pc.cast(pa.array(maps.numbers, pa.int64()), pa.string())
        values = pc.if_else(coded, rendered, values)
    array: pa.Array[Any] = pa.MapArray.from_arrays(  # type: ignore[call-overload]
        pa.array(maps.offsets, pa.int32()), keys, values
    )
    return array


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


def arrow_schema() -> pa.Schema:
    """The Arrow schema of a segment: every ``otel_traces`` column with its DuckDB type."""
    import pyarrow as pa

    return pa.schema([pa.field(name, _arrow_type(_SQL_TYPES[name])) for name in ALL_COLUMNS])
