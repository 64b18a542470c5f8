"""The Gemini API wire format: the request the client sends (compared with the one the
google-genai SDK sends for the same call), the stream read event by event (compared with what
the SDK reads from the same bytes), the chunk rule, finish reasons, usage, safety blocks, and
the error classification — in memory, through ``httpx2``'s mock transport."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from google import genai
from google.genai import types

from otel_llm import Source
from otel_llm import _errors as e
from otel_llm._act._completion import Completion
from otel_llm._act._pool import Pool
from otel_llm._act._transport import chat_completion
from otel_llm._measure._chunks import ChunkClock
from tests.support.wire_answers import (
    gemini_data,
    gemini_error_body,
    gemini_response,
    gemini_sse,
    json_response,
    sse_response,
)

KEY = "AIzaSyGEMINI-SECRET-0123456789"
MESSAGES = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "yes?"},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
]


def gemini(**fields: Any) -> Source:
    given: dict[str, Any] = {
        "name": "gem",
        "provider": "gemini",
        "model": "gemini-m",
        "api_key": KEY,
        "base_url": "http://gemini.test/v1",
    }
    return Source(**{**given, **fields})


async def run(
    answer: httpx2.Response | str,
    *,
    source: Source | None = None,
    payload: dict[str, Any] | None = None,
    stream: bool = True,
) -> tuple[Completion, ChunkClock, list[httpx2.Request]]:
    """One attempt at a Gemini source answered by ``answer`` (a stream's text, or a
    response); the completion, the chunk clock and the requests sent."""
    requests: list[httpx2.Request] = []
    response = sse_response(answer) if isinstance(answer, str) else answer

    def handler(request: httpx2.Request) -> httpx2.Response:
        requests.append(request)
        return response

    clock = ChunkClock()
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
        completion = await chat_completion(
            Pool(client=http),
            source or gemini(),
            payload or {"messages": MESSAGES},
            stream=stream,
            clock=clock,
        )
    return completion, clock, requests


def sdk(handler: Any) -> genai.Client:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    options = types.HttpOptions(base_url="http://sdk.test", httpx_async_client=http)
    return genai.Client(api_key="k", http_options=options)


async def test_the_request_is_the_one_the_sdk_sends() -> None:
    """Roles become user/model, system prompts ``systemInstruction``, the generation settings
    ``generationConfig``: the body equals google-genai's for the same call, the URL is the
    model's ``streamGenerateContent?alt=sse`` and the key is in ``x-goog-api-key`` only."""
    payload = {
        "messages": MESSAGES, "max_tokens": 64, "temperature": 0.5, "top_p": 0.9,
        "stop": ["END"], "seed": 3, "presence_penalty": 0.1, "frequency_penalty": 0.2,
    }  # fmt: skip
    _, _, (request,) = await run(gemini_sse(), payload=payload)
    bodies: list[dict[str, Any]] = []

    def handler(sent: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(sent.content))
        return sse_response(gemini_sse())

    config = types.GenerateContentConfig(
        system_instruction="be brief", max_output_tokens=64, temperature=0.5, top_p=0.9,
        stop_sequences=["END"], seed=3, presence_penalty=0.1, frequency_penalty=0.2,
    )  # fmt: skip
    contents = [
        types.Content(role="user", parts=[types.Part(text="hi")]),
        types.Content(role="model", parts=[types.Part(text="yes?")]),
        types.Content(role="user", parts=[types.Part(text="a"), types.Part(text="b")]),
    ]
    async for _ in await sdk(handler).aio.models.generate_content_stream(
        model="gemini-m", contents=contents, config=config
    ):
        pass
    assert json.loads(request.content) == bodies[0]
    assert str(request.url) == "http://gemini.test/v1/models/gemini-m:streamGenerateContent?alt=sse"
    assert request.headers["x-goog-api-key"] == KEY
    assert KEY not in str(request.url)
    assert "authorization" not in request.headers


