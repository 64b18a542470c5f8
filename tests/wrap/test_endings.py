"""How a wrapped call ends when the application, not the provider, ends it: a task cancelled
while the request waits for its answer, or a ``with`` block of a stream helper left by the
task's cancellation or by the application's own exception. The spans and the attempts metric
say what happened — cancelled, or the application's error — never a provider error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import Any

import anthropic
import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_llm import _semconv as sc
from otel_llm import (
    instrument_anthropic,
    instrument_openai,
    uninstrument_anthropic,
    uninstrument_openai,
)
from otel_llm.simulator import Script, SimulatedProvider
from otel_llm.testing import Spans

MESSAGES: list[Any] = [{"role": "user", "content": "hello"}]
SCRIPTS = {
    "held": Script(first_chunk_delay_s=0.0, chunk_interval_s=0.002, chunk_count=5, hold_s=30.0),
    "smooth": Script(first_chunk_delay_s=0.0, chunk_interval_s=0.002, chunk_count=5),
}
"""``held``: the answer's headers come after 30 s, long after every test here has cancelled."""
KEY = "sk-endings-secret-0000"


@pytest.fixture
def metrics() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def instrumented(spans: Spans, metrics: InMemoryMetricReader) -> Iterator[Spans]:
    meters = MeterProvider(metric_readers=[metrics])
    instrument_openai(tracer_provider=spans.provider, meter_provider=meters)
    instrument_anthropic(tracer_provider=spans.provider, meter_provider=meters)
    yield spans
    uninstrument_openai()
    uninstrument_anthropic()


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider(scripts=SCRIPTS) as running:
        yield running


def attempt_outcomes(metrics: InMemoryMetricReader) -> list[str]:
    """The outcome of every attempt the attempts counter counted."""
    data = metrics.get_metrics_data()
    assert data is not None
    return [
        str((point.attributes or {})[sc.ATTEMPT_OUTCOME])
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "otel_llm.client.attempts"
        for point in metric.data.data_points
        for _ in range(int(getattr(point, "value", 0)))
    ]


def ended_as(spans: Spans) -> tuple[str, Any, Any]:
    """The attempt's outcome and error type, the call's error type."""
    (attempt,) = spans.attempts()
    (call,) = spans.calls()
    attributes, call_attributes = dict(attempt.attributes or {}), dict(call.attributes or {})
    assert not [event for event in attempt.events if event.name == "exception"] or (
        attributes[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    )
    return (
        str(attributes[sc.ATTEMPT_OUTCOME]),
        attributes.get(sc.ERROR_TYPE),
        call_attributes.get(sc.ERROR_TYPE),
    )


async def cancelled_once(ready: Callable[[], Awaitable[Any]], call: Awaitable[Any]) -> None:
    """Run ``call`` in a task and cancel it once ``ready()`` has returned (the provider has
    the request, or the application is inside its block): the task ends cancelled."""
    task = asyncio.ensure_future(call)
    await ready()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def _openai(provider: SimulatedProvider) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=provider.base_url, api_key=KEY, max_retries=0)


def _anthropic(provider: SimulatedProvider) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=provider.url, api_key=KEY, max_retries=0)


async def _openai_streamed(provider: SimulatedProvider) -> Any:
    sdk = _openai(provider)
    return await sdk.chat.completions.create(model="held", messages=MESSAGES, stream=True)


async def _openai_answer(provider: SimulatedProvider) -> Any:
    sdk = _openai(provider)
    return await sdk.chat.completions.create(model="held", messages=MESSAGES)


async def _anthropic_streamed(provider: SimulatedProvider) -> Any:
    sdk = _anthropic(provider)
    return await sdk.messages.create(model="held", max_tokens=10, messages=MESSAGES, stream=True)


async def _anthropic_helper(provider: SimulatedProvider) -> Any:
    sdk = _anthropic(provider)
    async with sdk.messages.stream(model="held", max_tokens=10, messages=MESSAGES) as stream:
        return await stream.get_final_text()


CALLS: dict[str, Callable[[SimulatedProvider], Awaitable[Any]]] = {
    "openai create(stream=True)": _openai_streamed,
    "openai create()": _openai_answer,
    "anthropic create(stream=True)": _anthropic_streamed,
    "anthropic messages.stream()": _anthropic_helper,
}


