"""The zero-overhead hedging model: one call under the client's hedging rules, computed from the
timelines of its attempts alone (pure, no clock).

A :class:`Timeline` is one attempt read as times from its start: the first incremental chunk,
every gap longer than the model's floor (the chunk before it and its length), and the end (its
last chunk, or the moment it failed). :func:`simulate_call` replays a call through the client's
rules:

* stall hedge: after the first chunk, the first gap longer than ``stall_after_s`` starts a hedge leg
  at (chunk before the gap) + ``stall_after_s``; first-token hedge: a first chunk later than
  ``after_s`` starts it at ``after_s``; at most one hedge per round, never a hedge of a hedge, paid
  from the client's own :class:`~otel_llm._act._hedge_budget.HedgeBudgets`; a first-token hedge the
  budget refuses leaves the round's hedge to the stall trigger;
* the watchdog (optional) kills a leg ``watchdog_s`` after its start or its last chunk;
  without one, the client's fallbacks do: ``timeout_s`` (its ``TIMEOUT_S``) before the first
  chunk, ``gap_timeout_s`` between chunks;
* first success wins; a round whose legs all fail is retried (a new round that may hedge again)
  after a backoff, at most ``max_rounds`` rounds;
* a call's wall time is its first success (``inf`` if none); its requests are its legs.

Both ``benchmarks/hedging/model.py`` (on the simulator's draws) and ``otel-llm tune`` (on the
attempts a store recorded) run this code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from otel_llm._act._hedge_budget import FIRST_TOKEN, STALL, HedgeBudgets, Trigger
from otel_llm._defaults import DEFAULTS
from otel_llm._quantile import quantile

Role = Literal["primary", "hedge", "retry"]
"""Which draw a leg is: a round's first leg (the call's first round, or a retry), or a hedge."""


@dataclass(frozen=True, slots=True)
class Timeline:
    """One attempt as times from its start (seconds)."""

    first_s: float
    """The first incremental chunk (``inf``: none came)."""
    end_s: float
    """Its last chunk when it succeeded, else the moment it failed."""
    long_gaps: tuple[tuple[float, float], ...] = ()
    """(arrival of the chunk before the gap, gap) for every gap above the floor, in order; a
    failed attempt's last is the silence that ended it (its last chunk to ``end_s``)."""
    ok: bool = True
    """Whether the attempt succeeded (at ``end_s``)."""

    def triggers(
        self, after_s: float | None, stall_after_s: float | None
    ) -> Iterator[tuple[Trigger, float]]:
        """The hedge triggers that fire on this leg, in time order (``fire`` from its start):
        the first-token trigger (a first chunk later than ``after_s``), then the stall trigger
        (the first gap after the first chunk longer than ``stall_after_s``). A leg that failed
        fires nothing after it failed."""
        if after_s is not None and self.first_s > after_s and (self.ok or self.end_s > after_s):
            yield FIRST_TOKEN, after_s
        if stall_after_s is None:
            return
        for before, gap in self.long_gaps:
            if gap > stall_after_s:
                fire = before + stall_after_s
                if self.ok or fire < self.end_s:
                    yield STALL, fire
                return

    def kill(self, kills: Kills) -> float | None:
        """When the watchdog (or the read timeout) would kill the leg, from its start
        (``None``: never)."""
        first, gap_limit = kills.first_s, kills.gap_s
        if first is not None and self.first_s > first and (self.ok or self.end_s > first):
            return first
        if gap_limit is None:
            return None
        for before, gap in self.long_gaps:
            if gap > gap_limit and (self.ok or before + gap_limit < self.end_s):
                return before + gap_limit
        return None

    def success(self, kills: Kills) -> float:
        """When the leg succeeds, from its start (``inf``: it fails or is killed)."""
        return self.end_s if self.ok and self.kill(kills) is None else math.inf

    def over(self, kills: Kills) -> float:
        """When the leg is over, succeeded, failed or killed, from its start."""
        killed = self.kill(kills)
        return self.end_s if killed is None else killed


