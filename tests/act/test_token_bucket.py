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
