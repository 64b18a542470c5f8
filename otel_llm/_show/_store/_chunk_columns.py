"""Spans' chunk events kept as three integer arrays, made Arrow columns in a few vector calls.

Nearly all of a streamed attempt's events are chunk events (an index and, but for the first, the
gap before it). The writer's queue holds them packed (:mod:`._records`: arrival steps, indexes
and gaps as machine integers); :class:`ChunkColumns` appends those bytes to ``array('q')``
buffers without making a Python object per event, and :meth:`ChunkColumns.arrays` turns them
into the event columns (``Events.Timestamp``/``Name``/``Attributes``) and the typed chunk columns
with Arrow compute: arrival times are a running sum of the steps, each event's map is
``{index, gap}`` rendered from the integers. Rows without chunk events of this kind hold empty
lists here; :class:`~._columns.SegmentColumns` takes their events from its general lists.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final

from otel_llm import _semconv as sc
from otel_llm._show._store._rows import CHUNK_PAIR

if TYPE_CHECKING:
    import pyarrow as pa

_WIDE: Final = ord("q")
"""The typecode of a packed piece of 8-byte integers (``i``: 4-byte)."""
_COUNTING: dict[tuple[int, int], bytes] = {}
"""Packed indexes that count up by one, by (first, count): a few distinct ones a process."""
_COUNTING_MOST: Final = 1024
"""Runs longer than this are packed afresh each time (the cache stays under 8 MiB)."""


def _counting(first: int, count: int) -> bytes:
    packed = _COUNTING.get((first, count))
    if packed is None:
        try:
            packed = b"i" + array("i", range(first, first + count)).tobytes()
        except OverflowError:
            packed = b"q" + array("q", range(first, first + count)).tobytes()
        if count <= _COUNTING_MOST and len(_COUNTING) < 1024:
            _COUNTING[(first, count)] = packed
    return packed


class _Pieces:
    """Integers packed as ``_records._ints`` packs them (typecode first), kept as bytes until
    Arrow reads them all at once."""

    __slots__ = ("pieces", "size", "wide", "widths")

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        """The integers of each piece, without its typecode."""
        self.widths: list[bool] = []
        """Whether each piece holds 8-byte integers (else 4-byte)."""
        self.size = 0
        self.wide = False

    def add(self, packed: bytes) -> int:
        """Keep ``packed``; the number of integers in it."""
        wide = packed[0] == _WIDE
        data = packed[1:]
        self.pieces.append(data)
        self.widths.append(wide)
        count = len(data) >> 3 if wide else len(data) >> 2
        self.wide = self.wide or wide
        self.size += count
        return count

    def truncate(self, pieces: int) -> None:
        for data, wide in zip(self.pieces[pieces:], self.widths[pieces:], strict=True):
            self.size -= len(data) >> 3 if wide else len(data) >> 2
        del self.pieces[pieces:], self.widths[pieces:]

    def int64(self) -> pa.Array[Any]:
        """Every integer kept, in order, as one Arrow ``int64`` array."""
        import pyarrow as pa

        if not self.wide:
            return _array(False, b"".join(self.pieces))
        runs = [
            _array(wide, b"".join(data for _, data in run))
            for wide, run in groupby(zip(self.widths, self.pieces, strict=True), key=itemgetter(0))
        ]
        return pa.concat_arrays(runs) if runs else pa.array([], pa.int64())


def _array(wide: bool, data: bytes) -> pa.Array[Any]:
    """Machine integers (8-byte when ``wide``, else 4-byte) as an Arrow ``int64`` array."""
    import pyarrow as pa

    kind = pa.int64() if wide else pa.int32()
    count = len(data) >> 3 if wide else len(data) >> 2
    return pa.Array.from_buffers(kind, count, [None, pa.py_buffer(data)]).cast(pa.int64())


_ONE_GAP: Final = (b"i" + bytes(4), b"q" + bytes(8))
"""A gap of 0 in each width: what stands in where a span's first event has none."""


