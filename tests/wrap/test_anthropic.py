"""instrument_anthropic(): the real anthropic SDK over loopback against the simulated provider's
Messages API — every way of calling it, the figures exact, faults recorded as what they are."""

from __future__ import annotations

import gc
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import pytest
from anthropic.types.beta.parsed_beta_message import ParsedBetaMessage
from anthropic.types.parsed_message import ParsedMessage

from otel_llm import _semconv as sc
from otel_llm import instrument_anthropic, uninstrument_anthropic
from otel_llm.simulator import Script, Silence, SimulatedProvider
from otel_llm.testing import Spans

MESSAGES: list[Any] = [{"role": "user", "content": "hello"}]
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
    "cut": Script(**FAST, fault="truncate", fault_after_chunk=5),
    "broken": Script(**FAST, fault="error", fault_after_chunk=5, fault_status=529),
    "overloaded": Script(error_status=529, error_type="overloaded_error"),
}
KEY = "sk-ant-secret-0000"


@pytest.fixture
def instrumented(spans: Spans) -> Iterator[Spans]:
    """The SDK instrumented into the in-memory span pipeline (threshold 100 ms)."""
    instrument_anthropic(tracer_provider=spans.provider, stall_threshold_ms=100)
    yield spans
    uninstrument_anthropic()


@pytest.fixture
def client() -> Iterator[anthropic.Anthropic]:
    with (
        SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running,
        anthropic.Anthropic(base_url=running.url, api_key=KEY, max_retries=0) as sdk,
    ):
        yield sdk


@pytest.fixture
async def aclient() -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with SimulatedProvider(scripts=SCRIPTS) as running:
        sdk = anthropic.AsyncAnthropic(base_url=running.url, api_key=KEY, max_retries=0)
        yield sdk
        await sdk.close()


def attempt(spans: Spans) -> dict[str, Any]:
    (span,) = spans.attempts()
    return dict(span.attributes or {})


def _create(model: str, **more: Any) -> dict[str, Any]:
    return {"model": model, "max_tokens": 100, "messages": MESSAGES, **more}


def test_a_streamed_create_is_metered(instrumented: Spans, client: anthropic.Anthropic) -> None:
    """``create(stream=True)``: every text delta one chunk, the silence one stall, the stop
    reason and usage from ``message_delta``; the stream is still the SDK's; no key anywhere."""
    stream = client.messages.create(**_create("stall"), stream=True)
    assert isinstance(stream, anthropic.Stream)
    events = list(stream)
    assert sum(e.type == "content_block_delta" for e in events) == 12
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT]) == (12, 1)
    assert a[sc.STALL_MS] >= 100  # the threshold: a late chunk before the 0.5 s silence shortens it
    assert a[sc.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12
    assert a[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0
    assert a[sc.GEN_AI_RESPONSE_ID]
    assert a[sc.SERVER_ADDRESS] == "127.0.0.1"
    assert a[sc.METERING_STATUS] == sc.METERING_EXACT
    assert all(KEY not in span.to_json() for span in instrumented.finished())


async def test_an_async_streamed_create_is_metered(
    instrumented: Spans, aclient: anthropic.AsyncAnthropic
) -> None:
    """The async twin, the same figures."""
    stream = await aclient.messages.create(**_create("stall"), stream=True)
    assert isinstance(stream, anthropic.AsyncStream)
    async for _ in stream:
        pass
    a = attempt(instrumented)
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT]) == (12, 1)


def test_the_stream_helper_is_metered_whichever_way_it_is_read(
    instrumented: Spans, client: anthropic.Anthropic
) -> None:
    """``messages.stream()`` read by ``text_stream``, by iterating, by ``get_final_message``:
    each one call, each raw event once (the helper's own derived events are not counted)."""
    with client.messages.stream(**_create("smooth")) as stream:
        text = "".join(stream.text_stream)
    assert text.startswith("word0 word1")
    with client.messages.stream(**_create("smooth")) as stream:
        kinds = [event.type for event in stream]
    assert "text" in kinds  # the helper's derived events were there and not counted
    with client.messages.stream(**_create("stall")) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "end_turn"
    counts = [
        ((s.attributes or {})[sc.CHUNK_COUNT], (s.attributes or {})[sc.STALL_COUNT])
        for s in instrumented.attempts()
    ]
    assert counts == [(12, 0), (12, 0), (12, 1)]