@dataclass(frozen=True, slots=True)
class Kills:
    """The silences that kill a leg: before its first chunk, and between two chunks
    (``None``: nothing kills)."""

    first_s: float | None = None
    gap_s: float | None = None

    @classmethod
    def both(cls, seconds: float | None) -> Kills:
        """The same silence before the first chunk and between chunks."""
        return cls(seconds, seconds)


@dataclass(frozen=True, slots=True)
class Rules:
    """A hedge setting, as the client's keys spell it."""

    after_s: float | None = None
    """``HEDGE__AFTER_S``."""
    stall_after_s: float | None = None
    """``HEDGE__STALL_AFTER_S``."""
    watchdog_s: float | None = None
    """The watchdog (``TTFT_TIMEOUT_S`` = ``INTER_TOKEN_TIMEOUT_S``); ``None``: none set."""
    ratio: float = DEFAULTS.hedge_budget_ratio
    """``HEDGE__BUDGET_RATIO``."""
    burst: float = DEFAULTS.hedge_budget_burst
    """``HEDGE__BUDGET_BURST``."""
    first_token_burst: float = DEFAULTS.hedge_first_token_burst
    """``HEDGE__FIRST_TOKEN_BURST``."""
    max_rounds: int = DEFAULTS.max_attempts
    """Rounds a call may run (the client's ``max_attempts``)."""
    timeout_s: float | None = None
    """The client's ``TIMEOUT_S``: the read timeout, and the watchdog's fallback — a client
    without ``TTFT_TIMEOUT_S`` still kills a leg this long after its start (``None``: no such
    kill, a study's idealised client)."""
    gap_timeout_s: float | None = None
    """The silence between chunks that kills a leg of a client without
    ``INTER_TOKEN_TIMEOUT_S``: ``TIMEOUT_S`` when the client sets it, else the default 30 s
    (:func:`~otel_llm._act._source.inter_chunk_budget_s`); ``None``: as ``timeout_s``."""

    @property
    def kills(self) -> Kills:
        """The silences that kill a leg: the watchdog (its budget for both, or the read timeout
        when that is shorter), else the client's fallbacks."""
        if self.watchdog_s is not None:  # it sets INTER_TOKEN_TIMEOUT_S: no fallback between chunks
            both = _shorter(self.watchdog_s, self.timeout_s)
            return Kills(both, both)
        gap = self.gap_timeout_s if self.gap_timeout_s is not None else self.timeout_s
        return Kills(self.timeout_s, gap)

    @property
    def hedging(self) -> bool:
        """Whether either trigger is set."""
        return self.after_s is not None or self.stall_after_s is not None

    def budgets(self) -> HedgeBudgets:
        """A fresh, full budget for a run of calls under these rules."""
        both = self.after_s is not None and self.stall_after_s is not None
        return HedgeBudgets(self.ratio, self.burst, self.first_token_burst, both)


def _shorter(a: float | None, b: float | None) -> float | None:
    limits = [s for s in (a, b) if s is not None]
    return min(limits) if limits else None


def mean_backoff_s(
    rounds: int, base_s: float = DEFAULTS.backoff_base_s, cap_s: float = DEFAULTS.backoff_max_s
) -> tuple[float, ...]:
    """The mean wait before each retry under full jitter on ``base_s`` × 2^k capped at ``cap_s``
    (the client's backoff), for ``rounds`` − 1 retries."""
    return tuple(min(cap_s, base_s * 2.0**k) / 2.0 for k in range(max(0, rounds - 1)))


@dataclass(slots=True)
class Outcome:
    """One call: its wall time (``inf``: no success), requests, rounds and hedges per trigger."""

    wall_s: float = math.inf
    requests: int = 0
    rounds: int = 0
    first_token_hedges: int = 0
    stall_hedges: int = 0

    @property
    def hedges(self) -> int:
        """Hedge legs the call started."""
        return self.first_token_hedges + self.stall_hedges


