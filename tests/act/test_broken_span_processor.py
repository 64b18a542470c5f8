"""A span processor that raises — a bug in the application's own tracing — never costs the LLM
call: over real HTTP to the simulated provider, streamed and not, hedged, embeddings and
``observe_stream``, the answer comes back, the provider is asked as often as without the
processor, every span started ends once, and the good processors on the same tracer provider
still receive the spans."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_llm import Client, NotFound, Source, observe_stream
from otel_llm import _semconv as sc
from otel_llm.simulator import Script, SimulatedProvider
from otel_llm.testing import Spans

MESSAGES = [{"role": "user", "content": "hi"}]
SCRIPTS = {
    "smooth": Script(first_chunk_delay_s=0.0, chunk_interval_s=0.002, chunk_count=10),
    "missing": Script(error_status=404),
    "slow-first": Script(  # its first chunk 25× later than the hedge trigger
        first_chunk_delay_s=5.0, chunk_interval_s=0.002, chunk_count=10
    ),
}
WHERE = ("start", "end", "both")
"""Where the faulty processor raises: in ``on_start``, ``on_end``, or both."""


class ProcessorBug(RuntimeError):
    """What the faulty processor raises."""


class FaultyProcessor(SpanProcessor):
    """A span processor with a bug: it raises in ``on_start``, ``on_end`` or both, with
    ``error`` (a class of the test's own, so its kind of failure is new to the process)."""

    def __init__(self, where: str, error: type[Exception] = ProcessorBug) -> None:
        self.where = where
        self.error = error
        self.raised = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.where in ("start", "both"):
            self.raised += 1
            raise self.error("bug in a span processor's on_start")

    def on_end(self, span: ReadableSpan) -> None:
        if self.where in ("end", "both"):
            self.raised += 1
            raise self.error("bug in a span processor's on_end")


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider(scripts=SCRIPTS) as running:
        yield running


def broken(spans: Spans, where: str, error: type[Exception] = ProcessorBug) -> FaultyProcessor:
    """The faulty processor, added to ``spans``' provider after its good ones (the tracker that
    checks every span ends once, the deriving processor into memory)."""
    faulty = FaultyProcessor(where, error)
    spans.provider.add_span_processor(faulty)
    return faulty


def source(sim: SimulatedProvider, name: str, model: str, **fields: Any) -> Source:
    return Source(
        name=name, provider="openai", base_url=sim.base_url, model=model, api_key="sim", **fields
    )


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
@pytest.mark.parametrize("where", WHERE)
async def test_chat_answers_once_through_a_raising_processor(
    provider: SimulatedProvider, spans: Spans, where: str, stream: bool
) -> None:
    """A chat call answers through a processor raising in on_start, on_end or both; the
    provider is asked once (no retry of an answered call), and the good processors receive
    the call and attempt spans with the winner's figures."""
    faulty = broken(spans, where)
    async with Client([source(provider, "a", "smooth")], tracer_provider=spans.provider) as c:
        result = await c.chat(MESSAGES, stream=stream)
    assert result.text.startswith("word0")
    assert result.finish_reason == "stop"
    assert provider.stats.requests == 1
    assert (result.stats.attempts, result.stats.retries, result.stats.hedges) == (1, 0, 0)
    assert faulty.raised >= 2, "the processor raised for the call span and the attempt span"
    (call,) = spans.calls()
    (attempt,) = spans.attempts()
    assert attrs(attempt)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert attempt.parent is not None
    assert attempt.parent.span_id == call.context.span_id
    assert sc.ERROR_TYPE not in attrs(call)
    assert attrs(call)[sc.CALL_WINNER_ATTEMPT] == 1
    assert attrs(call)[sc.WALL_MS] == result.stats.wall_ms


@pytest.mark.parametrize("where", WHERE)
async def test_a_hedged_call_hedges_as_without_the_processor(
    provider: SimulatedProvider, spans: Spans, where: str
) -> None:
    """A primary with no first chunk is hedged onto the next source, the hedge wins and the
    primary is cancelled — exactly as without the faulty processor: two requests, one hedge;
    both legs' spans reach the good processors and end once."""
    broken(spans, where)
    sources = [source(provider, "a", "slow-first"), source(provider, "b", "smooth")]
    async with Client(sources, hedge_after_s=0.2, tracer_provider=spans.provider) as c:
        result = await c.chat(MESSAGES)
        await provider.stats.wait_for_disconnects(1)
    assert result.text.startswith("word0")
    assert (result.source, result.stats.hedge_won) == ("b", True)
    assert (result.stats.attempts, result.stats.hedges) == (2, 1)
    assert provider.stats.requests == 2
    legs = {attrs(s)[sc.ATTEMPT_SOURCE]: attrs(s) for s in spans.attempts()}
    assert legs["a"][sc.ATTEMPT_OUTCOME] == sc.OUTCOME_HEDGE_CANCELLED
    assert legs["b"][sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert legs["b"][sc.ATTEMPT_LEG] == sc.LEG_HEDGE
    (call,) = spans.calls()
    assert attrs(call)[sc.CALL_HEDGE_WON] is True


@pytest.mark.parametrize("where", WHERE)
async def test_embeddings_answer_once_through_a_raising_processor(
    provider: SimulatedProvider, spans: Spans, where: str
) -> None:
    """An embeddings call answers through the faulty processor, asking the provider once."""
    broken(spans, where)
    async with Client([source(provider, "a", "embed")], tracer_provider=spans.provider) as c:
        result = await c.embed(["one", "two"])
    assert len(result.vectors) == 2
    assert provider.stats.requests == 1
    (call,) = spans.calls()
    assert attrs(call)[sc.GEN_AI_OPERATION_NAME] == sc.OPERATION_EMBEDDINGS
    (attempt,) = spans.attempts()
    assert attrs(attempt)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK


@pytest.mark.parametrize("where", WHERE)
async def test_observe_stream_meters_through_a_raising_processor(
    provider: SimulatedProvider, spans: Spans, where: str
) -> None:
    """``observe_stream`` over an openai stream from the simulator: every chunk reaches the
    application unchanged, and the call's spans reach the good processors."""
    broken(spans, where)
    sdk = openai.AsyncOpenAI(base_url=provider.base_url, api_key="sim", max_retries=0)
    try:
        raw = await sdk.chat.completions.create(
            model="smooth",
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
        )
        observed = observe_stream(
            raw, provider="openai", model="smooth", tracer_provider=spans.provider
        )
        chunks = [chunk async for chunk in observed]  # type: ignore[union-attr]
    finally:
        await sdk.close()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("word0")
    assert provider.stats.requests == 1
    (attempt,) = spans.attempts()
    assert attrs(attempt)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert attrs(attempt)[sc.CHUNK_COUNT] == 10
    assert len(spans.calls()) == 1


async def test_a_processor_after_one_raising_on_start_still_receives_the_spans(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """The SDK hands a span whose on_start raised to no one, yet started it: the call goes on
    with that span and ends it, so a processor added after the faulty one still receives every
    span, parent and child linked as usual."""
    broken(spans, "start")
    after = InMemorySpanExporter()
    spans.provider.add_span_processor(SimpleSpanProcessor(after))
    async with Client([source(provider, "a", "smooth")], tracer_provider=spans.provider) as c:
        result = await c.chat(MESSAGES)
    assert result.text.startswith("word0")
    received = after.get_finished_spans()
    roles = sorted(str(attrs(s)[sc.SPAN_ROLE]) for s in received)
    assert roles == [sc.SPAN_ROLE_ATTEMPT, sc.SPAN_ROLE_CALL]
    (call,) = [s for s in received if attrs(s)[sc.SPAN_ROLE] == sc.SPAN_ROLE_CALL]
    (attempt,) = [s for s in received if attrs(s)[sc.SPAN_ROLE] == sc.SPAN_ROLE_ATTEMPT]
    assert attempt.parent is not None
    assert attempt.parent.span_id == call.context.span_id


async def test_each_kind_of_failure_is_logged_once(
    provider: SimulatedProvider, spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    """Three calls through a processor raising on every start and end log one warning for the
    failed starts and one for the failed ends — not one per span or per call."""

    class ThisTestsBug(RuntimeError):  # a kind of failure no other test raised
        pass

    faulty = broken(spans, "both", ThisTestsBug)
    caplog.set_level(logging.DEBUG, logger="otel_llm")
    async with Client([source(provider, "a", "smooth")], tracer_provider=spans.provider) as c:
        for _ in range(3):
            await c.chat(MESSAGES)
    assert faulty.raised == 12, "a call span and an attempt span per call, started and ended"
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "ThisTestsBug" in r.getMessage()
    ]
    assert len(warned) == 2, warned
    assert "could not start a span" in warned[0]
    assert "could not end a span" in warned[1]
    assert all("the LLM call goes on" in message for message in warned)


class RefusingSpan(trace.NonRecordingSpan):
    """A span of another tracing SDK that raises on everything it is asked to record."""

    def set_attribute(self, key: str, value: Any) -> None:
        raise ProcessorBug("set_attribute")

    def set_attributes(self, attributes: Any) -> None:
        raise ProcessorBug("set_attributes")

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        raise ProcessorBug("add_event")

    def set_status(self, status: Any, description: str | None = None) -> None:
        raise ProcessorBug("set_status")

    def end(self, end_time: int | None = None) -> None:
        raise ProcessorBug("end")


class RefusingTracer(trace.NoOpTracer):
    def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
        return RefusingSpan(trace.INVALID_SPAN_CONTEXT)


class RefusingProvider(trace.NoOpTracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return RefusingTracer()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
async def test_spans_that_refuse_every_record_cost_the_call_nothing(
    provider: SimulatedProvider, stream: bool
) -> None:
    """A tracer provider whose spans raise on every attribute, event, status and end: the
    call still answers, once, as a call without telemetry would — streamed (chunk events) or
    not, a failed call too (its error recorded on the span)."""
    sources = [source(provider, "a", "smooth")]
    async with Client(sources, tracer_provider=RefusingProvider()) as c:
        result = await c.chat(MESSAGES, stream=stream)
    assert result.text.startswith("word0")
    assert provider.stats.requests == 1
    missing = [source(provider, "a", "missing")]
    async with Client(missing, tracer_provider=RefusingProvider()) as c:
        with pytest.raises(NotFound):  # the provider's error, not the span's
            await c.chat(MESSAGES, stream=stream)
    assert provider.stats.requests == 2


class UnstartableProvider(trace.NoOpTracerProvider):
    """A tracer provider of another SDK whose tracer cannot start a span at all."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return UnstartableTracer()


class UnstartableTracer(trace.NoOpTracer):
    def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
        raise ProcessorBug("start_span")


async def test_a_tracer_that_cannot_start_spans_costs_the_call_nothing(
    provider: SimulatedProvider,
) -> None:
    """When no started span can be found after start_span raised, the call goes on with a
    non-recording span: a hedged streamed call and an embeddings call answer as usual."""
    sources = [source(provider, "a", "slow-first"), source(provider, "b", "smooth")]
    async with Client(sources, hedge_after_s=0.2, tracer_provider=UnstartableProvider()) as c:
        result = await c.chat(MESSAGES)
        await provider.stats.wait_for_disconnects(1)
    assert (result.source, result.stats.hedges, provider.stats.requests) == ("b", 1, 2)
    async with Client([source(provider, "a", "embed")], tracer_provider=UnstartableProvider()) as c:
        embedded = await c.embed("one")
    assert len(embedded.vectors) == 1
    assert provider.stats.requests == 3


class MeterBug(RuntimeError):
    """What the faulty meter provider's instruments raise (a kind no other test raises)."""


class RaisingInstrument:
    """An instrument of a meter provider with a bug: every measurement raises."""

    def record(self, *args: Any, **kwargs: Any) -> None:
        raise MeterBug("bug in a meter provider's instrument")

    add = record


class RaisingMeter(metrics.NoOpMeter):
    def create_histogram(self, *args: Any, **kwargs: Any) -> Any:
        return RaisingInstrument()

    def create_counter(self, *args: Any, **kwargs: Any) -> Any:
        return RaisingInstrument()


class RaisingMeterProvider(metrics.NoOpMeterProvider):
    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> metrics.Meter:
        return RaisingMeter(name)


async def test_a_meter_provider_that_raises_costs_the_call_and_its_spans_nothing(
    provider: SimulatedProvider, spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    """Metrics failing on every measurement: three hedged calls answer as without them, every
    span is recorded, and each kind of metric failure is one warning, not one per call."""
    caplog.set_level(logging.DEBUG, logger="otel_llm")
    sources = [source(provider, "a", "slow-first"), source(provider, "b", "smooth")]
    async with Client(
        sources,
        tracer_provider=spans.provider,
        meter_provider=RaisingMeterProvider(),
        hedge_after_s=0.2,
    ) as client:
        for _ in range(3):
            result = await client.chat(MESSAGES)
            assert result.text.startswith("word0")
            assert result.stats.hedges == 1
    assert len(spans.calls()) == 3
    assert len(spans.attempts()) == 6
    warned = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and "MeterBug" in r.getMessage()
    ]
    kinds = sorted(message.split(" (", 1)[0] for message in warned)
    assert kinds == [
        "otel-llm: could not record a call's metrics",
        "otel-llm: could not record a hedge's metrics",
        "otel-llm: could not record an attempt's metrics",
    ], warned