async def test_the_async_stream_helper_is_metered(
    instrumented: Spans, aclient: anthropic.AsyncAnthropic
) -> None:
    """``async with messages.stream()`` and its async ``text_stream``."""
    async with aclient.messages.stream(**_create("smooth")) as stream:
        text = "".join([piece async for piece in stream.text_stream])
    assert text.startswith("word0")
    assert attempt(instrumented)[sc.CHUNK_COUNT] == 12


def test_the_spans_of_the_helper_start_when_the_request_is_sent(
    instrumented: Spans, client: anthropic.Anthropic
) -> None:
    """A manager made and never entered sends nothing and records nothing; one entered late
    measures the provider's first chunk, not the wait before ``with``."""
    client.messages.stream(**_create("smooth"))
    assert instrumented.finished() == []
    manager = client.messages.stream(**_create("smooth"))
    time.sleep(0.5)
    with manager as stream:
        stream.until_done()
    assert attempt(instrumented)[sc.TTFT_MS] < 400


def test_time_to_first_chunk_and_reasoning(
    instrumented: Spans, client: anthropic.Anthropic
) -> None:
    """Thinking deltas are chunks (the first one ends the wait for the first chunk); the
    thinking tokens are the reasoning tokens."""
    for _ in client.messages.create(**_create("late"), stream=True):
        pass
    for _ in client.messages.create(**_create("thinking"), stream=True):
        pass
    late, thinking = (dict(s.attributes or {}) for s in instrumented.attempts())
    assert 250 <= late[sc.TTFT_MS] < 3000
    assert thinking[sc.CHUNK_COUNT] == 12
    assert thinking[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 4


def test_tool_input_deltas_are_chunks(instrumented: Spans, client: anthropic.Anthropic) -> None:
    """A streamed tool call: its input JSON deltas are the chunks; the stop reason says so."""
    for _ in client.messages.create(**_create("tool"), stream=True):
        pass
    a = attempt(instrumented)
    assert a[sc.CHUNK_COUNT] == 12
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_use",)


def test_pings_are_not_chunks_and_hide_no_silence(
    instrumented: Spans, client: anthropic.Anthropic
) -> None:
    """A silence full of ``ping`` events is still a stall."""
    for _ in client.messages.create(**_create("pinged"), stream=True):
        pass
    a = attempt(instrumented)
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT]) == (12, 1)


def test_a_non_streamed_create_records_the_answer(
    instrumented: Spans, client: anthropic.Anthropic
) -> None:
    """One call, no stall figures, stop reason and usage."""
    message = client.messages.create(**_create("smooth"))
    assert message.content[0].type == "text"
    a = attempt(instrumented)
    assert sc.STALL_MS not in a
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12


def _answered(a: dict[str, Any], streamed: bool) -> None:
    """The figures of a ``smooth`` answer, recorded as ``create()`` records them."""
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert a.get(sc.CHUNK_COUNT) == (12 if streamed else None)
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12
    assert a[sc.GEN_AI_RESPONSE_MODEL]
    assert a[sc.GEN_AI_RESPONSE_ID]


def _messages_of(sdk: Any, api: str) -> Any:
    """``sdk.messages`` or ``sdk.beta.messages``."""
    return sdk.messages if api == "messages" else sdk.beta.messages


@pytest.mark.parametrize("api", ["messages", "beta.messages"])
def test_parse_is_metered(instrumented: Spans, client: anthropic.Anthropic, api: str) -> None:
    """``parse()`` sends its own request (not through ``create()``): one call, recorded as a
    non-streamed ``create()``, and the SDK's parsed message returned."""
    message = _messages_of(client, api).parse(**_create("smooth"))
    assert isinstance(message, ParsedMessage | ParsedBetaMessage)
    _answered(attempt(instrumented), streamed=False)
    (call,) = instrumented.calls()
    assert dict(call.attributes or {})[sc.GEN_AI_REQUEST_MODEL] == "smooth"


async def test_async_parse_is_metered(
    instrumented: Spans, aclient: anthropic.AsyncAnthropic
) -> None:
    """The same for the async client, and for its beta resource."""
    await aclient.messages.parse(**_create("smooth"))
    await aclient.beta.messages.parse(**_create("smooth"))
    assert len(instrumented.calls()) == 2
    for span in instrumented.attempts():
        _answered(dict(span.attributes or {}), streamed=False)


