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


def test_one_hedge_rescues_a_stalled_call() -> None:
    """A stalled primary with a clean hedge ends at the hedge's end; two requests."""
    rules = MODEL.Rules("stall 10", stall_after_s=10.0)
    stalled = Script(
        first_chunk_delay_s=1.0,
        chunk_count=3,
        chunk_interval_s=0.5,
        silences=(Silence(after_chunk=0, duration_s=100.0),),
    )
    clean = Script(first_chunk_delay_s=1.0, chunk_count=3, chunk_interval_s=0.5)

    class Fixed:
        def __init__(self, script: Script) -> None:
            self.leg = MODEL.Leg.of(script)

        def __getitem__(self, index: int) -> object:
            return self.leg

    sources = MODEL.Sources((Fixed(stalled), Fixed(clean), Fixed(clean)))
    budget = MODEL.HedgeBudget(ratio=0.25, burst=10.0)
    wall, requests = MODEL.simulate_call(rules, sources, budget, 5)
    assert requests == 2
    assert wall == 1.0 + 10.0 + 2.0
