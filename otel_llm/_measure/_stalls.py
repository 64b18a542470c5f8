"""Pure stall metering: the figures of one attempt from its chunk arrivals.

Everything here is arithmetic on integer nanoseconds taken from one monotonic clock. Conversion
to whole milliseconds happens in exactly one place, :func:`to_ms`, so the client, the span
processor and SQL can never disagree by a rounding step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from otel_llm._defaults import DEFAULTS
from otel_llm._env import env_text, stall_threshold_key
from otel_llm._errors import ConfigurationError

NS_PER_MS = 1_000_000


def to_ms(ns: int) -> int:
    """Whole milliseconds of a non-negative nanosecond duration — the one rounding place."""
    return int(ns) // NS_PER_MS


@dataclass(frozen=True, slots=True)
class Timeline:
    """What metering needs to know about one attempt, in nanoseconds from its start.

    ``gaps_ns`` must contain every gap strictly longer than ``complete_above_ms``; it may
    contain shorter ones too (they never count as stalls at a threshold at or above that floor).
    ``max_gap_ns`` is the longest gap of all, recorded or not.
    """

    wall_ns: int
    streamed: bool
    chunk_count: int = 0
    ttft_ns: int | None = None
    gaps_ns: Sequence[int] = ()
    max_gap_ns: int | None = None
    complete_above_ms: int = 0
    known_stall: tuple[int, int, int] | None = None
    """``(threshold_ms, stall_ns, stall_count)`` known exactly at one threshold below the floor
    (recorded when chunk events had to be thinned above the attempt's threshold)."""

    @classmethod
    def from_gaps(cls, *, wall_ns: int, ttft_ns: int | None, gaps_ns: Sequence[int]) -> Timeline:
        """A streamed attempt whose every gap is known (the client's own view)."""
        count = 0 if ttft_ns is None else len(gaps_ns) + 1
        return cls(
            wall_ns=wall_ns,
            streamed=True,
            chunk_count=count,
            ttft_ns=ttft_ns,
            gaps_ns=gaps_ns,
            max_gap_ns=max(gaps_ns) if gaps_ns else None,
        )


@dataclass(frozen=True, slots=True)
class StallFigures:
    """Where the wall time of one attempt went (its fields are the table of figures,
    :mod:`otel_llm._figures`). Stall figures always come as a pair.

    ``stall_ms``/``stall_count`` are ``None`` when not observable (not streamed, or fewer than
    two incremental chunks) and ``0`` when observed to be zero. ``generation_ms`` is the net
    generation time: wall time minus stalls, still including time to first chunk and the tail.
    ``threshold_ms`` is the stall threshold they were measured at (not part of equality: the
    same figures are the same, whatever produced them).
    """

    wall_ms: int
    generation_ms: int
    stall_ms: int | None
    stall_count: int | None
    ttft_ms: int | None
    max_inter_chunk_ms: int | None
    chunk_count: int | None
    threshold_ms: int | None = field(default=None, compare=False)


def stall_sum(gaps_ns: Sequence[int], threshold_ms: int) -> tuple[int, int]:
    """Total nanoseconds and number of gaps strictly longer than ``threshold_ms``."""
    limit = threshold_ms * NS_PER_MS
    if not gaps_ns or max(gaps_ns) <= limit:  # most streams: one pass in C, and done
        return 0, 0
    stalls = [gap for gap in gaps_ns if gap > limit]
    return sum(stalls), len(stalls)


def meter(timeline: Timeline, threshold_ms: int) -> StallFigures:
    """Derive the figures of one attempt at ``threshold_ms``."""
    known = timeline.known_stall
    exact_here = known is not None and known[0] == threshold_ms
    if threshold_ms < timeline.complete_above_ms and not exact_here:
        raise ValueError(
            f"threshold {threshold_ms} ms is below the floor {timeline.complete_above_ms} ms "
            "above which every gap is known"
        )
    wall_ms = to_ms(timeline.wall_ns)
    if not timeline.streamed:
        return StallFigures(wall_ms, wall_ms, None, None, None, None, None, threshold_ms)
    ttft_ms = None if timeline.ttft_ns is None else to_ms(timeline.ttft_ns)
    if timeline.chunk_count < 2:
        return StallFigures(
            wall_ms, wall_ms, None, None, ttft_ms, None, timeline.chunk_count, threshold_ms
        )
    if exact_here and known is not None:
        stall_ns, stall_count = known[1], known[2]
    else:
        stall_ns, stall_count = stall_sum(timeline.gaps_ns, threshold_ms)
    stall_ms = to_ms(stall_ns)
    max_gap_ms = None if timeline.max_gap_ns is None else to_ms(timeline.max_gap_ns)
    return StallFigures(
        wall_ms=wall_ms,
        generation_ms=max(0, wall_ms - stall_ms),
        stall_ms=stall_ms,
        stall_count=stall_count,
        ttft_ms=ttft_ms,
        max_inter_chunk_ms=max_gap_ms,
        chunk_count=timeline.chunk_count,
        threshold_ms=threshold_ms,
    )


def threshold_ms_from_env(scope: str = DEFAULTS.scope) -> int:
    """``{scope}__STREAM__STALL_THRESHOLD_MS`` when set (by the one rule), else the default —
    the key the client reads, so wrapped calls and the processor measure like the client."""
    key = stall_threshold_key(scope)
    raw = env_text(key)
    if raw is None:
        return DEFAULTS.stall_threshold_ms
    return validate_threshold_ms(threshold_from_text(raw), key)


def resolve_threshold_ms(value: object | None) -> int:
    """An explicit threshold (by the one rule), or else the environment's (see
    :func:`threshold_ms_from_env`) — how every entry point that takes one picks it."""
    return threshold_ms_from_env() if value is None else validate_threshold_ms(value)


def threshold_from_text(value: object) -> object:
    """A threshold as the environment gives it: decimal digits become the integer, anything
    else is left for :func:`threshold_rule` to refuse (``"1000.0"``, ``"+500"``, ``"1_000"``,
    ``"²"`` or full-width digits, which ``str.isdigit`` alone would let through).
    The one parser of threshold text, for the settings and the wrappers alike."""
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            return int(text)
    return value


def threshold_rule(value: object) -> int:
    """The one rule of a stall threshold: a positive integer of milliseconds — an
    ``int``, not a bool, not a float, not text (text from the environment is parsed before).
    Raises ValueError naming what was wrong (callers add the key)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"must be a positive integer of milliseconds, got {value!r}")
    if value > DEFAULTS.max_stall_threshold_ms:
        raise ValueError(
            f"must be at most {DEFAULTS.max_stall_threshold_ms} ms (a day), got {value!r}"
        )
    return value


def validate_threshold_ms(value: object, key: str = "stall_threshold_ms") -> int:
    """:func:`threshold_rule`, failing with a ConfigurationError naming ``key``."""
    try:
        return threshold_rule(value)
    except ValueError as exc:
        error = ConfigurationError(key, str(exc))
    raise error