def test_the_beta_messages_api_is_metered(instrumented: Spans, client: anthropic.Anthropic) -> None:
    """``beta.messages``: ``create()`` streamed and not and the ``stream()`` helper, each one
    call with the figures ``messages`` records, the SDK's own types returned."""
    message = client.beta.messages.create(**_create("smooth"))
    stream = client.beta.messages.create(**_create("smooth"), stream=True)
    assert isinstance(stream, anthropic.Stream)
    assert sum(event.type == "content_block_delta" for event in stream) == 12
    with client.beta.messages.stream(**_create("smooth")) as helper:
        assert "".join(helper.text_stream)
    assert type(message).__name__ == "BetaMessage"
    attempts = [dict(span.attributes or {}) for span in instrumented.attempts()]
    assert sorted(a.get(sc.CHUNK_COUNT) or 0 for a in attempts) == [0, 12, 12]
    for a in attempts:
        _answered(a, streamed=a.get(sc.CHUNK_COUNT) is not None)


async def test_the_async_beta_messages_api_is_metered(
    instrumented: Spans, aclient: anthropic.AsyncAnthropic
) -> None:
    """The same for the async client's ``beta.messages``."""
    await aclient.beta.messages.create(**_create("smooth"))
    stream = await aclient.beta.messages.create(**_create("smooth"), stream=True)
    assert isinstance(stream, anthropic.AsyncStream)
    assert [event async for event in stream]
    async with aclient.beta.messages.stream(**_create("smooth")) as helper:
        await helper.until_done()
    attempts = [dict(span.attributes or {}) for span in instrumented.attempts()]
    assert sorted(a.get(sc.CHUNK_COUNT) or 0 for a in attempts) == [0, 12, 12]
    for a in attempts:
        _answered(a, streamed=a.get(sc.CHUNK_COUNT) is not None)


def _kinds(answer: Any) -> list[str]:
    """The event types of a stream read to its end (a whole message: ``["message"]``)."""
    return [e.type for e in answer] if isinstance(answer, anthropic.Stream) else [answer.type]


async def _async_kinds(answer: Any) -> list[str]:
    if isinstance(answer, anthropic.AsyncStream):
        return [e.type async for e in answer]
    return [answer.type]


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "answer"])
@pytest.mark.parametrize("way", ["with_raw_response", "with_streaming_response"])
def test_a_raw_response_is_metered_through_parse(
    instrumented: Spans,
    client: anthropic.Anthropic,
    caplog: pytest.LogCaptureFixture,
    way: str,
    streamed: bool,
) -> None:
    """``with_raw_response`` / ``with_streaming_response``: what ``parse()`` returns is metered
    exactly as ``create()``'s own result (chunks, stop reason, usage); nothing logged."""
    create = getattr(client.messages, way).create
    if way == "with_raw_response":
        response = create(**_create("smooth"), stream=streamed)
        kinds = _kinds(response.parse())
    else:
        with create(**_create("smooth"), stream=streamed) as response:
            kinds = _kinds(response.parse())
    assert response.http_response.status_code == 200
    assert kinds.count("content_block_delta") == (12 if streamed else 0)
    _answered(attempt(instrumented), streamed)
    assert _errors(caplog) == []


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "answer"])
@pytest.mark.parametrize("way", ["with_raw_response", "with_streaming_response"])
async def test_an_async_raw_response_is_metered_through_parse(
    instrumented: Spans,
    aclient: anthropic.AsyncAnthropic,
    caplog: pytest.LogCaptureFixture,
    way: str,
    streamed: bool,
) -> None:
    """The async twin."""
    create = getattr(aclient.messages, way).create
    if way == "with_raw_response":
        response = await create(**_create("smooth"), stream=streamed)
        kinds = await _async_kinds(await response.parse())
    else:
        async with create(**_create("smooth"), stream=streamed) as response:
            kinds = await _async_kinds(await response.parse())
    assert kinds.count("content_block_delta") == (12 if streamed else 0)
    _answered(attempt(instrumented), streamed)
    assert _errors(caplog) == []


def test_a_raw_answer_read_without_parse_is_ok(
    instrumented: Spans, client: anthropic.Anthropic
) -> None:
    """A non-streamed message's body read without ``parse()`` — ``with_raw_response`` then
    ``http_response.json()``, or ``.json()`` in a ``with_streaming_response`` block — was
    answered: ``ok`` with the body's stop reason and usage, never ``dropped`` or ``closed``."""
    raw = client.messages.with_raw_response.create(**_create("smooth"))
    assert raw.http_response.json()["stop_reason"] == "end_turn"
    del raw
    gc.collect()
    with client.messages.with_streaming_response.create(**_create("smooth")) as response:
        assert response.json()["stop_reason"] == "end_turn"
    for span in instrumented.attempts():
        _answered(dict(span.attributes or {}), streamed=False)
    assert len(instrumented.calls()) == 2


