"""The settings ``otel-llm tune`` tries, chosen from the recorded distribution.

A trigger is worth trying where it would hedge a useful share of calls, so the candidates are
quantiles of what the calls' first attempts recorded, rounded to sensible seconds
(:func:`sensible_seconds`):

* first-token triggers (``HEDGE__AFTER_S``): the first chunk's time that 10 %, 5 % and 1 % of
  calls exceed;
* stall triggers (``HEDGE__STALL_AFTER_S``): the longest gap that 30 %, 20 %, 10 %, 5 % and 2 %
  of calls exceed, and the 10th, 25th and 50th percentile of the longest gap of the calls that
  have one above the floor (where stalls are rare or bimodal — a normal cadence, then long
  silences — the shares of all calls land in the cadence, and the best trigger is just above
  it: the earlier a stalled call hedges, the sooner it ends, as long as the budget pays). A
  failed attempt's gaps include the silence that ended it (its last chunk to the failure). Only
  gaps above the chunk-event floor are known, so a candidate at or below the floor is never
  tried (nor recommended);
* watchdogs (``TTFT_TIMEOUT_S`` = ``INTER_TOKEN_TIMEOUT_S``): none, and the longest silence
  (first chunk or gap) that 5 % and 1 % of calls exceed, above the floor and below the
  client's ``TIMEOUT_S`` (``--timeout``, 60 s by default). "None" is what the client does
  without one: it kills a leg at its fallbacks — ``TIMEOUT_S`` before the first chunk, and
  between chunks 30 s, or ``TIMEOUT_S`` when ``--timeout`` is given — so every setting
  replays those kills. A watchdog is only combined with triggers below it, and without one a
  first-token trigger stays below the first fallback and a stall trigger below the second
  (the client refuses a trigger the watchdog would pre-empt);
* budget ratios (``HEDGE__BUDGET_RATIO``): the one the request budget allows (budget − 1), half
  and twice it.

Every combination is run: both triggers, each alone, and unhedged, each with every watchdog.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Final

from otel_llm._act._source import inter_chunk_budget_s
from otel_llm._defaults import DEFAULTS
from otel_llm._tune._hedging_model import Rules, Timeline
from otel_llm._tune._sample import Sample

FIRST_TOKEN_SHARES: Final = (0.10, 0.05, 0.01)
"""Shares of calls a first-token trigger candidate would hedge."""
STALL_SHARES: Final = (0.30, 0.20, 0.10, 0.05, 0.02)
"""Shares of calls a stall trigger candidate would hedge."""
STALLED_QUANTILES: Final = (0.10, 0.25, 0.50)
"""Quantiles of the longest gap of the calls with a gap above the floor, as candidates."""
WATCHDOG_SHARES: Final = (0.05, 0.01)
"""Shares of calls a watchdog candidate would kill (once)."""
_MANTISSAS: Final = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def sensible_seconds(value: float) -> float:
    """``value`` (> 0) rounded to the nearest of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^k
    seconds (nearest on a log scale: a ratio, not a difference, is what matters)."""
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"a trigger is a finite number of seconds > 0, got {value!r}")
    scale = 10.0 ** math.floor(math.log10(value))
    best = min(_MANTISSAS, key=lambda m: abs(math.log(value / (m * scale))))
    return float(f"{best * scale:.6g}")


def exceeded_by(values: Sequence[float], share: float) -> float | None:
    """The value that a ``share`` of ``values`` exceeds (the 1 − share quantile, nearest rank);
    ``None`` when there are no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, math.ceil((1.0 - share) * len(ordered)) - 1))
    return ordered[rank]


def longest_gap(timeline: Timeline) -> float:
    """The longest recorded gap after the first chunk (0: none above the floor)."""
    return max((gap for _, gap in timeline.long_gaps), default=0.0)


def longest_silence(timeline: Timeline) -> float:
    """The longest wait for a chunk: the first one, or a recorded gap."""
    first = timeline.first_s if math.isfinite(timeline.first_s) else timeline.end_s
    return max(first, longest_gap(timeline))


