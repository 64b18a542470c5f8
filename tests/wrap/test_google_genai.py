"""instrument_google_genai(): the real google-genai SDK over loopback against the simulated
provider's Gemini API — streams, the chat helper, non-streamed answers, faults."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest
from google import genai
from google.genai import errors, types

from otel_llm import _semconv as sc
from otel_llm import (
    instrument_google_genai,
    instrument_openai,
    uninstrument_google_genai,
    uninstrument_openai,
)
from otel_llm.simulator import Script, Silence, SimulatedProvider
from otel_llm.testing import Spans

pytestmark = pytest.mark.filterwarnings(
    # google-genai's async client subclasses aiohttp.ClientSession, which aiohttp 3.14 deprecates
    "ignore:Inheritance class AiohttpClientSession from ClientSession:DeprecationWarning"
)

FAST = {"first_chunk_delay_s": 0.0, "chunk_interval_s": 0.002, "chunk_count": 12}
SCRIPTS = {
    "smooth": Script(**FAST),
    "stall": Script(**FAST, silences=(Silence(after_chunk=4, duration_s=0.5),)),
    "pinged": Script(
        **FAST, silences=(Silence(after_chunk=4, duration_s=0.5, keepalive_every_s=0.05),)
    ),
    "late": Script(**{**FAST, "first_chunk_delay_s": 0.3}),
    "thinking": Script(**FAST, reasoning_chunks=4),
    "tool": Script(**FAST, tool_call=True),
    "long": Script(**FAST, finish_reason="length"),
    "filtered": Script(**FAST, finish_reason="content_filter"),
    "cut": Script(**FAST, fault="truncate", fault_after_chunk=5),
    "exhausted": Script(error_status=429),
}
KEY = "AIza-secret-gemini-0000"


@pytest.fixture
def instrumented(spans: Spans) -> Iterator[Spans]:
    """The SDK instrumented into the in-memory span pipeline (threshold 100 ms)."""
    instrument_google_genai(tracer_provider=spans.provider, stall_threshold_ms=100)
    yield spans
    uninstrument_google_genai()


@pytest.fixture
def client() -> Iterator[genai.Client]:
    with SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running:
        options = types.HttpOptions(base_url=running.url, retry_options=None)
        with genai.Client(api_key=KEY, http_options=options) as sdk:
            yield sdk


@pytest.fixture
async def aclient() -> AsyncIterator[genai.Client]:
    async with SimulatedProvider(scripts=SCRIPTS) as running:
        sdk = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=running.url))
        yield sdk
        await sdk.aio.aclose()


def attempt(spans: Spans) -> dict[str, Any]:
    (span,) = spans.attempts()
    return dict(span.attributes or {})


def test_a_stream_is_metered(instrumented: Spans, client: genai.Client) -> None:
    """Every response with new text one chunk, the silence one stall, the finish reason as the
    API names it, usage; the generator still is one; no key anywhere."""
    stream = client.models.generate_content_stream(model="stall", contents="hello")
    responses = list(stream)
    assert "".join(r.text or "" for r in responses).startswith("word0 word1")
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT]) == (12, 1)
    assert a[sc.STALL_MS] >= 100  # the threshold: a late chunk before the 0.5 s silence shortens it
    assert a[sc.GEN_AI_PROVIDER_NAME] == "gcp.gemini"
    assert a[sc.GEN_AI_OPERATION_NAME] == "generate_content"
    assert a[sc.GEN_AI_REQUEST_MODEL] == "stall"
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("STOP",)
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12
    assert a[sc.SERVER_ADDRESS] == "127.0.0.1"
    assert all(KEY not in span.to_json() for span in instrumented.finished())


async def test_an_async_stream_is_metered(instrumented: Spans, aclient: genai.Client) -> None:
    """``await client.aio.models.generate_content_stream(...)`` the same way."""
    stream = await aclient.aio.models.generate_content_stream(model="stall", contents="hello")
    async for _ in stream:
        pass
    a = attempt(instrumented)
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT]) == (12, 1)


def test_the_spans_start_at_the_first_step_of_the_generator(
    instrumented: Spans, client: genai.Client
) -> None:
    """A stream never read sends nothing and records nothing; one read late measures the
    provider, not the wait before reading."""
    client.models.generate_content_stream(model="smooth", contents="hello")
    assert instrumented.finished() == []
    stream = client.models.generate_content_stream(model="smooth", contents="hello")
    time.sleep(0.5)
    for _ in stream:
        pass
    assert attempt(instrumented)[sc.TTFT_MS] < 400


def test_the_chat_helper_is_metered(instrumented: Spans, client: genai.Client) -> None:
    """``chats.create(...).send_message_stream`` goes through the wrapped stream: one call per
    message."""
    chat = client.chats.create(model="smooth")
    for _ in chat.send_message_stream("hello"):
        pass
    for _ in chat.send_message_stream("again"):
        pass
    assert [(s.attributes or {})[sc.CHUNK_COUNT] for s in instrumented.attempts()] == [12, 12]


def test_a_chat_stream_closed_part_way_ends_as_closed(
    instrumented: Spans, client: genai.Client
) -> None:
    """Closing ``send_message_stream``'s generator part-way closes the stream it reads (the
    chat's generator lets go of it): ``closed``, as closing ``generate_content_stream``'s own
    is — not ``dropped``."""
    messages = client.chats.create(model="smooth").send_message_stream("hello")
    next(messages)
    next(messages)
    messages.close()
    direct = client.models.generate_content_stream(model="smooth", contents="hello")
    next(direct)
    direct.close()
    outcomes = [(s.attributes or {})[sc.ATTEMPT_OUTCOME] for s in instrumented.attempts()]
    assert outcomes == [sc.OUTCOME_CLOSED, sc.OUTCOME_CLOSED]


@pytest.fixture
def with_openai(instrumented: Spans) -> Iterator[Spans]:
    """The openai SDK instrumented too, into the same pipeline."""
    instrument_openai(tracer_provider=instrumented.provider, stall_threshold_ms=100)
    yield instrumented
    uninstrument_openai()


def _calling_tools(tool: Any) -> types.GenerateContentConfig:
    """Automatic function calling with ``tool``: the SDK runs it inside the wrapped call."""
    return types.GenerateContentConfig(
        tools=[tool],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(maximum_remote_calls=2),
    )


def _openai_calls(spans: Spans) -> list[str]:
    """The outcome of every openai call recorded (its call span's provider is openai)."""
    return [
        str((span.attributes or {}).get(sc.ATTEMPT_OUTCOME))
        for span in spans.attempts()
        if (span.attributes or {})[sc.GEN_AI_PROVIDER_NAME] == "openai"
    ]


@pytest.mark.parametrize("way", ["models.generate_content", "chats.send_message"])
def test_an_llm_call_made_by_a_tool_has_spans_of_its_own(with_openai: Spans, way: str) -> None:
    """Automatic function calling runs the application's tool inside the wrapped call: an
    openai call the tool makes is a call of its own, recorded with its own spans."""
    made: list[str] = []
    with (
        SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running,
        openai.OpenAI(base_url=running.base_url, api_key="sk-x", max_retries=0) as inner,
        genai.Client(
            api_key=KEY, http_options=types.HttpOptions(base_url=running.url, retry_options=None)
        ) as sdk,
    ):

        def lookup(query: str) -> str:
            """Look something up (asks another model)."""
            answer = inner.chat.completions.create(
                model="smooth", messages=[{"role": "user", "content": query}]
            )
            made.append(answer.id)
            return answer.choices[0].message.content or ""

        if way == "chats.send_message":
            sdk.chats.create(model="tool", config=_calling_tools(lookup)).send_message("hi")
        else:
            sdk.models.generate_content(model="tool", contents="hi", config=_calling_tools(lookup))
    assert made
    assert _openai_calls(with_openai) == [sc.OUTCOME_OK] * len(made)
    gemini = [s for s in with_openai.calls() if s.name == "generate_content tool"]
    assert gemini  # the chat helper runs its own loop: one call per turn
    assert len(with_openai.calls()) == len(gemini) + len(made)


async def test_an_llm_call_made_by_an_async_tool_has_spans_of_its_own(
    with_openai: Spans, aclient: genai.Client
) -> None:
    """The same for the async client and an async tool."""
    made: list[str] = []
    base = aclient._api_client._http_options.base_url
    assert base is not None
    async with openai.AsyncOpenAI(
        base_url=base.rstrip("/") + "/v1", api_key="sk-x", max_retries=0
    ) as inner:

        async def lookup(query: str) -> str:
            """Look something up (asks another model)."""
            answer = await inner.chat.completions.create(
                model="smooth", messages=[{"role": "user", "content": query}]
            )
            made.append(answer.id)
            return answer.choices[0].message.content or ""

        await aclient.aio.models.generate_content(
            model="tool", contents="hi", config=_calling_tools(lookup)
        )
    assert made
    assert _openai_calls(with_openai) == [sc.OUTCOME_OK] * len(made)
    assert len(with_openai.calls()) == 1 + len(made)


def test_first_chunk_thoughts_and_a_function_call(
    instrumented: Spans, client: genai.Client
) -> None:
    """Thought parts are chunks; a function call arrives whole, one chunk."""
    for model in ("late", "thinking", "tool"):
        for _ in client.models.generate_content_stream(model=model, contents="hello"):
            pass
    late, thinking, tool = (dict(s.attributes or {}) for s in instrumented.attempts())
    assert 250 <= late[sc.TTFT_MS] < 3000
    assert thinking[sc.CHUNK_COUNT] == 12
    assert thinking[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 4
    assert tool[sc.CHUNK_COUNT] == 1


def test_a_silence_is_a_stall(instrumented: Spans, client: genai.Client) -> None:
    """A silence scripted with keepalives is a stall: Gemini sends none (google-genai cannot
    read an SSE comment), so the stream is simply silent."""
    for _ in client.models.generate_content_stream(model="pinged", contents="hello"):
        pass
    assert attempt(instrumented)[sc.STALL_COUNT] == 1


@pytest.mark.parametrize(("model", "reason"), [("long", "MAX_TOKENS"), ("filtered", "SAFETY")])
def test_finish_reasons_are_the_apis(
    instrumented: Spans, client: genai.Client, model: str, reason: str
) -> None:
    """A length stop and a safety stop, named as Gemini names them."""
    for _ in client.models.generate_content_stream(model=model, contents="hello"):
        pass
    assert attempt(instrumented)[sc.GEN_AI_RESPONSE_FINISH_REASONS] == (reason,)


def test_a_non_streamed_answer_is_recorded(instrumented: Spans, client: genai.Client) -> None:
    """``generate_content``: one call, no stall figures, the finish reason and usage."""
    answer = client.models.generate_content(model="smooth", contents="hello")
    assert (answer.text or "").startswith("word0")
    a = attempt(instrumented)
    assert sc.STALL_MS not in a
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("STOP",)
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12


async def test_an_async_non_streamed_answer_is_recorded(
    instrumented: Spans, aclient: genai.Client
) -> None:
    """The async ``generate_content`` too."""
    await aclient.aio.models.generate_content(model="smooth", contents="hello")
    assert attempt(instrumented)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12


def test_a_cut_stream_is_recorded_as_truncated(instrumented: Spans, client: genai.Client) -> None:
    """The stream ends without a finish reason: recorded as cut short, with its chunks."""
    for _ in client.models.generate_content_stream(model="cut", contents="hello"):
        pass
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.ERROR_TYPE] == "TruncatedStream"
    assert a[sc.CHUNK_COUNT] == 6


def test_resource_exhausted_is_recorded_and_raised(
    instrumented: Spans, client: genai.Client
) -> None:
    """HTTP 429: the SDK's error reaches the application, the span names it."""
    with pytest.raises(errors.ClientError):
        for _ in client.models.generate_content_stream(model="exhausted", contents="hello"):
            pass
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.ERROR_TYPE] == "ClientError"


