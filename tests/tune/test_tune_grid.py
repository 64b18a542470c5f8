"""``otel_llm/_tune/_grid.py``: sensible seconds, candidates from the recorded distribution,
and the grid's shape (never a trigger at or below the floor, never a watchdog below a
trigger)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_llm._defaults import DEFAULTS
from otel_llm._tune._grid import (
    exceeded_by,
    first_token_triggers,
    grid,
    ratios,
    sensible_seconds,
    stall_triggers,
    watchdogs,
)
from otel_llm._tune._hedging_model import Kills, Role, Rules, Timeline, simulate_call
from otel_llm._tune._sample import Sample


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(1.0, 1.0), (1.1, 1.2), (7.0, 8.0), (13.0, 12.0), (55.0, 60.0), (0.013, 0.012), (9.6, 10.0)],
)
def test_sensible_seconds_by_table(value: float, seconds: float) -> None:
    """The nearest of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^k on a log scale."""
    assert sensible_seconds(value) == seconds


@given(st.floats(min_value=1e-4, max_value=1e5))
def test_sensible_seconds_stay_close_and_are_fixed_points(value: float) -> None:
    """Rounding moves a value by at most half the ladder's widest step (1.5 → 2: ×1.155) and
    rounding a rounded value changes nothing."""
    seconds = sensible_seconds(value)
    half_step = math.sqrt(2.0 / 1.5) + 1e-9
    assert 1 / half_step <= seconds / value <= half_step
    assert sensible_seconds(seconds) == seconds


@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan])
def test_sensible_seconds_refuse_what_is_no_duration(value: float) -> None:
    """Zero, negatives and non-finite values are not trigger durations."""
    with pytest.raises(ValueError, match="finite number of seconds"):
        sensible_seconds(value)


def test_exceeded_by_is_the_nearest_rank_quantile() -> None:
    """The value a share of the values exceeds (ties included)."""
    values = [float(v) for v in range(1, 101)]
    assert exceeded_by(values, 0.10) == 90.0
    assert exceeded_by(values, 0.01) == 99.0
    assert exceeded_by(values, 0.0) == 100.0
    assert exceeded_by([], 0.1) is None


def _sample(primaries: list[Timeline], floor_ms: int = 100) -> Sample:
    return Sample(
        primaries=tuple(primaries),
        primary_sources=("a",) * len(primaries),
        pools={"a": tuple(primaries)},
        sources={"a": len(primaries)},
        attempts_used=len(primaries),
        censored=0,
        left_out={},
        floor_ms=floor_ms,
        recorded=(),
        source=None,
        calls_in_range=len(primaries),
    )


def _measured_like(calls: int = 1000) -> list[Timeline]:
    """First chunks spread over 0.5–5.5 s; every fifth call has one gap of 2–40 s."""
    found = []
    for i in range(calls):
        first = 0.5 + 5.0 * ((i * 37) % 100) / 100
        gaps = ((first + 0.2, 2.0 + 38.0 * ((i * 13) % 50) / 50),) if i % 5 == 0 else ()
        found.append(Timeline(first, first + 3.0 + sum(g for _, g in gaps), gaps))
    return found


def test_candidates_come_from_the_distribution_above_the_floor() -> None:
    """First-token candidates are first-chunk quantiles, stall candidates quantiles of the
    longest gap (of all calls and of the stalled ones), all rounded, each exceeded by some
    call; watchdogs start with none."""
    data = _sample(_measured_like())
    afters = first_token_triggers(data)
    stalls = stall_triggers(data)
    assert afters
    assert stalls
    assert all(sensible_seconds(v) == v for v in (*afters, *stalls))
    assert max(afters) <= 6.0
    assert min(stalls) >= 2.0, "the stalled calls' own quantiles: just above the cadence"
    assert max(stalls) <= 40.0
    assert watchdogs(data)[0] is None


def test_no_candidate_at_or_below_the_floor() -> None:
    """With a floor of 5 s (gaps shorter than that unknown), no stall trigger or watchdog is
    at or below it."""
    data = _sample(_measured_like(), floor_ms=5_000)
    assert all(v > 5.0 for v in stall_triggers(data))
    assert all(v is None or v > 5.0 for v in watchdogs(data))


def test_no_long_gap_means_no_stall_candidate() -> None:
    """Calls without a gap above the floor give no stall trigger to try."""
    data = _sample([Timeline(1.0 + i / 100, 3.0) for i in range(200)])
    assert stall_triggers(data) == ()


def test_ratios_follow_the_budget() -> None:
    """Half, all and twice what the budget allows; the default ratio when it allows nothing."""
    assert ratios(1.25) == (0.125, 0.25, 0.5)
    assert ratios(1.0) == (0.125, 0.25, 0.5)
    assert ratios(2.0) == (0.5, 1.0, 2.0)


def test_the_grid_has_both_triggers_each_alone_and_unhedged() -> None:
    """The unhedged setting without a watchdog first; every pair, each trigger alone, every
    ratio for hedged settings; a watchdog only with triggers below it, and without one, a
    stall trigger only below the default 30 s between chunks."""
    data = _sample(_measured_like())
    settings = grid(data, 1.25)
    assert settings[0].after_s is None
    assert settings[0].stall_after_s is None
    assert settings[0].watchdog_s is None
    afters, stalls = first_token_triggers(data), stall_triggers(data)
    unwatched = [s for s in settings if s.watchdog_s is None]
    hedged = {(s.after_s, s.stall_after_s, s.ratio) for s in unwatched if s.hedging}
    pairs: list[tuple[float | None, float | None]] = [(a, None) for a in afters]
    pairs += [(None, s) for s in stalls]
    pairs += [(a, s) for a in afters for s in stalls]
    gap_s = DEFAULTS.inter_token_timeout_s
    kept = [(a, s) for a, s in pairs if s is None or s < gap_s]
    assert len(kept) < len(pairs), "the data suggest a stall trigger past 30 s"
    assert hedged == {(a, s, r) for a, s in kept for r in ratios(1.25)}
    assert {s.kills for s in unwatched} == {Kills(DEFAULTS.timeout_s, gap_s)}
    for setting in settings:
        if setting.watchdog_s is not None:
            triggers = [t for t in (setting.after_s, setting.stall_after_s) if t is not None]
            assert all(t < setting.watchdog_s for t in triggers)
    assert len({(s.after_s, s.stall_after_s, s.watchdog_s, s.ratio) for s in settings}) == len(
        settings
    )


def test_without_a_watchdog_no_trigger_reaches_the_default_timeout() -> None:
    """Gaps of minutes: no setting without a watchdog has a first-token trigger at or above
    the default TIMEOUT_S (60 s) or a stall trigger at or above the default 30 s between
    chunks, which the client's watchdog falls back to and would pre-empt, so the client
    refuses it; with ``--timeout 90`` both limits are 90 s."""
    data = _sample(
        [
            Timeline(1.0 + 60.0 * (i % 3), 200.0, ((2.0, 50.0 + i),) if i % 2 else ())
            for i in range(300)
        ]
    )
    assert max(stall_triggers(data)) >= 60.0, "the data suggest one"
    for setting in grid(data, 1.25):
        if setting.watchdog_s is None:
            assert (setting.after_s or 0.0) < 60.0
            assert (setting.stall_after_s or 0.0) < 30.0
    longer = [s for s in grid(data, 1.25, 90.0) if s.watchdog_s is None]
    assert max(s.stall_after_s or 0.0 for s in longer) >= 30.0
    assert {s.kills for s in longer} == {Kills.both(90.0)}


def test_first_attempts_that_failed_before_a_chunk_count_but_are_no_candidate() -> None:
    """First attempts that failed before their first chunk (``first_s`` = inf, 5 % of them,
    or most of them) rank above every candidate and are never one themselves: no error."""
    some = [
        Timeline(math.inf, 2.0, ok=False) if i % 20 == 0 else t
        for i, t in enumerate(_measured_like())
    ]
    afters = first_token_triggers(_sample(some))
    assert afters
    assert all(math.isfinite(v) for v in afters)
    assert max(afters) <= 6.0
    most = [Timeline(math.inf, 2.0, ok=False)] * 90 + [Timeline(1.0, 3.0)] * 10
    assert all(math.isfinite(v) for v in first_token_triggers(_sample(most)))
    assert grid(_sample(most), 1.25)


def _long_silences() -> list[Timeline]:
    """A fifth of the calls fall silent for 20–150 s after their first chunk (an SDK with a
    600 s read timeout would record such silences whole)."""
    found = []
    for i in range(1500):
        first = 1.0 + (i % 10) / 10
        gaps = ((first + 1.0, 20.0 + 130.0 * ((i * 7) % 100) / 100),) if i % 5 == 0 else ()
        found.append(Timeline(first, first + 3.0 + sum(g for _, g in gaps), gaps))
    return found


def test_no_watchdog_or_trigger_at_or_above_the_clients_timeout() -> None:
    """Every setting kills at the client's TIMEOUT_S (default 60 s) without a watchdog, as the
    client does; no watchdog candidate is at or above it, no trigger either (the client
    refuses a trigger its watchdog would pre-empt). A longer --timeout lets longer watchdogs
    in, still below it."""
    data = _sample(_long_silences())
    settings = grid(data, 1.25)
    assert {s.timeout_s for s in settings} == {DEFAULTS.timeout_s}
    for setting in settings:
        limits = [t for t in (setting.after_s, setting.stall_after_s, setting.watchdog_s) if t]
        assert all(t < DEFAULTS.timeout_s for t in limits)
    longer = watchdogs(data, timeout_s=200.0)
    assert any(w is not None and w > DEFAULTS.timeout_s for w in longer), "the data suggest one"
    assert all(w is None or w < 200.0 for w in longer)
    assert all(s.timeout_s == 200.0 for s in grid(data, 1.25, timeout_s=200.0))


def test_no_watchdog_kills_at_the_timeout() -> None:
    """A leg silent for 80 s after its chunk at 2 s, without a watchdog, is killed at 62 s by
    the client's 60 s TIMEOUT_S and retried; with no timeout (a study's client) it answers at
    its own end; a watchdog below the timeout kills first."""
    stalled = Timeline(1.0, 85.0, ((2.0, 80.0),))
    good = Timeline(1.0, 3.0)

    def draw(role: Role) -> Timeline:
        return stalled if role == "primary" else good

    client = Rules(timeout_s=60.0)
    assert client.kills == Kills(60.0, 60.0)
    outcome = simulate_call(client, draw, client.budgets(), (0.25,))
    assert outcome.rounds == 2
    assert math.isclose(outcome.wall_s, 2.0 + 60.0 + 0.25 + 3.0)
    assert simulate_call(Rules(), draw, Rules().budgets(), (0.25,)).wall_s == 85.0
    watched = Rules(watchdog_s=10.0, timeout_s=60.0)
    assert watched.kills == Kills(10.0, 10.0)
    defaults = Rules(timeout_s=60.0, gap_timeout_s=30.0)  # a source that sets no TIMEOUT_S
    assert defaults.kills == Kills(60.0, 30.0)
    # a watchdog of 40 s sets INTER_TOKEN_TIMEOUT_S=40: the 30 s fallback no longer applies
    assert Rules(watchdog_s=40.0, timeout_s=60.0, gap_timeout_s=30.0).kills == Kills.both(40.0)
    assert math.isclose(simulate_call(defaults, draw, defaults.budgets(), (0.25,)).wall_s, 35.25)
    assert math.isclose(simulate_call(watched, draw, watched.budgets(), (0.25,)).wall_s, 15.25)