async def test_a_non_streamed_call_asks_generate_content() -> None:
    """Not streamed: ``:generateContent`` (no ``alt=sse``), one complete answer."""
    answer = json_response(200, gemini_response([{"text": "Hello"}], finish="STOP",
                                                usage={"promptTokenCount": 2,
                                                       "candidatesTokenCount": 1}))  # fmt: skip
    completion, clock, (request,) = await run(answer, stream=False)
    assert str(request.url) == "http://gemini.test/v1/models/gemini-m:generateContent"
    assert (completion.text, completion.finish_reason) == ("Hello", "stop")
    assert completion.usage is not None
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (2, 1)
    assert clock.count == 0


@pytest.mark.parametrize(
    ("stream", "finish"),
    [
        (gemini_sse(["one", " two", " three"]), "stop"),
        (gemini_sse(["a"], thoughts=["let", " me", " see"], finish="MAX_TOKENS"), "length"),
        (gemini_sse(["x"], call=("lookup", {"q": "x"})), "tool_calls"),
        (gemini_sse(["x"], finish="MALFORMED_FUNCTION_CALL"), "malformed_function_call"),
    ],
    ids=["text", "thoughts", "function-call", "other-reason"],
)
async def test_a_stream_reads_as_the_sdk_reads_it(stream: str, finish: str) -> None:
    """Text, thoughts, function calls, usage and the model agree with what google-genai reads
    from the same bytes; the finish reason is chat completions' word for it."""
    ours, clock, _ = await run(stream)
    text, thoughts, calls = [], [], []
    usage = model = None
    models = sdk(lambda _: sse_response(stream)).aio.models
    async for response in await models.generate_content_stream(model="gemini-m", contents="x"):
        for part in response.candidates[0].content.parts or []:
            if part.function_call is not None:
                calls.append((part.function_call.name, part.function_call.args))
            elif part.thought:
                thoughts.append(part.text or "")
            else:
                text.append(part.text or "")
        usage = response.usage_metadata or usage
        model = response.model_version
    assert ours.text == "".join(text)
    assert ours.reasoning == ("".join(thoughts) or None)
    assert [(call.name, json.loads(call.arguments)) for call in ours.tool_calls] == calls
    assert ours.finish_reason == finish
    assert ours.response_model == model
    assert usage is not None
    assert ours.usage is not None
    assert ours.usage.input_tokens == usage.prompt_token_count
    assert ours.usage.reasoning_tokens == usage.thoughts_token_count
    assert ours.usage.cache_read_tokens == usage.cached_content_token_count
    assert ours.usage.output_tokens == (usage.candidates_token_count or 0) + (
        usage.thoughts_token_count or 0
    )
    assert clock.count == sum(1 for piece in (text + thoughts) if piece) + len(calls)


@pytest.mark.parametrize(
    ("response", "chunk"),
    [
        (gemini_response([{"text": "x"}]), True),
        (gemini_response([{"text": "hm", "thought": True}]), True),
        (gemini_response([{"functionCall": {"name": "f", "args": {}}}]), True),
        (gemini_response([{"text": ""}]), False),
        (gemini_response([]), False),
        (gemini_response([{"thoughtSignature": "c2ln"}]), False),
        ({"usageMetadata": {"promptTokenCount": 3}, "modelVersion": "gemini-m"}, False),
        ({"candidates": []}, False),
    ],
    ids=["text", "thought", "function-call", "empty-text", "no-parts", "signature",
         "usage-only", "no-candidates"],
)  # fmt: skip
async def test_the_chunk_rule(response: dict[str, Any], chunk: bool) -> None:
    """A response carrying new text, thought or function-call parts is a chunk; a usage-only,
    empty or signature-only one is not."""
    stream = gemini_data(response) + gemini_data(gemini_response([], finish="STOP"))
    _, clock, _ = await run(stream)
    assert clock.count == int(chunk)


