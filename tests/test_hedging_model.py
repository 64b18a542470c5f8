"""The zero-overhead hedging model (benchmarks/hedging_model.py) reads scripts faithfully."""

from __future__ import annotations

import importlib.util
import itertools
import random
import sys
from pathlib import Path
from types import ModuleType

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
        leg = MODEL.Leg.of(script)
        expected = [(a, b - a) for a, b in itertools.pairwise(times) if b - a > 1.0]
        assert abs(leg.end - times[-1]) < 1e-6
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
    leg = MODEL.Leg.of(script)  # chunks at 2, 2.5, 33, 33.5, 34
    assert leg.trigger(None, 10.0) == 2.5 + 10.0
    assert leg.trigger(1.0, 10.0) == 1.0
    assert leg.trigger(None, 40.0) is None
    assert leg.kill(20.0) == 2.5 + 20.0
    assert leg.kill(None) is None
    assert leg.kill(1.5) == 1.5


class Fixed:
    """A source that answers its requests with the given scripts, the last one repeated."""

    def __init__(self, *scripts: Script) -> None:
        self.legs = [MODEL.Leg.of(script) for script in scripts]

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
    rules: object,
    primary: Script,
    hedge: Script | tuple[Script, ...],
    retry: Script,
    tokens: float = 10.0,
) -> tuple[float, int]:
    hedges = hedge if isinstance(hedge, tuple) else (hedge,)
    sources = MODEL.Sources((Fixed(primary), Fixed(*hedges), Fixed(retry)))
    budget = MODEL.HedgeBudget(ratio=0.25, burst=10.0, tokens=tokens)
    result: tuple[float, int] = MODEL.simulate_call(rules, sources, budget, 5)
    return result


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
