"""Stores of scripted attempts for the ``otel-llm tune`` tests: real SDK spans (the client's
``AttemptSpan`` with its chunk clock marked at scripted times, through the deriving processor)
in a real segment store, so the timelines tune reads back can be checked against the script."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from unittest.mock import patch

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from otel_llm import DerivingSpanProcessor, SegmentSpanExporter
from otel_llm import _semconv as sc
from otel_llm._measure import _spans as spans_module
from otel_llm._measure._spans import AttemptSpan
from otel_llm._measure._stalls import NS_PER_MS
from otel_llm._tune._hedging_model import Timeline

MS = NS_PER_MS
THRESHOLD_MS = 1000
"""The stall threshold the scripted attempts are measured at (the floor is then 100 ms)."""


@dataclass(frozen=True, slots=True)
class Scripted:
    """One attempt: chunk arrivals (ms from its start) and its end; a source, leg, outcome."""

    arrivals_ms: tuple[float, ...]
    end_ms: float
    source: str = "sim-1"
    leg: str = sc.LEG_PRIMARY
    outcome: str = sc.OUTCOME_OK
    start_ms: float = 0.0
    """When it started, from its call's start."""

    def timeline(self, floor_ms: float = 100.0) -> Timeline:
        """What the hedging model should read of it (the script's own arithmetic)."""
        arrivals = self.arrivals_ms
        gaps = tuple(
            (before / 1000, (after - before) / 1000)
            for before, after in pairwise(arrivals)
            if after - before > floor_ms
        )
        ok = self.outcome == sc.OUTCOME_OK
        if not ok and arrivals and self.end_ms - arrivals[-1] > floor_ms:  # the fatal silence
            gaps += ((arrivals[-1] / 1000, (self.end_ms - arrivals[-1]) / 1000),)
        first = arrivals[0] / 1000 if arrivals else float("inf")
        return Timeline(first, self.end_ms / 1000, gaps, ok=ok)


def stream(
    first_ms: float,
    chunks: int = 20,
    every_ms: float = 20.0,
    silences: dict[int, float] | None = None,
) -> tuple[float, ...]:
    """Arrivals: the first chunk at ``first_ms``, then one every ``every_ms``; ``silences``
    maps a chunk index to extra silence (ms) before the chunk after it."""
    arrivals, t = [], first_ms
    for index in range(chunks):
        arrivals.append(t)
        t += every_ms + (silences or {}).get(index, 0.0)
    return tuple(arrivals)


@contextmanager
def _wall_clock(at_ns: int | None) -> Iterator[None]:
    """The wall clock the spans are anchored on reads ``at_ns`` (``None``: the real one)."""
    if at_ns is None:
        yield
        return
    with patch.object(spans_module, "time_ns", lambda: at_ns):
        yield


@dataclass
class TuneStore:
    """A segment store written through the SDK and the deriving processor."""

    path: Path
    service: str | None = None
    """The spans' ``service.name`` (``None``: the SDK's default)."""
    provider: TracerProvider = field(init=False)
    exporter: SegmentSpanExporter = field(init=False)

    def __post_init__(self) -> None:
        self.exporter = SegmentSpanExporter(self.path)
        resource = Resource.create({} if self.service is None else {"service.name": self.service})
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(
            DerivingSpanProcessor([SimpleSpanProcessor(self.exporter)])
        )

    def call(self, attempts: Sequence[Scripted], at_ns: int | None = None) -> None:
        """One call of ``attempts`` (numbered in order), its span from the first start to the
        last end, started now or at ``at_ns`` (wall-clock ns); failed (an error status) when
        none of them succeeded."""
        with _wall_clock(at_ns):
            self._call(attempts)

    def _call(self, attempts: Sequence[Scripted]) -> None:
        tracer = self.provider.get_tracer("tests")
        anchor = spans_module.time_ns()
        wall_ms = max(a.start_ms + a.end_ms for a in attempts)
        call = tracer.start_span(
            "chat sim-model",
            start_time=anchor,
            attributes={
                sc.SPAN_ROLE: sc.SPAN_ROLE_CALL,
                sc.GEN_AI_OPERATION_NAME: sc.OPERATION_CHAT,
                sc.GEN_AI_REQUEST_MODEL: "sim-model",
                sc.GEN_AI_REQUEST_STREAM: True,
                sc.CALL_ATTEMPTS: len(attempts),
                sc.CALL_HEDGES: sum(a.leg == sc.LEG_HEDGE for a in attempts),
            },
        )
        context = trace.set_span_in_context(call)
        for number, scripted in enumerate(attempts, start=1):
            start = int(scripted.start_ms * MS)
            span = AttemptSpan(
                tracer,
                "chat sim-model",
                attributes={
                    sc.GEN_AI_OPERATION_NAME: sc.OPERATION_CHAT,
                    sc.GEN_AI_REQUEST_MODEL: "sim-model",
                    sc.ATTEMPT_SOURCE: scripted.source,
                    sc.ATTEMPT_NUMBER: number,
                    sc.ATTEMPT_LEG: scripted.leg,
                },
                threshold_ms=THRESHOLD_MS,
                streamed=True,
                context=context,
                start_ns=start,
            )
            for arrival in scripted.arrivals_ms:
                span.clock.mark_at(start + int(arrival * MS))
            span.finish(scripted.outcome, end_ns=start + int(scripted.end_ms * MS))
        winner = next((n for n, a in enumerate(attempts, 1) if a.outcome == sc.OUTCOME_OK), 0)
        if winner:
            call.set_attribute(sc.CALL_WINNER_ATTEMPT, winner)
        else:  # every attempt failed
            call.set_status(Status(StatusCode.ERROR, "every attempt failed"))
        call.end(end_time=anchor + int(wall_ms * MS))

    def close(self) -> None:
        """Flush every span into the store."""
        self.provider.shutdown()


def measured_like(rng: random.Random, source: str = "sim-1") -> Scripted:
    """An attempt drawn like the user's traffic, shortened: a first chunk near 1.6 s (rarely
    late), 20 % of attempts with one long silence (2–30 s), a short tail."""
    first = rng.lognormvariate(0.5, 0.35) * 1000
    if rng.random() < 0.02:
        first += rng.uniform(5_000, 15_000)
    silences = {rng.randrange(2, 18): rng.uniform(2_000, 30_000)} if rng.random() < 0.2 else None
    arrivals = stream(first, 20, 25.0, silences)
    return Scripted(arrivals, arrivals[-1] + 5.0, source=source)


def write_store(
    path: Path, calls: int, *, seed: int = 7, sources: Sequence[str] = ("sim-1",)
) -> list[Scripted]:
    """A store of ``calls`` unhedged calls of one :func:`measured_like` attempt each, sources
    taken in turn; the scripts, in call order."""
    rng = random.Random(seed)
    store = TuneStore(path)
    scripts = []
    try:
        for index in range(calls):
            scripted = measured_like(rng, sources[index % len(sources)])
            store.call([scripted])
            scripts.append(scripted)
    finally:
        store.close()
    return scripts
