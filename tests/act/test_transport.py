"""The transport over real HTTP to the simulated provider: assembly, chunk rule, error mapping."""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from pydantic import SecretStr

from otel_llm import Client, Source
from otel_llm import _errors as e
from otel_llm import _semconv as sc
from otel_llm._act._attempt import Attempt
from otel_llm._act._pool import Pool
from otel_llm._act._transport import chat_completion
from otel_llm._measure._chunks import ChunkClock
from otel_llm.simulator import Script, Silence, SimulatedProvider
from otel_llm.testing import Spans
from otel_llm.testing import figures_of as derived

MESSAGES = [{"role": "user", "content": "hello"}]
SECRET = "sk-test-0123456789abcdefSECRET"


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider() as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[Pool]:
    async with httpx2.AsyncClient() as client:
        yield Pool(client=client)


def source(provider: SimulatedProvider, **options: Any) -> Source:
    return Source(
        name="sim-1",
        provider="sim",
        base_url=provider.base_url,
        model="sim-model",
        api_key=SecretStr(SECRET),
        **options,
    )


def scripted(script: Script) -> dict[str, Any]:
    """A chat payload whose behaviour is ``script`` (sent in the body field ``sim``)."""
    return {"messages": MESSAGES, "sim": script.model_dump(mode="json")}


FAST = {"first_chunk_delay_s": 0.0, "chunk_interval_s": 0.002}


async def stream(http: Pool, provider: SimulatedProvider, script: Script) -> tuple[Any, ChunkClock]:
    clock = ChunkClock()
    completion = await chat_completion(
        http, source(provider), scripted(script), stream=True, clock=clock
    )
    return completion, clock


async def test_stream_is_assembled(http: Pool, provider: SimulatedProvider) -> None:
    """Content, finish reason, usage and response model come back from a stream."""
    completion, clock = await stream(http, provider, Script(chunk_count=5, **FAST))
    assert completion.text == "word0 word1 word2 word3 word4"
    assert completion.finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.output_tokens == 5
    assert completion.response_model == "sim-model"
    assert completion.response_id
    assert clock.count == 5, "the role-only first chunk and the usage frame are not chunks"


async def test_reasoning_only_phase_counts_as_chunks_not_stall(
    http: Pool, provider: SimulatedProvider
) -> None:
    """A reasoning-only phase is output: its chunks are timed, so it is not a stall."""
    script = Script(chunk_count=30, reasoning_chunks=20, **FAST)
    completion, clock = await stream(http, provider, script)
    assert completion.reasoning is not None
    assert completion.reasoning.startswith("thought0")
    assert clock.count == 30
    figures = clock.timeline(clock.arrivals_ns[-1]).gaps_ns
    assert max(figures) < 100_000_000


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_both_reasoning_keys_are_chunks(
    http: Pool, provider: SimulatedProvider, key: str
) -> None:
    """Both ``reasoning_content`` and ``reasoning`` deltas are incremental chunks."""
    script = Script(chunk_count=4, reasoning_chunks=4, reasoning_key=key, **FAST)  # type: ignore[arg-type]
    completion, clock = await stream(http, provider, script)
    assert clock.count == 4
    assert completion.text == ""
    assert completion.reasoning


async def test_keepalives_do_not_hide_a_silence(http: Pool, provider: SimulatedProvider) -> None:
    """SSE keepalive comments during a silence are not chunks: the gap is measured in full."""
    silence = Silence(after_chunk=2, duration_s=0.5, keepalive_every_s=0.02)
    script = Script(chunk_count=5, silences=(silence,), **FAST)
    _, clock = await stream(http, provider, script)
    assert clock.count == 5
    gaps = clock.gaps_ns()
    # pings come every 20 ms: had they counted, no gap would exceed ~20 ms; the margin below
    # the scripted 500 ms is for a chunk delivered late on a loaded machine
    assert gaps[2] >= 250_000_000, "the gap spans the silence despite the pings"
    assert max(gaps[:2] + gaps[3:]) < 100_000_000


async def test_tool_calls_are_assembled(http: Pool, provider: SimulatedProvider) -> None:
    """Streamed tool-call deltas become one tool call with its full arguments."""
    completion, clock = await stream(http, provider, Script(chunk_count=6, tool_call=True, **FAST))
    assert completion.finish_reason == "tool_calls"
    (call,) = completion.tool_calls
    assert call.id
    assert call.name
    assert call.arguments.startswith("{")
    assert clock.count == 6


