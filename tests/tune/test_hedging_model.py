"""The zero-overhead hedging model (benchmarks/hedging/model.py) reads scripts faithfully; the
grid it shares with the client benchmark, the time-ordered replay of the client's draws and the
frontier are sound."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import itertools
import math
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import vl_convert
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.hedging import model as MODEL
from otel_llm._act._hedge_budget import FIRST_TOKEN, STALL
from otel_llm._tune._hedging_model import Kills, Rules, Timeline, simulate_call
from otel_llm._tune._script_timeline import arrivals
from otel_llm.simulator import Script, Silence, sample_measured


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
    assert leg.kill(Kills.both(20.0)) == 2.5 + 20.0
    assert leg.kill(Kills()) is None
    assert leg.kill(Kills.both(1.5)) == 1.5
    assert leg.kill(Kills(first_s=1.5)) == 1.5  # the first chunk (at 2) is too late
    assert leg.kill(Kills(first_s=60.0, gap_s=30.0)) == 2.5 + 30.0  # the 30.5 s gap
    assert leg.kill(Kills(first_s=60.0, gap_s=31.0)) is None


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
    is hedged exactly once (one hedge per round)."""
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


# --- the grid both benchmarks share, the time-ordered replay, the frontier -----------------------


GRID = importlib.import_module("benchmarks.hedging._grid")
REPLAY = importlib.import_module("benchmarks.hedging._replay")
FRONTIER = importlib.import_module("benchmarks.hedging._frontier")


def test_the_grid_names_each_setting_once_and_parses_back() -> None:
    """Row names are unique in both grids and parse back to their settings; the default grid
    spans the frontier (unhedged, watchdog only, each trigger alone, both, with the 20 s watchdog,
    both budgets) in 10-14 settings; no watchdog at or below a trigger; the budget is named only
    where a trigger spends it."""
    for grid in (GRID.DEFAULT, GRID.FULL):
        names = [setting.name for setting in grid]
        assert len(set(names)) == len(names)
        assert GRID.parse_grid(",".join(names)) == grid
    assert 10 <= len(GRID.DEFAULT) <= 14
    kinds = {(s.stall_after_s is not None, s.after_s is not None) for s in GRID.DEFAULT}
    assert kinds == {(False, False), (True, False), (False, True), (True, True)}
    assert {s.watchdog_s for s in GRID.DEFAULT} == {None, 20.0}
    assert {s.budget for s in GRID.DEFAULT if s.hedging} == {0.25, 0.5}
    for setting in GRID.FULL:
        triggers = [t for t in (setting.stall_after_s, setting.after_s) if t is not None]
        assert setting.watchdog_s is None or all(setting.watchdog_s > t for t in triggers)
        assert ("b0." in setting.name) == setting.hedging
    assert GRID.Setting(10.0, 6.0, 20.0, 0.5).name == "stall 10 ft 6 wd 20 b0.5"
    assert GRID.Setting(watchdog_s=20.0).name == "wd 20"
    assert GRID.parse_grid("full") == GRID.FULL
    with pytest.raises(ValueError, match="unknown rows"):
        GRID.parse_grid("stall 11 b0.25")


STALLED = Timeline(first_s=1.0, end_s=102.0, long_gaps=((1.0, 100.0),))
"""First chunk at 1 s, 100 s of silence, last chunk at 102 s."""
QUICK = Timeline(first_s=1.0, end_s=2.0)


def fixed(primary: Timeline, hedge: Timeline) -> Callable[[int, int], Timeline]:
    """Draws: every request at source 0 gets ``primary``, at any other source ``hedge``."""
    return lambda source, call: primary if source == 0 else hedge


def test_the_replay_spends_the_budget_in_time_order() -> None:
    """Three stalled calls 5 s apart, ratio 0.5, burst 1: all three rounds have earned (the
    bucket stays full at 1) before the first stall trigger fires at 11 s, which takes the token;
    the triggers at 16 s and 21 s find it empty. Call by call (the sequential model) the third
    call would have earned its token back."""
    rules = Rules(stall_after_s=10.0, ratio=0.5, burst=1.0)
    result = REPLAY.replay(rules, 3, 5.0, fixed(STALLED, QUICK))
    assert [o.wall_s for o in result.outcomes] == [13.0, 102.0, 102.0]
    assert [o.requests for o in result.outcomes] == [2, 1, 1]
    assert [o.stall_hedges for o in result.outcomes] == [1, 0, 0]
    budgets, walls = rules.budgets(), []
    for _ in range(3):
        walls.append(
            simulate_call(
                rules, lambda role: STALLED if role != "hedge" else QUICK, budgets, ()
            ).wall_s
        )
    assert walls == [13.0, 102.0, 13.0]


def test_the_replay_retries_on_the_same_source_then_the_next() -> None:
    """Watchdog 20 s, every script stalled: the primary (sim-0) dies at 21 s; the first retry
    stays on sim-0 (same_source_retries 1), the second fails over to sim-1; each retry waits its
    full-jitter backoff from the client's seeded generator, which also draws the breaker jitter."""
    rules = Rules(watchdog_s=20.0, max_rounds=3)
    sources: list[int] = []

    def draw(source: int, call: int) -> Timeline:
        sources.append(source)
        return STALLED

    shape = REPLAY.ClientShape(max_attempts=3, seed=7)
    result = REPLAY.replay(rules, 1, 1.0, draw, shape)
    assert sources == [0, 0, 1]
    outcome = result.outcomes[0]
    assert outcome.wall_s == math.inf
    assert (outcome.requests, outcome.rounds) == (3, 3)


