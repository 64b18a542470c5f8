"""The hedge budget caps extra requests."""

from __future__ import annotations

from otel_llm._act._hedge_budget import HedgeBudget


def test_ratio_bounds_hedges_over_a_long_run() -> None:
    """After the burst, at most ratio × primary rounds hedges start."""
    budget = HedgeBudget(ratio=0.1, burst=2.0)
    hedges = 0
    for _ in range(1000):
        budget.earn()
        if budget.spend():
            hedges += 1
    assert 100 <= hedges <= 102


def test_refund_returns_an_unused_hedge() -> None:
    """A hedge that could not start after all is given back."""
    budget = HedgeBudget(ratio=0.0, burst=1.0)
    assert budget.spend()
    assert not budget.spend()
    budget.refund()
    assert budget.spend()
