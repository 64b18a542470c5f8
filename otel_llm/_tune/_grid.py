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
  it: the earlier a stalled call hedges, the sooner it ends, as long as the budget pays). Only
  gaps above the chunk-event floor are known, so a candidate at or below the floor is never
  tried (nor recommended);
* watchdogs (``TTFT_TIMEOUT_S`` = ``INTER_TOKEN_TIMEOUT_S``): none, and the longest silence
  (first chunk or gap) that 5 % and 1 % of calls exceed, above the floor; a watchdog is only
  combined with triggers below it, and without one the triggers stay below the default
  ``TIMEOUT_S`` (60 s), the watchdog's fallback (the client refuses a trigger the watchdog
  would pre-empt, R13);
* budget ratios (``HEDGE__BUDGET_RATIO``): the one the request budget allows (budget − 1), half
  and twice it.

Every combination is run: both triggers, each alone, and unhedged, each with every watchdog.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Final

from otel_llm._defaults import DEFAULTS
from otel_llm._tune._model import Rules, Timeline
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
    found: set[float] = set()
    for share in shares:
        value = exceeded_by(values, share)
        if value is None or value <= 0:
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


def watchdogs(sample: Sample) -> tuple[float | None, ...]:
    """``None`` (no watchdog) and the watchdog candidates, above the floor."""
    floor_s = sample.floor_ms / 1000
    silences = [longest_silence(t) for t in sample.primaries]
    return (None, *_candidates(silences, WATCHDOG_SHARES, floor_s))


def ratios(budget: float) -> tuple[float, ...]:
    """``HEDGE__BUDGET_RATIO`` candidates for a request budget: budget − 1, half and twice it
    (the default ratio around it when the budget allows no hedge at all)."""
    allowed = budget - 1.0
    if allowed <= 1e-9:
        allowed = DEFAULTS.hedge_budget_ratio
    return tuple(sorted({round(allowed * f, 4) for f in (0.5, 1.0, 2.0)}))


def grid(sample: Sample, budget: float) -> list[Rules]:
    """Every setting to replay: unhedged, each trigger alone and both, with every watchdog and
    (hedged) every ratio. The unhedged setting without a watchdog comes first."""
    afters = first_token_triggers(sample)
    stalls = stall_triggers(sample)
    pairs: list[tuple[float | None, float | None]] = [
        *((after, None) for after in afters),
        *((None, stall) for stall in stalls),
        *((after, stall) for after in afters for stall in stalls),
    ]
    unhedged_ratio = max(0.0, round(budget - 1.0, 4))
    settings: list[Rules] = []
    for watchdog in watchdogs(sample):
        settings.append(Rules(watchdog_s=watchdog, ratio=unhedged_ratio))
        for after, stall in pairs:
            triggers = [t for t in (after, stall) if t is not None]
            if max(triggers) >= (watchdog or DEFAULTS.timeout_s):
                continue  # the watchdog would kill the leg before the trigger fires (R13)
            for ratio in ratios(budget):
                settings.append(Rules(after, stall, watchdog, ratio=ratio))
    return settings
