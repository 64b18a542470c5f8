"""The per-source circuit breaker (SPEC R4)."""

from __future__ import annotations

from otel_llm.act._breaker import Breaker, BreakerState


def test_consecutive_failures_open_it() -> None:
    """The threshold-th consecutive failure opens the breaker; a success in between resets."""
    breaker = Breaker(failure_threshold=3, cooldown_s=10.0)
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
    breaker = Breaker(failure_threshold=1, cooldown_s=5.0)
    breaker.record_failure(0.0)
    assert breaker.acquire(5.0)
    assert breaker.state is BreakerState.HALF_OPEN
    assert not breaker.acquire(5.0), "a second concurrent probe is refused"
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED
    assert breaker.acquire(5.0)


def test_failed_probe_reopens() -> None:
    """A failed probe re-opens the breaker for another cool-down."""
    breaker = Breaker(failure_threshold=5, cooldown_s=5.0)
    for _ in range(5):
        breaker.record_failure(0.0)
    assert breaker.acquire(6.0)
    breaker.record_failure(6.0)
    assert breaker.state is BreakerState.OPEN
    assert breaker.open_until() == 11.0


def test_release_frees_the_probe_without_a_verdict() -> None:
    """A cancelled probe (hedge loser) gives no verdict: the next probe may go."""
    breaker = Breaker(failure_threshold=1, cooldown_s=1.0)
    breaker.record_failure(0.0)
    assert breaker.acquire(1.0)
    breaker.release()
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.acquire(1.0)