async def test_missing_done_with_finish_reason_is_complete(
    http: Pool, provider: SimulatedProvider
) -> None:
    """A stream with a finish reason that ends cleanly without [DONE] is a complete answer."""
    completion, _ = await stream(http, provider, Script(chunk_count=3, done=False, **FAST))
    assert completion.finish_reason == "stop"
    assert completion.text == "word0 word1 word2"


async def test_non_streamed_completion(http: Pool, provider: SimulatedProvider) -> None:
    """A non-streamed request returns the assembled JSON answer and marks no chunks."""
    clock = ChunkClock()
    completion = await chat_completion(
        http, source(provider), scripted(Script(chunk_count=3, **FAST)), stream=False, clock=clock
    )
    assert completion.text == "word0 word1 word2"
    assert completion.usage is not None
    assert clock.count == 0


@pytest.mark.parametrize(
    ("script", "error", "check"),
    [
        pytest.param(
            Script(fault="truncate", fault_after_chunk=2, **FAST),
            e.TruncatedStream,
            "without a finish reason",
            id="truncated",
        ),
        pytest.param(
            Script(fault="malformed", fault_after_chunk=1, **FAST),
            e.MalformedStream,
            "not JSON",
            id="malformed",
        ),
        pytest.param(
            Script(fault="reset", fault_after_chunk=1, **FAST),
            e.ProviderConnectionError,
            "after 2 chunks",
            id="reset",
        ),
        pytest.param(Script(error_status=500), e.ServerError, "answered 500", id="500"),
        pytest.param(Script(error_status=408), e.ServerError, "answered 408", id="408"),
        pytest.param(
            Script(error_status=429), e.RateLimited, "answered 429", id="429-no-retry-after"
        ),
        pytest.param(
            Script(
                error_status=400,
                error_code="context_length_exceeded",
                error_message="This model's maximum context length is 8192 tokens.",
            ),
            e.ContextLengthExceeded,
            "maximum context length is 8192 tokens",
            id="context-length",
        ),
        pytest.param(
            Script(error_status=400, error_code="content_filter", error_message="refused"),
            e.ContentFiltered,
            "refused",
            id="content-filter",
        ),
        pytest.param(
            Script(error_status=400, error_code="invalid_value", error_message="bad temperature"),
            e.BadRequest,
            "bad temperature",
            id="400",
        ),
        pytest.param(Script(error_status=401), e.AuthenticationError, "401", id="401"),
        pytest.param(Script(error_status=403), e.AuthenticationError, "403", id="403"),
        pytest.param(Script(error_status=404), e.NotFound, "404", id="404"),
        pytest.param(Script(error_status=422), e.BadRequest, "422", id="422"),
    ],
)
async def test_failures_map_to_the_error_hierarchy(
    http: Pool,
    provider: SimulatedProvider,
    script: Script,
    error: type[e.ProviderError],
    check: str,
) -> None:
    """Every failure becomes the most specific error, with the provider's reason unmasked."""
    with pytest.raises(error) as caught:
        await stream(http, provider, script)
    assert check in str(caught.value)
    assert caught.value.source == "sim-1"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({"retry_after": "7"}, 7.0, id="seconds"),
        pytest.param({"retry_after_ms": "1500"}, 1.5, id="ms"),
        pytest.param({"retry_after": "soon"}, None, id="garbage"),
        pytest.param({}, None, id="absent"),
    ],
)
async def test_retry_after_is_honoured(
    http: Pool, provider: SimulatedProvider, headers: dict[str, str], expected: float
) -> None:
    """A 429's Retry-After (seconds or ms) is parsed onto the error."""
    with pytest.raises(e.RateLimited) as caught:
        await stream(http, provider, Script(error_status=429, **headers))  # type: ignore[arg-type]
    assert caught.value.retry_after_s == expected