@pytest.mark.parametrize("call", CALLS)
async def test_a_task_cancelled_while_the_request_waits_ends_as_cancelled(
    instrumented: Spans, metrics: InMemoryMetricReader, provider: SimulatedProvider, call: str
) -> None:
    """Cancelled before the answer's headers: both spans and the attempts metric say
    cancelled — no provider error, no exception event."""
    await cancelled_once(lambda: provider.stats.wait_for_requests(1), CALLS[call](provider))
    assert ended_as(instrumented) == (sc.OUTCOME_CANCELLED, sc.OUTCOME_CANCELLED, "cancelled")
    assert attempt_outcomes(metrics) == [sc.OUTCOME_CANCELLED]


async def test_a_helper_left_by_the_tasks_cancellation_ends_as_cancelled(
    instrumented: Spans, metrics: InMemoryMetricReader, provider: SimulatedProvider
) -> None:
    """``messages.stream()``'s block left because the task was cancelled while the application
    awaited something of its own: cancelled, as for a stream from ``create(stream=True)``."""
    inside = asyncio.Event()

    async def application() -> None:
        sdk = _anthropic(provider)
        async with sdk.messages.stream(model="smooth", max_tokens=10, messages=MESSAGES):
            inside.set()
            await asyncio.Event().wait()  # the application's own I/O, never done

    await cancelled_once(inside.wait, application())
    assert ended_as(instrumented)[0] == sc.OUTCOME_CANCELLED
    assert attempt_outcomes(metrics) == [sc.OUTCOME_CANCELLED]


async def test_a_helper_left_by_the_applications_exception_ends_as_its_error(
    instrumented: Spans, metrics: InMemoryMetricReader, provider: SimulatedProvider
) -> None:
    """An exception the application raises inside the block is the call's error, as it is
    for a stream from ``create(stream=True)`` used as a context manager."""
    sdk = _anthropic(provider)
    with pytest.raises(ValueError, match="the application's own"):
        async with sdk.messages.stream(model="smooth", max_tokens=10, messages=MESSAGES):
            raise ValueError("the application's own")
    assert ended_as(instrumented) == (sc.OUTCOME_ERROR, "ValueError", "ValueError")
    assert attempt_outcomes(metrics) == [sc.OUTCOME_ERROR]


def test_a_sync_helper_left_by_the_applications_exception_ends_as_its_error(
    instrumented: Spans, metrics: InMemoryMetricReader
) -> None:
    """The same for the synchronous client's ``messages.stream()``."""

    def application(sdk: anthropic.Anthropic) -> None:
        with sdk.messages.stream(model="smooth", max_tokens=10, messages=MESSAGES) as stream:
            next(iter(stream.text_stream))
            raise ValueError("the application's own")

    with (
        SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running,
        anthropic.Anthropic(base_url=running.url, api_key=KEY, max_retries=0) as sdk,
        pytest.raises(ValueError, match="the application's own"),
    ):
        application(sdk)
    assert ended_as(instrumented) == (sc.OUTCOME_ERROR, "ValueError", "ValueError")
    assert attempt_outcomes(metrics) == [sc.OUTCOME_ERROR]


def _openai_helpers(sdk: Any) -> dict[str, Any]:
    return {
        "chat.completions.stream()": lambda: sdk.chat.completions.stream(
            model="smooth", messages=MESSAGES
        ),
        "responses.stream()": lambda: sdk.responses.stream(model="smooth", input="hello"),
    }


