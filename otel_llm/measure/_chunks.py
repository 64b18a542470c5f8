"""The metering primitive: which streamed events are incremental chunks, and when they arrived.

SPEC §1: an incremental chunk carries generated output — non-empty ``delta.content``,
``delta.reasoning_content`` (or ``reasoning``), or tool-call deltas. Role-only or empty deltas,
usage-only frames, SSE comments and ``[DONE]`` are not chunks.

SPEC M1: the hot path only records a monotonic timestamp and sets a flag.
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Mapping
from operator import sub
from typing import Any

from otel_llm.measure import _clock
from otel_llm.measure._stalls import Timeline


def delta_has_output(delta: object) -> bool:
    """True when one choice's ``delta`` carries content, reasoning or tool-call deltas."""
    if not isinstance(delta, Mapping):
        return False
    return bool(
        delta.get("content")
        or delta.get("reasoning_content")
        or delta.get("reasoning")
        or delta.get("tool_calls")
    )


def is_incremental(chunk: Mapping[str, Any]) -> bool:
    """True when an OpenAI-style ``chat.completion.chunk`` carries generated output."""
    return any(
        isinstance(choice, Mapping) and delta_has_output(choice.get("delta"))
        for choice in chunk.get("choices") or ()
    )


class ChunkClock:
    """Arrival times (``_clock.now_ns``, monotonic) of one attempt's incremental chunks.

    ``mark()`` is the whole per-chunk cost: one timestamp appended, one flag set. A consumer-aware
    caller (a wrapped stream, SPEC M8) passes the time it started waiting for the chunk, so time
    the application held the stream between reads is not counted as provider silence.
    """

    __slots__ = ("_arrivals", "_signal", "_waits", "start_ns")

    def __init__(
        self,
        start_ns: int | None = None,
        signal: asyncio.Event | None = None,
        *,
        consumer_aware: bool = False,
    ) -> None:
        self.start_ns = _clock.now_ns() if start_ns is None else start_ns
        self._arrivals = array("q")
        self._waits: array[int] | None = array("q") if consumer_aware else None
        self._signal = signal

    def mark(self) -> None:
        """Record the arrival of an incremental chunk now."""
        self._arrivals.append(_clock.now_ns())
        if self._signal is not None:
            self._signal.set()

    def mark_at(self, arrival_ns: int) -> None:
        """Record an arrival at a known ``time.monotonic_ns()`` value (replays and tests)."""
        self._arrivals.append(arrival_ns)
        if self._signal is not None:
            self._signal.set()

    def mark_after_wait(self, wait_start_ns: int, arrival_ns: int) -> None:
        """Record an arrival at ``arrival_ns`` the consumer started waiting for at
        ``wait_start_ns`` (both ``time.monotonic_ns()`` values).

        Only for clocks built with ``consumer_aware=True``.
        """
        if self._waits is None:
            raise RuntimeError("mark_after_wait() needs a ChunkClock(consumer_aware=True)")
        self._waits.append(wait_start_ns)
        self._arrivals.append(arrival_ns)
        if self._signal is not None:
            self._signal.set()

    @property
    def count(self) -> int:
        """Incremental chunks seen so far."""
        return len(self._arrivals)

    @property
    def arrivals_ns(self) -> array[int]:
        """The raw arrival timestamps (monotonic nanoseconds)."""
        return self._arrivals

    def gaps_ns(self) -> list[int]:
        """Provider-side silence before each chunk after the first, in nanoseconds."""
        arrivals = self._arrivals
        if self._waits is None:
            return list(map(sub, arrivals[1:], arrivals))
        # a gap starts at the later of the previous arrival and the consumer's next read
        starts = map(max, arrivals, self._waits[1:])
        return list(map(sub, arrivals[1:], starts))

    def timeline(
        self, end_ns: int, *, streamed: bool = True, gaps_ns: list[int] | None = None
    ) -> Timeline:
        """Everything metering needs, from the attempt start to ``end_ns``.

        ``gaps_ns`` may pass a :meth:`gaps_ns` result the caller already computed.
        """
        wall_ns = end_ns - self.start_ns
        if not streamed:
            return Timeline(wall_ns=wall_ns, streamed=False)
        ttft_ns = self._arrivals[0] - self.start_ns if self._arrivals else None
        gaps = self.gaps_ns() if gaps_ns is None else gaps_ns
        return Timeline.from_gaps(wall_ns=wall_ns, ttft_ns=ttft_ns, gaps_ns=gaps)
