"""The metering primitive: which streamed events are incremental chunks, and when they arrived.

An incremental chunk carries generated output — non-empty ``delta.content``,
``delta.reasoning_content`` (or ``reasoning``), ``delta.refusal``, tool-call deltas, a legacy
``delta.function_call`` or an audio answer's ``delta.audio``.
Role-only or empty deltas, usage-only frames, SSE comments and ``[DONE]`` are not chunks.

The hot path only records a monotonic timestamp and sets a flag.
"""

from __future__ import annotations

import asyncio
from collections.abc import Set
from operator import sub
from typing import Any

from otel_llm._measure import _clock
from otel_llm._measure._response import MAPPING_TYPES, field_of, is_mapping
from otel_llm._measure._stalls import Timeline

_TEXT_FIELDS = ("content", "reasoning_content", "reasoning", "refusal")
"""Delta fields whose text is output: the answer, its reasoning, a refusal."""
_NESTED_TEXT_FIELDS = (("function_call", ("name", "arguments")), ("audio", ("transcript", "data")))
"""Delta fields holding output in text fields of their own: a call of the legacy functions API
(``functions=``: its name, then its arguments) and an audio answer (``modalities=["audio"]``:
its transcript and its data)."""


def _has_text(value: Any, names: tuple[str, ...]) -> bool:
    """Whether ``value`` (a dict or an SDK object) has non-empty text in one of ``names``."""
    if value is None:
        return False
    mapping = MAPPING_TYPES.get(value.__class__)
    if mapping is None:
        mapping = is_mapping(value)
    for name in names:
        text = value.get(name) if mapping else getattr(value, name, None)
        if text.__class__ is str and text:
            return True
    return False


def delta_has_output(delta: Any) -> bool:
    """The chunk rule, the one place it is written: True when one choice's
    ``delta`` — a dict or an SDK object — carries text of content, reasoning
    (``reasoning_content`` or ``reasoning``) or a refusal, tool-call deltas, a legacy function
    call's name or arguments, or an audio answer's transcript or data. Empty text is no output,
    and neither is a value of another type where text belongs (a number is not generated
    text); every reader of chunks (the client's assembler, the wrappers' classifier and their
    fused reader) asks this function."""
    if delta is None:
        return False
    mapping = MAPPING_TYPES.get(delta.__class__)  # per chunk: a lookup, not a call
    if mapping is None:
        mapping = is_mapping(delta)
    if mapping:
        for name in _TEXT_FIELDS:
            value = delta.get(name)
            if value.__class__ is str and value:
                return True
        if delta.get("tool_calls"):
            return True
        return any(_has_text(delta.get(name), texts) for name, texts in _NESTED_TEXT_FIELDS)
    for name in _TEXT_FIELDS:
        value = getattr(delta, name, None)
        if value.__class__ is str and value:
            return True
    if getattr(delta, "tool_calls", None):
        return True
    return any(_has_text(getattr(delta, name, None), texts) for name, texts in _NESTED_TEXT_FIELDS)


def stream_complete(choices_seen: Set[int], choices_finished: Set[int]) -> bool:
    """The one rule of a complete streamed answer, for the client and the wrappers.

    A stream is complete when a finish reason arrived for every choice it streamed (OpenAI
    sends one per choice; ``n > 1`` has several), and for at least one. Neither ``[DONE]`` nor
    a clean end of the HTTP body is enough on its own: that is also how a proxy or a server
    ends a stream it cut short, and a stream that never carried a finish reason (or never a
    ``data:`` line at all) is not an answer.
    """
    return bool(choices_finished) and choices_seen <= choices_finished


def is_incremental(chunk: Any) -> bool:
    """True when an OpenAI-style ``chat.completion.chunk`` (dict or SDK object) carries
    generated output in any choice."""
    choices = field_of(chunk, "choices")
    if not isinstance(choices, list | tuple):
        return False
    return any(delta_has_output(field_of(choice, "delta")) for choice in choices)


class ChunkClock:
    """Arrival times (``_clock.now_ns``, monotonic) of one attempt's incremental chunks.

    ``mark()`` is the whole per-chunk cost: one timestamp appended, one flag set. A consumer-aware
    caller (a wrapped stream) also passes how long the application has held the stream
    between reads so far, in total; a gap is then the time between two arrivals minus what the
    application held in between — whatever other items (empty deltas, pings) came meanwhile. The
    clock keeps that as a second timeline, each arrival minus the hold so far ("provider time"),
    whose differences are the gaps.

    Timestamps live in plain lists: appending to a list costs a fraction of appending to an
    ``array('q')`` (which parses every value), and the hot path is what this class is for; the
    price is about 40 bytes per chunk and timeline instead of 8.
    ``finished`` is set once the stream's finish reason arrived: after that, silence before the
    end of the stream is no reason to hedge or to kill it.
    """

    __slots__ = ("_anchor", "_arrivals", "_provider_ns", "_signal", "finished", "start_ns")

    def __init__(
        self,
        start_ns: int | None = None,
        signal: asyncio.Event | None = None,
        *,
        consumer_aware: bool = False,
    ) -> None:
        self.start_ns = _clock.now_ns() if start_ns is None else start_ns
        self._arrivals: list[int] = []
        self._provider_ns: list[int] | None = [] if consumer_aware else None
        """Consumer-aware clocks: each arrival minus the consumer's total hold until then."""
        self._signal = signal
        self.finished = False
        self._anchor: tuple[float, int] | None = None

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

    def mark_with_hold(self, arrival_ns: int, held_ns: int) -> None:
        """Record an arrival at ``arrival_ns`` (a ``time.monotonic_ns()`` value) when the
        consumer had held the stream ``held_ns`` in total so far.

        Only for clocks built with ``consumer_aware=True``.
        """
        provider_ns = self._provider_ns
        if provider_ns is None:
            raise RuntimeError("mark_with_hold() needs a ChunkClock(consumer_aware=True)")
        provider_ns.append(arrival_ns - held_ns)
        self._arrivals.append(arrival_ns)
        if self._signal is not None:
            self._signal.set()

    def on_loop(self, ns: int) -> float:
        """The event loop's time of the metering instant ``ns``. Timers (the watchdog, the
        hedge window) run on the loop's clock and figures on the metering clock; the two are
        tied together once, when a timer first asks.

        In production both are ``time.monotonic`` and the tie is exact. A swapped metering
        clock (a test's fake clock, virtual time) is tied at that first ask and assumed to run
        at the loop's rate afterwards: a fake clock moved by hand while the loop's time stands
        still moves the timers' deadlines with it. ``run_virtual`` drives both from one clock.
        """
        anchor = self._anchor
        if anchor is None:
            anchor = self._anchor = (asyncio.get_running_loop().time(), _clock.now_ns())
        return anchor[0] + (ns - anchor[1]) / 1e9

    @property
    def count(self) -> int:
        """Incremental chunks seen so far."""
        return len(self._arrivals)

    @property
    def arrivals_ns(self) -> list[int]:
        """The raw arrival timestamps (monotonic nanoseconds)."""
        return self._arrivals

    def gaps_ns(self) -> list[int]:
        """Provider-side silence before each chunk after the first, in nanoseconds."""
        times = self._arrivals if self._provider_ns is None else self._provider_ns
        return list(map(sub, times[1:], times))

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