@pytest.mark.parametrize(
    ("stream", "why"),
    [
        (gemini_data(gemini_response([{"text": "partial"}])), "without a finish reason"),
        ("", "without a finish reason"),
        (gemini_data({"candidates": [
            {"index": 0, "content": {"parts": [{"text": "a"}]}, "finishReason": "STOP"},
            {"index": 1, "content": {"parts": [{"text": "b"}]}}]}),
         "for every candidate"),
    ],
    ids=["cut", "empty", "second-candidate-unfinished"],
)  # fmt: skip
async def test_a_stream_without_its_finish_reason_is_truncated(stream: str, why: str) -> None:
    """A stream whose candidates did not all finish is a TruncatedStream, never an answer."""
    with pytest.raises(e.TruncatedStream, match=why):
        await run(stream)


@pytest.mark.parametrize("reason", ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT"])
@pytest.mark.parametrize("stream", [True, False])
async def test_a_content_stop_is_content_filtered(reason: str, stream: bool) -> None:
    """A candidate stopped on content grounds is the content-filter error with Gemini's reason
    and the blocked categories, streamed (partial text discarded) or not."""
    ratings = [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH",
                "blocked": True}]  # fmt: skip
    final = gemini_response([], finish=reason, safetyRatings=ratings)
    final["candidates"][0]["safetyRatings"] = ratings
    if stream:
        answer: httpx2.Response | str = gemini_data(gemini_response([{"text": "so"}])) + (
            gemini_data(final)
        )
    else:
        answer = json_response(200, final)
    with pytest.raises(e.ContentFiltered, match=f"{reason}: HARM_CATEGORY_DANGEROUS_CONTENT") as c:
        await run(answer, stream=stream)
    assert c.value.code == reason


async def test_a_blocked_prompt_is_content_filtered() -> None:
    """``promptFeedback.blockReason`` (no candidates at all) is the content-filter error."""
    blocked = {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT",
                                  "blockReasonMessage": "not allowed"}}  # fmt: skip
    with pytest.raises(e.ContentFiltered, match="PROHIBITED_CONTENT") as caught:
        await run(gemini_data(blocked))
    assert "not allowed" in str(caught.value)


RETRY_INFO = {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}
BAD_KEY = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
           "domain": "googleapis.com"}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "name", "message", "details", "headers", "error", "wait"),
    [
        (429, "RESOURCE_EXHAUSTED", "Quota exceeded", [RETRY_INFO], {}, e.RateLimited, 12.0),
        (429, "RESOURCE_EXHAUSTED", "Quota exceeded", [RETRY_INFO], {"retry-after": "3"},
         e.RateLimited, 3.0),
        (503, "UNAVAILABLE", "The model is overloaded", None, {}, e.ServerError, None),
        (500, "INTERNAL", "An internal error has occurred", None, {}, e.ServerError, None),
        (504, "DEADLINE_EXCEEDED", "Deadline expired", None, {}, e.ServerError, None),
        (400, "INVALID_ARGUMENT", "Invalid value at 'contents'", None, {}, e.BadRequest, None),
        (400, "INVALID_ARGUMENT",
         "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)",
         None, {}, e.ContextLengthExceeded, None),
        (400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [BAD_KEY],
         {}, e.AuthenticationError, None),
        (403, "PERMISSION_DENIED", "Permission denied", None, {}, e.AuthenticationError, None),
        (404, "NOT_FOUND", "models/gemini-nope is not found", None, {}, e.NotFound, None),
        (400, "FAILED_PRECONDITION", "User location is not supported", None, {},
         e.PermanentError, None),
    ],
)  # fmt: skip
async def test_error_bodies_are_classified(
    status: int,
    name: str,
    message: str,
    details: list[dict[str, Any]] | None,
    headers: dict[str, str],
    error: type[e.ProviderError],
    wait: float | None,
) -> None:
    """Each Google API error is its class of the hierarchy (RESOURCE_EXHAUSTED rate limited,
    honouring Retry-After or the RetryInfo delay; UNAVAILABLE transient; INVALID_ARGUMENT
    permanent, or the context-length or bad-key error it really is), Gemini's status and
    message unmasked."""
    body = gemini_error_body(status, name, message, details)
    with pytest.raises(e.ProviderError) as caught:
        await run(json_response(status, body, **headers))
    assert type(caught.value) is error
    assert message in str(caught.value)
    assert (caught.value.code, caught.value.status_code) == (name, status)
    if isinstance(caught.value, e.RateLimited):
        assert caught.value.retry_after_s == wait