async def test_an_async_chat_stream_closed_part_way_ends_as_closed(
    instrumented: Spans, aclient: genai.Client
) -> None:
    """The async chat helper the same way: closing ``send_message_stream``'s async generator
    part-way ends the call as ``closed``, as closing the async
    ``generate_content_stream``'s own is."""
    messages = await aclient.aio.chats.create(model="smooth").send_message_stream("hello")
    await anext(messages)
    await anext(messages)
    await messages.aclose()  # type: ignore[attr-defined]
    direct = await aclient.aio.models.generate_content_stream(model="smooth", contents="hello")
    await anext(direct)
    await direct.aclose()  # type: ignore[attr-defined]
    outcomes = [(s.attributes or {})[sc.ATTEMPT_OUTCOME] for s in instrumented.attempts()]
    assert outcomes == [sc.OUTCOME_CLOSED, sc.OUTCOME_CLOSED]


class _EchoingDenial(BaseHTTPRequestHandler):
    """A gateway that refuses every request and quotes the credential headers it was sent."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        sent = [self.headers.get(name) or "" for name in ("Authorization", "X-Gateway-Token")]
        message = f"denied: {' / '.join(sent)}"
        body = json.dumps({"error": {"code": 403, "message": message, "status": "DENIED"}})
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def echoing() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EchoingDenial)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_a_token_sent_in_a_header_never_reaches_spans(instrumented: Spans, echoing: str) -> None:
    """A token sent in a header — the client's ``http_options`` or the call's
    ``config.http_options`` — rather than as the API key, echoed by the error, is redacted
    like the key, streamed or not."""
    gateway, per_call = "gateway-token-0000", "per-call-token-0000"
    options = types.HttpOptions(
        base_url=echoing, headers={"X-Gateway-Token": gateway}, retry_options=None
    )
    config = types.GenerateContentConfig(
        http_options=types.HttpOptions(headers={"Authorization": f"Token {per_call}"})
    )
    with genai.Client(api_key=KEY, http_options=options) as sdk:
        with pytest.raises(errors.ClientError) as raised:
            sdk.models.generate_content(model="m", contents="hi", config=config)
        assert gateway in str(raised.value)
        assert per_call in str(raised.value)
        with pytest.raises(errors.ClientError):
            for _ in sdk.models.generate_content_stream(model="m", contents="hi"):
                pass
    assert len(instrumented.calls()) == 2
    for span in instrumented.finished():
        text = span.to_json()
        assert gateway not in text
        assert per_call not in text


def test_a_stream_copied_refuses_as_the_sdks_own_and_is_metered_once(
    instrumented: Spans, client: genai.Client
) -> None:
    """``copy.copy`` of a stream does what it does to the SDK's own (a generator: it refuses),
    never a second handle that would start a second call over the same request; the stream is
    then read as one call."""
    stream = client.models.generate_content_stream(model="smooth", contents="hi")
    with pytest.raises(TypeError, match="generator"):
        copy.copy(stream)
    assert "".join(response.text or "" for response in stream).startswith("word0")
    a = attempt(instrumented)
    assert (a[sc.ATTEMPT_OUTCOME], a[sc.CHUNK_COUNT]) == (sc.OUTCOME_OK, 12)


async def test_an_async_stream_copied_refuses_as_the_sdks_own(
    instrumented: Spans, aclient: genai.Client
) -> None:
    """The same for the async client's stream (an async generator)."""
    stream = await aclient.aio.models.generate_content_stream(model="smooth", contents="hi")
    with pytest.raises(TypeError, match="generator"):
        copy.copy(stream)
    assert [response async for response in stream]
    a = attempt(instrumented)
    assert (a[sc.ATTEMPT_OUTCOME], a[sc.CHUNK_COUNT]) == (sc.OUTCOME_OK, 12)