def test_the_applications_own_error_is_recorded_by_its_type_only(
    instrumented: Spans, metrics: InMemoryMetricReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception the application raises inside a stream's block may quote the answer: with
    content capture off the spans name its type, never its message or its stack."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)

    def application(sdk: openai.OpenAI) -> None:
        with sdk.chat.completions.create(model="smooth", messages=MESSAGES, stream=True) as stream:
            text = next(iter(stream)).choices[0].delta.content
            raise ValueError(f"unexpected answer: {text}")

    with (
        SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running,
        openai.OpenAI(base_url=running.base_url, api_key=KEY, max_retries=0) as sdk,
        pytest.raises(ValueError, match="unexpected answer"),
    ):
        application(sdk)
    assert ended_as(instrumented) == (sc.OUTCOME_ERROR, "ValueError", "ValueError")
    for span in (*instrumented.calls(), *instrumented.attempts()):
        assert "unexpected answer" not in span.to_json()
        (event,) = [event for event in span.events if event.name == "exception"]
        assert dict(event.attributes or {}) == {"exception.type": "ValueError"}
        assert span.status.description == "ValueError"


def test_a_providers_error_keeps_its_message(instrumented: Spans) -> None:
    """An error the SDK's API layer raises is the provider's word: its (redacted) message is
    recorded as before, content capture or not."""
    with (
        SimulatedProvider.start_in_thread(scripts={"bad": Script(error_status=400)}) as running,
        openai.OpenAI(base_url=running.base_url, api_key=KEY, max_retries=0) as sdk,
        pytest.raises(openai.BadRequestError) as raised,
    ):
        sdk.chat.completions.create(model="bad", messages=MESSAGES)
    for span in (*instrumented.calls(), *instrumented.attempts()):
        (event,) = span.events
        assert dict(event.attributes or {})["exception.message"] == str(raised.value)
        assert "Traceback" in str(dict(event.attributes or {})["exception.stacktrace"])


@pytest.mark.parametrize("helper", ["chat.completions.stream()", "responses.stream()"])
def test_an_openai_helper_left_by_the_applications_exception_ends_as_its_error(
    instrumented: Spans, metrics: InMemoryMetricReader, helper: str
) -> None:
    """The openai helpers close their stream on the way out without saying why; their
    manager (still the SDK's type) tells the spans first."""
    with (
        SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running,
        openai.OpenAI(base_url=running.base_url, api_key=KEY, max_retries=0) as sdk,
    ):
        manager = _openai_helpers(sdk)[helper]()
        assert manager.__class__.__name__.endswith("StreamManager"), "isinstance holds"

        def application() -> None:
            with manager as stream:
                next(iter(stream))
                raise ValueError("the application's own")

        with pytest.raises(ValueError, match="the application's own"):
            application()
    assert ended_as(instrumented) == (sc.OUTCOME_ERROR, "ValueError", "ValueError")
    assert attempt_outcomes(metrics) == [sc.OUTCOME_ERROR]


@pytest.mark.parametrize("helper", ["chat.completions.stream()", "responses.stream()"])
async def test_an_openai_helper_left_by_the_tasks_cancellation_ends_as_cancelled(
    instrumented: Spans,
    metrics: InMemoryMetricReader,
    provider: SimulatedProvider,
    helper: str,
) -> None:
    """The async helpers the same way: the task cancelled inside the block is cancelled."""
    inside = asyncio.Event()
    sdk = _openai(provider)

    async def application() -> None:
        async with _openai_helpers(sdk)[helper]() as stream:
            await anext(aiter(stream))
            inside.set()
            await asyncio.Event().wait()  # the application's own I/O, never done

    await cancelled_once(inside.wait, application())
    assert ended_as(instrumented)[0] == sc.OUTCOME_CANCELLED
    assert attempt_outcomes(metrics) == [sc.OUTCOME_CANCELLED]
    await sdk.close()


def test_a_generator_closed_around_a_stream_ends_it_as_closed(
    instrumented: Spans, metrics: InMemoryMetricReader
) -> None:
    """A web framework's response generator closed when its client went away raises
    ``GeneratorExit`` inside the ``with`` block: the consumer stopped reading — ``closed``, not
    an error — for a helper and for a stream from ``create(stream=True)`` alike."""
    with (
        SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running,
        anthropic.Anthropic(base_url=running.url, api_key=KEY, max_retries=0) as claude,
        openai.OpenAI(base_url=running.base_url, api_key=KEY, max_retries=0) as gpt,
    ):

        def helper() -> Generator[str]:
            with claude.messages.stream(model="smooth", max_tokens=10, messages=MESSAGES) as s:
                yield from s.text_stream

        def created() -> Generator[Any]:
            with gpt.chat.completions.create(model="smooth", messages=MESSAGES, stream=True) as s:
                yield from s

        for response in (helper(), created()):
            next(response)
            response.close()
    outcomes = sorted(
        str((a.attributes or {})[sc.ATTEMPT_OUTCOME]) for a in instrumented.attempts()
    )
    assert outcomes == [sc.OUTCOME_CLOSED, sc.OUTCOME_CLOSED]
    assert sorted(attempt_outcomes(metrics)) == [sc.OUTCOME_CLOSED, sc.OUTCOME_CLOSED]


async def test_an_async_generator_closed_around_a_helper_ends_it_as_closed(
    instrumented: Spans, metrics: InMemoryMetricReader, provider: SimulatedProvider
) -> None:
    """The same for an async generator's ``aclose()`` around openai's helper."""
    sdk = _openai(provider)

    async def response() -> AsyncGenerator[Any]:
        async with sdk.chat.completions.stream(model="smooth", messages=MESSAGES) as stream:
            async for event in stream:
                yield event

    body = response()
    await anext(body)
    await body.aclose()
    assert ended_as(instrumented)[0] == sc.OUTCOME_CLOSED
    assert attempt_outcomes(metrics) == [sc.OUTCOME_CLOSED]
    await sdk.close()