def test_without_hedging_the_replay_gives_the_scripted_walls() -> None:
    """Unhedged, every call's wall is its primary script's end, for keyed and arrival-order
    draws; keyed draws are the simulator's (seed/key/occurrence)."""
    scripts = REPLAY.KeyedScripts((3, 4, 5))
    result = REPLAY.replay(Rules(), 300, 0.5, scripts.draws())
    assert [o.wall_s for o in result.outcomes] == pytest.approx(
        [sample_measured(random.Random(f"3/call-{i}/0")).nominal_duration_s for i in range(300)],
        abs=1e-9,
    )
    arrival = REPLAY.ArrivalDraws((3, 4, 5))
    rng = random.Random(3)
    expected = [sample_measured(rng).nominal_duration_s for _ in range(300)]
    walls = [o.wall_s for o in REPLAY.replay(Rules(), 300, 0.5, arrival.draws()).outcomes]
    assert walls == pytest.approx(expected, abs=1e-9)
    assert (
        scripts.oracle_s(7)
        == sample_measured(random.Random("3/call-7/0"), silences=False).nominal_duration_s
    )


@given(
    after=st.one_of(st.none(), st.sampled_from([3.0, 6.0])),
    stall=st.one_of(st.none(), st.sampled_from([2.0, 5.0, 10.0])),
    ratio=st.sampled_from([0.1, 0.25, 0.5]),
    burst=st.sampled_from([1.0, 3.0, 10.0]),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=20, deadline=None)
def test_far_apart_calls_replay_like_the_sequential_model(
    after: float | None, stall: float | None, ratio: float, burst: float, seed: int
) -> None:
    """Calls that never overlap (a day apart, no watchdog, so no retries) meet the budget in
    call order: the replay then gives the package model's outcomes call by call."""
    rules = Rules(after, stall, None, ratio, burst)
    scripts = REPLAY.KeyedScripts((seed, seed + 1, seed + 2))
    result = REPLAY.replay(rules, 40, 86_400.0, scripts.draws())
    draw, budgets = scripts.draws(), rules.budgets()
    source = {"primary": 0, "hedge": 1, "retry": 2}
    for index, outcome in enumerate(result.outcomes):
        expected = simulate_call(
            rules, functools.partial(lambda i, role: draw(source[role], i), index), budgets, ()
        )
        assert outcome.wall_s == pytest.approx(expected.wall_s, abs=1e-6)
        assert replace(outcome, wall_s=0.0) == replace(expected, wall_s=0.0)


@given(
    after=st.one_of(st.none(), st.sampled_from([3.0, 6.0])),
    stall=st.one_of(st.none(), st.sampled_from([2.0, 5.0, 10.0])),
    watchdog=st.one_of(st.none(), st.sampled_from([12.0, 20.0])),
    ratio=st.sampled_from([0.1, 0.25, 0.5, 1.0]),
    burst=st.sampled_from([1.0, 3.0, 10.0]),
    interval=st.sampled_from([0.01, 0.5, 5.0]),
    per_trigger=st.booleans(),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=30, deadline=None)
def test_the_replay_never_spends_beyond_the_budget_cap(
    after: float | None,
    stall: float | None,
    watchdog: float | None,
    ratio: float,
    burst: float,
    interval: float,
    per_trigger: bool,
    seed: int,
) -> None:
    """At every hedge, the hedge legs so far are at most ratio × rounds started + the starting
    tokens (burst, plus the first-token burst with both triggers per trigger); a call
    hedges at most once per round and sends one request per round and per hedge."""
    rules = Rules(after, stall, watchdog, ratio, burst, max_rounds=5)
    shape = REPLAY.ClientShape(seed=seed, per_trigger=per_trigger)
    scripts = REPLAY.KeyedScripts((seed, seed + 1, seed + 2))
    result = REPLAY.replay(rules, 120, interval, scripts.draws(), shape)
    assert result.cap_excess <= 1e-9
    for outcome in result.outcomes:
        assert outcome.hedges <= outcome.rounds
        assert outcome.requests == outcome.rounds + outcome.hedges
        assert (outcome.wall_s < math.inf) or outcome.rounds == 5


def test_the_frontier_keeps_only_settings_no_other_beats_on_both(tmp_path: Path) -> None:
    """A row is on the frontier when every row with fewer or as many requests has a higher p99;
    saved grid points load back; the picture renders to a PNG with the model's grid, its
    frontier and the client's pairs."""
    rows = [("a", 1.0, 8.0), ("b", 1.2, 2.5), ("c", 1.25, 2.6), ("d", 1.3, 2.0), ("e", 1.3, 2.2)]
    kept = FRONTIER.frontier(rows, key=lambda row: (row[1], row[2]))
    assert [row[0] for row in kept] == ["a", "b", "d"]
    spec = FRONTIER.frontier_spec(rows, [(("b", 1.21, 2.55), ("b", 1.2, 2.5))])
    series = [value["series"] for value in spec["data"]["values"]]
    assert series.count(FRONTIER.MODEL_FRONTIER) == 3
    assert series.count(FRONTIER.CLIENT) == series.count(FRONTIER.CLIENT_MODEL) == 1
    png = vl_convert.vegalite_to_png(spec)
    assert png.startswith(b"\x89PNG")
    FRONTIER.save_grid_points(rows, tmp_path / "grid.json")
    assert FRONTIER.load_grid_points(tmp_path / "grid.json") == rows
    assert FRONTIER.spaced(kept) == kept  # far apart: each one labelled
    assert FRONTIER.spaced([("a", 1.0, 2.0), ("b", 1.01, 1.95)]) == [("a", 1.0, 2.0)]
