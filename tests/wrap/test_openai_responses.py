"""instrument_openai() on the OpenAI Responses API: the real openai SDK over loopback against the
simulated provider — create (streamed and not), the stream() helper, parse(), faults — and Azure
OpenAI named as such."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pydantic
import pytest

from otel_llm import _semconv as sc
from otel_llm import instrument_openai, uninstrument_openai
from otel_llm.simulator import Script, Silence, SimulatedProvider, ThreadedProvider
from otel_llm.testing import Spans

FAST = {"first_chunk_delay_s": 0.0, "chunk_interval_s": 0.002, "chunk_count": 12}
SCRIPTS = {
    "smooth": Script(**FAST),
    "stall": Script(**FAST, silences=(Silence(after_chunk=4, duration_s=0.5),)),
    "pinged": Script(
        **FAST, silences=(Silence(after_chunk=4, duration_s=0.5, keepalive_every_s=0.05),)
    ),
    "thinking": Script(**FAST, reasoning_chunks=4),
    "tool": Script(**FAST, tool_call=True),
    "refusing": Script(**FAST, refusal=True),
    "long": Script(**FAST, finish_reason="length"),
    "cut": Script(**FAST, fault="truncate", fault_after_chunk=5),
    "broken": Script(**FAST, fault="error", fault_after_chunk=5),
}
KEY = "sk-responses-secret-0000"
CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@pytest.fixture
def instrumented(spans: Spans) -> Iterator[Spans]:
    """The SDK instrumented into the in-memory span pipeline (threshold 100 ms)."""
    instrument_openai(tracer_provider=spans.provider, stall_threshold_ms=100)
    yield spans
    uninstrument_openai()


@pytest.fixture
def threaded() -> Iterator[ThreadedProvider]:
    with SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running:
        yield running


@pytest.fixture
def client(threaded: ThreadedProvider) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=threaded.base_url, api_key=KEY, max_retries=0) as sdk:
        yield sdk


@pytest.fixture
async def aclient() -> AsyncIterator[openai.AsyncOpenAI]:
    async with SimulatedProvider(scripts=SCRIPTS) as running:
        sdk = openai.AsyncOpenAI(base_url=running.base_url, api_key=KEY, max_retries=0)
        async with sdk:
            yield sdk


def attempt(spans: Spans) -> dict[str, Any]:
    (span,) = spans.attempts()
    return dict(span.attributes or {})


def test_a_streamed_create_is_metered(instrumented: Spans, client: openai.OpenAI) -> None:
    """``responses.create(stream=True)``: each text delta a chunk, lifecycle events not, the
    silence a stall, usage and ``stop`` from ``response.completed``; no key anywhere."""
    stream = client.responses.create(model="stall", input="hello", stream=True)
    assert isinstance(stream, openai.Stream)
    kinds = [event.type for event in stream]
    assert "response.created" in kinds
    assert kinds.count("response.output_text.delta") == 12
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT]) == (12, 1)
    assert a[sc.STALL_MS] >= 100  # the threshold: a late chunk before the 0.5 s silence shortens it
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12
    assert str(a[sc.GEN_AI_RESPONSE_ID]).startswith("resp")
    assert all(KEY not in span.to_json() for span in instrumented.finished())


async def test_an_async_streamed_create_is_metered(
    instrumented: Spans, aclient: openai.AsyncOpenAI
) -> None:
    """The async twin."""
    stream = await aclient.responses.create(model="stall", input="hello", stream=True)
    async for _ in stream:
        pass
    assert (attempt(instrumented)[sc.CHUNK_COUNT], attempt(instrumented)[sc.STALL_COUNT]) == (12, 1)


def test_the_stream_helper_is_metered(instrumented: Spans, client: openai.OpenAI) -> None:
    """``responses.stream()`` goes through ``create``: one call, the same figures."""
    with client.responses.stream(model="stall", input="hello") as stream:
        final = stream.get_final_response()
    assert final.output_text.startswith("word0")
    assert (attempt(instrumented)[sc.CHUNK_COUNT], attempt(instrumented)[sc.STALL_COUNT]) == (12, 1)


async def test_the_async_stream_helper_is_metered(
    instrumented: Spans, aclient: openai.AsyncOpenAI
) -> None:
    """``async with responses.stream()``."""
    async with aclient.responses.stream(model="smooth", input="hello") as stream:
        async for _ in stream:
            pass
    assert attempt(instrumented)[sc.CHUNK_COUNT] == 12


def test_the_stream_helper_read_to_the_end_is_ok(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """Text events, ``until_done()`` and ``get_final_response()`` all come through and each
    call ends ``ok``; the raw stream and its HTTP response are still what the SDK made."""
    with client.responses.stream(model="smooth", input="hello") as stream:
        assert isinstance(stream._raw_stream, openai.Stream)
        assert isinstance(stream._response, type(stream._raw_stream.response))
        texts = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(texts) == final.output_text
    with client.responses.stream(model="smooth", input="hello") as stream:
        stream.until_done()
    outcomes = [(s.attributes or {})[sc.ATTEMPT_OUTCOME] for s in instrumented.attempts()]
    assert outcomes == [sc.OUTCOME_OK, sc.OUTCOME_OK]


async def test_the_async_stream_helper_read_to_the_end_is_ok(
    instrumented: Spans, aclient: openai.AsyncOpenAI
) -> None:
    """The async twin: text events, ``until_done()``, ``get_final_response()``; ``ok``."""
    async with aclient.responses.stream(model="smooth", input="hello") as stream:
        texts = [e.delta async for e in stream if e.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert "".join(texts) == final.output_text
    async with aclient.responses.stream(model="smooth", input="hello") as stream:
        await stream.until_done()
    outcomes = [(s.attributes or {})[sc.ATTEMPT_OUTCOME] for s in instrumented.attempts()]
    assert outcomes == [sc.OUTCOME_OK, sc.OUTCOME_OK]


@pytest.mark.parametrize("close", [False, True], ids=["break", "close"])
def test_the_stream_helper_left_early_ends_as_closed_then(
    instrumented: Spans, client: openai.OpenAI, close: bool
) -> None:
    """``break`` out of ``responses.stream()``'s ``with`` (or ``close()`` it): ``closed``
    there and then, not ``dropped`` whenever the stream is collected."""
    with client.responses.stream(model="smooth", input="hello") as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                break
        if close:
            stream.close()
            assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED
    assert instrumented.tracker.open_spans() == []
    del stream  # held until here: the outcome did not wait for the collector


@pytest.mark.parametrize("close", [False, True], ids=["break", "close"])
async def test_the_async_stream_helper_left_early_ends_as_closed_then(
    instrumented: Spans, aclient: openai.AsyncOpenAI, close: bool
) -> None:
    """The async twin (before, the spans stayed open until the event loop closed)."""
    async with aclient.responses.stream(model="smooth", input="hello") as stream:
        async for event in stream:
            if event.type == "response.output_text.delta":
                break
        if close:
            await stream.close()
            assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED
    assert instrumented.tracker.open_spans() == []
    del stream


@pytest.mark.parametrize(
    ("model", "chunks", "reason"),
    [("thinking", 12, "stop"), ("tool", 12, "tool_call"), ("refusing", 12, "stop"),
     ("long", 12, "length")],
)  # fmt: skip
def test_reasoning_tool_arguments_and_refusals_are_chunks(
    instrumented: Spans, client: openai.OpenAI, model: str, chunks: int, reason: str
) -> None:
    """Reasoning summary deltas, function-call argument deltas and refusal deltas all count;
    the finish reason follows the response's status and output."""
    for _ in client.responses.create(model=model, input="hello", stream=True):
        pass
    a = attempt(instrumented)
    assert a[sc.CHUNK_COUNT] == chunks
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == (reason,)