async def test_an_error_body_in_a_list_is_read() -> None:
    """Google APIs may wrap the error body in a list of one."""
    body = [gemini_error_body(503, "UNAVAILABLE", "try later")]
    with pytest.raises(e.ServerError, match="try later"):
        await run(json_response(503, body))


@pytest.mark.parametrize(
    ("code", "name", "error"),
    [(503, "UNAVAILABLE", e.ServerError), (429, "RESOURCE_EXHAUSTED", e.RateLimited),
     (400, "INVALID_ARGUMENT", e.BadRequest)],
)  # fmt: skip
async def test_an_error_mid_stream_is_the_providers_error(
    code: int, name: str, error: type[e.ProviderError]
) -> None:
    """An ``{"error": …}`` event after some output is the provider's error of its status."""
    stream = gemini_data(gemini_response([{"text": "so far"}])) + gemini_data(
        gemini_error_body(code, name, f"{name} mid-stream")
    )
    with pytest.raises(e.ProviderError) as caught:
        await run(stream)
    assert type(caught.value) is error
    assert f"{name} mid-stream" in str(caught.value)


async def test_the_key_never_appears() -> None:
    """The key is never in the URL, an error or a repr (an error's message or status, or a
    safety stop's message, echoing it is redacted)."""
    body = gemini_error_body(400, "INVALID_ARGUMENT", f"API key {KEY} not valid", [BAD_KEY])
    with pytest.raises(e.AuthenticationError) as caught:
        await run(json_response(400, body))
    assert KEY not in str(caught.value)
    assert KEY not in repr(gemini())
    named = gemini_error_body(400, KEY, "bad request")
    with pytest.raises(e.ProviderError) as coded:
        await run(json_response(400, named))
    assert coded.value.code is not None
    assert KEY not in coded.value.code
    assert KEY not in str(coded.value)
    stopped = gemini_response([], finish="SAFETY", finishMessage=f"echo {KEY}")
    stopped["candidates"][0]["finishMessage"] = f"echo {KEY}"
    with pytest.raises(e.ContentFiltered) as filtered:
        await run(gemini_data(stopped))
    assert KEY not in str(filtered.value)
    assert "[REDACTED]" in str(filtered.value)


@pytest.mark.parametrize(
    ("response", "field"),
    [
        ({"candidates": 5}, "candidates"),
        ({"candidates": [7]}, "candidates[0]"),
        ({"candidates": [{"content": {"parts": "x"}}]}, "candidates[0].content.parts"),
        ({"candidates": [{"content": {"parts": [{"text": 3}]}}]},
         "candidates[0].content.parts[0].text"),
        ({"candidates": [{"content": {"parts": [{"text": "x", "thought": "yes"}]}}]},
         "candidates[0].content.parts[0].thought"),
        ({"candidates": [{"index": "0"}]}, "candidates[0].index"),
        ({"candidates": [{"finishReason": 1}]}, "candidates[0].finishReason"),
        ({"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": []}}]}}]},
         "candidates[0].content.parts[0].functionCall.args"),
    ],
)  # fmt: skip
async def test_a_field_of_the_wrong_type_is_a_malformed_stream_naming_it(
    response: dict[str, Any], field: str
) -> None:
    """A response of the wrong shape is a MalformedStream naming the field."""
    stream = gemini_data(gemini_response([{"text": "a"}])) + gemini_data(response)
    with pytest.raises(e.MalformedStream, match=field.replace(".", r"\.").replace("[", r"\[")):
        await run(stream)
