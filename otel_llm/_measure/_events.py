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


def plan_chunk_events(
    arrivals_ns: Sequence[int],
    gaps_ns: Sequence[int],
    *,
    floor_ms: int,
    budget: int,
    start_ns: int = 0,
) -> ChunkEventPlan:
    """Choose the chunk events for one attempt (see the module docstring).

    ``arrivals_ns[i]`` is chunk *i*'s arrival, ``gaps_ns[i - 1]`` the silence before it and
    ``start_ns`` the attempt start. At most ``budget`` events are chosen.
    """
    if budget < 3:
        raise ValueError("the chunk event budget must allow at least 3 events")
    n = len(arrivals_ns)
    if n == 0:
        return ChunkEventPlan((), floor_ms)
    chosen = {0, n - 1}
    if n >= 2:
        chosen.add(gaps_ns.index(max(gaps_ns)) + 1)
    room = budget - len(chosen)
    floor_ns = floor_ms * NS_PER_MS
    candidates = [
        index
        for index, gap in enumerate(gaps_ns, start=1)
        if gap > floor_ns and index not in chosen
    ]
    if len(candidates) > room:
        candidates.sort(key=lambda index: gaps_ns[index - 1], reverse=True)
        first_left_out = gaps_ns[candidates[room] - 1]
        floor_ms = -(-first_left_out // NS_PER_MS)  # ceil: every gap above it fits
        floor_ns = floor_ms * NS_PER_MS
        candidates = [index for index in candidates if gaps_ns[index - 1] > floor_ns]
    chosen.update(candidates)
    events = tuple(
        ChunkEvent(index, arrivals_ns[index] - start_ns, gaps_ns[index - 1] if index else None)
        for index in sorted(chosen)
    )
    return ChunkEventPlan(events, floor_ms)


def event_attributes(event: ChunkEvent) -> dict[str, int]:
    """Span-event attributes of one chunk event."""
    if event.gap_ns is None:
        return {sc.CHUNK_INDEX: event.index}
    return {sc.CHUNK_INDEX: event.index, sc.CHUNK_GAP_NS: event.gap_ns}


@dataclass(frozen=True, slots=True)
class RecordedChunks:
    """The chunk events of a finished span, as read back, with a verdict on their completeness."""

    timeline: Timeline | None
    status: str


def read_chunk_events(
    attributes: Mapping[str, Any],
    events: Sequence[tuple[str, int, Mapping[str, Any]]],
    *,
    start_ns: int,
    end_ns: int,
    dropped_events: int,
) -> RecordedChunks:
    """Rebuild an attempt's :class:`Timeline` from its span, or say why it cannot be trusted.

    ``events`` are ``(name, timestamp_ns, attributes)`` triples in span order.
    """
    wall_ns = end_ns - start_ns
    if not attributes.get(sc.GEN_AI_REQUEST_STREAM, False):
        return RecordedChunks(Timeline(wall_ns=wall_ns, streamed=False), sc.METERING_NOT_STREAMED)
    total = attributes.get(sc.CHUNK_COUNT_RECORDED)
    expected = attributes.get(sc.CHUNK_EVENTS_RECORDED)
    floor_ms = attributes.get(sc.CHUNK_EVENTS_FLOOR_MS, 0)
    if not isinstance(total, int) or not isinstance(expected, int):
        return RecordedChunks(None, sc.METERING_INCOMPLETE_MISSING)
    chunk_events = [(ts, attrs) for name, ts, attrs in events if name == sc.CHUNK_EVENT]
    if dropped_events or len(chunk_events) != expected:
        return RecordedChunks(None, sc.METERING_INCOMPLETE_DROPPED)
    if total == 0:
        return RecordedChunks(Timeline(wall_ns=wall_ns, streamed=True), sc.METERING_EXACT)
    by_index: dict[int, tuple[int, int | None]] = {}
    for ts, attrs in chunk_events:
        index = attrs.get(sc.CHUNK_INDEX)
        gap = attrs.get(sc.CHUNK_GAP_NS)
        if not isinstance(index, int) or index in by_index or (index > 0) != isinstance(gap, int):
            return RecordedChunks(None, sc.METERING_INCOMPLETE_MISSING)
        by_index[index] = (ts, gap)
    if 0 not in by_index or total - 1 not in by_index or max(by_index) >= total:
        return RecordedChunks(None, sc.METERING_INCOMPLETE_MISSING)
    gaps = [gap for index, (_, gap) in sorted(by_index.items()) if gap is not None]
    known = None
    stall_ns, stall_count = attributes.get(sc.CHUNK_STALL_NS), attributes.get(sc.CHUNK_STALL_COUNT)
    threshold = attributes.get(sc.STALL_THRESHOLD_MS)
    if isinstance(stall_ns, int) and isinstance(stall_count, int) and isinstance(threshold, int):
        known = (threshold, stall_ns, stall_count)
    timeline = Timeline(
        wall_ns=wall_ns,
        streamed=True,
        chunk_count=total,
        ttft_ns=by_index[0][0] - start_ns,
        gaps_ns=gaps,
        max_gap_ns=max(gaps) if gaps else None,
        complete_above_ms=int(floor_ms),
        known_stall=known,
    )
    return RecordedChunks(timeline, sc.METERING_EXACT)