def test_keepalives_hide_no_silence(instrumented: Spans, client: openai.OpenAI) -> None:
    """A silence full of keepalive comments is still a stall."""
    for _ in client.responses.create(model="pinged", input="hello", stream=True):
        pass
    assert attempt(instrumented)[sc.STALL_COUNT] == 1


def test_non_streamed_create_and_parse(instrumented: Spans, client: openai.OpenAI) -> None:
    """``create()`` and ``parse()`` without a stream: one call each, usage, no stall figures."""
    answer = client.responses.create(model="smooth", input="hello")
    assert answer.output_text.startswith("word0")
    client.responses.parse(model="smooth", input="hello")
    for span in instrumented.attempts():
        a = dict(span.attributes or {})
        assert sc.STALL_MS not in a
        assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12
        assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert len(instrumented.attempts()) == 2


class City(pydantic.BaseModel):
    city: str


def test_an_answer_that_fails_validation_stays_out_of_the_spans(
    instrumented: Spans, client: openai.OpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``parse(text_format=…)`` of an answer that is not that JSON raises the SDK's validation
    error, whose message quotes the answer: with content capture off both spans record the
    error's type only — no message, no stack."""
    monkeypatch.delenv(CAPTURE, raising=False)
    with pytest.raises(pydantic.ValidationError, match="word0"):
        client.responses.parse(model="smooth", input="hello", text_format=City)
    (call,) = instrumented.calls()
    (attempt_span,) = instrumented.attempts()
    for span in (call, attempt_span):
        assert dict(span.attributes or {})[sc.ERROR_TYPE] == "ValidationError"
        assert [dict(event.attributes or {}) for event in span.events] == [
            {"exception.type": "ValidationError"}
        ]
        assert span.status.description == "ValidationError"
        assert "word0" not in span.to_json()


def test_with_content_capture_on_the_validation_error_is_recorded_whole(
    instrumented: Spans, client: openai.OpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With content capture on, the same error's message is recorded as any error's is."""
    monkeypatch.setenv(CAPTURE, "true")
    with pytest.raises(pydantic.ValidationError):
        client.responses.parse(model="smooth", input="hello", text_format=City)
    for span in (*instrumented.calls(), *instrumented.attempts()):
        (event,) = span.events
        assert "word0" in str(dict(event.attributes or {})["exception.message"])
        assert "word0" in (span.status.description or "")


def test_a_cut_stream_is_recorded_as_truncated(instrumented: Spans, client: openai.OpenAI) -> None:
    """No ``response.completed``: recorded as cut short, with the chunks that came."""
    for _ in client.responses.create(model="cut", input="hello", stream=True):
        pass
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.ERROR_TYPE] == "TruncatedStream"
    assert a[sc.CHUNK_COUNT] == 6


def test_a_failure_mid_stream_is_the_providers_error(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """The stream reports a failure of its own after six chunks: recorded as an error even
    where the SDK raises nothing."""
    try:
        for _ in client.responses.create(model="broken", input="hello", stream=True):
            pass
    except openai.APIError:
        pass
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.CHUNK_COUNT] == 6


def test_azure_openai_is_named_as_such(spans: Spans, threaded: ThreadedProvider) -> None:
    """An ``AzureOpenAI`` client's calls carry ``azure.ai.openai`` as their provider."""
    instrument_openai(tracer_provider=spans.provider)
    try:
        with openai.AzureOpenAI(
            azure_endpoint=threaded.url,
            api_key=KEY,
            api_version="2024-10-21",
            azure_deployment="smooth",
            max_retries=0,
        ) as azure:
            for _ in azure.chat.completions.create(
                model="smooth", messages=[{"role": "user", "content": "hi"}], stream=True
            ):
                pass
    finally:
        uninstrument_openai()
    a = attempt(spans)
    assert a[sc.GEN_AI_PROVIDER_NAME] == "azure.ai.openai"
    assert a[sc.CHUNK_COUNT] == 12
