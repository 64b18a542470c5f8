"""The Anthropic Messages API wire format: the request the client sends (compared with the one
the anthropic SDK sends for the same call), the stream read event by event (compared with what
the SDK assembles from the same bytes), the chunk rule, stop reasons, usage, refusals, and the
error classification — in memory, through ``httpx2``'s mock transport."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import pytest

from otel_llm import Source
from otel_llm import _errors as e
from otel_llm._act._completion import Completion
from otel_llm._act._pool import Pool
from otel_llm._act._transport import chat_completion
from otel_llm._act._watchdog import Watchdog
from otel_llm._defaults import DEFAULTS
from otel_llm._measure._chunks import ChunkClock
from otel_llm.testing import run_virtual
from tests.support.wire_answers import (
    anthropic_error_body,
    anthropic_event,
    anthropic_finish,
    anthropic_message_start,
    anthropic_sse,
    json_response,
    sse_response,
    text_delta,
)

KEY = "sk-ant-api03-SECRETSECRETSECRET"
MESSAGES = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": [{"type": "text", "text": "yes?"}]},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
]


def claude(**fields: Any) -> Source:
    given: dict[str, Any] = {
        "name": "claude",
        "provider": "anthropic",
        "model": "claude-m",
        "api_key": KEY,
        "base_url": "http://anthropic.test/v1",
    }
    return Source(**{**given, **fields})


async def run(
    answer: httpx2.Response | str,
    *,
    source: Source | None = None,
    payload: dict[str, Any] | None = None,
    stream: bool = True,
) -> tuple[Completion, ChunkClock, list[httpx2.Request]]:
    """One attempt at an Anthropic source answered by ``answer`` (a stream's text, or a
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
            source or claude(),
            payload or {"messages": MESSAGES},
            stream=stream,
            clock=clock,
        )
    return completion, clock, requests


async def sdk_request(**call: Any) -> dict[str, Any]:
    """The body the anthropic SDK sends for ``messages.create(**call)``."""
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        bodies.append(json.loads(request.content))
        return sse_response(anthropic_sse())

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    async with anthropic.AsyncAnthropic(
        api_key="k", base_url="http://sdk.test", http_client=http, max_retries=0
    ) as client:
        stream = await client.messages.create(**call)
        async for _ in stream:
            pass
    return bodies[0]


async def test_the_request_is_the_one_the_sdk_sends() -> None:
    """System prompts become the top-level ``system``, text parts text blocks, and the
    generation settings the Messages API's names: the body equals the SDK's for the same call."""
    payload = {"messages": MESSAGES, "max_tokens": 64, "stop": ["END"]}
    _, _, (request,) = await run(anthropic_sse(), payload=payload)
    ours = json.loads(request.content)
    theirs = await sdk_request(
        model="claude-m",
        max_tokens=64,
        system="be brief",
        messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "yes?"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
        ],
        stop_sequences=["END"],
        stream=True,
    )
    assert ours == theirs
    assert request.url == "http://anthropic.test/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == DEFAULTS.anthropic_version
    assert "authorization" not in request.headers


@pytest.mark.parametrize(
    ("call", "source_limit", "sent"),
    [
        ({}, None, DEFAULTS.anthropic_max_tokens),
        ({}, 300, 300),
        ({"max_tokens": 20}, 300, 20),
        ({"max_completion_tokens": 30}, None, 30),
    ],
)
async def test_max_tokens_from_the_call_the_source_or_the_default(
    call: dict[str, Any], source_limit: int | None, sent: int
) -> None:
    """The Messages API requires ``max_tokens``: the call's, else the source's, else 4096."""
    _, _, (request,) = await run(
        anthropic_sse(),
        source=claude(max_tokens=source_limit),
        payload={"messages": MESSAGES[1:2], **call},
    )
    assert json.loads(request.content)["max_tokens"] == sent


async def test_api_version_is_the_anthropic_version_header() -> None:
    """``api_version`` on an Anthropic source is its ``anthropic-version`` header."""
    _, _, (request,) = await run(anthropic_sse(), source=claude(api_version="2023-06-01"))
    assert request.headers["anthropic-version"] == "2023-06-01"