def test_a_raw_stream_left_early_ends_as_closed(
    instrumented: Spans, client: anthropic.Anthropic
) -> None:
    """Leaving ``with_streaming_response``'s ``with`` part-way through the stream: ``closed``
    on the way out; and ``with_raw_response.create(...).parse()`` in one expression still
    meters the stream to its end."""
    with client.messages.with_streaming_response.create(
        **_create("smooth"), stream=True
    ) as response:
        for _ in response.parse():
            break
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED
    instrumented.exporter.clear()
    stream = client.messages.with_raw_response.create(**_create("smooth"), stream=True).parse()
    assert sum(e.type == "content_block_delta" for e in stream) == 12
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK


def test_a_cut_stream_is_recorded_as_truncated(
    instrumented: Spans, client: anthropic.Anthropic
) -> None:
    """The stream ends without ``message_delta``/``message_stop``: whatever the SDK gives the
    application, the span says the answer was cut short."""
    try:
        for _ in client.messages.create(**_create("cut"), stream=True):
            pass
    except anthropic.APIError:
        pass
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.CHUNK_COUNT] == 6


def test_an_error_event_mid_stream_is_the_providers_error(
    instrumented: Spans, client: anthropic.Anthropic
) -> None:
    """``event: error`` after six chunks: the SDK raises it, the span records it and the chunks
    that came."""
    with pytest.raises(anthropic.APIStatusError):
        for _ in client.messages.create(**_create("broken"), stream=True):
            pass
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.CHUNK_COUNT] == 6
    assert a[sc.ERROR_TYPE]


def test_an_overloaded_answer_is_recorded_and_raised(
    instrumented: Spans, client: anthropic.Anthropic
) -> None:
    """HTTP 529: the SDK's exception reaches the application, the span names it."""
    with pytest.raises(anthropic.APIStatusError) as raised:
        client.messages.create(**_create("overloaded"), stream=True)
    assert raised.value.status_code == 529
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.ERROR_TYPE] == type(raised.value).__name__


class _EchoingDenial(BaseHTTPRequestHandler):
    """A provider that refuses every request and quotes the credentials it was sent."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        sent = [self.headers.get(name) or "" for name in ("Authorization", "X-Amz-Security-Token")]
        message = f"denied: {' / '.join(sent)}"
        body = json.dumps(
            {"type": "error", "error": {"type": "permission_error", "message": message}}
        )
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


SESSION_TOKEN = "aws-session-token-0000"
ACCESS_TOKEN = "ya29.vertex-access-token-0000"


def test_bedrock_and_vertex_are_named_as_such_and_their_credentials_kept_out(
    instrumented: Spans, echoing: str
) -> None:
    """``AnthropicBedrock`` and ``AnthropicVertex`` calls carry the convention's names for
    those platforms (``aws.bedrock``, ``gcp.vertex_ai``), and the credentials a provider
    echoes back (an AWS session token, a Google access token) never reach a span."""
    bedrock = anthropic.AnthropicBedrock(
        base_url=echoing,
        aws_region="us-east-1",
        aws_access_key="AKIAEXAMPLEKEY0000",
        aws_secret_key="aws-secret-key-0000",
        aws_session_token=SESSION_TOKEN,
        max_retries=0,
    )
    vertex = anthropic.AnthropicVertex(
        base_url=echoing,
        region="us-east5",
        project_id="p",
        access_token=ACCESS_TOKEN,
        max_retries=0,
    )
    for sdk in (bedrock, vertex):
        with pytest.raises(anthropic.PermissionDeniedError) as raised:
            sdk.messages.create(**_create("smooth"))
        assert SESSION_TOKEN in str(raised.value) or ACCESS_TOKEN in str(raised.value)
        sdk.close()
    providers = [(s.attributes or {})[sc.GEN_AI_PROVIDER_NAME] for s in instrumented.attempts()]
    assert providers == ["aws.bedrock", "gcp.vertex_ai"]
    for span in instrumented.finished():
        text = span.to_json()
        assert SESSION_TOKEN not in text
        assert ACCESS_TOKEN not in text


AWS_SECRET = "aws-secret-key-bedrock-0000"


def _bedrock(url: str, sdk: Any = None) -> Any:
    """An ``AnthropicBedrock`` client (or ``sdk``, its async twin) of the simulator, which
    speaks Bedrock's ``invoke`` routes and AWS event streams."""
    return (sdk or anthropic.AnthropicBedrock)(
        base_url=url,
        aws_region="us-east-1",
        aws_access_key="AKIAEXAMPLEBEDROCK00",
        aws_secret_key=AWS_SECRET,
        max_retries=0,
    )