def _candidates(
    values: Sequence[float], shares: Iterable[float], floor_s: float
) -> tuple[float, ...]:
    """The sensible seconds that each share of ``values`` exceeds, above ``floor_s``. A
    non-finite value (a first attempt that failed before its first chunk: ``first_s`` is
    ``inf``) still counts in the ranks, as exceeding every candidate, but is never one."""
    found: set[float] = set()
    for share in shares:
        value = exceeded_by(values, share)
        if value is None or not math.isfinite(value) or value <= 0:
            continue
        seconds = sensible_seconds(value)
        if seconds > floor_s and any(v > seconds for v in values):
            found.add(seconds)
    return tuple(sorted(found))


def first_token_triggers(sample: Sample) -> tuple[float, ...]:
    """Candidates for ``HEDGE__AFTER_S`` (the first chunk is always recorded: no floor)."""
    return _candidates([t.first_s for t in sample.primaries], FIRST_TOKEN_SHARES, 0.0)


def stall_triggers(sample: Sample) -> tuple[float, ...]:
    """Candidates for ``HEDGE__STALL_AFTER_S``, above the floor."""
    floor_s = sample.floor_ms / 1000
    longest = [longest_gap(t) for t in sample.primaries]
    stalled = [gap for gap in longest if gap > floor_s]
    shares = (1.0 - q for q in STALLED_QUANTILES)
    found = {*_candidates(longest, STALL_SHARES, floor_s), *_candidates(stalled, shares, floor_s)}
    return tuple(sorted(found))


def watchdogs(sample: Sample, timeout_s: float = DEFAULTS.timeout_s) -> tuple[float | None, ...]:
    """``None`` (no watchdog: the kill at ``timeout_s``) and the watchdog candidates, above the
    floor and below ``timeout_s``."""
    floor_s = sample.floor_ms / 1000
    silences = [longest_silence(t) for t in sample.primaries]
    found = _candidates(silences, WATCHDOG_SHARES, floor_s)
    return (None, *(watchdog for watchdog in found if watchdog < timeout_s))


def ratios(budget: float) -> tuple[float, ...]:
    """``HEDGE__BUDGET_RATIO`` candidates for a request budget: budget − 1, half and twice it
    (the default ratio around it when the budget allows no hedge at all)."""
    allowed = budget - 1.0
    if allowed <= 1e-9:
        allowed = DEFAULTS.hedge_budget_ratio
    return tuple(sorted({round(allowed * f, 4) for f in (0.5, 1.0, 2.0)}))


def grid(
    sample: Sample,
    budget: float,
    timeout_s: float | None = None,
    max_attempts: int = DEFAULTS.max_attempts,
) -> list[Rules]:
    """Every setting to replay: unhedged, each trigger alone and both, with every watchdog and
    (hedged) every ratio, each killing a leg without a watchdog where the client would: at
    ``timeout_s`` (the client's ``TIMEOUT_S``; ``None``: not set) before the first chunk and,
    between chunks, at the budget the client falls back to; each call runs at most
    ``max_attempts`` rounds (the client's ``RETRY__MAX_ATTEMPTS``). The unhedged setting
    without a watchdog comes first."""
    read_s = timeout_s if timeout_s is not None else DEFAULTS.timeout_s
    fallback = Rules(
        timeout_s=read_s,
        gap_timeout_s=inter_chunk_budget_s(None, timeout_s),
        max_rounds=max_attempts,
    )
    afters = first_token_triggers(sample)
    stalls = stall_triggers(sample)
    pairs: list[tuple[float | None, float | None]] = [
        *((after, None) for after in afters),
        *((None, stall) for stall in stalls),
        *((after, stall) for after in afters for stall in stalls),
    ]
    settings: list[Rules] = []
    for watchdog in watchdogs(sample, read_s):
        watched = replace(fallback, watchdog_s=watchdog)
        settings.append(watched)
        kills = watched.kills
        for after, stall in pairs:
            if _too_late(after, kills.first_s) or _too_late(stall, kills.gap_s):
                continue  # the watchdog would kill the leg before the trigger fires: refused
            for ratio in ratios(budget):
                settings.append(replace(watched, after_s=after, stall_after_s=stall, ratio=ratio))
    return settings


def _too_late(trigger: float | None, kill_s: float | None) -> bool:
    return trigger is not None and kill_s is not None and trigger >= kill_s