async def sdk_final(text: str) -> anthropic.types.Message:
    """What the anthropic SDK's own stream accumulator makes of ``text``."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return sse_response(text)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    async with (
        anthropic.AsyncAnthropic(
            api_key="k", base_url="http://sdk.test", http_client=http, max_retries=0
        ) as client,
        client.messages.stream(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        ) as stream,
    ):
        return await stream.get_final_message()


@pytest.mark.parametrize(
    ("stream", "finish"),
    [
        (anthropic_sse(["one", " two", " three"]), "stop"),
        (anthropic_sse(["a"], thinking=["let", " me", " see"], stop_reason="max_tokens"), "length"),
        (anthropic_sse(["call"], tool=("lookup", ['{"q": ', '"x"}']), stop_reason="tool_use"),
         "tool_calls"),
        (anthropic_sse(["x"], stop_reason="stop_sequence"), "stop"),
    ],
    ids=["text", "thinking", "tool", "stop-sequence"],
)  # fmt: skip
async def test_a_stream_reads_as_the_sdk_reads_it(stream: str, finish: str) -> None:
    """Text, thinking, tool input, the stop reason and usage agree with the anthropic SDK's
    own assembly of the same bytes; the finish reason is chat completions' word for it."""
    ours, _, _ = await run(stream)
    theirs = await sdk_final(stream)
    texts = [block.text for block in theirs.content if block.type == "text"]
    thinking = [block.thinking for block in theirs.content if block.type == "thinking"]
    tools = [block for block in theirs.content if block.type == "tool_use"]
    assert ours.text == "".join(texts)
    assert ours.reasoning == ("".join(thinking) or None)
    assert [(t.id, t.name, json.loads(t.arguments)) for t in ours.tool_calls] == [
        (tool.id, tool.name, tool.input) for tool in tools
    ]
    assert ours.finish_reason == finish
    assert ours.response_model == theirs.model
    assert ours.response_id == theirs.id
    usage = theirs.usage
    assert ours.usage is not None
    assert ours.usage.output_tokens == usage.output_tokens
    cached = (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
    assert ours.usage.input_tokens == usage.input_tokens + cached  # the convention's total
    assert ours.usage.cache_read_tokens == usage.cache_read_input_tokens
    assert ours.usage.cache_creation_tokens == usage.cache_creation_input_tokens


@pytest.mark.parametrize(
    ("event", "chunk"),
    [
        (text_delta("x"), True),
        (text_delta(""), False),
        (anthropic_event("content_block_delta", index=0,
                         delta={"type": "thinking_delta", "thinking": "hm"}), True),
        (anthropic_event("content_block_delta", index=0,
                         delta={"type": "input_json_delta", "partial_json": "{"}), True),
        (anthropic_event("content_block_delta", index=0,
                         delta={"type": "signature_delta", "signature": "sig"}), False),
        (anthropic_event("content_block_delta", index=0,
                         delta={"type": "citations_delta", "citation": {}}), False),
        (anthropic_event("content_block_start", index=1,
                         content_block={"type": "tool_use", "id": "t", "name": "f",
                                        "input": {}}), False),
        (anthropic_event("content_block_start", index=0,
                         content_block={"type": "text", "text": ""}), False),
        (anthropic_event("content_block_start", index=0,
                         content_block={"type": "text", "text": "x"}), True),
        (anthropic_event("content_block_start", index=0,
                         content_block={"type": "thinking", "thinking": "hm"}), True),
        (anthropic_event("content_block_stop", index=0), False),
        (anthropic_event("ping"), False),
        ("event: ping\ndata: not json at all\n\n", False),
        (": keepalive comment\n\n", False),
        (anthropic_event("some_future_event", detail=1), False),
    ],
    ids=["text", "empty-text", "thinking", "tool-args", "signature", "citation", "tool-start",
         "empty-block-start", "text-block-start", "thinking-block-start", "block-stop", "ping",
         "ping-garbage", "comment", "unknown"],
)  # fmt: skip
async def test_the_chunk_rule(event: str, chunk: bool) -> None:
    """Only output — text, thinking, tool-call arguments — is a chunk; signatures, citations,
    a block's start (a tool call's names the tool; the API starts text blocks empty), pings,
    comments and metadata are not. A block start that does carry text or thinking (a gateway
    may send it) is output, in the answer and counted."""
    stream = anthropic_message_start() + event + anthropic_finish()
    _, clock, _ = await run(stream)
    assert clock.count == int(chunk)


def test_pings_never_keep_the_watchdog_alive() -> None:
    """On virtual time: after two chunks the stream sends only pings, one a second; the
    watchdog's 5 s between chunks kills it 5 s after the last chunk all the same."""

    async def body() -> AsyncIterator[bytes]:
        yield (anthropic_message_start() + text_delta("a") + text_delta("b")).encode()
        for _ in range(100):
            await asyncio.sleep(1.0)
            yield anthropic_event("ping").encode()

    async def main() -> tuple[float, int]:
        loop = asyncio.get_running_loop()
        clock = ChunkClock()

        def handler(request: httpx2.Request) -> httpx2.Response:
            return httpx2.Response(
                200, headers={"content-type": "text/event-stream"}, content=body()
            )

        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
            started = loop.time()
            with pytest.raises(e.WatchdogTimeout):
                async with Watchdog(clock, 60.0, 5.0, source="claude"):
                    await chat_completion(
                        Pool(client=http), claude(), {"messages": MESSAGES}, stream=True,
                        clock=clock,
                    )  # fmt: skip
            return loop.time() - started, clock.count

    elapsed, chunks = run_virtual(main())
    assert chunks == 2
    assert 5.0 <= elapsed < 5.5


@pytest.mark.parametrize(
    ("stream", "why"),
    [
        (anthropic_message_start() + text_delta("partial"), "without a stop reason"),
        (anthropic_message_start() + text_delta("x") + anthropic_event("message_stop"),
         "message_stop came without it"),
        ("", "without a stop reason"),
    ],
    ids=["cut", "stop-without-reason", "empty"],
)  # fmt: skip
async def test_a_stream_without_its_stop_reason_is_truncated(stream: str, why: str) -> None:
    """A stream that never sent its stop reason is a TruncatedStream, never an answer."""
    with pytest.raises(e.TruncatedStream, match=why):
        await run(stream)


async def test_a_complete_answer_needs_no_message_stop() -> None:
    """The stop reason completes the answer; a body that then ends without ``message_stop``
    still is one (as ``[DONE]`` is not needed after a finish reason)."""
    stream = (
        anthropic_message_start()
        + text_delta("done")
        + anthropic_event(
            "message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 1}
        )
    )
    completion, _, _ = await run(stream)
    assert (completion.text, completion.finish_reason) == ("done", "stop")


@pytest.mark.parametrize("stream", [True, False])
async def test_a_refusal_is_content_filtered(stream: bool) -> None:
    """``stop_reason: refusal`` is the content-filter error with Anthropic's category and
    explanation — streamed (the partial text discarded) or not."""
    details = {"type": "refusal", "category": "cyber", "explanation": "not that"}
    if stream:
        answer: httpx2.Response | str = (
            anthropic_message_start() + text_delta("I will") + anthropic_finish("refusal",
                                                                                stop_details=details)
        )  # fmt: skip
    else:
        answer = json_response(200, {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-m",
            "content": [{"type": "text", "text": "I will"}], "stop_reason": "refusal",
            "stop_details": details, "usage": {"input_tokens": 1, "output_tokens": 2},
        })  # fmt: skip
    with pytest.raises(e.ContentFiltered, match="refusal: cyber; not that") as caught:
        await run(answer, stream=stream)
    assert caught.value.code == "refusal"


async def test_a_non_streamed_message() -> None:
    """A non-streamed ``message`` is parsed into the same answer, finish reason normalized."""
    answer = json_response(200, {
        "id": "msg_9", "type": "message", "role": "assistant", "model": "claude-m",
        "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "text", "text": "Hello"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 4, "output_tokens": 6,
                  "output_tokens_details": {"thinking_tokens": 2}},
    })  # fmt: skip
    completion, clock, (request,) = await run(answer, stream=False)
    assert json.loads(request.content)["stream"] is False
    assert (completion.text, completion.reasoning) == ("Hello", "hm")
    assert completion.finish_reason == "tool_calls"
    assert [(t.id, t.name, t.arguments) for t in completion.tool_calls] == [("t1", "f", '{"a": 1}')]
    assert completion.usage is not None
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (4, 6)
    assert completion.usage.reasoning_tokens == 2
    assert clock.count == 0