class Budget(Protocol):
    """What a call spends hedges from (the client's :class:`HedgeBudgets`, or a study's)."""

    def earn(self) -> None:
        """A primary round started."""
        ...

    def spend(self, trigger: Trigger) -> bool:
        """Take one hedge for ``trigger`` if the budget has it."""
        ...


def simulate_call(
    rules: Rules,
    draw: Callable[[Role], Timeline],
    budget: Budget,
    backoff_s: Sequence[float],
    *,
    chain: bool = False,
    fallthrough: bool = True,
) -> Outcome:
    """One call under ``rules``; ``draw`` gives each new leg's timeline. ``chain`` breaks the
    one-hedge- per-round rule on purpose (every leg may hedge, a study's what-if);
    ``fallthrough=False`` is the earlier client policy (a refused first-token hedge ends the
    round's hedging)."""
    start = 0.0
    outcome = Outcome()
    kills = rules.kills
    for number in range(rules.max_rounds):
        budget.earn()
        outcome.rounds += 1
        legs: list[tuple[float, Timeline]] = [(start, draw("primary" if number == 0 else "retry"))]
        outcome.requests += 1
        index = 0
        while rules.hedging and index < len(legs) and (chain or index == 0):
            leg_start, leg = legs[index]
            index += 1
            for trigger, fire in leg.triggers(rules.after_s, rules.stall_after_s):
                at = leg_start + fire
                killed = leg.kill(kills)
                if at >= first_success(legs, kills) or (killed is not None and fire >= killed):
                    break
                if budget.spend(trigger):
                    legs.append((at, draw("hedge")))
                    outcome.requests += 1
                    if trigger == STALL:
                        outcome.stall_hedges += 1
                    else:
                        outcome.first_token_hedges += 1
                    break
                if not (trigger == FIRST_TOKEN and fallthrough):
                    break
        done = first_success(legs, kills)
        if done < math.inf:
            outcome.wall_s = done
            return outcome
        start = max(leg_start + leg.over(kills) for leg_start, leg in legs)
        if number < len(backoff_s):
            start += backoff_s[number]
        elif backoff_s:
            start += backoff_s[-1]
    return outcome


def first_success(legs: Sequence[tuple[float, Timeline]], kills: Kills) -> float:
    """When the first of ``legs`` (start, timeline) succeeds (``inf``: none does)."""
    return min((start + leg.success(kills) for start, leg in legs), default=math.inf)


FAILED_S = 1e12
"""A failed call's wall time in percentiles: it never answered, so it counts as very long."""


def percentiles(walls: Sequence[float]) -> tuple[float, float, float]:
    """(p50, p95, p99) of wall times (:func:`otel_llm._quantile.quantile`, as the dashboards
    compute them); a failed call (``inf``) counts as :data:`FAILED_S`, and so does a
    percentile that falls between an answered call and a failed one: a failed call has no wall
    time to interpolate with (interpolating with :data:`FAILED_S` gave "p99 8.1e11 s")."""
    counted = [wall if wall < math.inf else FAILED_S for wall in walls]
    answered = max((wall for wall in walls if wall < math.inf), default=0.0)

    def at(q: float) -> float:
        value = quantile(counted, q)
        return FAILED_S if value > answered else value

    return at(0.5), at(0.95), at(0.99)


def p99_interval(walls: Sequence[float]) -> tuple[float, float]:
    """A 95 % interval of the p99 of the calls ``walls`` came from: the wall times at ranks
    0.99 n ∓ 1.96 √(n · 0.99 · 0.01) (the binomial count of calls below the true p99, normal
    approximation; distribution-free). It is the sampling noise of n calls — at 1,000 calls
    it spans the 18th to the 4th slowest — not the model's error. A failed call counts as
    :data:`FAILED_S`."""
    ordered = sorted(wall if wall < math.inf else FAILED_S for wall in walls)
    n = len(ordered)
    half = 1.96 * math.sqrt(n * 0.99 * 0.01)
    low = max(0, math.floor(0.99 * n - half) - 1)
    high = min(n - 1, math.ceil(0.99 * n + half) - 1)
    return ordered[low], ordered[high]
