"""The client benchmark's run replayed through the zero-overhead model, in time order.

``hedging_tail_latency.py`` starts call ``i`` at ``i / rate`` real seconds against three
simulated providers (seeds S, S+1, S+2) and every request of call ``i`` carries the body field
``sim_key`` = :func:`call_key` ``(i)``: a provider then draws that request's script from a
generator seeded by (its seed, the key, how many earlier requests of that key it served), so
which script a leg gets does not depend on how the calls' requests interleave
(:class:`KeyedScripts`). Without keys a provider draws in arrival order (:class:`ArrivalDraws`,
the benchmark before issue 13 §2).

:func:`replay` runs all the calls of a setting as one discrete-event pass on simulated time:
call ``i`` starts at ``i × interval_s``; every round earns the hedge budget when it starts, every
hedge trigger spends it when it fires, each source's circuit breaker hears of every leg's end,
and the client's seeded generator draws the breaker and backoff jitter, all in the order the
events happen across calls. Which source a round or a hedge goes to is decided by the client's
own :class:`~otel_llm._act._source_state.Candidates` on real
:class:`~otel_llm._act._breaker.Breaker` objects, the budget is the client's
:class:`~otel_llm._act._hedge_budget.HedgeBudgets`, and a leg's chunks come at its
:class:`~otel_llm._tune._hedging_model.Timeline`'s times (watchdog and hedging rules as in
``otel_llm._tune._hedging_model``). So
the replay is the client without overhead on the very scripts the client met; what differs
between the two is the client's (and the simulator's) own time.

Left out, as the benchmark never meets them: admission limits, rate limits, permanent errors,
the call deadline and the stall window.
"""

from __future__ import annotations

import functools
import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from otel_llm._act._backoff import backoff_delay
from otel_llm._act._breaker import Breaker, Permit
from otel_llm._act._hedge_budget import FIRST_TOKEN, STALL, HedgeBudgets, Trigger
from otel_llm._act._source import Source
from otel_llm._act._source_state import Candidates, SourceState, Stay
from otel_llm._defaults import DEFAULTS
from otel_llm._tune._hedging_model import Outcome, Rules, Timeline
from otel_llm._tune._script_timeline import timeline_of
from otel_llm.simulator import MeasuredPreset

LONG_GAP_S = 1.0
"""Gaps a leg keeps: every trigger and watchdog of the grid is above it, normal cadence below."""


def call_key(index: int) -> str:
    """The ``sim_key`` every request of call ``index`` carries."""
    return f"call-{index}"


class KeyedScripts:
    """What providers of seeds ``seeds`` answer to keyed requests: the ``n``-th request of call
    ``i`` at source ``s`` gets ``preset`` drawn from ``Random(f"{seeds[s]}/{key}/{n}")``, as the
    simulator's ``rng_for`` seeds it (made once, cached)."""

    def __init__(self, seeds: Sequence[int], preset: MeasuredPreset | None = None) -> None:
        self.seeds = tuple(seeds)
        self._preset = preset if preset is not None else MeasuredPreset()
        self._legs: dict[tuple[int, int, int], Timeline] = {}

    def leg(self, source: int, call: int, occurrence: int) -> Timeline:
        """The timeline of that request's script."""
        where = (source, call, occurrence)
        leg = self._legs.get(where)
        if leg is None:
            rng = random.Random(f"{self.seeds[source]}/{call_key(call)}/{occurrence}")
            leg = self._legs[where] = timeline_of(self._preset(rng), LONG_GAP_S)
        return leg

    def oracle_s(self, call: int) -> float:
        """Call ``call``'s primary script without its silences (the ``oracle`` preset): its end."""
        rng = random.Random(f"{self.seeds[0]}/{call_key(call)}/0")
        return replace(self._preset, silences=False)(rng).nominal_duration_s

    def draws(self) -> Draw:
        """A fresh run's draws (occurrences counted from zero)."""
        counts: dict[tuple[int, int], int] = {}

        def draw(source: int, call: int) -> Timeline:
            occurrence = counts.get((source, call), 0)
            counts[(source, call)] = occurrence + 1
            return self.leg(source, call, occurrence)

        return draw


class ArrivalDraws:
    """What providers answer to requests without a key: each source's next script from its own
    ``Random(seed)``, in the order the requests arrive (made once, cached)."""

    def __init__(self, seeds: Sequence[int], preset: MeasuredPreset | None = None) -> None:
        self.seeds = tuple(seeds)
        self._preset = preset if preset is not None else MeasuredPreset()
        self._rngs = [random.Random(seed) for seed in self.seeds]
        self._legs: list[list[Timeline]] = [[] for _ in self.seeds]

    def leg(self, source: int, index: int) -> Timeline:
        """The ``index``-th script source ``source`` serves."""
        legs = self._legs[source]
        while len(legs) <= index:
            legs.append(timeline_of(self._preset(self._rngs[source]), LONG_GAP_S))
        return legs[index]

    def draws(self) -> Draw:
        """A fresh run's draws (every source from its first script)."""
        served = [0] * len(self.seeds)

        def draw(source: int, call: int) -> Timeline:
            served[source] += 1
            return self.leg(source, served[source] - 1)

        return draw


