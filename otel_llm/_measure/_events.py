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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, islice, repeat
from operator import eq, itemgetter, lt
from types import MappingProxyType
from typing import Any

from otel_llm import _semconv as sc
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
        timestamps.__getitem__,
        start_ns=start_ns,
        end_ns=end_ns,
        dropped_events=dropped_events,
    )


_INDEX_OF = itemgetter(sc.CHUNK_INDEX)
_GAP_OF = itemgetter(sc.CHUNK_GAP_NS)


def read_chunk_columns(
    attributes: Mapping[str, Any],
    names: Sequence[str],
    event_attributes: Sequence[Mapping[str, Any] | None],
    timestamp_at: Callable[[int], int],
    *,
    start_ns: int,
    end_ns: int,
    dropped_events: int,
) -> RecordedChunks:
    """:func:`read_chunk_events` of a span's events given as columns: their names and
    attribute mappings in span order, and ``timestamp_at(position)`` for the one timestamp
    needed (the first chunk's; the gaps are attributes).

    A span may carry 120 chunk events, and every span is read back once: each check runs over
    a whole column in C (``map``, ``set``, ``compress``) rather than once per event in Python.
    """
    wall_ns = end_ns - start_ns
    if not attributes.get(sc.GEN_AI_REQUEST_STREAM, False):
        return RecordedChunks(Timeline(wall_ns=wall_ns, streamed=False), sc.METERING_NOT_STREAMED)
    total = attributes.get(sc.CHUNK_COUNT_RECORDED)
    expected = attributes.get(sc.CHUNK_EVENTS_RECORDED)
    floor_ms = attributes.get(sc.CHUNK_EVENTS_FLOOR_MS, 0)
    if (
        not isinstance(total, int)
        or not isinstance(expected, int)
        or not isinstance(floor_ms, int)
        or any(isinstance(count, bool) for count in (total, expected, floor_ms))
    ):  # not as otel-llm writes them: nothing to trust
        return RecordedChunks(None, sc.METERING_INCOMPLETE_MISSING)
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
    ordered = _gaps_in_order(mappings, total)
    read = (ordered, 0) if ordered is not None else _gaps_by_index(mappings, total)
    if read is None:
        return RecordedChunks(None, sc.METERING_INCOMPLETE_MISSING)
    gaps, first = read
    known = None
    stall_ns, stall_count = attributes.get(sc.CHUNK_STALL_NS), attributes.get(sc.CHUNK_STALL_COUNT)
    threshold = attributes.get(sc.STALL_THRESHOLD_MS)
    if isinstance(stall_ns, int) and isinstance(stall_count, int) and isinstance(threshold, int):
        known = (threshold, stall_ns, stall_count)
    timeline = Timeline(
        wall_ns=wall_ns,
        streamed=True,
        chunk_count=total,
        ttft_ns=timestamp_at(positions[first]) - start_ns,
        gaps_ns=gaps,
        max_gap_ns=max(gaps) if gaps else None,
        complete_above_ms=floor_ms,
        known_stall=known,
    )
    return RecordedChunks(timeline, sc.METERING_EXACT)


def _gaps_in_order(mappings: Sequence[Mapping[str, Any]], total: int) -> list[Any] | None:
    """The gaps of chunk events in the shape they are written in, checked in a few passes over
    the columns: indices ascending from 0 to ``total - 1``, chunk 0 without a gap, every later
    one with an integer gap. ``None`` for any other shape (:func:`_gaps_by_index` reads it)."""
    if not mappings:
        return None
    try:
        indices = list(map(_INDEX_OF, mappings))
        gaps = list(map(_GAP_OF, mappings[1:]))
    except KeyError:
        return None
    if (
        indices[0] == 0
        and indices[-1] == total - 1
        and sc.CHUNK_GAP_NS not in mappings[0]
        and all(map(isinstance, indices, repeat(int)))
        and all(map(lt, indices, islice(indices, 1, None)))
        and all(map(isinstance, gaps, repeat(int)))
    ):
        return gaps
    return None


def _gaps_by_index(
    mappings: Sequence[Mapping[str, Any]], total: int
) -> tuple[list[Any], int] | None:
    """The gaps of chunk events in any order, ordered by chunk index, and the position of chunk
    0's event; ``None`` when the events do not describe ``total`` chunks (a missing, repeated or
    out-of-range index, or a gap missing or where none belongs)."""
    by_index: dict[int, Any] = {}
    for attrs in mappings:
        index = attrs.get(sc.CHUNK_INDEX)
        gap = attrs.get(sc.CHUNK_GAP_NS)
        if not isinstance(index, int) or index in by_index or (index > 0) != isinstance(gap, int):
            return None
        by_index[index] = gap
    if 0 not in by_index or total - 1 not in by_index or max(by_index) >= total:
        return None
    gaps = [gap for _, gap in sorted(by_index.items()) if gap is not None]
    return gaps, list(by_index).index(0)
