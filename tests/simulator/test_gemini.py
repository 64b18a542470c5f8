"""The google-genai SDK against the simulated provider's Gemini API over loopback
(``otel_llm/simulator/_gemini.py``): what it reads back, and how it surfaces each fault."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import aiohttp
import httpx2
import pytest
from aiohttp import web
from google import genai
from google.genai import errors, types

from otel_llm.simulator import SCRIPT_HEADER, Script, Silence, SimulatedProvider, ThreadedProvider
from otel_llm.simulator._gemini import GEMINI
from otel_llm.simulator._server import answering, create_app
from otel_llm.simulator._wire import OPENAI_SSE

pytestmark = pytest.mark.filterwarnings(
    # google-genai's async client subclasses aiohttp.ClientSession, which aiohttp 3.14 deprecates
    "ignore:Inheritance class AiohttpClientSession from ClientSession:DeprecationWarning"
)

SCALE = 0.001
KEEPALIVE_SILENCE = Silence(after_chunk=1, duration_s=30.0, keepalive_every_s=10.0)


def header(script: Script) -> dict[str, str]:
    return {SCRIPT_HEADER: script.model_dump_json()}


def config(script: Script) -> types.GenerateContentConfig:
    """A per-call config sending ``script`` in the X-Sim-Script header."""
    return types.GenerateContentConfig(http_options=types.HttpOptions(headers=header(script)))


def words(stem: str, count: int) -> str:
    return " ".join(f"{stem}{k}" for k in range(count))


def parts(response: types.GenerateContentResponse) -> list[types.Part]:
    if not response.candidates:
        return []
    content = response.candidates[0].content
    return list(content.parts or []) if content is not None else []


def is_chunk(response: types.GenerateContentResponse) -> bool:
    """Gemini's chunk rule: the response carries new text, a thought or a function call."""
    return any(part.text or part.thought or part.function_call for part in parts(response))


def text_of(responses: list[types.GenerateContentResponse], *, thought: bool = False) -> str:
    return "".join(
        part.text or ""
        for response in responses
        for part in parts(response)
        if bool(part.thought) == thought
    )


def finish_of(responses: list[types.GenerateContentResponse]) -> list[types.FinishReason]:
    return [
        candidate.finish_reason
        for response in responses
        for candidate in response.candidates or []
        if candidate.finish_reason is not None
    ]


@pytest.fixture(scope="module")
def threaded() -> Iterator[ThreadedProvider]:
    with SimulatedProvider.start_in_thread(time_scale=SCALE) as running:
        yield running


@pytest.fixture
def sdk(threaded: ThreadedProvider) -> Iterator[genai.Client]:
    client = genai.Client(api_key="sim", http_options=types.HttpOptions(base_url=threaded.url))
    with client:
        yield client


@pytest.fixture
async def async_sdk() -> AsyncIterator[genai.client.AsyncClient]:
    async with SimulatedProvider(time_scale=SCALE) as running:
        client = genai.Client(api_key="sim", http_options=types.HttpOptions(base_url=running.url))
        try:
            yield client.aio
        finally:
            await client.aio.aclose()


def stream(sdk: genai.Client, script: Script) -> list[types.GenerateContentResponse]:
    return list(
        sdk.models.generate_content_stream(
            model="sim-model", contents="say something", config=config(script)
        )
    )


def test_streamed_content_carries_the_scripted_words(sdk: genai.Client) -> None:
    """generate_content_stream: a usage-only opening, then chunk_count responses carrying
    thoughts and text, then a finish (empty text, STOP) with the final usageMetadata; the
    silence with keepalives sends nothing the SDK could choke on."""
    script = Script(
        chunk_count=5, reasoning_chunks=2, words_per_chunk=2, silences=(KEEPALIVE_SILENCE,)
    )
    responses = stream(sdk, script)
    opening = responses[0]
    assert opening.candidates is None
    assert opening.usage_metadata is not None
    assert opening.usage_metadata.prompt_token_count == 2
    assert sum(is_chunk(response) for response in responses) == 5
    assert text_of(responses, thought=True) == words("thought", 4)
    assert text_of(responses) == words("word", 6)
    assert finish_of(responses) == [types.FinishReason.STOP]
    assert not is_chunk(responses[-1])
    usage = responses[-1].usage_metadata
    assert usage is not None
    assert (usage.prompt_token_count, usage.candidates_token_count) == (2, 6)
    assert (usage.thoughts_token_count, usage.total_token_count) == (4, 12)
    running = [response.usage_metadata for response in responses[1:-1]]
    assert [meta.total_token_count for meta in running if meta] == [4, 6, 8, 10, 12]