@pytest.mark.parametrize(
    ("status", "kind", "message", "error", "headers"),
    [
        (529, "overloaded_error", "Overloaded", e.ServerError, {}),
        (500, "api_error", "Internal server error", e.ServerError, {}),
        (504, "timeout_error", "Request timeout", e.ServerError, {}),
        (429, "rate_limit_error", "Number of request tokens has exceeded your limit",
         e.RateLimited, {"retry-after": "7"}),
        (400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum",
         e.ContextLengthExceeded, {}),
        (400, "invalid_request_error", "max_tokens: must be greater than 0", e.BadRequest, {}),
        (401, "authentication_error", "invalid x-api-key", e.AuthenticationError, {}),
        (403, "permission_error", "no access to this model", e.AuthenticationError, {}),
        (404, "not_found_error", "model: claude-nope", e.NotFound, {}),
        (413, "request_too_large", "Request exceeds the maximum size", e.BadRequest, {}),
        (402, "billing_error", "credit balance too low", e.PermanentError, {}),
    ],
)  # fmt: skip
async def test_error_bodies_are_classified(
    status: int, kind: str, message: str, error: type[e.ProviderError], headers: dict[str, str]
) -> None:
    """Each Anthropic error answer is its class of the hierarchy, the provider's type and
    message unmasked (529 overloaded is transient; a 429 keeps its Retry-After)."""
    with pytest.raises(e.ProviderError) as caught:
        await run(json_response(status, anthropic_error_body(kind, message), **headers))
    assert type(caught.value) is error
    assert message in str(caught.value)
    assert caught.value.code == kind
    assert caught.value.status_code == status
    if error is e.RateLimited:
        assert isinstance(caught.value, e.RateLimited)
        assert caught.value.retry_after_s == 7.0


