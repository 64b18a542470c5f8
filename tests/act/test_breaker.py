"""The per-source circuit breaker: opening, probing, growing cool-downs, jitter."""

from __future__ import annotations

import pytest

from otel_llm._act._breaker import Breaker, BreakerState
from otel_llm._defaults import DEFAULTS


def fixed(threshold: int, cooldown_s: float) -> Breaker:
    """A breaker whose every cool-down is ``cooldown_s`` (no growth, no jitter)."""
    return Breaker(
        failure_threshold=threshold, first_cooldown_s=cooldown_s, max_cooldown_s=cooldown_s,
        growth=1.0, jitter=0.0,
    )  # fmt: skip


def test_consecutive_failures_open_it() -> None:
    """The threshold-th consecutive failure opens the breaker; a success in between resets."""
    breaker = fixed(3, 10.0)
    breaker.record_failure(0.0)
    breaker.record_failure(0.0)
    breaker.record_success()
    breaker.record_failure(1.0)
    breaker.record_failure(1.0)
    assert breaker.state is BreakerState.CLOSED
    breaker.record_failure(2.0)
    assert breaker.state is BreakerState.OPEN
    assert not breaker.allows(11.9)
    assert breaker.open_until() == 12.0


def test_half_open_lets_one_probe_through() -> None:
    """After the cool-down exactly one probe passes; its success closes the breaker."""
    breaker = fixed(1, 5.0)
    breaker.record_failure(0.0)
    assert breaker.acquire(5.0)
    assert breaker.state is BreakerState.HALF_OPEN
    assert not breaker.acquire(5.0), "a second concurrent probe is refused"
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED
    assert breaker.acquire(5.0)


def test_failed_probe_reopens() -> None:
    """A failed probe re-opens the breaker for another cool-down."""
    breaker = fixed(5, 5.0)
    for _ in range(5):
        breaker.record_failure(0.0)
    assert breaker.acquire(6.0)
    breaker.record_failure(6.0)
    assert breaker.state is BreakerState.OPEN
    assert breaker.open_until() == 11.0


def test_release_frees_the_probe_without_a_verdict() -> None:
    """A cancelled probe (hedge loser) gives no verdict: the next probe may go."""
    breaker = fixed(1, 1.0)
    breaker.record_failure(0.0)
    assert breaker.acquire(1.0)
    breaker.release()
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.acquire(1.0)


def test_only_the_probe_frees_the_probe() -> None:
    """An attempt let through while the breaker was closed, ending without a verdict while
    another call's probe is in flight, leaves that probe in flight: no second probe goes."""
    breaker = fixed(1, 1.0)
    older = breaker.acquire(0.0)
    assert older is not None
    assert older.probe is None
    breaker.record_failure(0.0)
    probe = breaker.acquire(1.0)
    assert probe is not None
    assert probe.probe is not None
    breaker.release(older)
    assert breaker.acquire(1.0) is None, "the probe is still in flight"
    breaker.release(probe)
    assert breaker.acquire(1.0) is not None


def test_an_older_attempts_failure_does_not_decide_the_probe() -> None:
    """Half-open, the failure of an attempt let through before the breaker opened is counted
    but is no failed probe: the breaker stays half-open, the cool-down does not grow, and the
    probe's own failure re-opens it."""
    breaker = Breaker(failure_threshold=1, first_cooldown_s=1.0, max_cooldown_s=8.0, jitter=0.0)
    older = breaker.acquire(0.0)
    breaker.record_failure(0.0)
    probe = breaker.acquire(1.0)
    breaker.record_failure(1.5, permit=older)
    assert breaker.state is BreakerState.HALF_OPEN
    assert (breaker.reopened, breaker.failures) == (0, 2)
    assert breaker.acquire(1.5) is None, "the probe is still in flight"
    breaker.record_failure(2.0, permit=probe)
    assert breaker.state is BreakerState.OPEN
    assert breaker.open_until() == 2.0 + 1.0 * breaker.growth


def test_a_probe_from_an_earlier_half_open_decides_nothing() -> None:
    """A probe that outlived its half-open state (an older attempt's success closed the
    breaker, failures opened it again, a new probe went) neither frees nor fails the new
    probe."""
    breaker = fixed(1, 1.0)
    older = breaker.acquire(0.0)
    breaker.record_failure(0.0)
    first = breaker.acquire(1.0)
    breaker.record_success()  # ``older`` answered after all
    breaker.record_failure(2.0, permit=breaker.acquire(2.0))
    second = breaker.acquire(3.0)
    assert None not in (older, first, second)
    breaker.release(first)
    breaker.record_failure(3.5, permit=first)
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.acquire(3.5) is None, "the second probe is still in flight"
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED


