"""Retry backoff: exponential growth, a cap, full jitter."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_llm._act._backoff import backoff_delay


@pytest.mark.parametrize(
    ("failures", "unit", "expected"),
    [
        (0, 0.9, 0.0),
        (1, 1.0, 0.5),
        (2, 1.0, 1.0),
        (3, 1.0, 2.0),
        (5, 1.0, 8.0),
        (6, 1.0, 8.0),
        (3, 0.5, 1.0),
        (3, 0.0, 0.0),
        (500, 1.0, 8.0),
    ],
)
def test_backoff_table(failures: int, unit: float, expected: float) -> None:
    """Delay doubles per failure from the base, is capped, and scales with the jitter draw."""
    assert backoff_delay(failures, base_s=0.5, cap_s=8.0, unit=unit) == pytest.approx(expected)


@given(
    failures=st.integers(min_value=1, max_value=10_000),
    unit=st.floats(min_value=0.0, max_value=1.0),
)
def test_backoff_is_bounded(failures: int, unit: float) -> None:
    """Every delay lies in [0, cap]."""
    assert 0.0 <= backoff_delay(failures, base_s=0.25, cap_s=4.0, unit=unit) <= 4.0