class ChunkColumns:
    """Chunk events of appended rows as packed integers (see the module docstring)."""

    __slots__ = ("first_alone", "gaps", "indexes", "row_ends", "starts", "steps")

    def __init__(self) -> None:
        self.steps = _Pieces()
        """Each event's arrival minus the one before (the first: minus its span's start)."""
        self.indexes = _Pieces()
        self.gaps = _Pieces()
        """Each event's gap; 0 stands in where a span's first event has none."""
        self.first_alone: list[int] = []
        """Positions (among all events) of first events without a gap."""
        self.starts: list[int] = []
        """Each row's span start."""
        self.row_ends: list[int] = [0]
        """Where each row's events end among all events (row ``r`` is ``row_ends[r:r+2]``)."""

    def __len__(self) -> int:
        return self.steps.size

    def add_packed(
        self,
        start: int,
        first_alone: bool,
        steps: bytes,
        indexes: int | bytes,
        gaps: bytes,
    ) -> None:
        """One row's chunk events as the packer keeps them: ``indexes`` is the first index
        when they count up by one."""
        before = self.steps.size
        count = self.steps.add(steps)
        self.indexes.add(_counting(indexes, count) if type(indexes) is int else indexes)  # type: ignore[arg-type]
        if first_alone:
            self.first_alone.append(before)
            self.gaps.add(_ONE_GAP[bool(gaps) and gaps[0] == _WIDE])
        if gaps:
            self.gaps.add(gaps)
        self._close(start)

    def add_lists(
        self, start: int, stamps: Sequence[int], indexes: Sequence[int], gaps: Sequence[int | None]
    ) -> None:
        """One row's chunk events as plain lists (a gap of ``None`` only first)."""
        before = self.steps.size
        steps = [b - a for a, b in zip([start, *stamps[:-1]], stamps, strict=True)]
        self.steps.add(b"q" + array("q", steps).tobytes())
        self.indexes.add(b"q" + array("q", indexes).tobytes())
        if gaps and gaps[0] is None:
            self.first_alone.append(before)
            gaps = [0, *gaps[1:]]
        self.gaps.add(b"q" + array("q", gaps).tobytes())  # type: ignore[type-var]
        self._close(start)

    def skip(self, start: int) -> None:
        """A row without chunk events of this kind."""
        self._close(start)

    def _close(self, start: int) -> None:
        self.starts.append(start)
        self.row_ends.append(self.steps.size)

    def mark(self) -> tuple[int, ...]:
        """Where the columns stand (for :meth:`truncate`)."""
        return (
            len(self.starts),
            len(self.first_alone),
            len(self.steps.pieces),
            len(self.indexes.pieces),
            len(self.gaps.pieces),
        )

    def truncate(self, mark: tuple[int, ...]) -> None:
        """Back to where :meth:`mark` stood (undoing a failed append)."""
        rows, first_alone, steps, indexes, gaps = mark
        del self.starts[rows:], self.row_ends[rows + 1 :], self.first_alone[first_alone:]
        self.steps.truncate(steps)
        self.indexes.truncate(indexes)
        self.gaps.truncate(gaps)

    def arrays(self) -> dict[str, pa.Array[Any]]:
        """The rows' events as list columns: ``stamps``, ``names``, ``maps`` (of the event
        columns) and ``index``, ``gap``, ``offset`` (the typed chunk columns)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        count = self.steps.size
        row_ends = pa.array(self.row_ends, pa.int32())
        steps = self.steps.int64()
        running = pc.cumulative_sum(steps)  # wraps past 64 bits; the differences stay exact
        before_row = pc.take(pa.concat_arrays([pa.array([0], pa.int64()), running]), row_ends[:-1])
        rows_of = pc.list_parent_indices(pa.ListArray.from_arrays(row_ends, steps))
        offsets = pc.subtract(running, pc.take(before_row, rows_of))
        stamps = pc.add(offsets, pc.take(pa.array(self.starts, pa.int64()), rows_of))
        indexes = self.indexes.int64()
        gaps = self.gaps.int64()
        if self.first_alone:
            alone = bytearray(count)
            for position in self.first_alone:
                alone[position] = 1
            missing = pc.cast(
                pa.Array.from_buffers(pa.uint8(), count, [None, pa.py_buffer(alone)]), pa.bool_()
            )
            gaps = pc.if_else(missing, pa.scalar(None, pa.int64()), gaps)
        else:
            missing = None
        maps = _chunk_maps(indexes, gaps, missing, count)

        def listed(values: pa.Array[Any]) -> pa.Array[Any]:
            return pa.ListArray.from_arrays(row_ends, values)

        return {
            "stamps": listed(pc.cast(stamps, pa.timestamp("ns"))),
            "names": listed(pa.repeat(pa.scalar(sc.CHUNK_EVENT, pa.string()), count)),
            "maps": listed(maps),
            "index": listed(indexes),
            "gap": listed(gaps),
            "offset": listed(offsets),
        }


_COUNTED: list[pa.Array[Any]] = []
"""0, 1, 2, … as one Arrow array, grown as needed (:func:`counted`)."""


def counted(count: int) -> pa.Array[Any]:
    """The integers 0 … ``count`` - 1 as an Arrow ``int64`` array."""
    import pyarrow as pa

    have = _COUNTED[0] if _COUNTED else None
    if have is None or len(have) < count:
        # read once, sliced from the local: another writer thread may replace the shared one
        # meanwhile (with a shorter array it decided on before this one grew it)
        have = pa.array(range(max(count, 2 * len(have) if have is not None else 4096)), pa.int64())
        _COUNTED[:] = [have]
    return have.slice(0, count)


def _chunk_maps(
    indexes: pa.Array[Any], gaps: pa.Array[Any], missing: pa.Array[Any] | None, count: int
) -> pa.Array[Any]:
    """``{index, gap}`` (or ``{index}`` where the gap is missing) per event, in that order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    # entries interleaved: event e's index at 2e, its gap at 2e + 1 (dropped where missing)
    texts = pa.concat_arrays([pc.cast(indexes, pa.string()), pc.cast(gaps, pa.string())])
    slots = counted(2 * count)
    second = pc.bit_wise_and(slots, 1)
    source = pc.add(pc.shift_right(slots, 1), pc.multiply(second, count))
    keys = pc.take(pa.array(CHUNK_PAIR, pa.string()), second)
    per_event: pa.Array[Any] = pa.repeat(pa.scalar(2, pa.int32()), count)
    if missing is not None:
        gap_slot = pc.equal(second, pa.scalar(1, pa.int64()))
        keep = pc.invert(pc.and_(gap_slot, pc.take(missing, pc.shift_right(slots, 1))))
        source = pc.filter(source, keep)
        keys = pc.filter(keys, keep)
        per_event = pc.subtract(per_event, pc.cast(missing, pa.int32()))
    map_offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(per_event)])
    array: pa.Array[Any] = pa.MapArray.from_arrays(  # type: ignore[call-overload]
        map_offsets, keys, pc.take(texts, source)
    )
    return array
