"""Which segments one merge takes: a pure choice over names and sizes.

Small segments (under ``small_bytes``) merge as soon as ``min_segments`` of them wait, oldest
name first, up to ``max_bytes`` and ``max_inputs``: the store's steady stream of one-flush
segments becomes one segment again every merge, and a backlog of thousands is merged a bounded
batch at a time (each merge short, so a reader never waits long for one) — unless one
compaction's merges at that size would leave part of it behind (:func:`batch_size`).
Larger segments sit in size tiers, each ``fanout`` times as wide as
the one below (``[small, small·fanout)``, ``[small·fanout, small·fanout²)``, ...); once
``fanout`` of them share a tier, the oldest ``fanout`` merge into one of the next tier. In the
top tier, whose ``fanout`` segments would pass ``max_bytes`` together (``[64, 256) MiB`` by
default), two are enough: they merge into one too large to merge again. So a
store that is written for months holds fewer than ``min_segments`` small segments plus fewer
than ``fanout`` per tier (one in the top tier), besides the segments too large to merge again
(over half ``max_bytes``, one for every ~``max_bytes / 2``–``max_bytes`` of data) after each
compaction, whatever the write rate its merges keep up with (a merge reads and writes about
200 small segments a second here: writers sealing faster than that together outpace any
plan). And since
``small_bytes`` is small, a merge of small segments rewrites little of what was merged before:
history goes up the tiers, each span rewritten about once per tier, so a merge costs the same
in a store's first hour as in its sixth month. :meth:`SegmentStore.compact` asks again after each
merge, so a tier that filled up is merged in the same call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Candidate:
    """A segment compaction may take: its name (names sort oldest first) and size in bytes."""

    name: str
    size: int


def tier(size: int, *, small_bytes: int, fanout: int) -> int:
    """0 for a small segment, else 1 + how many times ``fanout`` fits into its size over
    ``small_bytes``."""
    if size < small_bytes:
        return 0
    level, bound = 1, small_bytes * fanout
    while size >= bound:
        level, bound = level + 1, bound * fanout
    return level


def choose(
    candidates: Sequence[Candidate],
    *,
    small_bytes: int,
    min_segments: int,
    max_bytes: int,
    fanout: int,
    max_inputs: int,
) -> list[Candidate]:
    """The segments of the next merge (oldest first, at most ``max_inputs``), or ``[]`` when
    none is due: small ones first, then the lowest tier that is full."""
    if max_inputs < 2:
        raise ValueError(f"a merge takes at least two segments, not max_inputs={max_inputs}")
    ordered = sorted(candidates, key=lambda candidate: candidate.name)
    by_tier: dict[int, list[Candidate]] = {}
    for candidate in ordered:
        if 2 * candidate.size > max_bytes:
            continue  # merged with anything of its tier it would pass the limit
        level = tier(candidate.size, small_bytes=small_bytes, fanout=fanout)
        by_tier.setdefault(level, []).append(candidate)
    for level in sorted(by_tier):
        chosen = _within(by_tier[level], max_bytes)[:max_inputs]
        due = _due_at(level, small_bytes, min_segments, max_bytes, fanout)
        if len(chosen) >= min(due, max_inputs):  # a full batch is due, whatever the minimum
            return chosen if level == 0 else chosen[:fanout]
    return []


def batch_size(small_waiting: int, *, max_inputs: int, max_merges: int | None) -> int:
    """How many small segments one merge of a compaction may take: ``max_inputs``, or more
    when ``max_merges`` such merges would leave part of ``small_waiting`` behind — a writer
    that seals faster than one compaction merges would otherwise leave more every time, and
    the store would grow without bound (each merge is longer then, and a reader waits for
    one). ``None``: the compaction merges until nothing is due, at ``max_inputs``."""
    if max_merges is None or max_merges <= 0:
        return max_inputs
    return max(max_inputs, -(-small_waiting // max_merges))


def _due_at(level: int, small_bytes: int, min_segments: int, max_bytes: int, fanout: int) -> int:
    """How many segments of tier ``level`` make a merge: ``min_segments`` small ones,
    ``fanout`` of a tier, but two of the top tier, where ``fanout`` segments (each at least
    the tier's lower bound) never fit in ``max_bytes`` and would wait for ever."""
    if level == 0:
        return min_segments
    if small_bytes * fanout**level >= max_bytes:
        return 2
    return fanout


def _within(candidates: Sequence[Candidate], max_bytes: int) -> list[Candidate]:
    chosen: list[Candidate] = []
    total = 0
    for candidate in candidates:
        if total + candidate.size > max_bytes:
            break
        chosen.append(candidate)
        total += candidate.size
    return chosen
