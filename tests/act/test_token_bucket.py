"""The token bucket behind admission."""

from __future__ import annotations

import pytest

from otel_llm._act._token_bucket import TokenBucket


def test_starts_full_and_refills() -> None:
    """A bucket starts full, empties, and refills at its rate."""
    bucket = TokenBucket.full(60.0, 1.0, now=0.0)
    assert bucket.wait_for(60, 0.0) == 0.0
    bucket.take(60, 0.0)
    assert bucket.wait_for(1, 0.0) == pytest.approx(1.0)
    assert bucket.wait_for(1, 1.0) == 0.0


def test_amount_above_capacity_is_clamped() -> None:
    """Asking for more than the capacity waits for a full bucket, not forever."""
    bucket = TokenBucket.full(10.0, 1.0, now=0.0)
    bucket.take(10, 0.0)
    assert bucket.wait_for(1_000, 0.0) == pytest.approx(10.0)


def test_settlement_refunds_and_charges() -> None:
    """adjust() refunds up to the capacity and charges into debt."""
    bucket = TokenBucket.full(100.0, 0.0, now=0.0)
    bucket.take(80, 0.0)
    bucket.adjust(+200, 0.0)
    assert bucket.level == 100.0
    bucket.adjust(-150, 0.0)
    assert bucket.level == -50.0
    assert bucket.wait_for(1, 0.0) == float("inf")


@pytest.mark.parametrize("capacity", [6.0, 7.0, 0.7, 3000.0, 123_457.0])
@pytest.mark.parametrize("start", [0.0, 40.0, 1e6])
def test_the_wait_it_names_is_enough(capacity: float, start: float) -> None:
    """A request that waits exactly the time the bucket named is admitted then — the refill's
    float rounding (0.9999999999999998 of a request) is no reason to wait again: that wait
    (2e-15 s) is no time on a clock reading 40.0, and an event loop on virtual time asked
    again for ever. A positive wait is long enough for a clock to move."""
    bucket = TokenBucket.full(capacity, capacity / 60.0, now=start)
    now = start
    for _ in range(500):
        wait = bucket.wait_for(1, now)
        if wait > 0:
            assert wait >= 60e-9
            now += wait
            assert bucket.wait_for(1, now) == 0.0, f"waited {wait!r}, asked to wait again"
        bucket.take(1, now)