@pytest.mark.parametrize(
    ("kind", "error"),
    [("overloaded_error", e.ServerError), ("api_error", e.ServerError),
     ("rate_limit_error", e.RateLimited), ("invalid_request_error", e.BadRequest)],
)  # fmt: skip
async def test_an_error_event_mid_stream_is_the_providers_error(
    kind: str, error: type[e.ProviderError]
) -> None:
    """``event: error`` after some output is the provider's error of its type, never an
    answer of what came before it."""
    stream = (
        anthropic_message_start()
        + text_delta("so far")
        + anthropic_event("error", error={"type": kind, "message": f"{kind} mid-stream"})
    )
    with pytest.raises(e.ProviderError) as caught:
        await run(stream)
    assert type(caught.value) is error
    assert f"{kind} mid-stream" in str(caught.value)


async def test_the_key_never_appears_in_an_error() -> None:
    """An error body (its message or its code), or a refusal's explanation, echoing the key is
    redacted."""
    body = anthropic_error_body("authentication_error", f"invalid x-api-key: {KEY}")
    with pytest.raises(e.AuthenticationError) as caught:
        await run(json_response(401, body))
    assert KEY not in str(caught.value)
    assert KEY not in repr(claude())
    body["error"]["details"] = {"error_code": f"key {KEY}"}
    with pytest.raises(e.AuthenticationError) as coded:
        await run(json_response(401, body))
    assert coded.value.code is not None
    assert KEY not in coded.value.code
    assert KEY not in str(coded.value)
    details = {"type": "refusal", "category": None, "explanation": f"about {KEY}"}
    stream = anthropic_message_start() + anthropic_finish("refusal", stop_details=details)
    with pytest.raises(e.ContentFiltered) as refused:
        await run(stream)
    assert KEY not in str(refused.value)
    assert "[REDACTED]" in str(refused.value)


@pytest.mark.parametrize(
    ("event", "field"),
    [
        (anthropic_event("content_block_delta", index=0, delta={"type": "text_delta", "text": 3}),
         "content_block_delta.delta.text"),
        (anthropic_event("content_block_delta", index="0", delta={"type": "text_delta"}),
         "content_block_delta.index"),
        (anthropic_event("content_block_delta", index=0, delta=["x"]), "content_block_delta.delta"),
        (anthropic_event("message_delta", delta={"stop_reason": 1}),
         "message_delta.delta.stop_reason"),
        (anthropic_event("content_block_start", index=0, content_block="text"),
         "content_block_start.content_block"),
        ('event: content_block_delta\ndata: {"type": 5}\n\n', "type"),
    ],
)  # fmt: skip
async def test_a_field_of_the_wrong_type_is_a_malformed_stream_naming_it(
    event: str, field: str
) -> None:
    """A chunk of the wrong shape is a MalformedStream naming the field, never a TypeError."""
    with pytest.raises(e.MalformedStream, match=field.replace(".", r"\.")):
        await run(anthropic_message_start() + text_delta("a") + event + anthropic_finish())