async def test_async_stream_of_a_function_call(async_sdk: genai.client.AsyncClient) -> None:
    """client.aio (aiohttp): a tool-call script's N chunks arrive as one functionCall part
    after the thoughts (reasoning_chunks + 1 chunks), with the scripted arguments."""
    script = Script(chunk_count=5, reasoning_chunks=1, tool_call=True)
    responses = [
        response
        async for response in await async_sdk.models.generate_content_stream(
            model="sim-model", contents="say something", config=config(script)
        )
    ]
    assert sum(is_chunk(response) for response in responses) == 2
    calls = [part.function_call for response in responses for part in parts(response)]
    found = [call for call in calls if call is not None]
    assert len(found) == 1
    assert (found[0].name, found[0].args) == ("lookup", {"query": words("arg", 4)})
    assert finish_of(responses) == [types.FinishReason.STOP]


@pytest.mark.parametrize(
    ("finish", "reason"),
    [
        ("stop", types.FinishReason.STOP),
        ("length", types.FinishReason.MAX_TOKENS),
        ("content_filter", types.FinishReason.SAFETY),
    ],
)
def test_non_streamed_content_and_finish_reasons(
    sdk: genai.Client, finish: str, reason: types.FinishReason
) -> None:
    """generate_content: the text, the thought, usage and the mapped finish reason."""
    script = Script(chunk_count=3, reasoning_chunks=1, finish_reason=finish)
    response = sdk.models.generate_content(
        model="sim-model", contents="say something", config=config(script)
    )
    thought, text = parts(response)
    assert (thought.text, thought.thought) == ("thought0", True)
    assert text.text == words("word", 2)
    assert finish_of([response]) == [reason]
    assert response.usage_metadata is not None
    assert response.usage_metadata.thoughts_token_count == 1
    assert response.usage_metadata.candidates_token_count == 2


def test_selection_by_header_body_and_model(threaded: ThreadedProvider) -> None:
    """google-genai selects scripts with http_options headers, http_options extra_body's `sim`,
    and the model name (which travels in the URL)."""
    options = types.HttpOptions(base_url=threaded.url, headers=header(Script(chunk_count=2)))
    with genai.Client(api_key="sim", http_options=options) as headed:
        answer = headed.models.generate_content(model="m", contents="x")
        assert text_of([answer]) == words("word", 2)
    with genai.Client(
        api_key="sim", http_options=types.HttpOptions(base_url=threaded.url)
    ) as plain:
        body = types.HttpOptions(extra_body={"sim": {"chunk_count": 4}})
        answer = plain.models.generate_content(
            model="m", contents="x", config=types.GenerateContentConfig(http_options=body)
        )
        assert text_of([answer]) == words("word", 4)
        preset = plain.models.generate_content(model="smooth", contents="x")
        assert len(text_of([preset]).split()) == 40


# Faults, as the SDK surfaces them.


def test_truncated_stream_ends_silently(sdk: genai.Client) -> None:
    """truncate: the stream just ends — no finish reason, no error."""
    responses = stream(sdk, Script(chunk_count=4, fault="truncate", fault_after_chunk=1))
    assert text_of(responses) == words("word", 2)
    assert finish_of(responses) == []


def test_malformed_chunk_is_an_unknown_api_response(sdk: genai.Client) -> None:
    """malformed: google-genai raises errors.UnknownApiResponseError (a ValueError)."""
    with pytest.raises(errors.UnknownApiResponseError):
        stream(sdk, Script(chunk_count=4, fault="malformed", fault_after_chunk=1))


@pytest.mark.parametrize(
    ("status", "error", "rpc"),
    [(503, errors.ServerError, "UNAVAILABLE"), (429, errors.ClientError, "RESOURCE_EXHAUSTED")],
)
def test_error_chunk_raises_by_its_code(
    sdk: genai.Client, status: int, error: type[errors.APIError], rpc: str
) -> None:
    """error: an {"error": …} chunk mid-stream raises ServerError / ClientError by its code,
    after the chunks before it."""
    script = Script(chunk_count=4, fault="error", fault_after_chunk=1, fault_status=status)
    seen: list[types.GenerateContentResponse] = []
    with pytest.raises(error) as raised:
        seen.extend(
            sdk.models.generate_content_stream(
                model="sim-model", contents="say something", config=config(script)
            )
        )
    assert (raised.value.code, raised.value.status) == (status, rpc)
    assert text_of(seen) == words("word", 2)


