"""The fake metering clock (``otel_llm.testing.FakeClock``): it moves exactly as far as told,
forward only."""

from __future__ import annotations

import math

import pytest

from otel_llm import ConfigurationError
from otel_llm.testing import FakeClock


def test_an_advance_is_exact_to_the_nanosecond() -> None:
    """``advance(1000 * (0.7 + 0.1))`` (799.9999999999999 as a float) moves 800 ms, and
    fractions of a millisecond keep their nanoseconds (it truncated: 799.999999 ms)."""
    clock = FakeClock()
    start = clock()
    clock.advance(1000 * (0.7 + 0.1))
    assert clock() - start == 800_000_000
    clock.advance(0.0015)
    assert clock() - start == 800_001_500


@pytest.mark.parametrize("ms", [-1.0, math.nan, math.inf, -math.inf])
def test_a_clock_never_moves_back_nor_by_no_number(ms: float) -> None:
    """A negative, NaN or infinite advance is a ConfigurationError naming it, and the clock
    stays where it was (a negative one moved it back: gaps below zero; NaN raised a bare
    ValueError from int())."""
    clock = FakeClock()
    before = clock()
    with pytest.raises(ConfigurationError, match=r"ms: .*finite number of milliseconds"):
        clock.advance(ms)
    assert clock() == before