Draw = Callable[[int, int], Timeline]
"""The timeline of the next request of call ``call`` (second) at source ``source`` (first)."""


@dataclass(frozen=True, slots=True)
class ClientShape:
    """The benchmark client, in simulated seconds."""

    sources: int = 3
    max_attempts: int = 5
    same_source_retries: int = DEFAULTS.same_source_retries
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0
    breaker_threshold: int = DEFAULTS.breaker_failure_threshold
    breaker_first_cooldown_s: float = 10.0
    """The library's first cool-down (1 real second) in simulated seconds at time scale 0.1."""
    breaker_cooldown_s: float = 30.0
    seed: int = 1
    """The client's ``seed`` (its generator draws breaker and backoff jitter)."""
    per_trigger: bool = True
    """The client of issue 13 §1 (:class:`HedgeBudgets` per trigger, a refused first-token hedge
    leaves the round to the stall trigger); ``False``: one bucket for both, and a refused
    first-token hedge ends the round's hedging (the client before it)."""

    @classmethod
    def of_benchmark(
        cls, time_scale: float, max_attempts: int, seed: int, *, per_trigger: bool = True
    ) -> ClientShape:
        """The shape ``hedging_tail_latency.py`` builds at ``time_scale``: its durations are
        scaled, except the breaker's first cool-down (the library default, real seconds)."""
        first = min(DEFAULTS.breaker_first_cooldown_s / time_scale, 30.0)
        return cls(
            max_attempts=max_attempts,
            breaker_first_cooldown_s=first,
            seed=seed,
            per_trigger=per_trigger,
        )


@dataclass(slots=True)
class _Leg:
    state: SourceState
    start_s: float
    timeline: Timeline
    hedge: bool
    permit: Permit
    """The breaker's leave (which half-open probe it is, if one)."""
    trigger: Trigger | None = None
    over: bool = False


@dataclass(slots=True)
class _Call:
    index: int
    start_s: float
    outcome: Outcome = field(default_factory=Outcome)
    legs: list[_Leg] = field(default_factory=list)
    round_id: int = 0
    fails: int = 0
    stay: Stay | None = None
    avoid: str | None = None
    same_source: dict[str, int] = field(default_factory=dict)
    done: bool = False


@dataclass(frozen=True, slots=True)
class Replay:
    """A setting's calls as the client without overhead would run them."""

    outcomes: tuple[Outcome, ...]
    """Per call, in call order."""
    cap_excess: float
    """The most hedge legs ever started beyond ratio × rounds started + what the budget
    started with (≤ 0 when the budget held its cap at every moment)."""


