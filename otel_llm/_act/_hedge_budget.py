"""The hedge budget: a token bucket that caps extra requests from hedging (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


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


Trigger = Literal["first_token", "stall"]
"""What started a hedge: the first chunk was late or the stream stalled."""
FIRST_TOKEN: Trigger = "first_token"
STALL: Trigger = "stall"


@dataclass(slots=True)
class HedgeBudgets:
    """The hedge budget of a client, spent per trigger (the study behind it is
    ``benchmarks/results/hedging_budgets.txt``).

    With one trigger set, that trigger has the whole bucket (``ratio``, ``burst``), exactly as
    before. With both, the stall trigger keeps the whole bucket, as if it were alone, and the
    first-token trigger spends only what the full bucket would throw away: each round's
    ``ratio`` that does not fit into the stall bucket flows into a first-token bucket of at most
    ``first_token_burst`` tokens. Both buckets start full, so a fresh client hedges a late first
    chunk at once (a short-lived process or a quiet route would otherwise never earn the
    overflow). So over any run from the start hedge legs stay at most ``ratio`` × primary
    rounds + ``burst`` + ``first_token_burst``; the long-run rate is ``ratio`` all the same.
    A first-token hedge never takes a stall token: the stall bucket earns and spends exactly as
    with the stall trigger alone.
    (That a refused first-token hedge leaves the round's one hedge to the stall trigger is the
    round's part, :mod:`otel_llm._act._round`; a non-streamed call, where only the first-token
    trigger applies, spends from the first-token bucket all the same.)
    """

    ratio: float
    burst: float
    first_token_burst: float
    both: bool
    """Whether both triggers are set (else the one set spends the whole bucket)."""
    stall: HedgeBudget = field(init=False)
    first_token: HedgeBudget = field(init=False)

    def __post_init__(self) -> None:
        self.stall = HedgeBudget(self.ratio, self.burst)
        self.first_token = HedgeBudget(0.0, self.first_token_burst) if self.both else self.stall

    def earn(self) -> None:
        """A primary round started."""
        before = self.stall.tokens
        self.stall.earn()
        self._spill(before + self.ratio - self.stall.tokens)

    def _spill(self, tokens: float) -> None:
        """``tokens`` the full stall bucket could not hold go to the first-token bucket (up to
        its burst; with one trigger there is no second bucket and they are lost, as before)."""
        if self.first_token is not self.stall and tokens > 0:
            first = self.first_token
            first.tokens = min(first.burst, first.tokens + tokens)

    def _bucket(self, trigger: Trigger) -> HedgeBudget:
        return self.stall if trigger == STALL else self.first_token

    def spend(self, trigger: Trigger) -> bool:
        """Take one hedge for ``trigger`` if its bucket has it."""
        return self._bucket(trigger).spend()

    def refund(self, trigger: Trigger) -> None:
        """Give back a hedge of ``trigger`` that was not started after all. A stall token the
        stall bucket can no longer hold (it filled up meanwhile) spills like an earned one."""
        if trigger == STALL:
            before = self.stall.tokens
            self.stall.refund()
            self._spill(before + 1.0 - self.stall.tokens)
        else:
            self.first_token.refund()

    @property
    def held(self) -> float:
        """Tokens the buckets hold together."""
        extra = 0.0 if self.first_token is self.stall else self.first_token.tokens
        return self.stall.tokens + extra
