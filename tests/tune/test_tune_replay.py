"""``otel_llm/_tune/_replay.py``: a known tiny store replayed through the package model, every
figure checked by hand, and the seeded draws."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from otel_llm import _semconv as sc
from otel_llm import open_store
from otel_llm._tune._hedging_model import FAILED_S, Rules, mean_backoff_s
from otel_llm._tune._recorded import read_recorded
from otel_llm._tune._replay import Draws, replay
from otel_llm._tune._sample import Sample, sample
from otel_llm._tune._tuning import tune
from tests.support.tune_store import Scripted, TuneStore, stream

FAST = Scripted(stream(500.0, 20, 20.0), 1_000.0, source="a")
"""1 s, no gap above the floor."""
STALLED = Scripted(stream(1_000.0, 10, 20.0, {2: 10_000.0}), 11_300.0, source="a")
"""First chunk at 1 s, chunk 2 at 1.04 s, then a 10.02 s gap; ends at 11.3 s."""
FAILS = Scripted(stream(500.0, 5, 20.0), 3_000.0, source="a", outcome=sc.OUTCOME_ERROR)
"""Fails at 3 s, 2.42 s after its last chunk (0.58 s): the silence that ended it is its gap."""
OTHER = Scripted(stream(500.0, 10, 20.0), 2_000.0, source="b")
"""The other source: every hedge or retry leg is this one, 2 s."""
BACKOFF = mean_backoff_s(Rules().max_rounds)[0]
"""The mean wait before the first retry (0.25 s)."""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three calls on source a (fast, stalled, failing) and two identical calls on b."""
    path = tmp_path_factory.mktemp("tiny") / "s"
    store = TuneStore(path)
    for scripted in (FAST, STALLED, FAILS, OTHER, OTHER):
        store.call([scripted])
    store.close()
    return path


def _sample(path: Path) -> Sample:
    with open_store(path) as conn:
        return sample(read_recorded(conn, since=None, max_calls=100), "a")


def _walls(path: Path, rules: Rules) -> tuple[list[float], float]:
    data = _sample(path)
    draws = Draws.of(data, seed=1, rounds=rules.max_rounds)
    figures = replay(data, rules, draws)
    return [figures.p50_s, figures.p95_s, figures.p99_s], figures.requests_per_call


def _p(walls: list[float], q: float) -> float:
    """The inclusive (linear) quantile of three walls, by hand."""
    ordered = sorted(walls)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    return ordered[low] + (position - low) * (ordered[min(low + 1, 2)] - ordered[low])


@pytest.mark.parametrize(
    ("rules", "walls", "requests"),
    [
        # unhedged: 1 s; 11.3 s; fails at 3 s, retried after the backoff on b (2 s)
        (Rules(), [1.0, 11.3, 3.0 + BACKOFF + 2.0], 4),
        # the stall trigger fires 2 s into the 10 s gap (1.04 + 2), the hedge takes 2 s; and
        # 2 s into the failing call's last silence (0.58 + 2): its hedge answers, no retry
        (Rules(stall_after_s=2.0), [1.0, 1.04 + 2.0 + 2.0, 0.58 + 2.0 + 2.0], 5),
        # the first-token trigger fires at 0.8 s on the stalled call only (its first chunk: 1 s)
        (Rules(after_s=0.8), [1.0, 0.8 + 2.0, 3.0 + BACKOFF + 2.0], 5),
        # a 5 s watchdog kills the stalled call at 1.04 + 5, retried after the backoff
        (Rules(watchdog_s=5.0), [1.0, 1.04 + 5.0 + BACKOFF + 2.0, 3.0 + BACKOFF + 2.0], 5),
        # a stall trigger above the gap never fires
        (Rules(stall_after_s=12.0), [1.0, 11.3, 3.0 + BACKOFF + 2.0], 4),
    ],
)
def test_a_tiny_store_replays_as_computed_by_hand(
    tiny: Path, rules: Rules, walls: list[float], requests: int
) -> None:
    """Each setting's p50 / p95 / p99 and requests per call on the tiny store are the ones
    worked out by hand from its scripts and the client's rules."""
    figures, per_call = _walls(tiny, rules)
    expected = [_p(walls, q) for q in (0.5, 0.95, 0.99)]
    assert figures == pytest.approx(expected, abs=1e-6)
    assert per_call == pytest.approx(requests / 3)


def test_tune_replays_the_same_baseline_and_says_it_is_too_little(tiny: Path) -> None:
    """tune on the tiny store: its baseline is the unhedged replay above, the recorded calls'
    own figures beside it (the failed call failed), and no recommendation (3 calls, 2
    attempts in the pool)."""
    with open_store(tiny) as conn:
        tuning = tune(conn, source="a")
    assert tuning.baseline is not None
    assert tuning.baseline.figures.p50_s == pytest.approx(3.0 + BACKOFF + 2.0)
    assert tuning.recorded is not None
    # as recorded, the failing call had no retry: it failed, and counts as failed (FAILED_S)
    # the way the replay counts a call that never answers, not as its 3 s
    assert tuning.recorded.p50_s == pytest.approx(11.3, abs=1e-6)
    assert tuning.recorded.p99_s > 0.9 * FAILED_S
    with open_store(tiny) as conn:
        calls = read_recorded(conn, since=None, max_calls=100).calls.values()
    assert sorted(call.ok for call in calls) == [False, True, True, True, True]
    assert tuning.recommendation is None
    assert not tuning.sample.enough
    assert len(tuning.sample.problems) == 2


def test_the_same_seed_gives_the_same_draws_and_figures(tmp_path: Path) -> None:
    """Draws are made once per seed: the same seed, the same legs and figures; the draws of
    another seed differ (a pool of several attempts)."""
    store = TuneStore(tmp_path / "s")
    for index in range(40):
        store.call([Scripted(stream(300.0 + 37 * index, 5), 1_000.0 + 97 * index)])
    store.close()
    with open_store(tmp_path / "s") as conn:
        data = sample(read_recorded(conn, since=None, max_calls=100))
    rules = Rules(after_s=0.5)
    one, again, other = (Draws.of(data, seed, rules.max_rounds) for seed in (1, 1, 2))
    assert one == again
    assert one != other
    assert replay(data, rules, one) == replay(data, rules, again)
    assert all(len(picks) == 2 * rules.max_rounds for picks in one.picks)
