"""Chunk-arrival span events: which to record, and how to read them back exactly.

A span keeps 128 events by default and drops the *oldest*; a 100,000-chunk stream cannot have
one event per chunk. So an attempt records events for the first chunk, the last chunk, the
longest gap, and every gap strictly longer than a recording floor — each event carrying its
chunk index and the gap before it. Stall figures at any threshold at or above the floor follow
exactly from those events. When a stream has more long gaps than the event budget allows, the
floor is raised (and written on the span) so that the rule "every gap above the floor is
recorded" stays true. The span also records how many chunk events were added, so a reader can
tell when the pipeline dropped some.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, islice, repeat
from operator import eq, itemgetter, le, lt, sub
from types import MappingProxyType
from typing import Any, Final

from otel_llm import _semconv as sc
from otel_llm._measure._span_events import ChunkRun
from otel_llm._measure._stalls import NS_PER_MS, Timeline


@dataclass(frozen=True, slots=True)
class ChunkEvent:
    """One recorded chunk arrival: its index, offset from the attempt start, preceding gap."""

    index: int
    offset_ns: int
    gap_ns: int | None


@dataclass(frozen=True, slots=True)
class ChunkEventPlan:
    """The events to add to an attempt span, and the floor above which every gap is among them."""

    events: tuple[ChunkEvent, ...]
    floor_ms: int


def choose_event_indices(
    count: int, gaps_ns: Sequence[int], *, floor_ms: int, budget: int
) -> tuple[list[int], int]:
    """The chunk indices to record, ascending, and the floor above which every gap is among
    them (see the module docstring) — the rule itself, for ``count`` chunks whose gaps are
    ``gaps_ns`` (``gaps_ns[i - 1]`` the silence before chunk *i*). At most ``budget`` indices.

    The scan over every gap runs in C (``compress`` over a comparison ``map``): it is paid once
    per chunk of every stream, and the per-index work once per recorded event.
    """
    if budget < 3:
        raise ValueError("the chunk event budget must allow at least 3 events")
    if count == 0:
        return [], floor_ms
    chosen = {0, count - 1}
    floor_ns = floor_ms * NS_PER_MS
    longest = max(gaps_ns) if count >= 2 else 0
    if count >= 2:
        chosen.add(gaps_ns.index(longest) + 1)
    above = (
        list(compress(range(1, count), map(floor_ns.__lt__, gaps_ns)))
        if longest > floor_ns
        else []  # no gap above the floor: the scan is not needed
    )
    room = budget - len(chosen)
    if len(above) - len(chosen.intersection(above)) > room:
        candidates = [index for index in above if index not in chosen]
        candidates.sort(key=lambda index: gaps_ns[index - 1], reverse=True)
        first_left_out = gaps_ns[candidates[room] - 1]
        floor_ms = -(-first_left_out // NS_PER_MS)  # ceil: every gap above it fits
        floor_ns = floor_ms * NS_PER_MS
        above = [index for index in candidates if gaps_ns[index - 1] > floor_ns]
    return sorted([*above, *chosen.difference(above)]), floor_ms  # mostly in order already


def plan_chunk_events(
    arrivals_ns: Sequence[int],
    gaps_ns: Sequence[int],
    *,
    floor_ms: int,
    budget: int,
    start_ns: int = 0,
) -> ChunkEventPlan:
    """Choose the chunk events for one attempt (:func:`choose_event_indices`), as events.

    ``arrivals_ns[i]`` is chunk *i*'s arrival, ``gaps_ns[i - 1]`` the silence before it and
    ``start_ns`` the attempt start. At most ``budget`` events are chosen.
    """
    indices, floor_ms = choose_event_indices(
        len(arrivals_ns), gaps_ns, floor_ms=floor_ms, budget=budget
    )
    events = tuple(
        ChunkEvent(index, arrivals_ns[index] - start_ns, gaps_ns[index - 1] if index else None)
        for index in indices
    )
    return ChunkEventPlan(events, floor_ms)


def event_attributes(event: ChunkEvent) -> dict[str, int]:
    """Span-event attributes of one chunk event (:func:`chunk_event_attributes` for many)."""
    if event.gap_ns is None:
        return {sc.CHUNK_INDEX: event.index}
    return {sc.CHUNK_INDEX: event.index, sc.CHUNK_GAP_NS: event.gap_ns}


CHUNK_EVENT_ATTRIBUTES = 2
"""The most attributes a chunk event has: its index and the gap before it."""


def chunk_event_attributes(indices: Sequence[int], gaps_ns: Sequence[int]) -> list[dict[str, int]]:
    """Span-event attributes of the chunk events at ``indices`` (ascending; chunk 0 has no
    gap before it): :func:`event_attributes` of each, in one pass instead of a call each."""
    if not indices:
        return []
    first = [{sc.CHUNK_INDEX: 0}] if indices[0] == 0 else []
    rest = indices[1:] if first else indices
    gap_key, index_key = sc.CHUNK_GAP_NS, sc.CHUNK_INDEX
    return first + [{index_key: index, gap_key: gaps_ns[index - 1]} for index in rest]


_NO_ATTRIBUTES: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class RecordedChunks:
    """The chunk events of a finished span, as read back, with a verdict on their completeness."""

    timeline: Timeline | None
    status: str


def read_chunk_events(
    attributes: Mapping[str, Any],
    events: Sequence[tuple[str, int, Mapping[str, Any] | None]],
    *,
    start_ns: int,
    end_ns: int,
    dropped_events: int,
) -> RecordedChunks:
    """Rebuild an attempt's :class:`Timeline` from its span, or say why it cannot be trusted.

    ``events`` are ``(name, timestamp_ns, attributes)`` triples in span order
    (:func:`read_chunk_columns` takes them as columns).
    """
    names, timestamps, event_attributes = zip(*events, strict=True) if events else ((), (), ())
    return read_chunk_columns(
        attributes,
        names,
        event_attributes,
        timestamps,
        start_ns=start_ns,
        end_ns=end_ns,
        dropped_events=dropped_events,
    )


_INDEX_OF = itemgetter(sc.CHUNK_INDEX)
_GAP_OF = itemgetter(sc.CHUNK_GAP_NS)


_INT: Final = frozenset({int})


def _int_of(value: object) -> int | None:
    """``value`` when it is an ``int`` and not a ``bool`` (as otel-llm writes its counts)."""
    return value if type(value) is int else None


def _plain_ints(*values: object) -> bool:
    """Every value an ``int`` and none a ``bool`` (as otel-llm writes its counts, indices,
    gaps and times), checked in C."""
    return set(map(type, values)) <= _INT


def read_chunk_columns(
    attributes: Mapping[str, Any],
    names: Sequence[str],
    event_attributes: Sequence[Mapping[str, Any] | None],
    timestamps: Sequence[int],
    *,
    start_ns: int,
    end_ns: int,
    dropped_events: int,
) -> RecordedChunks:
    """:func:`read_chunk_events` of a span's events given as columns: their names, attribute
    mappings and timestamps, in span order.

    A span may carry 120 chunk events, and every span is read back once: each check runs over
    a whole column in C (``map``, ``set``, ``compress``) rather than once per event in Python.
    The times are checked too (:data:`~otel_llm._semconv.METERING_INCOMPLETE_TIMING`): a span
    otel-llm did not write may carry any.
    """
    counts = _bookkeeping(attributes, start_ns, end_ns)
    if isinstance(counts, RecordedChunks):
        return counts
    wall_ns, total, expected, floor_ms = counts
    positions: Sequence[int] = range(len(names))
    if names.count(sc.CHUNK_EVENT) != len(names):  # other events too: keep the chunk events
        keep = list(map(eq, names, repeat(sc.CHUNK_EVENT)))
        positions = list(compress(positions, keep))
        event_attributes = list(compress(event_attributes, keep))
    if dropped_events or len(positions) != expected:
        return RecordedChunks(None, sc.METERING_INCOMPLETE_DROPPED)
    if total == 0:
        return RecordedChunks(Timeline(wall_ns=wall_ns, streamed=True), sc.METERING_EXACT)
    mappings: Sequence[Mapping[str, Any]] = (
        event_attributes  # type: ignore[assignment]  # all() just said: none is None or empty
        if all(event_attributes)
        else [attrs or _NO_ATTRIBUTES for attrs in event_attributes]
    )
    gaps = _gaps_in_order(mappings, total)
    if gaps is not None:
        stamps = list(map(timestamps.__getitem__, positions))
    else:
        read = _gaps_by_index(mappings, total)
        if read is None:
            return RecordedChunks(None, sc.METERING_INCOMPLETE_MISSING)
        gaps, order = read
        stamps = [timestamps[positions[at]] for at in order]
    return _checked(attributes, wall_ns, total, floor_ms, stamps, gaps, start_ns, end_ns)


def read_chunk_run(
    attributes: Mapping[str, Any], run: ChunkRun, *, start_ns: int, end_ns: int
) -> RecordedChunks:
    """:func:`read_chunk_columns` of a span whose events are exactly one run of chunk events
    otel-llm added, none dropped (:func:`~otel_llm._measure._span_events.chunk_run` found it):
    the run holds its events' times, indices and gaps as they were made, so no event is read —
    the same verdict and timeline at a fraction of the cost."""
    counts = _bookkeeping(attributes, start_ns, end_ns)
    if isinstance(counts, RecordedChunks):
        return counts
    wall_ns, total, expected, floor_ms = counts
    stamps, indexes = run.stamps, run.indexes
    if len(stamps) != expected:
        return RecordedChunks(None, sc.METERING_INCOMPLETE_DROPPED)
    if total == 0:
        return RecordedChunks(Timeline(wall_ns=wall_ns, streamed=True), sc.METERING_EXACT)
    if (
        not run.first_alone
        or indexes[-1] != total - 1
        or not all(map(lt, indexes, islice(indexes, 1, None)))
    ):
        return RecordedChunks(None, sc.METERING_INCOMPLETE_MISSING)
    gaps = list(run.gaps)
    return _checked(attributes, wall_ns, total, floor_ms, list(stamps), gaps, start_ns, end_ns)


def _bookkeeping(
    attributes: Mapping[str, Any], start_ns: int, end_ns: int
) -> RecordedChunks | tuple[int, int, int, int]:
    """The verdict on a span that has no chunk events to read (ended before it started, not
    streamed, its chunk bookkeeping not as otel-llm writes it), or its wall time, chunk count,
    chunk events written and event floor."""
    wall_ns = end_ns - start_ns
    if wall_ns < 0:
        return RecordedChunks(None, sc.METERING_INCOMPLETE_TIMING)
    if not attributes.get(sc.GEN_AI_REQUEST_STREAM, False):
        return RecordedChunks(Timeline(wall_ns=wall_ns, streamed=False), sc.METERING_NOT_STREAMED)
    total = _int_of(attributes.get(sc.CHUNK_COUNT_RECORDED))
    expected = _int_of(attributes.get(sc.CHUNK_EVENTS_RECORDED))
    floor_ms = _int_of(attributes.get(sc.CHUNK_EVENTS_FLOOR_MS, 0))
    if total is None or expected is None or floor_ms is None or min(total, expected, floor_ms) < 0:
        return RecordedChunks(None, sc.METERING_INCOMPLETE_MISSING)  # not as otel-llm writes
    return wall_ns, total, expected, floor_ms


def _checked(
    attributes: Mapping[str, Any],
    wall_ns: int,
    total: int,
    floor_ms: int,
    stamps: list[int],
    gaps: list[int],
    start_ns: int,
    end_ns: int,
) -> RecordedChunks:
    """The timeline of chunk events at ``stamps`` (in chunk order, the first chunk's first)
    with ``gaps`` before all but the first, once their times are found possible."""
    if not _times_possible(stamps, gaps, start_ns, end_ns):
        return RecordedChunks(None, sc.METERING_INCOMPLETE_TIMING)
    known = None
    stall_ns = _int_of(attributes.get(sc.CHUNK_STALL_NS))
    stall_count = _int_of(attributes.get(sc.CHUNK_STALL_COUNT))
    threshold = _int_of(attributes.get(sc.STALL_THRESHOLD_MS))
    if stall_ns is not None and stall_count is not None and threshold is not None and threshold > 0:
        if stall_count >= total or not _stall_possible(
            stall_ns, stall_count, threshold, gaps, stamps[-1] - stamps[0]
        ):
            return RecordedChunks(None, sc.METERING_INCOMPLETE_TIMING)
        known = (threshold, stall_ns, stall_count)
    timeline = Timeline(
        wall_ns=wall_ns,
        streamed=True,
        chunk_count=total,
        ttft_ns=stamps[0] - start_ns,
        gaps_ns=gaps,
        max_gap_ns=max(gaps) if gaps else None,
        complete_above_ms=floor_ms,
        known_stall=known,
    )
    return RecordedChunks(timeline, sc.METERING_EXACT)


def _times_possible(stamps: Sequence[int], gaps: Sequence[int], start_ns: int, end_ns: int) -> bool:
    """Whether chunk events at ``stamps`` (in chunk order) with the ``gaps`` before all but the
    first can be true of a span from ``start_ns`` to ``end_ns``: every event within the span,
    no gap negative, and none longer than the time since the event before it (chunks between
    two events, not recorded, only add to that time; a wrapped stream's gaps leave out the
    application's holds, so a gap may be shorter than that time, never longer)."""
    if not _plain_ints(*stamps) or stamps[0] < start_ns or stamps[-1] > end_ns:
        return False
    return not gaps or (min(gaps) >= 0 and all(map(le, gaps, map(sub, stamps[1:], stamps))))


def _stall_possible(
    stall_ns: int, count: int, threshold_ms: int, gaps: Sequence[int], span_ns: int
) -> bool:
    """Whether an exact stall sum and count at ``threshold_ms`` (recorded when chunk events were
    thinned above it) agree with the events: every stall is a gap longer than the threshold,
    the recorded ones among them, and all gaps together last no longer than ``span_ns``, from
    the first chunk event to the last."""
    limit = threshold_ms * NS_PER_MS
    seen = [gap for gap in gaps if gap > limit]
    return (
        len(seen) <= count
        and sum(seen) <= stall_ns <= span_ns
        and count * (limit + 1) <= stall_ns
        and (count == 0) == (stall_ns == 0)  # a stall lasts, and only a stall counts
    )


def _gaps_in_order(mappings: Sequence[Mapping[str, Any]], total: int) -> list[Any] | None:
    """The gaps of chunk events in the shape they are written in, checked in a few passes over
    the columns: indices ascending from 0 to ``total - 1``, chunk 0 without a gap, every later
    one with an integer gap. ``None`` for any other shape (:func:`_gaps_by_index` reads it)."""
    if not mappings:
        return None
    try:
        indices = list(map(_INDEX_OF, mappings))
        gaps = list(map(_GAP_OF, mappings[1:]))
    except (KeyError, TypeError):  # a key missing, or attributes that are no mapping
        return None
    if (
        indices[0] == 0
        and indices[-1] == total - 1
        and sc.CHUNK_GAP_NS not in mappings[0]
        and _plain_ints(*indices, *gaps)
        and all(map(lt, indices, islice(indices, 1, None)))
    ):
        return gaps
    return None


def _gaps_by_index(mappings: Sequence[object], total: int) -> tuple[list[Any], list[int]] | None:
    """The gaps of chunk events in any order, ordered by chunk index, and the events' positions
    in that order; ``None`` when the events do not describe ``total`` chunks (a missing,
    repeated or out-of-range index, or a gap missing or where none belongs)."""
    by_index: dict[int, tuple[int, Any]] = {}
    for at, attrs in enumerate(mappings):
        if not isinstance(attrs, Mapping):  # a span built by hand may carry anything
            return None
        index = attrs.get(sc.CHUNK_INDEX)
        gap = attrs.get(sc.CHUNK_GAP_NS)
        if type(index) is not int or index < 0 or index in by_index:
            return None
        if (type(gap) is not int) if index > 0 else (gap is not None):  # chunk 0 has no gap
            return None
        by_index[index] = (at, gap)
    if 0 not in by_index or total - 1 not in by_index or max(by_index) >= total:
        return None
    ordered = sorted(by_index.items())
    gaps = [gap for _, (_, gap) in ordered if gap is not None]
    return gaps, [at for _, (at, _) in ordered]