def _figures(spans: Spans) -> list[tuple[Any, ...]]:
    return [
        (
            a.get(sc.ATTEMPT_OUTCOME),
            a.get(sc.CHUNK_COUNT),
            a.get(sc.STALL_COUNT),
            a.get(sc.GEN_AI_PROVIDER_NAME),
            a.get(sc.GEN_AI_RESPONSE_FINISH_REASONS),
            a.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS),
        )
        for a in (dict(s.attributes or {}) for s in spans.attempts())
    ]


def test_bedrock_streams_are_metered_as_anthropics_own(instrumented: Spans) -> None:
    """Through Bedrock (AWS event stream messages, not SSE) every way of streaming gives the
    figures Anthropic's own API gives: each delta one chunk, the silence one stall, stop
    reason and usage; ``aws.bedrock``; a mid-stream exception recorded as the provider's
    error; no AWS secret anywhere."""
    with SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running:
        sdk = _bedrock(running.url)
        events = list(sdk.messages.create(**_create("stall"), stream=True))
        assert sum(e.type == "content_block_delta" for e in events) == 12
        with sdk.messages.stream(**_create("smooth")) as stream:
            assert stream.get_final_message().stop_reason == "end_turn"
        sdk.messages.create(**_create("smooth"))
        with pytest.raises(anthropic.APIStatusError):
            for _ in sdk.messages.create(**_create("broken"), stream=True):
                pass
        sdk.close()
    bedrock = sc.PROVIDER_AWS_BEDROCK
    assert _figures(instrumented) == [
        (sc.OUTCOME_OK, 12, 1, bedrock, ("end_turn",), 12),
        (sc.OUTCOME_OK, 12, 0, bedrock, ("end_turn",), 12),
        (sc.OUTCOME_OK, None, None, bedrock, ("end_turn",), 12),
        (sc.OUTCOME_ERROR, 6, 0, bedrock, ("error",), 1),  # as first-party: chunks to the fault
    ]
    stall = dict(instrumented.attempts()[0].attributes or {})
    assert stall[sc.STALL_MS] >= 100
    assert stall[sc.METERING_STATUS] == sc.METERING_EXACT
    assert dict(instrumented.attempts()[3].attributes or {})[sc.ERROR_TYPE]
    assert all(AWS_SECRET not in span.to_json() for span in instrumented.finished())


async def test_async_bedrock_streams_are_metered(instrumented: Spans) -> None:
    """The async Bedrock client the same way."""
    async with SimulatedProvider(scripts=SCRIPTS) as running:
        sdk = _bedrock(running.url, anthropic.AsyncAnthropicBedrock)
        async for _ in await sdk.messages.create(**_create("stall"), stream=True):
            pass
        async with sdk.messages.stream(**_create("smooth")) as stream:
            text = "".join([piece async for piece in stream.text_stream])
        assert text.startswith("word0")
        await sdk.close()
    bedrock = sc.PROVIDER_AWS_BEDROCK
    assert _figures(instrumented) == [
        (sc.OUTCOME_OK, 12, 1, bedrock, ("end_turn",), 12),
        (sc.OUTCOME_OK, 12, 0, bedrock, ("end_turn",), 12),
    ]


_PLATFORM_ARGUMENTS: dict[str, dict[str, Any]] = {
    "Bedrock": {"aws_region": "us-east-1", "aws_access_key": "a", "aws_secret_key": "s"},
    "BedrockMantle": {"aws_region": "us-east-1", "api_key": "k"},
    "AWS": {"aws_region": "us-east-1", "api_key": "k", "workspace_id": "w"},
    "Vertex": {"region": "us-east5", "project_id": "p", "access_token": "t"},
    "GoogleCloud": {"project": "p", "location": "us-east5", "skip_auth": True},
    "Foundry": {"resource": "r", "api_key": "k"},
}
"""Construction arguments of each platform client the anthropic SDK exports (``Anthropic`` +
the key), none of which reaches a network."""