class _Run:
    """One pass of the event loop (see :func:`replay`)."""

    def __init__(self, rules: Rules, draw: Draw, shape: ClientShape) -> None:
        self.rules = rules
        self.draw = draw
        self.shape = shape
        self.rng = random.Random(shape.seed)
        both = rules.after_s is not None and rules.stall_after_s is not None
        self.budgets = HedgeBudgets(
            rules.ratio, rules.burst, rules.first_token_burst, both and shape.per_trigger
        )
        self.start_tokens = self.budgets.held
        """The buckets start full: burst, and the first-token burst with both triggers."""
        self.states = [
            SourceState(
                Source(
                    name=f"sim-{index}",
                    provider="sim",
                    base_url="http://127.0.0.1:9",
                    model="measured",
                    priority=index,
                ),
                Breaker(
                    failure_threshold=shape.breaker_threshold,
                    first_cooldown_s=shape.breaker_first_cooldown_s,
                    max_cooldown_s=shape.breaker_cooldown_s,
                ),
            )
            for index in range(shape.sources)
        ]
        self.index_of = {state.name: index for index, state in enumerate(self.states)}
        self.events: list[tuple[float, int, Callable[[float], None]]] = []
        self.sequence = 0
        self.rounds = 0
        self.hedges = 0
        self.cap_excess = -math.inf

    def at(self, when: float, action: Callable[[float], None]) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (when, self.sequence, action))

    def run(self) -> None:
        while self.events:
            when, _, action = heapq.heappop(self.events)
            action(when)

    # --- rounds ----------------------------------------------------------------------------

    def start_round(self, call: _Call, now: float) -> None:
        candidates = Candidates(self.states)
        pick = candidates.pick(now, avoid=call.avoid, stay=call.stay)
        assert pick is not None  # nothing is ever excluded here
        if pick.wait_s > 0:
            self.at(now + pick.wait_s, lambda when: self.start_round(call, when))
            return
        state = pick.state
        permit = state.breaker.acquire(now)
        if permit is None:
            self.at(now + DEFAULTS.probe_recheck_s, lambda when: self.start_round(call, when))
            return
        if call.stay is not None and call.stay.source == state.name:
            call.same_source[state.name] = call.same_source.get(state.name, 0) + 1
        call.stay = None
        call.round_id += 1
        call.outcome.rounds += 1
        self.rounds += 1
        if self.rules.hedging:
            self.budgets.earn()
        leg = self.new_leg(call, state, now, permit, hedge=False)
        call.legs = [leg]
        self.schedule_triggers(call, leg, list(self.triggers(leg)))

    def new_leg(
        self, call: _Call, state: SourceState, now: float, permit: Permit, *, hedge: bool
    ) -> _Leg:
        timeline = self.draw(self.index_of[state.name], call.index)
        leg = _Leg(state, now, timeline, hedge, permit)
        call.outcome.requests += 1
        round_id = call.round_id
        killed = timeline.kill(self.rules.kills)
        ends = timeline.end_s if killed is None else killed
        self.at(now + ends, lambda when: self.end_leg(call, round_id, leg, when))
        return leg

    def triggers(self, leg: _Leg) -> list[tuple[Trigger, float]]:
        """The primary's triggers that fire before it ends or is killed (absolute times)."""
        rules = self.rules
        if not rules.hedging:
            return []
        killed = leg.timeline.kill(rules.kills)
        ends = leg.timeline.end_s if killed is None else killed
        fires = []
        for trigger, fire in leg.timeline.triggers(rules.after_s, rules.stall_after_s):
            if fire >= ends:
                break
            fires.append((trigger, leg.start_s + fire))
        return fires

    def schedule_triggers(self, call: _Call, leg: _Leg, fires: list[tuple[Trigger, float]]) -> None:
        if not fires:
            return
        (trigger, when), rest = fires[0], fires[1:]
        round_id = call.round_id
        self.at(when, lambda now: self.fire(call, round_id, leg, trigger, rest, now))

    def fire(
        self,
        call: _Call,
        round_id: int,
        primary: _Leg,
        trigger: Trigger,
        rest: list[tuple[Trigger, float]],
        now: float,
    ) -> None:
        if call.done or call.round_id != round_id or primary.over:
            return
        if self.hedge(call, primary, trigger, now):
            return
        if trigger == FIRST_TOKEN and self.shape.per_trigger:
            self.schedule_triggers(call, primary, rest)  # fallthrough to the stall trigger

    def hedge(self, call: _Call, primary: _Leg, trigger: Trigger, now: float) -> bool:
        """Start the round's one hedge if a source and the budget allow it (the client's
        ``find_hedge``: the first eligible source, by priority, whose breaker lets it through)."""
        targets = Candidates(self.states).hedge_targets(now, primary=primary.state.name)
        budget_trigger = trigger if self.shape.per_trigger else STALL
        if not targets or not self.budgets.spend(budget_trigger):
            return False
        for target in targets:
            permit = target.breaker.acquire(now)
            if permit is not None:
                break
        else:
            self.budgets.refund(budget_trigger)
            return False
        self.hedges += 1
        self.cap_excess = max(
            self.cap_excess, self.hedges - self.rules.ratio * self.rounds - self.start_tokens
        )
        leg = self.new_leg(call, target, now, permit, hedge=True)
        leg.trigger = trigger
        call.legs.append(leg)
        if trigger == STALL:
            call.outcome.stall_hedges += 1
        else:
            call.outcome.first_token_hedges += 1
        return True

    def end_leg(self, call: _Call, round_id: int, leg: _Leg, now: float) -> None:
        if call.done or call.round_id != round_id or leg.over:
            return
        leg.over = True
        killed = leg.timeline.kill(self.rules.kills)
        if killed is None:  # the script ran to its end: the leg won
            leg.state.breaker.record_success()
            for other in call.legs:
                if not other.over:
                    other.over = True
                    other.state.breaker.release(other.permit)  # a cancelled loser: no verdict
            call.done = True
            call.outcome.wall_s = now - call.start_s
            return
        leg.state.breaker.record_failure(now, unit=self.rng.random(), permit=leg.permit)
        if not all(other.over for other in call.legs):
            return
        call.fails += 1
        if call.fails >= self.shape.max_attempts:
            call.done = True  # wall_s stays inf: the call failed
            return
        primary = call.legs[0].state.name
        if call.same_source.get(primary, 0) < self.shape.same_source_retries:
            call.stay, call.avoid = Stay(primary, max_wait_s=0.0), None
        else:
            call.stay, call.avoid = None, primary
        delay = backoff_delay(
            call.fails,
            base_s=self.shape.backoff_base_s,
            cap_s=self.shape.backoff_max_s,
            unit=self.rng.random(),
        )
        self.at(now + delay, lambda when: self.start_round(call, when))


def replay(
    rules: Rules, calls: int, interval_s: float, draw: Draw, shape: ClientShape | None = None
) -> Replay:
    """``calls`` calls under ``rules``, call ``i`` starting at ``i × interval_s`` simulated
    seconds, each request's timeline from ``draw`` at the moment the request is made."""
    run = _Run(rules, draw, shape if shape is not None else ClientShape())
    records = [_Call(index, index * interval_s) for index in range(calls)]
    for record in records:
        run.at(record.start_s, functools.partial(run.start_round, record))
    run.run()
    return Replay(tuple(record.outcome for record in records), run.cap_excess)