def test_failures_while_open_do_not_extend_it() -> None:
    """Attempts let through before the breaker opened may fail later: the cool-down stands."""
    breaker = fixed(1, 5.0)
    breaker.record_failure(0.0)
    breaker.record_failure(3.0)
    assert breaker.open_until() == 5.0


def test_cooldowns_grow_with_failed_probes_up_to_the_cap() -> None:
    """Each failed probe doubles the cool-down from the first one up to the longest; a success
    starts the sequence again."""
    breaker = Breaker(
        failure_threshold=1, max_cooldown_s=5.0, first_cooldown_s=1.0, growth=2.0, jitter=0.0
    )
    breaker.record_failure(0.0)
    now, cooldowns = 0.0, []
    for _ in range(6):
        cooldowns.append(breaker.cooldown_s)
        now = breaker.open_until() or now
        assert breaker.acquire(now)
        breaker.record_failure(now)
    assert cooldowns == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert breaker.acquire(breaker.open_until() or now)
    breaker.record_success()
    breaker.record_failure(100.0)
    assert breaker.cooldown_s == 1.0


@pytest.mark.parametrize(("unit", "cooldown"), [(0.0, 5.0), (0.5, 4.75), (0.999, 4.5005)])
def test_jitter_only_shortens(unit: float, cooldown: float) -> None:
    """Jitter takes up to its fraction off a cool-down and never adds to it."""
    breaker = Breaker(failure_threshold=1, max_cooldown_s=5.0, first_cooldown_s=5.0, jitter=0.1)
    breaker.record_failure(0.0, unit=unit)
    assert breaker.cooldown_s == pytest.approx(cooldown)


def test_defaults_bound_recovery_and_probe_rate() -> None:
    """With the defaults, no cool-down exceeds 5 s and, once grown, none is shorter than 4.5 s:
    a recovered source waits at most 5 s for its probe, an outage costs about one probe every
    5 s."""
    breaker = Breaker(
        failure_threshold=1,
        max_cooldown_s=DEFAULTS.breaker_cooldown_s,
        first_cooldown_s=DEFAULTS.breaker_first_cooldown_s,
    )
    breaker.record_failure(0.0, unit=0.999)
    for _ in range(10):
        now = breaker.open_until() or 0.0
        breaker.acquire(now)
        breaker.record_failure(now, unit=0.999)
    assert 4.5 <= breaker.cooldown_s <= 5.0


def test_an_outage_of_days_keeps_the_breaker_working() -> None:
    """Thousands of failed probes (an outage of days): the cool-down stays at its maximum (no
    overflow), and the first successful probe closes the breaker."""
    breaker = Breaker(failure_threshold=1, max_cooldown_s=5.0, first_cooldown_s=1.0, jitter=0.0)
    breaker.record_failure(0.0)
    now = 0.0
    for _ in range(20_000):
        now = breaker.open_until() or now
        assert breaker.acquire(now)
        breaker.record_failure(now)
    assert breaker.cooldown_s == 5.0
    now = breaker.open_until() or now
    assert breaker.acquire(now)
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED


def test_every_change_of_state_is_told_once() -> None:
    """``on_change`` hears each move — open, half-open, open again, half-open, closed — and
    nothing that leaves the state as it was (a success while closed, a failure below the
    threshold); one that raises costs the breaker nothing."""
    moves: list[BreakerState] = []
    breaker = fixed(2, 5.0)
    breaker.on_change = moves.append
    breaker.record_success()
    breaker.record_failure(0.0)
    breaker.record_failure(0.0)  # opens
    assert breaker.acquire(5.0)  # half-open probe
    breaker.record_failure(5.0)  # the probe failed: open again
    assert breaker.acquire(10.0)
    breaker.record_success()
    assert moves == [
        BreakerState.OPEN,
        BreakerState.HALF_OPEN,
        BreakerState.OPEN,
        BreakerState.HALF_OPEN,
        BreakerState.CLOSED,
    ]

    def broken(state: BreakerState) -> None:
        raise RuntimeError("the meter is gone")

    breaker.on_change = broken
    breaker.record_failure(20.0)
    breaker.record_failure(20.0)
    assert breaker.state is BreakerState.OPEN