@pytest.mark.parametrize("platform", ["", *_PLATFORM_ARGUMENTS])
@pytest.mark.parametrize("prefix", ["", "Async"])
def test_every_platform_client_is_named_as_the_sdk_names_it(prefix: str, platform: str) -> None:
    """Each of the SDK's clients is recorded under the provider name the SDK's own tracing
    gives it (``aws.bedrock`` for Bedrock and Bedrock Mantle, ``gcp.vertex_ai`` for Vertex AI,
    ``anthropic`` for Anthropic's API however it is reached), and every platform client the
    installed SDK exports is covered here."""
    from otel_llm._wrap._sdk_client import client_facts

    exported = {
        name
        for name in dir(anthropic)
        if name.startswith("Anthropic")
        and isinstance(getattr(anthropic, name), type)
        and not issubclass(getattr(anthropic, name), BaseException)
    }
    assert exported == {f"Anthropic{key}" for key in ["", *_PLATFORM_ARGUMENTS]}, (
        "the SDK exports a platform client this test does not know"
    )
    cls = getattr(anthropic, f"{prefix}Anthropic{platform}")
    client = cls(**_PLATFORM_ARGUMENTS.get(platform, {"api_key": "k"}))

    class Resource:
        _client = client

    facts = client_facts(Resource(), default_provider=sc.PROVIDER_ANTHROPIC)
    assert facts.provider == client._gen_ai_provider_name


def test_uninstrument_restores_the_sdk(spans: Spans, client: anthropic.Anthropic) -> None:
    """After ``uninstrument_anthropic()`` nothing is recorded and the SDK's own types return."""
    instrument_anthropic(tracer_provider=spans.provider)
    uninstrument_anthropic()
    with client.messages.stream(**_create("smooth")) as stream:
        stream.until_done()
    assert spans.finished() == []


def test_a_token_sent_in_a_header_never_reaches_spans(instrumented: Spans, echoing: str) -> None:
    """A token the application sends in a header (the client's ``default_headers`` or the
    call's ``extra_headers``; a gateway's own scheme, not a bearer token) rather than as the
    client's key, echoed by the provider's error, is redacted like the key."""
    token = "header-bearer-token-0000"
    clients = [
        (anthropic.Anthropic(base_url=echoing, api_key="k", max_retries=0), True),
        (
            anthropic.Anthropic(
                base_url=echoing,
                api_key="k",
                max_retries=0,
                default_headers={"Authorization": f"Token {token}"},
            ),
            False,
        ),
    ]
    for sdk, per_call in clients:
        extra = {"Authorization": f"Token {token}"} if per_call else None
        with pytest.raises(anthropic.PermissionDeniedError) as raised:
            sdk.messages.create(**_create("smooth"), extra_headers=extra)
        assert token in str(raised.value)
        sdk.close()
    assert len(instrumented.calls()) == 2
    for span in instrumented.finished():
        assert token not in span.to_json()


@pytest.mark.parametrize(("model", "outcome"), [("smooth", "ok"), ("cut", "error")])
def test_a_stream_read_as_server_sent_events_without_parse_is_metered(
    instrumented: Spans, client: anthropic.Anthropic, model: str, outcome: str
) -> None:
    """``with_streaming_response`` of a streamed call read by ``iter_lines()``, never parsed:
    metered from its events by the Messages API's chunk rule; one cut short (no
    ``message_delta``) is recorded as such."""
    with client.messages.with_streaming_response.create(**_create(model), stream=True) as response:
        for _ in response.iter_lines():
            pass
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == outcome
    if model == "smooth":
        assert (a[sc.CHUNK_COUNT], a[sc.GEN_AI_RESPONSE_FINISH_REASONS]) == (12, ("end_turn",))
    else:
        assert (a[sc.CHUNK_COUNT], a[sc.ERROR_TYPE]) == (6, "TruncatedStream")


def test_a_bedrock_stream_read_as_raw_bytes_is_not_taken_for_server_sent_events(
    instrumented: Spans,
) -> None:
    """Bedrock's stream is AWS event stream messages, not server-sent events: its raw bytes
    are not read for events (no answer mistaken for one cut short); the call ends ``closed``
    with the block, as before."""
    with SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running:
        sdk = _bedrock(running.url)
        with sdk.messages.with_streaming_response.create(
            **_create("smooth"), stream=True
        ) as response:
            assert b"".join(response.iter_bytes())
        sdk.close()
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED
