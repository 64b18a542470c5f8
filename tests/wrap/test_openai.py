"""instrument_openai(): the real openai SDK over loopback against the simulated provider."""

from __future__ import annotations

import asyncio
import copy
import gc
import itertools
import json
import logging
import os
import pickle
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_llm import _semconv as sc
from otel_llm import instrument_openai, uninstrument_openai
from otel_llm.simulator import Script, Silence, SimulatedProvider, ThreadedProvider
from otel_llm.testing import Spans
from tests.support import REPOSITORY
from tests.support.processes import run_python

ROOT = REPOSITORY
MESSAGES = [{"role": "user", "content": "hello"}]
FAST = {"first_chunk_delay_s": 0.0, "chunk_interval_s": 0.002, "chunk_count": 12}
SCRIPTS = {
    "smooth": Script(**FAST),
    "stall": Script(**FAST, silences=(Silence(after_chunk=4, duration_s=0.5),)),
    "reset": Script(**FAST, fault="reset", fault_after_chunk=3),
    "bad": Script(error_status=400, error_code="context_length_exceeded"),
    "refusing": Script(**FAST, refusal=True),
    "leaky": Script(error_status=401, error_message="Incorrect API key provided: plain-key-77x"),
}


@pytest.fixture
def instrumented(spans: Spans) -> Iterator[Spans]:
    """The SDK instrumented into the in-memory span pipeline (threshold 100 ms)."""
    instrument_openai(tracer_provider=spans.provider, stall_threshold_ms=100)
    yield spans
    uninstrument_openai()


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider(scripts=SCRIPTS) as running:
        yield running


@pytest.fixture
def threaded() -> Iterator[ThreadedProvider]:
    with SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running:
        yield running


@pytest.fixture
async def aclient(provider: SimulatedProvider) -> AsyncIterator[openai.AsyncOpenAI]:
    client = openai.AsyncOpenAI(
        base_url=provider.base_url, api_key="sk-test-secret-0000", max_retries=0
    )
    yield client
    await client.close()


@pytest.fixture
def client(threaded: ThreadedProvider) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=threaded.base_url, api_key="sk-test-secret-0000", max_retries=0
    ) as c:
        yield c


def attempt(spans: Spans) -> dict[str, Any]:
    (span,) = spans.attempts()
    return dict(span.attributes or {})


async def test_async_stream_is_metered(instrumented: Spans, aclient: openai.AsyncOpenAI) -> None:
    """An async streamed create() yields the same chunks and records figures and events."""
    stream = await aclient.chat.completions.create(
        model="stall", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    assert isinstance(stream, openai.AsyncStream)
    texts = [c.choices[0].delta.content async for c in stream if c.choices]
    assert "".join(t for t in texts if t).startswith("word0")
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT]) == (12, 1)
    assert a[sc.STALL_MS] >= 100  # the threshold: a late chunk before the 0.5 s silence shortens it
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12
    assert a[sc.SERVER_ADDRESS] == "127.0.0.1"
    assert a[sc.METERING_STATUS] == sc.METERING_EXACT
    assert "sk-test-secret" not in instrumented.finished()[0].to_json()
    (call,) = instrumented.calls()
    assert (call.attributes or {})[sc.STALL_MS] == a[sc.STALL_MS]


def test_sync_stream_is_metered(instrumented: Spans, client: openai.OpenAI) -> None:
    """A sync streamed create() is metered the same way."""
    stream = client.chat.completions.create(model="stall", messages=MESSAGES, stream=True)
    assert isinstance(stream, openai.Stream)
    assert len(list(stream)) >= 12
    a = attempt(instrumented)
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT]) == (12, 1)


def test_sync_stream_as_context_manager(instrumented: Spans, client: openai.OpenAI) -> None:
    """with create(stream=True) as stream: works and ends the spans once."""
    with client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True) as stream:
        for _ in stream:
            pass
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK


async def test_async_stream_as_context_manager(
    instrumented: Spans, aclient: openai.AsyncOpenAI
) -> None:
    """async with create(stream=True) as stream: works and ends the spans once."""
    async with await aclient.chat.completions.create(
        model="smooth", messages=MESSAGES, stream=True
    ) as stream:
        async for _ in stream:
            pass
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK


