"""The zero-overhead hedging model (benchmarks/hedging_model.py) reads scripts faithfully."""

from __future__ import annotations

import importlib.util
import itertools
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from otel_llm._act._hedge_budget import FIRST_TOKEN, STALL
from otel_llm.simulator import Script, Silence, sample_measured


def load_model() -> ModuleType:
    path = Path(__file__).parent.parent / "benchmarks" / "hedging_model.py"
    spec = importlib.util.spec_from_file_location("hedging_model", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


MODEL = load_model()


def arrivals(script: Script) -> list[float]:
    silence: dict[int, float] = {}
    for item in script.silences:
        silence[item.after_chunk] = silence.get(item.after_chunk, 0.0) + item.duration_s
    times = [script.first_chunk_delay_s]
    for index in range(script.chunk_count - 1):
        times.append(times[-1] + script.chunk_interval_s + silence.get(index, 0.0))
    return times


def test_legs_match_the_chunk_by_chunk_timeline() -> None:
    """End and long gaps of a leg equal those of the script's chunk-by-chunk arrivals."""
    rng = random.Random(11)
    for _ in range(500):
        script = sample_measured(rng)
        times = arrivals(script)
        leg = MODEL.leg_of(script)
        expected = [(a, b - a) for a, b in itertools.pairwise(times) if b - a > 1.0]
        assert abs(leg.end_s - times[-1]) < 1e-6
        assert len(leg.long_gaps) == len(expected)
        for (before, gap), (want_before, want_gap) in zip(leg.long_gaps, expected, strict=True):
            assert abs(before - want_before) < 1e-6
            assert abs(gap - want_gap) < 1e-6


def test_triggers_and_kills_follow_the_rules() -> None:
    """Stall trigger after the first chunk only, first-token trigger before it, watchdog kill."""
    script = Script(
        first_chunk_delay_s=2.0,
        chunk_count=5,
        chunk_interval_s=0.5,
        silences=(Silence(after_chunk=1, duration_s=30.0),),
    )
    leg = MODEL.leg_of(script)  # chunks at 2, 2.5, 33, 33.5, 34
    assert list(leg.triggers(None, 10.0)) == [(STALL, 2.5 + 10.0)]
    assert list(leg.triggers(1.0, 10.0)) == [(FIRST_TOKEN, 1.0), (STALL, 2.5 + 10.0)]
    assert list(leg.triggers(None, 40.0)) == []
    assert leg.kill(20.0) == 2.5 + 20.0
    assert leg.kill(None) is None
    assert leg.kill(1.5) == 1.5


class Fixed:
    """A source that answers its requests with the given scripts, the last one repeated."""

    def __init__(self, *scripts: Script) -> None:
        self.legs = [MODEL.leg_of(script) for script in scripts]

    def __getitem__(self, index: int) -> object:
        return self.legs[min(index, len(self.legs) - 1)]


CLEAN = Script(first_chunk_delay_s=1.0, chunk_count=3, chunk_interval_s=0.5)  # ends at 2 s


def stalled(after_chunk: int = 0, seconds: float = 100.0) -> Script:
    return Script(
        first_chunk_delay_s=1.0,
        chunk_count=3,
        chunk_interval_s=0.5,
        silences=(Silence(after_chunk=after_chunk, duration_s=seconds),),
    )


def call(
    rules: Any,
    primary: Script,
    hedge: Script | tuple[Script, ...],
    retry: Script,
    tokens: float = 10.0,
) -> tuple[float, int]:
    hedges = hedge if isinstance(hedge, tuple) else (hedge,)
    sources = MODEL.Sources((Fixed(primary), Fixed(*hedges), Fixed(retry)))
    budgets = MODEL.Budgets(rules.policy, 0.25, 10.0, tokens)
    outcome = MODEL.simulate_call(rules, sources, budgets, 5)
    return outcome.wall_s, outcome.requests


def test_one_hedge_rescues_a_stalled_call() -> None:
    """A stalled primary with a clean hedge ends at the hedge's end; two requests."""
    rules = MODEL.Rules("stall 10", stall_after_s=10.0)
    assert call(rules, stalled(), CLEAN, CLEAN) == (1.0 + 10.0 + 2.0, 2)


def test_a_refused_hedge_leaves_the_primary_alone() -> None:
    """With no budget token the stalled primary runs to its end; one request."""
    rules = MODEL.Rules("stall 10", stall_after_s=10.0)
    assert call(rules, stalled(), CLEAN, CLEAN, tokens=0.0) == (stalled().nominal_duration_s, 1)


def test_no_hedge_of_a_hedge_and_first_success_wins() -> None:
    """Both legs stall: the round's one hedge is spent, the earlier success wins (the primary,
    whose silence ends first); with chain rules the hedge hedges again and a third leg wins."""
    primary, hedge = stalled(seconds=30.0), stalled(seconds=100.0)
    rules = MODEL.Rules("stall 10", stall_after_s=10.0)
    assert call(rules, primary, hedge, CLEAN) == (primary.nominal_duration_s, 2)
    chain = MODEL.Rules("chain 10", stall_after_s=10.0, chain=True)
    # the hedge starts at 11 s, stalls after its first chunk (12 s), hedges at 22 s: ends 24 s
    assert call(chain, primary, (hedge, CLEAN), CLEAN) == (24.0, 3)


def test_a_killed_primary_waits_for_the_hedge_then_a_failed_round_retries() -> None:
    """Watchdog 20 s: the primary dies at 21 s, the clean hedge (11-13 s) wins; when the hedge
    stalls too, both die, and the retry round starts after the last kill plus the backoff."""
    rules = MODEL.Rules("stall 10 wd 20", stall_after_s=10.0, watchdog_s=20.0)
    assert call(rules, stalled(), CLEAN, CLEAN) == (13.0, 2)
    wall, requests = call(rules, stalled(), stalled(), CLEAN)
    hedge_killed = 11.0 + 1.0 + 20.0  # hedge starts at 11 s, first chunk 1 s later, 20 s of silence
    assert requests == 3
    assert wall == hedge_killed + MODEL.BACKOFF_MEAN_S[0] + CLEAN.nominal_duration_s


def test_shared_is_the_default_and_a_refused_first_token_hedge_ends_the_rounds_hedging() -> None:
    """Rules default to the shared budget (today's client), which grants the first-token hedge
    from the full bucket; without fallthrough a first-token hedge the budget refuses leaves the
    round unhedged; with it the round's one hedge goes to the stall trigger instead, and the call
    is hedged exactly once (R10)."""
    assert MODEL.Rules("x").policy == MODEL.SHARED == MODEL.Policy()
    assert MODEL.SHARED.kind == "shared"
    assert not MODEL.SHARED.fallthrough
    slow_then_stalled = Script(
        first_chunk_delay_s=8.0,
        chunk_count=3,
        chunk_interval_s=0.5,
        silences=(Silence(after_chunk=0, duration_s=100.0),),
    )  # first chunk at 8 s, then 100 s of silence: ends at 109 s
    shared = MODEL.Rules("both", after_s=6.0, stall_after_s=10.0)
    # the first-token hedge at 6 s, a clean hedge leg: done at 8 s
    assert call(shared, slow_then_stalled, CLEAN, CLEAN) == (8.0, 2)
    overflow = MODEL.Policy("overflow", spill=1.0)
    assert call(
        MODEL.Rules("both", 6.0, 10.0, policy=overflow), slow_then_stalled, CLEAN, CLEAN
    ) == (109.0, 1)  # an empty first-token bucket refuses, and so ends the round's hedging
    fallthrough = MODEL.Policy("overflow", spill=1.0, fallthrough=True)
    # refused at 6 s, the stall hedge at 8 + 10 s from the stall bucket: done at 20 s
    assert call(
        MODEL.Rules("both", 6.0, 10.0, policy=fallthrough), slow_then_stalled, CLEAN, CLEAN
    ) == (20.0, 2)


def test_policies_keep_the_request_cap_and_the_stall_buckets_tokens() -> None:
    """Every policy spends at most ratio × rounds + burst, and its buckets hold at most the burst
    together (overflow outside the burst: burst + spill); priority refuses first-token hedges at
    its reserve but not stall hedges; overflow's first-token bucket earns only what the full stall
    bucket throws away."""
    priority = MODEL.Budgets(MODEL.Policy("priority", reserve=5.0), 0.25, 10.0, 5.5)
    assert not priority.spend(FIRST_TOKEN)
    assert priority.spend(STALL)
    overflow = MODEL.Budgets(MODEL.Policy("overflow", spill=2.0), 0.25, 10.0, 9.5)
    overflow.earn()  # 9.5 -> 9.75: nothing spilled
    assert not overflow.spend(FIRST_TOKEN)
    for _ in range(5):
        overflow.earn()  # 9.75 -> 10, then 1.0 spilled
    assert overflow.spend(FIRST_TOKEN)
    assert not overflow.spend(FIRST_TOKEN)
    for policy in MODEL.POLICIES:
        budgets = MODEL.Budgets(policy, 0.25, 10.0)
        most = 10.0 + (policy.spill if policy.kind == "overflow" and not policy.inside else 0.0)
        spent = 0
        for round_number in range(1, 2001):
            budgets.earn()
            assert budgets.held <= most + 1e-9, policy
            trigger = STALL if round_number % 3 else FIRST_TOKEN
            if round_number > 500:  # quiet at first: full buckets, overflow spills
                spent += budgets.spend(trigger) + budgets.spend(trigger)
            assert spent <= 0.25 * round_number + 10.0 + 1e-9, policy


def test_the_budget_study_is_deterministic_on_paired_draws() -> None:
    """Two runs of a policy row on fresh pools of the same seeds give the same figures; the
    shared row equals the default rules' row; the stall trigger alone hedges no first token."""
    both = MODEL.Rules("both", 6.0, 10.0)
    overflow = MODEL.Rules("both", 6.0, 10.0, policy=MODEL.Policy("overflow", fallthrough=True))

    def pools() -> tuple[object, object, object]:
        return (MODEL.Pool(1), MODEL.Pool(1001), MODEL.Pool(2001))

    first = MODEL.measure(overflow, 300, pools(), 5, paired=True)
    assert first == MODEL.measure(overflow, 300, pools(), 5, paired=True)
    assert first.stall_hedges > 0
    assert first.cap_used <= 1.0
    shared = MODEL.measure(both, 300, pools(), 5, paired=True)
    explicit = MODEL.Rules("both", 6.0, 10.0, policy=MODEL.Policy("shared"))
    assert shared == MODEL.measure(explicit, 300, pools(), 5, paired=True)
    assert shared.first_token_hedges > 0
    alone = MODEL.measure(MODEL.Rules("stall", None, 10.0), 300, pools(), 5, paired=True)
    assert alone.first_token_hedges == 0
    assert MODEL.run(both, 300, pools(), 5) == (
        MODEL.measure(both, 300, pools(), 5).p99,
        MODEL.measure(both, 300, pools(), 5).requests,
    )