async def test_connection_refused_is_transient(http: Pool) -> None:
    """A closed port is a transient connection error, not a crash."""
    dead = Source(name="dead", provider="sim", base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(e.ProviderConnectionError, match="before the first chunk"):
        await chat_completion(http, dead, {"messages": MESSAGES}, stream=True)


async def test_read_timeout_is_transient(http: Pool, provider: SimulatedProvider) -> None:
    """A provider that says nothing past the read timeout yields ProviderTimeout."""
    slow = source(provider, timeout_s=0.1)
    with pytest.raises(e.ProviderTimeout):
        await chat_completion(http, slow, scripted(Script(hold_s=5.0)), stream=True)


async def test_secrets_never_leave(http: Pool, provider: SimulatedProvider, spans: Spans) -> None:
    """The API key appears in no error message, span attribute, event or status."""
    script = Script(error_status=401, error_message=f"Incorrect API key provided: {SECRET}")
    attempt = Attempt(spans.tracer, source(provider), number=1, stream=True, threshold_ms=1000)
    with pytest.raises(e.AuthenticationError) as caught:
        await attempt.run(http, scripted(script))
    assert SECRET not in str(caught.value)
    assert SECRET not in repr(source(provider))
    (span,) = spans.attempts()
    dumped = span.to_json()
    assert SECRET not in dumped
    assert "REDACTED" in dumped


@pytest.mark.parametrize(
    "script",
    [
        Script(error_status=401, error_code=f"Bearer {SECRET}"),
        Script(error_status=401, error_type=SECRET, error_code=None),
        Script(chunk_count=5, fault="error", fault_after_chunk=2, error_code=SECRET),
    ],
    ids=["401 code", "401 type", "mid-stream error event"],
)
async def test_an_error_code_echoing_the_key_is_redacted(
    http: Pool, provider: SimulatedProvider, spans: Spans, script: Script
) -> None:
    """The provider's error code and type, like its message, never carry the key out."""
    attempt = Attempt(spans.tracer, source(provider), number=1, stream=True, threshold_ms=1000)
    with pytest.raises(e.ProviderError) as caught:
        await attempt.run(http, scripted(script))
    error = caught.value
    assert error.code is not None
    assert "[REDACTED]" in error.code
    assert SECRET not in str(error)
    assert SECRET not in repr(error)
    assert all(SECRET not in repr(value) for value in vars(error).values())
    (span,) = spans.attempts()
    assert SECRET not in span.to_json()


@pytest.mark.parametrize("threshold", [40, 100, 250])
async def test_processor_equals_transport_over_real_http(
    http: Pool, provider: SimulatedProvider, spans: Spans, threshold: int
) -> None:
    """Over real HTTP, the processor's figures equal the transport's at several thresholds."""
    script = Script(
        chunk_count=40,
        first_chunk_delay_s=0.05,
        chunk_interval_s=0.002,
        silences=(
            Silence(after_chunk=5, duration_s=0.3, keepalive_every_s=0.05),
            Silence(after_chunk=20, duration_s=0.15),
            Silence(after_chunk=30, duration_s=0.07),
        ),
    )
    attempt = Attempt(spans.tracer, source(provider), number=1, stream=True, threshold_ms=threshold)
    await attempt.run(http, scripted(script))
    (span,) = spans.attempts()
    assert attempt.figures is not None
    assert derived(span) == attempt.figures
    assert span.attributes[sc.METERING_STATUS] == sc.METERING_EXACT  # type: ignore[index]
    assert attempt.figures.stall_count is not None
    assert attempt.figures.stall_count >= 1


class _Failing(httpx2.AsyncBaseTransport):
    """Real HTTP to the simulator through ``httpx2``'s transport, except that the operating
    system's ``error`` escapes unwrapped — as a transport passed in with ``http_client=`` (an
    aiohttp- or proxy-backed one) lets it through — before the response, or from the body
    after ``after_pieces`` pieces of it."""

    def __init__(self, error: OSError, *, after_pieces: int | None = None) -> None:
        self.error = error
        self.after_pieces = after_pieces
        self.real = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.after_pieces is None:
            raise self.error
        response = await self.real.handle_async_request(request)
        body = _BreakingBody(response, self.error, self.after_pieces)
        return httpx2.Response(response.status_code, headers=response.headers, stream=body)

    async def aclose(self) -> None:
        await self.real.aclose()


class _BreakingBody(httpx2.AsyncByteStream):
    def __init__(self, response: httpx2.Response, error: OSError, after_pieces: int) -> None:
        self.response, self.error, self.after_pieces = response, error, after_pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pieces = 0
        async for piece in self.response.aiter_raw():
            if pieces == self.after_pieces:
                raise self.error
            pieces += 1
            yield piece

    async def aclose(self) -> None:
        await self.response.aclose()


@pytest.mark.parametrize(
    ("error", "after_pieces", "expected", "where"),
    [
        pytest.param(
            ConnectionResetError(104, "Connection reset by peer"),
            None,
            e.ProviderConnectionError,
            "before the first chunk",
            id="reset-at-connect",
        ),
        pytest.param(
            ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"),
            None,
            e.ProviderConnectionError,
            "before the first chunk",
            id="tls",
        ),
        pytest.param(
            socket.gaierror(-2, "Name or service not known"),
            None,
            e.ProviderConnectionError,
            "before the first chunk",
            id="dns",
        ),
        pytest.param(
            ConnectionResetError(104, "Connection reset by peer"),
            3,
            e.ProviderConnectionError,
            "after ",
            id="reset-mid-stream",
        ),
        pytest.param(TimeoutError(), 3, e.ProviderTimeout, "after ", id="timeout-mid-stream"),
    ],
)
async def test_operating_system_errors_of_a_transport_are_connection_failures(
    provider: SimulatedProvider,
    error: OSError,
    after_pieces: int | None,
    expected: type[e.ProviderError],
    where: str,
) -> None:
    """An ``OSError`` a transport lets through unwrapped is a failure of the connection, like
    ``httpx2``'s own: transient, its type and text in the message, nothing chained (it may hold
    the request) — not a raw ``OSError`` that ends the call without trying another source."""
    slow = {"first_chunk_delay_s": 0.0, "chunk_interval_s": 0.05, "chunk_count": 20}
    async with httpx2.AsyncClient(transport=_Failing(error, after_pieces=after_pieces)) as client:
        with pytest.raises(expected, match=where) as caught:
            await chat_completion(
                Pool(client=client),
                source(provider),
                scripted(Script(**slow)),  # type: ignore[arg-type]
                stream=True,
                clock=ChunkClock(),
            )
    assert type(error).__name__ in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


async def test_a_client_fails_over_when_a_transport_raises_an_operating_system_error(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """The first source's connection is reset under a transport that does not wrap the error:
    the call goes on to the next source and is answered there, and the first attempt's span
    records a connection failure."""

    class ResetFirst(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.real = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            if request.url.host == "localhost":
                raise ConnectionResetError(104, "Connection reset by peer")
            return await self.real.handle_async_request(request)

        async def aclose(self) -> None:
            await self.real.aclose()

    first = Source(
        name="reset",
        provider="sim",
        base_url=provider.base_url.replace("127.0.0.1", "localhost"),
        model="sim-model",
        api_key=SecretStr(SECRET),
    )
    async with (
        httpx2.AsyncClient(transport=ResetFirst()) as http_client,
        Client(
            [first, source(provider)], http_client=http_client, tracer_provider=spans.provider
        ) as client,
    ):
        result = await client.chat(MESSAGES)
    assert result.source == "sim-1"
    outcomes = [
        (span.attributes[sc.ATTEMPT_SOURCE], span.status.description or "")
        for span in spans.attempts()
    ]
    assert outcomes[0][0] == "reset"
    assert "ConnectionResetError" in outcomes[0][1]
    assert outcomes[-1][0] == "sim-1"


async def _serve(handler: Any) -> Any:
    """An aiohttp runner answering every request on 127.0.0.1 with ``handler``."""
    from aiohttp import web

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


@pytest.fixture
async def redirecting() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """A server that answers every request with a 307 to another server on another port, and
    the headers of each request that other server got."""
    from aiohttp import web

    reached: list[dict[str, str]] = []

    async def elsewhere(request: web.Request) -> web.Response:
        reached.append(dict(request.headers))
        return web.Response(status=500)

    other = await _serve(elsewhere)
    other_url = f"http://127.0.0.1:{other.addresses[0][1]}"

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(f"{other_url}{request.path_qs}")

    first = await _serve(redirect)
    try:
        yield f"http://127.0.0.1:{first.addresses[0][1]}", reached
    finally:
        await first.cleanup()
        await other.cleanup()


@pytest.mark.parametrize("provider_name", ["openai", "azure", "anthropic", "gemini"])
@pytest.mark.parametrize("streamed", [True, False])
async def test_a_redirect_is_never_followed_and_ends_at_that_source(
    redirecting: tuple[str, list[dict[str, str]]], provider_name: str, streamed: bool
) -> None:
    """A source answering 307 — even through an ``http_client`` built to follow redirects —
    is a permanent error naming where it points, asked once: the API key, in a header of the
    provider's own that an HTTP library carries along, never reaches the other host."""
    url, reached = redirecting
    fields: dict[str, Any] = {"base_url": f"{url}/v1"}
    if provider_name == "azure":
        fields = {"base_url": url, "api_version": "2024-10-21"}
    target = Source(name="r", provider=provider_name, model="m", api_key=SECRET, **fields)
    async with (
        httpx2.AsyncClient(follow_redirects=True) as http,
        Client([target], http_client=http) as client,
    ):
        with pytest.raises(e.PermanentError, match="answered 307, a redirect to http://") as caught:
            await client.chat(MESSAGES, stream=streamed)
    assert reached == []
    assert SECRET not in str(caught.value)
    assert caught.value.status_code == 307
