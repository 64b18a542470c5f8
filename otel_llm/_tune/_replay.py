"""A setting replayed over a sample through the package's hedging model.

Each call meets its own recorded first attempt as its primary leg, in the order the calls
started, and one budget (:meth:`Rules.budgets`) is spent along them as the client spends it.
A hedge or retry leg is an independent draw, with replacement, from the call's pool (the other
sources' usable attempts). The draws are made once per seed: call *i* meets the same hedge and
retry legs, in the same order, in every setting, so two settings differ by their rules alone and
the same seed gives the same figures.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from otel_llm._tune._hedging_model import (
    FAILED_S,
    Role,
    Rules,
    Timeline,
    mean_backoff_s,
    p99_interval,
    percentiles,
    simulate_call,
)
from otel_llm._tune._sample import Sample

DEFAULT_SEED: Final = 1
"""``--seed`` when not given: the same store gives the same figures."""


@dataclass(frozen=True, slots=True)
class Figures:
    """Wall-time percentiles of a run of calls (seconds) and its requests per call."""

    p50_s: float
    p95_s: float
    p99_s: float
    requests_per_call: float
    p99_interval_s: tuple[float, float] | None = None
    """A 95 % interval of the p99 over these calls
    (:func:`~otel_llm._tune._hedging_model.p99_interval`: how far another sample of as many calls
    could put it)."""
    failed_share: float = 0.0
    """The share of these calls that failed (a percentile that falls on one is no time)."""

    @property
    def all_failed(self) -> bool:
        """Whether every one of these calls failed."""
        return self.failed_share >= 1.0

    def as_json(self) -> dict[str, Any]:
        """The JSON object of these figures (seconds rounded to milliseconds); a percentile that
        falls on a failed call is ``null`` (the document's ``data.failed_share`` says how many of
        the calls failed as recorded)."""
        document: dict[str, Any] = {
            "p50_s": seconds_json(self.p50_s),
            "p95_s": seconds_json(self.p95_s),
            "p99_s": seconds_json(self.p99_s),
            "requests_per_call": round(self.requests_per_call, 4),
        }
        if self.p99_interval_s is not None:
            document["p99_interval_s"] = [seconds_json(value) for value in self.p99_interval_s]
        return document


def seconds_json(value: float) -> float | None:
    """A wall time for JSON: ``None`` for a failed call (:data:`FAILED_S`), else in seconds
    rounded to milliseconds."""
    return None if value >= FAILED_S else round(value, 3)


def figures_of(walls: Sequence[float], requests: int) -> Figures:
    """The figures of calls with wall times ``walls`` (``inf``: failed) and ``requests`` in all."""
    p50, p95, p99 = percentiles(walls)
    failed = sum(1 for wall in walls if wall == math.inf) / len(walls)
    return Figures(p50, p95, p99, requests / len(walls), p99_interval(walls), failed)


@dataclass(frozen=True, slots=True)
class Draws:
    """For each call, the indexes into its pool of the legs it meets after its primary."""

    picks: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, sample: Sample, seed: int, rounds: int) -> Draws:
        """Enough draws for ``rounds`` rounds of two legs per call (seeded by ``seed``)."""
        rng = random.Random(seed)
        legs = 2 * rounds
        picks = []
        for key in sample.pool_keys:
            size = len(sample.pools[key])
            picks.append(tuple(rng.randrange(size) for _ in range(legs)) if size else ())
        return cls(tuple(picks))


class _Legs:
    """The legs one call meets: its primary, then its pool's draws in order."""

    __slots__ = ("_draws", "_pool", "_primary")

    def __init__(self, primary: Timeline, pool: Sequence[Timeline], picks: Sequence[int]) -> None:
        self._primary = primary
        self._pool = pool or (primary,)
        self._draws = iter(picks)

    def __call__(self, role: Role) -> Timeline:
        if role == "primary":
            return self._primary
        return self._pool[next(self._draws, 0)]


def replay(sample: Sample, rules: Rules, draws: Draws) -> Figures:
    """``rules`` over every call of ``sample`` with the legs ``draws`` gives them. A call whose
    pool is empty meets its own primary again as each hedge and retry leg."""
    budget = rules.budgets()
    backoff = mean_backoff_s(rules.max_rounds)
    walls: list[float] = []
    requests = 0
    for primary, key, picks in zip(sample.primaries, sample.pool_keys, draws.picks, strict=True):
        outcome = simulate_call(rules, _Legs(primary, sample.pools[key], picks), budget, backoff)
        walls.append(outcome.wall_s)
        requests += outcome.requests
    return figures_of(walls, requests)