def test_reset_is_an_httpx2_read_error(sdk: genai.Client) -> None:
    """reset: the sync client lets httpx2.ReadError through (not a google-genai error)."""
    with pytest.raises(httpx2.ReadError):
        stream(sdk, Script(chunk_count=4, fault="reset", fault_after_chunk=1))


async def test_async_reset_is_an_aiohttp_payload_error(
    async_sdk: genai.client.AsyncClient,
) -> None:
    """reset: the async client (aiohttp) lets aiohttp.ClientPayloadError through."""
    script = Script(chunk_count=4, fault="reset", fault_after_chunk=1)
    with pytest.raises(aiohttp.ClientPayloadError):
        async for _ in await async_sdk.models.generate_content_stream(
            model="sim-model", contents="say something", config=config(script)
        ):
            pass


@pytest.mark.parametrize(
    ("status", "error", "rpc"),
    [
        (429, errors.ClientError, "RESOURCE_EXHAUSTED"),
        (503, errors.ServerError, "UNAVAILABLE"),
        (400, errors.ClientError, "INVALID_ARGUMENT"),
    ],
)
@pytest.mark.parametrize("streamed", [True, False])
def test_error_statuses_map_to_the_sdk_s_classes(
    sdk: genai.Client, status: int, error: type[errors.APIError], rpc: str, streamed: bool
) -> None:
    """Scripted HTTP errors have google.rpc's body: the status name, a RetryInfo for a numeric
    Retry-After, an ErrorInfo for the code; 4xx are ClientError, 5xx ServerError."""
    script = Script(error_status=status, retry_after="7", error_code="SCRIPTED")

    def call() -> object:
        if streamed:
            return stream(sdk, script)
        return sdk.models.generate_content(model="m", contents="x", config=config(script))

    with pytest.raises(error) as raised:
        call()
    assert (raised.value.code, raised.value.status) == (status, rpc)
    details = raised.value.details["error"]["details"]
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"} in details
    assert any(detail.get("reason") == "SCRIPTED" for detail in details)


async def test_sse_comments_break_google_genai() -> None:
    """Why Gemini streams carry no keepalive: served with `: ping` comments, the same answer makes
    google-genai fail with UnknownApiResponseError; without a keepalive it is read whole."""
    app = create_app(time_scale=SCALE)
    commented = replace(GEMINI, framing=lambda _: OPENAI_SSE)
    app.router.add_post("/comments/{version}/models/{model}:{action}", answering(commented))
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        options = types.HttpOptions(base_url=f"http://{host}:{port}/comments")
        client = genai.Client(api_key="sim", http_options=options)
        try:
            quiet = Script(chunk_count=3)
            read = [
                response
                async for response in await client.aio.models.generate_content_stream(
                    model="m", contents="x", config=config(quiet)
                )
            ]
            assert text_of(read) == words("word", 3)
            pinged = Script(chunk_count=3, silences=(KEEPALIVE_SILENCE,))
            with pytest.raises(errors.UnknownApiResponseError, match="ping"):
                async for _ in await client.aio.models.generate_content_stream(
                    model="m", contents="x", config=config(pinged)
                ):
                    pass
        finally:
            await client.aio.aclose()
    finally:
        await runner.cleanup()


async def test_json_array_stream_holds_sdk_responses() -> None:
    """Without ?alt=sse (which google-genai always sends) the stream is one JSON array whose
    elements google-genai's own model reads: the opening, each chunk, the finish."""
    script = Script(chunk_count=2)
    async with (
        SimulatedProvider(time_scale=SCALE) as running,
        httpx2.AsyncClient(base_url=running.url) as http,
    ):
        whole = await http.post(
            "/v1beta/models/m:streamGenerateContent",
            json={"contents": [{"role": "user", "parts": [{"text": "x"}]}]},
            headers=header(script),
        )
    payload = json.loads(whole.text)
    assert [text_of([types.GenerateContentResponse.model_validate(item)]) for item in payload] == [
        "",
        "word0",
        " word1",
        "",
    ]
