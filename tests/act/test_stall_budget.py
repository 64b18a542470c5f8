"""The stall budget counts non-productive time only."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from otel_llm._act._stall_budget import StallBudget


def test_burning_attempts_do_not_count() -> None:
    """Time inside attempts that consumed max_attempts is not stall."""
    budget = StallBudget(started_at=100.0, window_s=30.0)
    budget.burn(60.0)  # a transient failure that held the full timeout
    assert budget.waited_s(170.0) == 10.0
    assert not budget.exhausted(170.0)


def test_everything_else_counts_including_429_attempts() -> None:
    """Backoff, rate-limit waits and 429 attempts (not burned) all count."""
    budget = StallBudget(started_at=0.0, window_s=300.0)
    assert budget.exhausted(300.0)
    assert not budget.exhausted(299.9)
    assert budget.remaining_s(250.0) == 50.0


def test_regression_gateway_holding_then_429() -> None:
    """A gateway holding each request for the full 60 s timeout and then answering 429 ends
    the call at the window, not after 301 attempts (25 hours)."""
    budget = StallBudget(started_at=0.0, window_s=300.0)
    now, attempts = 0.0, 0
    while not budget.exhausted(now):
        now += 60.0  # the 429 attempt itself: never burned
        attempts += 1
    assert attempts == 5
    assert now == 300.0


@given(
    burns=st.lists(st.floats(min_value=0, max_value=100), max_size=20),
    extra=st.floats(min_value=0, max_value=1000),
)
def test_waited_is_elapsed_minus_burned(burns: list[float], extra: float) -> None:
    """waited = elapsed − burned, never negative."""
    budget = StallBudget(started_at=0.0, window_s=1.0)
    for burn in burns:
        budget.burn(burn)
    now = sum(burns) + extra
    assert abs(budget.waited_s(now) - extra) < 1e-6
