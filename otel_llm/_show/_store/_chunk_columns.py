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
from typing import TYPE_CHECKING, Any, Final

from otel_llm import _semconv as sc
from otel_llm._show._store._rows import CHUNK_PAIR

if TYPE_CHECKING:
    import pyarrow as pa

_EIGHT: Final = ord("q")


def _extend(target: array[int], packed: bytes) -> None:
    """Append integers packed as ``_records._ints`` packs them: typecode ``i`` or ``q`` first."""
    if packed[0] == _EIGHT:
        target.frombytes(packed[1:])
    else:
        target.extend(memoryview(packed)[1:].cast("i"))


class ChunkColumns:
    """Chunk events of appended rows as flat integer buffers (see the module docstring)."""

    __slots__ = ("first_alone", "gaps", "indexes", "row_ends", "starts", "steps")

    def __init__(self) -> None:
        self.steps: array[int] = array("q")
        """Each event's arrival minus the one before (the first: minus its span's start)."""
        self.indexes: array[int] = array("q")
        self.gaps: array[int] = array("q")
        """Each event's gap; 0 stands in where a span's first event has none."""
        self.first_alone: list[int] = []
        """Positions (in the event buffers) of first events without a gap."""
        self.starts: list[int] = []
        """Each row's span start."""
        self.row_ends: list[int] = [0]
        """Where each row's events end in the buffers (row ``r`` is ``row_ends[r:r+2]``)."""

    def __len__(self) -> int:
        return len(self.steps)

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
        before = len(self.steps)
        _extend(self.steps, steps)
        count = len(self.steps) - before
        if type(indexes) is int:
            self.indexes.extend(range(indexes, indexes + count))
        else:
            _extend(self.indexes, indexes)  # type: ignore[arg-type]
        if first_alone:
            self.first_alone.append(before)
            self.gaps.append(0)
        if gaps:
            _extend(self.gaps, gaps)
        self._close(start)

    def add_lists(
        self, start: int, stamps: Sequence[int], indexes: Sequence[int], gaps: Sequence[int | None]
    ) -> None:
        """One row's chunk events as plain lists (a gap of ``None`` only first)."""
        before = len(self.steps)
        previous = start
        for stamp in stamps:
            self.steps.append(stamp - previous)
            previous = stamp
        self.indexes.extend(indexes)
        if gaps and gaps[0] is None:
            self.first_alone.append(before)
            self.gaps.append(0)
            self.gaps.extend(gaps[1:])  # type: ignore[arg-type]
        else:
            self.gaps.extend(gaps)  # type: ignore[arg-type]
        self._close(start)

    def skip(self, start: int) -> None:
        """A row without chunk events of this kind."""
        self._close(start)

    def _close(self, start: int) -> None:
        self.starts.append(start)
        self.row_ends.append(len(self.steps))

    def truncate(self, rows: int, events: int, first_alone: int) -> None:
        """Back to ``rows`` rows holding ``events`` events (undoing a failed append)."""
        del self.steps[events:], self.indexes[events:], self.gaps[events:]
        del self.first_alone[first_alone:], self.starts[rows:], self.row_ends[rows + 1 :]

    def arrays(self) -> dict[str, pa.Array[Any]]:
        """The rows' events as list columns: ``stamps``, ``names``, ``maps`` (of the event
        columns) and ``index``, ``gap``, ``offset`` (the typed chunk columns)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        count = len(self.steps)
        row_ends = pa.array(self.row_ends, pa.int32())
        steps = _int64(self.steps)
        running = pc.cumulative_sum(steps)  # wraps past 64 bits; the differences stay exact
        before_row = pc.take(pa.concat_arrays([pa.array([0], pa.int64()), running]), row_ends[:-1])
        rows_of = pc.list_parent_indices(pa.ListArray.from_arrays(row_ends, steps))
        offsets = pc.subtract(running, pc.take(before_row, rows_of))
        stamps = pc.add(offsets, pc.take(pa.array(self.starts, pa.int64()), rows_of))
        indexes = _int64(self.indexes)
        gaps = _int64(self.gaps)
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


def _int64(values: array[int]) -> pa.Array[Any]:
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def _chunk_maps(
    indexes: pa.Array[Any], gaps: pa.Array[Any], missing: pa.Array[Any] | None, count: int
) -> pa.Array[Any]:
    """``{index, gap}`` (or ``{index}`` where the gap is missing) per event, in that order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    # entries interleaved: event e's index at 2e, its gap at 2e + 1 (dropped where missing)
    texts = pa.concat_arrays([pc.cast(indexes, pa.string()), pc.cast(gaps, pa.string())])
    slots = pa.array(range(2 * count), pa.int64())
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
