"""The hedge budget: a token bucket that caps extra requests from hedging (SPEC R16, pure)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class HedgeBudget:
    """Each primary round earns ``ratio`` of a hedge; a hedge leg spends one.

    Over any long run, hedge legs are at most ``ratio`` × primary rounds + ``burst``.
    """

    ratio: float
    burst: float
    tokens: float = -1.0

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = self.burst

    def earn(self) -> None:
        """A primary round started."""
        self.tokens = min(self.burst, self.tokens + self.ratio)

    def spend(self) -> bool:
        """Take one hedge if the budget has it."""
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def refund(self) -> None:
        """Give back a hedge that was not started after all."""
        self.tokens = min(self.burst, self.tokens + 1.0)
