"""The harness of the hedged-round tests: scripted legs on the real event loop, a ledger that
records what the round asked for."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from opentelemetry.trace import NoOpTracerProvider, Tracer

from otel_llm import HedgeSettings, Source
from otel_llm import _semconv as sc
from otel_llm._act._attempt import Attempt
from otel_llm._act._breaker import Breaker
from otel_llm._act._hedge_budget import Trigger
from otel_llm._act._legs import Leg
from otel_llm._act._round import Round, RoundResult
from otel_llm._act._source_state import SourceState

TIMER = 0.05
SLOW = 0.3

Behaviour = Callable[[Attempt], Awaitable[str]]


def state(name: str) -> SourceState:
    source = Source(name=name, provider="sim", base_url="http://127.0.0.1:9/v1", model="m")
    return SourceState(
        source, Breaker(failure_threshold=5, first_cooldown_s=30.0, max_cooldown_s=30.0)
    )


async def chunks(attempt: Attempt, count: int, every: float = 0.005) -> None:
    for _ in range(count):
        attempt.span.clock.mark()
        await asyncio.sleep(every)


def streamed(first_after: float, gap_after: int | None = None, gap: float = 0.0) -> Behaviour:
    """First chunk after ``first_after`` s, 10 chunks, optionally a ``gap`` after chunk N."""

    async def run(attempt: Attempt) -> str:
        await asyncio.sleep(first_after)
        if gap_after is None:
            await chunks(attempt, 10)
        else:
            await chunks(attempt, gap_after)
            await asyncio.sleep(gap)
            await chunks(attempt, 10 - gap_after)
        return attempt.source.name

    return run


def unstreamed(after: float) -> Behaviour:
    async def run(attempt: Attempt) -> str:
        await asyncio.sleep(after)
        return attempt.source.name

    return run


def fails(after: float, error: Exception) -> Behaviour:
    async def run(attempt: Attempt) -> str:
        await asyncio.sleep(after)
        raise error

    return run


def blocked() -> Behaviour:
    async def run(attempt: Attempt) -> str:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return run


@dataclass
class Legs:
    """Starts scripted legs and remembers what the round asked for."""

    behaviours: dict[str, Behaviour]
    stream: bool = True
    started: list[tuple[str, str, asyncio.Event | None, float, int]] = field(default_factory=list)
    legs: list[Leg[str]] = field(default_factory=list)
    hedge_target: str | None = "b"
    primary_started: asyncio.Event = field(default_factory=asyncio.Event)
    hedge_started: asyncio.Event = field(default_factory=asyncio.Event)
    asked: list[Trigger] = field(default_factory=list)
    """The triggers the round asked a hedge for, in order."""
    given_back: list[Trigger] = field(default_factory=list)
    """Triggers whose hedge was found as the primary finished, and given back."""
    tracer: Tracer = field(default_factory=lambda: NoOpTracerProvider().get_tracer("t"))

    def new_leg(
        self, target: SourceState, tokens: int, role: str, signal: asyncio.Event | None
    ) -> Leg[str]:
        loop = asyncio.get_running_loop()
        attempt = Attempt(
            self.tracer,
            target.source,
            number=len(self.legs) + 1,
            stream=self.stream,
            threshold_ms=1000,
            leg=role,
            signal=signal,
        )
        primary_chunks = self.legs[0].attempt.chunks if self.legs else 0
        self.started.append((target.name, role, signal, loop.time(), primary_chunks))
        leg: Leg[str] = Leg(target, attempt, tokens)
        self.legs.append(leg)
        (self.hedge_started if role == sc.LEG_HEDGE else self.primary_started).set()
        return leg

    async def run_leg(self, leg: Leg[str]) -> str:
        try:
            return await self.behaviours[leg.state.name](leg.attempt)
        finally:
            leg.finished_at = asyncio.get_running_loop().time()

    async def find_hedge(
        self, primary: SourceState, trigger: Trigger
    ) -> tuple[SourceState, int] | None:
        assert primary.name == "a"
        self.asked.append(trigger)
        return (state(self.hedge_target), 1) if self.hedge_target else None

    async def give_back_hedge(self, target: SourceState, tokens: int, trigger: Trigger) -> None:
        """Nothing to give back: this ledger takes nothing for a hedge."""
        self.given_back.append(trigger)

    make_signal: Callable[[], asyncio.Event] = asyncio.Event
    cleanup_s: float = 5.0

    def round(self, after_s: float | None, stall_after_s: float | None) -> Round[str]:
        return Round(
            hedge=HedgeSettings(after_s=after_s, stall_after_s=stall_after_s),
            stream=self.stream,
            ledger=self,
            make_signal=self.make_signal,
            cleanup_s=self.cleanup_s,
        )

    async def run(self, after_s: float | None, stall_after_s: float | None) -> RoundResult[str]:
        return await self.round(after_s, stall_after_s).run(state("a"), 1)

    @property
    def hedge(self) -> tuple[str, str, asyncio.Event | None, float, int] | None:
        hedges = [s for s in self.started if s[1] == sc.LEG_HEDGE]
        return hedges[0] if hedges else None
