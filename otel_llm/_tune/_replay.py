"""A setting replayed over a sample through the package's hedging model.

Each call meets its own recorded first attempt as its primary leg, in the order the calls
started, and one budget (:meth:`Rules.budgets`) is spent along them as the client spends it.
A hedge or retry leg is an independent draw, with replacement, from the call's pool (the other
sources' usable attempts). The draws are made once per seed: call *i* meets the same hedge and
retry legs, in the same order, in every setting, so two settings differ by their rules alone and
the same seed gives the same figures.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from otel_llm._tune._hedging_model import (
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

    def as_json(self) -> dict[str, Any]:
        """The JSON object of these figures (seconds rounded to milliseconds)."""
        document: dict[str, Any] = {
            "p50_s": round(self.p50_s, 3),
            "p95_s": round(self.p95_s, 3),
            "p99_s": round(self.p99_s, 3),
            "requests_per_call": round(self.requests_per_call, 4),
        }
        if self.p99_interval_s is not None:
            document["p99_interval_s"] = [round(value, 3) for value in self.p99_interval_s]
        return document


def figures_of(walls: Sequence[float], requests: int) -> Figures:
    """The figures of calls with wall times ``walls`` (``inf``: failed) and ``requests`` in all."""
    p50, p95, p99 = percentiles(walls)
    return Figures(p50, p95, p99, requests / len(walls), p99_interval(walls))


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
        for source in sample.primary_sources:
            size = len(sample.pools[source])
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
    for primary, source, picks in zip(
        sample.primaries, sample.primary_sources, draws.picks, strict=True
    ):
        outcome = simulate_call(rules, _Legs(primary, sample.pools[source], picks), budget, backoff)
        walls.append(outcome.wall_s)
        requests += outcome.requests
    return figures_of(walls, requests)