def test_a_metered_streams_response_is_still_the_sdks(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """``stream.response`` (which notices being closed) is the HTTP response the SDK gave:
    its type, status and headers; reading to the end still ends the call as ok."""
    stream = client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
    response = stream.response
    sdk_type = response.__class__  # httpx's or httpx2's Response, whichever the SDK uses
    assert (sdk_type.__name__, sdk_type.__module__.split(".")[0]) in (
        ("Response", "httpx"),
        ("Response", "httpx2"),
    )
    assert isinstance(response, sdk_type)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert len(list(stream)) >= 12
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK


def test_non_streamed_create(instrumented: Spans, client: openai.OpenAI) -> None:
    """A non-streamed create() records wall time and usage; no stall figures."""
    completion = client.chat.completions.create(model="smooth", messages=MESSAGES)
    assert completion.choices[0].message.content
    a = attempt(instrumented)
    assert sc.GEN_AI_REQUEST_STREAM not in a, "the convention sets it only when streaming"
    assert sc.STALL_MS not in a
    assert a[sc.GENERATION_MS] == a[sc.WALL_MS]
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0


def test_with_raw_response(instrumented: Spans, client: openai.OpenAI) -> None:
    """with_raw_response.create(...).parse() is metered."""
    raw = client.chat.completions.with_raw_response.create(
        model="stall", messages=MESSAGES, stream=True
    )
    assert raw.http_response.status_code == 200
    for _ in raw.parse():
        pass
    assert attempt(instrumented)[sc.STALL_COUNT] == 1


async def test_async_with_raw_response(instrumented: Spans, aclient: openai.AsyncOpenAI) -> None:
    """The async with_raw_response path is metered."""
    raw = await aclient.chat.completions.with_raw_response.create(
        model="smooth", messages=MESSAGES, stream=True
    )
    async for _ in raw.parse():
        pass
    assert attempt(instrumented)[sc.CHUNK_COUNT] == 12


def test_streaming_helper(instrumented: Spans, client: openai.OpenAI) -> None:
    """chat.completions.stream() (the SDK's helper) is metered."""
    with client.chat.completions.stream(model="stall", messages=MESSAGES) as stream:
        events = [event.type for event in stream]
    assert "content.delta" in events
    assert attempt(instrumented)[sc.STALL_COUNT] == 1


async def test_async_streaming_helper(instrumented: Spans, aclient: openai.AsyncOpenAI) -> None:
    """The async stream() helper is metered."""
    async with aclient.chat.completions.stream(model="smooth", messages=MESSAGES) as stream:
        async for _ in stream:
            pass
    assert attempt(instrumented)[sc.CHUNK_COUNT] == 12


def test_the_chat_helper_read_to_the_end_is_ok(instrumented: Spans, client: openai.OpenAI) -> None:
    """The helper's final completion and text events come through; the outcome is ``ok``, and
    the stream and its HTTP response are still what the SDK made."""
    with client.chat.completions.stream(model="smooth", messages=MESSAGES) as stream:
        assert isinstance(stream._raw_stream, openai.Stream)
        assert isinstance(stream._response, type(stream._raw_stream.response))
        texts = [event.delta for event in stream if event.type == "content.delta"]
        final = stream.get_final_completion()
    assert "".join(texts) == final.choices[0].message.content
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert a[sc.CHUNK_COUNT] == 12


async def test_the_async_chat_helper_read_to_the_end_is_ok(
    instrumented: Spans, aclient: openai.AsyncOpenAI
) -> None:
    """The async twin: text events and the final completion; ``ok``."""
    async with aclient.chat.completions.stream(model="smooth", messages=MESSAGES) as stream:
        texts = [event.delta async for event in stream if event.type == "content.delta"]
        final = await stream.get_final_completion()
    assert "".join(texts) == final.choices[0].message.content
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK


@pytest.mark.parametrize("close", [False, True], ids=["break", "close"])
def test_the_chat_helper_left_early_ends_as_closed_then(
    instrumented: Spans, client: openai.OpenAI, close: bool
) -> None:
    """``break`` out of the helper's ``with`` (or ``close()`` it): ``closed`` there and then,
    not ``dropped`` whenever the stream is collected."""
    with client.chat.completions.stream(model="smooth", messages=MESSAGES) as stream:
        for event in stream:
            if event.type == "content.delta":
                break
        if close:
            stream.close()
            assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED
    assert instrumented.tracker.open_spans() == []
    del stream  # held until here: the outcome did not wait for the collector


@pytest.mark.parametrize("close", [False, True], ids=["break", "close"])
async def test_the_async_chat_helper_left_early_ends_as_closed_then(
    instrumented: Spans, aclient: openai.AsyncOpenAI, close: bool
) -> None:
    """The async twin."""
    async with aclient.chat.completions.stream(model="smooth", messages=MESSAGES) as stream:
        async for event in stream:
            if event.type == "content.delta":
                break
        if close:
            await stream.close()
            assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED
    assert instrumented.tracker.open_spans() == []
    del stream


def test_with_streaming_response_left_early_ends_as_closed(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """Leaving ``with_streaming_response``'s ``with`` after one chunk: ``closed`` on the way
    out (the raw response holds the stream it parsed until then)."""
    with client.chat.completions.with_streaming_response.create(
        model="smooth", messages=MESSAGES, stream=True
    ) as response:
        for _ in response.parse():
            break
        assert instrumented.tracker.open_spans() != []
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED


def _answered_ok(spans: Spans) -> None:
    """One call, answered: ``ok``, the finish reason and the usage from the body."""
    a = attempt(spans)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12
    (call,) = spans.calls()
    assert sc.ERROR_TYPE not in dict(call.attributes or {})


def test_a_streaming_response_whose_body_was_read_without_parse_is_ok(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """``with_streaming_response`` of a non-streamed call, the body read with ``.json()``: the
    call was answered — ``ok``, with the body's finish reason and usage, not ``closed``."""
    with client.chat.completions.with_streaming_response.create(
        model="smooth", messages=MESSAGES
    ) as response:
        body = response.json()
    assert body["choices"][0]["finish_reason"] == "stop"
    _answered_ok(instrumented)


async def test_an_async_streaming_response_whose_body_was_read_without_parse_is_ok(
    instrumented: Spans, aclient: openai.AsyncOpenAI
) -> None:
    """The same for the async client."""
    async with aclient.chat.completions.with_streaming_response.create(
        model="smooth", messages=MESSAGES
    ) as response:
        await response.read()
    _answered_ok(instrumented)


def test_a_raw_response_read_without_parse_is_ok(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """``with_raw_response`` of a non-streamed call reads the body before it returns: read
    through ``http_response`` and let go of, the call is ``ok``, not ``dropped``."""
    raw = client.chat.completions.with_raw_response.create(model="smooth", messages=MESSAGES)
    assert raw.http_response.json()["choices"][0]["finish_reason"] == "stop"
    del raw
    gc.collect()
    _answered_ok(instrumented)


def test_a_streaming_response_left_unread_ends_as_closed(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """A non-streamed call whose body the application never read: ``closed``, as before."""
    with client.chat.completions.with_streaming_response.create(
        model="smooth", messages=MESSAGES
    ) as response:
        assert response.http_response.status_code == 200
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED


def test_a_raw_response_let_go_of_after_parse_leaves_the_stream_metered(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """``with_raw_response.create(...).parse()`` in one expression: the raw response is
    collected at once, and the stream it handed on is still metered to its end."""
    stream = client.chat.completions.with_raw_response.create(
        model="smooth", messages=MESSAGES, stream=True
    ).parse()
    gc.collect()
    for _ in stream:
        pass
    a = attempt(instrumented)
    assert (a[sc.ATTEMPT_OUTCOME], a[sc.CHUNK_COUNT]) == (sc.OUTCOME_OK, 12)


def test_a_second_parse_hands_on_the_same_metered_stream(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """The SDK caches what ``parse()`` parsed: a second ``parse()`` gets the stream the first
    handed on (read part-way by one, to its end by the other), and the call is one call of
    every chunk, not two."""
    raw = client.chat.completions.with_raw_response.create(
        model="smooth", messages=MESSAGES, stream=True
    )
    first = raw.parse()
    next(iter(first))
    second = raw.parse()
    assert second is first
    rest = sum(1 for _ in second)
    assert rest > 0
    assert len(instrumented.calls()) == 1
    a = attempt(instrumented)
    assert (a[sc.ATTEMPT_OUTCOME], a[sc.CHUNK_COUNT]) == (sc.OUTCOME_OK, 12)
    assert len(instrumented.finished()) == 2, "one call span and one attempt span"


def test_chat_completions_parse_is_metered(instrumented: Spans, client: openai.OpenAI) -> None:
    """``chat.completions.parse()`` sends its own request (not through ``create()``): one call,
    recorded as a non-streamed ``create()``, the SDK's parsed completion returned."""
    completion = client.chat.completions.parse(model="smooth", messages=MESSAGES)
    assert isinstance(completion, openai.types.chat.ParsedChatCompletion)
    assert len(instrumented.calls()) == 1
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12
    assert sc.STALL_MS not in a


async def test_async_chat_completions_parse_is_metered(
    instrumented: Spans, aclient: openai.AsyncOpenAI
) -> None:
    """The same for the async client, and through ``with_raw_response``."""
    await aclient.chat.completions.parse(model="smooth", messages=MESSAGES)
    raw = await aclient.chat.completions.with_raw_response.parse(model="smooth", messages=MESSAGES)
    assert isinstance(raw.parse(), openai.types.chat.ParsedChatCompletion)
    assert len(instrumented.calls()) == 2
    for span in instrumented.attempts():
        a = dict(span.attributes or {})
        assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
        assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12


def test_a_copy_of_a_stream_leaves_the_call_to_the_original(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """``copy.copy(stream)`` is a second handle on the same stream (as the SDK's copy is):
    collecting it ends nothing, and the original read to its end is ``ok`` with every chunk."""
    stream = client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
    twin = copy.copy(stream)
    assert isinstance(twin, openai.Stream)
    next(twin)  # one position: read through the copy, metered all the same
    del twin
    gc.collect()
    assert instrumented.tracker.open_spans() != []
    for _ in stream:
        pass
    a = attempt(instrumented)
    assert (a[sc.ATTEMPT_OUTCOME], a[sc.CHUNK_COUNT]) == (sc.OUTCOME_OK, 12)


def test_a_stream_read_through_its_copy_outlives_the_original(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """The original let go of while its copy is read on: the copy is a handle on the same
    stream, so the call is not ended as dropped — it is ``ok`` with every chunk once the copy
    is read to the end."""
    stream = client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
    twin = copy.copy(stream)
    next(twin)
    del stream
    gc.collect()
    assert instrumented.attempts() == []
    for _ in twin:
        pass
    a = attempt(instrumented)
    assert (a[sc.ATTEMPT_OUTCOME], a[sc.CHUNK_COUNT]) == (sc.OUTCOME_OK, 12)


def test_pickling_a_live_stream_fails_as_the_sdks_own(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """A live stream cannot be pickled (the SDK's holds a client with a lock): the wrapped one
    fails the same way, and trying ends nothing."""
    stream = client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
    with pytest.raises(TypeError, match="cannot pickle"):
        pickle.dumps(stream)
    for _ in stream:
        pass
    a = attempt(instrumented)
    assert (a[sc.ATTEMPT_OUTCOME], a[sc.CHUNK_COUNT]) == (sc.OUTCOME_OK, 12)


def test_embeddings(instrumented: Spans, client: openai.OpenAI) -> None:
    """embeddings.create() is one call with one non-streamed attempt."""
    result = client.embeddings.create(model="embed", input="hello")
    assert result.data[0].embedding
    a = attempt(instrumented)
    assert a[sc.GEN_AI_OPERATION_NAME] == "embeddings"
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0


async def test_async_embeddings(instrumented: Spans, aclient: openai.AsyncOpenAI) -> None:
    """The async embeddings.create() is metered."""
    await aclient.embeddings.create(model="embed", input=["a", "b"])
    assert attempt(instrumented)[sc.GEN_AI_OPERATION_NAME] == "embeddings"


def test_provider_error_is_recorded_and_raised(instrumented: Spans, client: openai.OpenAI) -> None:
    """An error answer raises the SDK's exception and ends both spans with error."""
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="bad", messages=MESSAGES, stream=True)
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.ERROR_TYPE] == "BadRequestError"
    assert instrumented.calls()[0].status.status_code.name == "ERROR"


def test_exception_mid_stream(instrumented: Spans, client: openai.OpenAI) -> None:
    """A connection reset mid-stream ends the spans as error with finish reason error."""
    stream = client.chat.completions.create(model="reset", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError):
        for _ in stream:
            pass
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)


def test_early_break_and_close(instrumented: Spans, client: openai.OpenAI) -> None:
    """Breaking out and closing the stream ends the spans as closed."""
    stream = client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
    for _ in stream:
        break
    stream.close()
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED


def test_dropped_stream_ends_when_collected(instrumented: Spans, client: openai.OpenAI) -> None:
    """A stream dropped unconsumed is ended, as dropped, when collected."""
    stream = client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
    del stream
    gc.collect()
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_DROPPED


async def test_task_cancellation(instrumented: Spans, aclient: openai.AsyncOpenAI) -> None:
    """Cancelling the task that reads the stream ends the spans as cancelled."""
    first = asyncio.Event()

    async def read() -> None:
        stream = await aclient.chat.completions.create(
            model="stall", messages=MESSAGES, stream=True
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                first.set()

    task = asyncio.create_task(read())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CANCELLED


async def test_slow_consumer_shows_no_stall(
    instrumented: Spans, aclient: openai.AsyncOpenAI
) -> None:
    """A consumer that works 200 ms per chunk on a smooth stream shows no stall."""
    stream = await aclient.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
    async for _ in stream:
        await asyncio.sleep(0.2)  # the application's own work, not a race
    a = attempt(instrumented)
    assert a[sc.STALL_COUNT] == 0
    assert a[sc.CONSUMER_HOLD_MS] >= 2_000


def test_instrumenting_twice_is_harmless_and_uninstrument_restores(spans: Spans) -> None:
    """A second instrument_openai() changes nothing; uninstrument restores the SDK."""
    from openai.resources.chat.completions.completions import Completions

    original = Completions.__dict__["create"]
    instrument_openai(tracer_provider=spans.provider)
    wrapped = Completions.__dict__["create"]
    instrument_openai(tracer_provider=spans.provider)
    assert Completions.__dict__["create"] is wrapped
    uninstrument_openai()
    assert Completions.__dict__["create"] is original
    uninstrument_openai()
    assert Completions.__dict__["create"] is original


async def test_async_exception_mid_stream(instrumented: Spans, aclient: openai.AsyncOpenAI) -> None:
    """An async stream cut by a connection reset ends the spans as error."""
    stream = await aclient.chat.completions.create(model="reset", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIError):
        async for _ in stream:
            pass
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)


async def test_async_early_break_and_close(
    instrumented: Spans, aclient: openai.AsyncOpenAI
) -> None:
    """Breaking out of an async stream and closing it ends the spans as closed."""
    stream = await aclient.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
    async for _ in stream:
        break
    await stream.close()
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED


async def test_async_dropped_stream_ends_when_collected(
    instrumented: Spans, aclient: openai.AsyncOpenAI
) -> None:
    """An async stream dropped unconsumed is ended, as dropped, when collected."""
    stream = await aclient.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
    del stream
    gc.collect()
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_DROPPED


def test_sync_slow_consumer_shows_no_stall(instrumented: Spans, client: openai.OpenAI) -> None:
    """A sync consumer that works 200 ms per chunk on a smooth stream shows no stall."""
    import time

    for _ in client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True):
        time.sleep(0.2)  # the application's own work, not a race
    a = attempt(instrumented)
    assert a[sc.STALL_COUNT] == 0
    assert a[sc.CONSUMER_HOLD_MS] >= 2_000


def test_sync_fast_consumer_on_stalling_stream(instrumented: Spans, client: openai.OpenAI) -> None:
    """A sync consumer waiting on a stalling stream sees the stall."""
    for _ in client.chat.completions.create(model="stall", messages=MESSAGES, stream=True):
        pass
    a = attempt(instrumented)
    assert a[sc.STALL_COUNT] == 1
    assert a[sc.CONSUMER_HOLD_MS] < 100


def test_api_key_echoed_by_the_provider_never_reaches_spans(
    instrumented: Spans, threaded: ThreadedProvider
) -> None:
    """A provider error that echoes the API key is redacted in every span, event and status."""
    client = openai.OpenAI(base_url=threaded.base_url, api_key="plain-key-77x", max_retries=0)
    with client, pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="leaky", messages=MESSAGES, stream=True)
    dumped = "".join(span.to_json() for span in instrumented.finished())
    assert "plain-key-77x" not in dumped
    assert "REDACTED" in dumped


NO_PROVIDER_SCRIPT = """
import sys
import httpx
import openai
import otel_llm
from otel_llm.simulator import Script, SimulatedProvider

mode = sys.argv[1]
if mode == "init-first":
    otel_llm.init(db_path=sys.argv[2])
otel_llm.instrument_openai()
if mode == "init-later":
    otel_llm.init(db_path=sys.argv[2])
script = Script(first_chunk_delay_s=0.0, chunk_interval_s=0.001, chunk_count=3)
with SimulatedProvider.start_in_thread(default=script) as sim:
    with openai.OpenAI(base_url=sim.base_url, api_key="sk-none", max_retries=0) as client:
        for _ in range(3):
            for _ in client.chat.completions.create(model="m", messages=[], stream=True):
                pass
"""


@pytest.mark.parametrize(
    ("mode", "sdk_disabled", "warnings"),
    [
        ("alone", False, 1),
        ("alone", True, 0),
        ("init-first", False, 0),
        ("init-later", False, 0),
    ],
)
def test_warns_once_when_no_tracer_provider_is_configured(
    tmp_path: Path, mode: str, sdk_disabled: bool, warnings: int
) -> None:
    """instrument_openai() with no provider anywhere warns once (not per call) that nothing is
    recorded; init() before or after instrumenting, or OTEL_SDK_DISABLED=true, keeps it quiet."""
    env = {**os.environ, "OTEL_SDK_DISABLED": "true" if sdk_disabled else "false"}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    out = run_python(NO_PROVIDER_SCRIPT, mode, str(tmp_path / "t.duckdb"), cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if "no tracer provider" in line]
    assert len(lines) == warnings, out.stderr
    assert out.stderr.strip() == "\n".join(lines), "nothing else is printed"


def test_no_warning_when_a_provider_is_passed(
    threaded: ThreadedProvider, spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    """A provider passed to instrument_openai() is used without a look at the global one."""
    instrument_openai(tracer_provider=spans.provider)
    try:
        with (
            caplog.at_level(logging.WARNING, logger="otel_llm"),
            openai.OpenAI(base_url=threaded.base_url, api_key="sk-none", max_retries=0) as client,
        ):
            client.chat.completions.create(model="smooth", messages=MESSAGES)
    finally:
        uninstrument_openai()
    assert "no tracer provider" not in caplog.text
    assert len(spans.calls()) == 1


def _sse(*frames: str) -> str:
    return "".join(f"data: {frame}\n\n" for frame in frames)


def test_a_chunk_whose_choices_is_not_a_list_is_passed_on_quietly(
    instrumented: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK builds chunks without validating them, so ``choices`` may be a number or a
    boolean: such a chunk is malformed, not output — passed on to the application unchanged,
    never counted as a chunk, and never a logged traceback."""
    head = '{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
    body = _sse(
        head + '"choices":[{"index":0,"delta":{"content":"hi"}}]}',
        head + '"choices":5}',
        head + '"choices":true}',
        head + '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
        "[DONE]",
    )
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, text=body
        )
    )
    with (
        httpx.Client(transport=transport) as http,
        openai.OpenAI(
            base_url="http://sim.test/v1", api_key="sk-x", max_retries=0, http_client=http
        ) as client,
        caplog.at_level(logging.DEBUG, logger="otel_llm"),
    ):
        chunks = list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
    assert [chunk.choices for chunk in chunks[1:3]] == [5, True]
    assert not [record for record in caplog.records if record.exc_info], caplog.text
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert a[sc.CHUNK_COUNT] == 1
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)


def test_refusal_deltas_are_chunks(instrumented: Spans, client: openai.OpenAI) -> None:
    """A refusal streamed as ``delta.refusal`` is output like any other: every delta a chunk."""
    stream = client.chat.completions.create(model="refusing", messages=MESSAGES, stream=True)
    refusal = "".join(c.choices[0].delta.refusal or "" for c in stream if c.choices)
    assert refusal
    assert attempt(instrumented)[sc.CHUNK_COUNT] == 12


def test_messages_given_as_an_iterator_reach_the_provider_with_content_capture_on(
    instrumented: Spans, threaded: ThreadedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK takes any iterable of messages; one that can be read once (a generator) is the
    SDK's to read: recording the prompt must not use it up (the request went out with
    ``messages: []``), so such a prompt is not recorded."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    sent: list[Any] = []

    def keep(request: httpx2.Request) -> None:
        sent.append(json.loads(request.read())["messages"])

    http = httpx2.Client(event_hooks={"request": [keep]})
    with openai.OpenAI(
        base_url=threaded.base_url, api_key="k", max_retries=0, http_client=http
    ) as client:
        client.chat.completions.create(model="smooth", messages=(m for m in MESSAGES))
        client.chat.completions.create(model="smooth", messages=tuple(MESSAGES))
    assert sent == [MESSAGES, MESSAGES]
    first, second = instrumented.calls()
    assert sc.GEN_AI_INPUT_MESSAGES not in (first.attributes or {})
    assert "hello" in str((second.attributes or {})[sc.GEN_AI_INPUT_MESSAGES])


ECHOED = "plain-key-77x"  # what the "leaky" script's error quotes


@pytest.mark.parametrize(
    ("settings", "extra_headers"),
    [
        ({"api_key": lambda: ECHOED}, None),  # fetched as the request goes out
        ({"api_key": "k", "default_headers": {"Authorization": f"Bearer {ECHOED}"}}, None),
        ({"api_key": "k", "admin_api_key": ECHOED}, None),
        ({"api_key": "k"}, {"Authorization": f"Bearer {ECHOED}"}),
        ({"api_key": "k"}, {"api-key": ECHOED}),
    ],
    ids=["key-function", "default-headers", "admin-key", "extra-authorization", "extra-api-key"],
)
def test_a_key_sent_other_than_as_the_clients_key_never_reaches_spans(
    instrumented: Spans,
    threaded: ThreadedProvider,
    settings: dict[str, Any],
    extra_headers: dict[str, str] | None,
) -> None:
    """A key the client fetches from a function, or one sent in a header (the client's
    ``default_headers``, the call's ``extra_headers``) or held as the admin key, echoed by the
    provider's error, is redacted like the client's own key, streamed or not."""
    with openai.OpenAI(base_url=threaded.base_url, max_retries=0, **settings) as client:
        for stream in (False, True):
            with pytest.raises(openai.AuthenticationError) as raised:
                client.chat.completions.create(
                    model="leaky", messages=MESSAGES, stream=stream, extra_headers=extra_headers
                )
            assert ECHOED in str(raised.value)
    assert len(instrumented.calls()) == 2
    dumped = "".join(span.to_json() for span in instrumented.finished())
    assert ECHOED not in dumped
    assert "REDACTED" in dumped


def _read_raw(response: Any, way: str) -> str:
    """The body of a raw response, read by its own ``iter_lines``/``iter_text``/``iter_bytes``."""
    if way == "lines":
        return "\n".join(response.iter_lines())
    if way == "text":
        return "".join(response.iter_text(7))  # pieces that cut lines and events in two
    return b"".join(response.iter_bytes(5)).decode()


@pytest.mark.parametrize("way", ["lines", "text", "bytes"])
def test_a_stream_read_as_server_sent_events_without_parse_is_metered(
    instrumented: Spans, client: openai.OpenAI, way: str
) -> None:
    """``with_streaming_response`` of a streamed call read line by line (the SDK's documented
    ``iter_lines()``), as text or as bytes, never parsed: the call is metered from the events
    — every chunk, the stall, the finish reason, ``ok`` — not recorded as ``closed``."""
    with client.chat.completions.with_streaming_response.create(
        model="stall", messages=MESSAGES, stream=True
    ) as response:
        body = _read_raw(response, way)
    assert body.count("data: ") == 15  # the role, 12 chunks, the finish, [DONE]
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT]) == (12, 1)
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)


def test_a_stream_reset_while_read_as_server_sent_events_ends_as_its_error(
    instrumented: Spans, client: openai.OpenAI
) -> None:
    """The connection reset while the raw lines are read: the call ends with that error, the
    chunks before it counted (as many as through ``parse()``)."""
    with (
        pytest.raises(httpx2.HTTPError),
        client.chat.completions.with_streaming_response.create(
            model="reset", messages=MESSAGES, stream=True
        ) as response,
    ):
        for _ in response.iter_lines():
            pass
    a = attempt(instrumented)
    assert (a[sc.ATTEMPT_OUTCOME], a[sc.CHUNK_COUNT]) == (sc.OUTCOME_ERROR, 4)


async def test_an_async_stream_read_as_server_sent_events_without_parse_is_metered(
    instrumented: Spans, aclient: openai.AsyncOpenAI
) -> None:
    """The same through the async client's ``iter_lines()``, chat completions and the
    Responses API."""
    async with aclient.chat.completions.with_streaming_response.create(
        model="smooth", messages=MESSAGES, stream=True
    ) as response:
        lines = [line async for line in response.iter_lines()]
    assert lines[-2:] == ["data: [DONE]", ""]
    async with aclient.responses.with_streaming_response.create(
        model="smooth", input="hello", stream=True
    ) as response:
        async for _ in response.iter_lines():
            pass
    outcomes = [
        ((s.attributes or {})[sc.ATTEMPT_OUTCOME], (s.attributes or {})[sc.CHUNK_COUNT])
        for s in instrumented.attempts()
    ]
    assert outcomes == [(sc.OUTCOME_OK, 12), (sc.OUTCOME_OK, 12)]


_JSON_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
_EVENT = st.dictionaries(st.sampled_from(["type", "delta", "x"]), _JSON_TEXT, max_size=3)


class _Collected:
    """A stand-in recorder: the events it was handed, in order."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def on_item(self, item: Any, wait_start: int, arrival: int) -> None:
        self.events.append(item)


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(_EVENT, max_size=6),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    named=st.booleans(),
    marked=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    kind=st.sampled_from(["text", "bytes"]),
)
def test_server_sent_events_read_from_any_pieces_are_the_events_sent(
    events: list[dict[str, str]],
    newline: str,
    named: bool,
    marked: bool,
    cuts: list[int],
    kind: str,
) -> None:
    """A raw body read as text or bytes cut anywhere (inside a line, a multi-byte character,
    a CR LF): the events read from it are exactly the events sent, each once, in order —
    whichever line ends the format allows (a lone CR too), after a byte-order mark or not (the
    client's own decoder reads it); ``[DONE]`` and the ``event:`` lines are none."""
    from otel_llm._wrap._raw_response import _SseEvents

    body = ("\ufeff" if marked else "") + (
        "".join(
            (f"event: e{index}{newline}" if named else "")
            + f"data: {json.dumps(event, ensure_ascii=False)}{newline}{newline}"
            for index, event in enumerate(events)
        )
        + f"data: [DONE]{newline}{newline}"
    )
    whole: Any = body.encode() if kind == "bytes" else body
    points = sorted({0, len(whole), *(cut % (len(whole) + 1) for cut in cuts)})
    reader, seen = _SseEvents(kind), _Collected()
    for start, end in itertools.pairwise(points):
        reader.read(whole[start:end], 0, 0, seen)  # type: ignore[arg-type]
    assert seen.events == events


@pytest.mark.parametrize("collected", ["original", "copy"])
def test_a_raw_response_copied_is_one_call_whichever_handle_parses(
    instrumented: Spans, client: openai.OpenAI, collected: str
) -> None:
    """``copy.copy`` of a raw response is a second handle on it (as a shallow copy of the
    SDK's is): one handle parses, the other is collected while the stream is read — the call is
    still metered to its end, not ended as dropped by the first handle let go of."""
    raw = client.chat.completions.with_raw_response.create(
        model="smooth", messages=MESSAGES, stream=True
    )
    other = copy.copy(raw)
    if collected == "original":
        raw, other = other, raw
    stream = raw.parse()
    next(stream)
    del other
    gc.collect()
    assert instrumented.attempts() == []
    assert len(list(stream)) >= 12
    a = attempt(instrumented)
    assert (a[sc.ATTEMPT_OUTCOME], a[sc.CHUNK_COUNT]) == (sc.OUTCOME_OK, 12)
