"""Each API's stream over real HTTP on loopback, from a server that writes raw bytes: what comes
after an answer's finish — an error event, an unreadable event, before or after the API's end
marker — decides as the docs say, on every wire format."""

from __future__ import annotations

import asyncio
import json

import pytest

from otel_llm import AllSourcesExhausted, ChatResult, Client, Source
from otel_llm import _errors as e
from otel_llm.testing import Spans
from tests.support.raw_server import RawServer
from tests.support.wire_answers import (
    anthropic_error_body,
    anthropic_event,
    anthropic_sse,
    gemini_data,
    gemini_error_body,
    gemini_sse,
)

KEY = "sk-stream-0123456789SECRET"


def chat_sse(words: tuple[str, ...] = ("hello", " world")) -> str:
    """A whole chat completions stream of ``words``, without its ``[DONE]``."""
    chunks = [{"index": 0, "delta": {"content": word}, "finish_reason": None} for word in words]
    chunks.append({"index": 0, "delta": {}, "finish_reason": "stop"})
    return "".join(
        f"data: {json.dumps({'id': 'c', 'model': 'm', 'choices': [chunk]})}\n\n" for chunk in chunks
    )


ANSWERS = {
    # a whole answer up to its finish, its end marker, an error event, an unreadable event
    "openai": (
        chat_sse(),
        "data: [DONE]\n\n",
        f"data: {json.dumps({'error': {'message': 'overloaded', 'type': 'server_error'}})}\n\n",
    ),
    "anthropic": (
        anthropic_sse().removesuffix(anthropic_event("message_stop")),
        anthropic_event("message_stop"),
        f"event: error\ndata: "
        f"{json.dumps(anthropic_error_body('overloaded_error', 'Overloaded'))}\n\n",
    ),
    "gemini": (
        gemini_sse(),
        "",  # the Gemini API sends no end marker
        gemini_data(gemini_error_body(503, "UNAVAILABLE", "overloaded")),
    ),
}
UNREADABLE = "data: {not json\n\n"


def _source(provider: str, url: str) -> Source:
    return Source(name=provider, provider=provider, base_url=f"{url}/v1", model="m", api_key=KEY)


async def _call(provider: str, server: RawServer, body: str) -> str | BaseException:
    server.pieces = [body.encode()]
    async with Client(
        [_source(provider, server.url)], max_attempts=1, same_source_retries=0
    ) as client:
        async with asyncio.timeout(30):
            try:
                return (await client.chat([{"role": "user", "content": "hi"}])).text
            except AllSourcesExhausted as exc:
                cause = exc.__cause__
                assert isinstance(cause, ExceptionGroup)
                (failure,) = cause.exceptions
                return failure


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_an_error_after_the_finish_but_before_the_end_marker_is_the_providers(
    provider: str,
) -> None:
    """The finish came, then (before the end marker, or the end of the body on Gemini) the
    provider's error event or an unreadable event: that is the answer's error, never the
    answer."""
    whole, _, error = ANSWERS[provider]

    async def main() -> tuple[str | BaseException, str | BaseException]:
        with RawServer() as server:
            return await _call(provider, server, whole + error), await _call(
                provider, server, whole + UNREADABLE
            )

    after_error, after_garbage = asyncio.run(main())
    assert type(after_error) is e.ServerError
    assert "overloaded" in str(after_error).lower()
    assert type(after_garbage) is e.MalformedStream


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_nothing_after_the_end_marker_costs_the_answer(provider: str) -> None:
    """After the end marker (``[DONE]``, ``message_stop``) nothing is read as an event: an
    error event or garbage there leaves the answer standing."""
    whole, end, error = ANSWERS[provider]

    async def main() -> list[str | BaseException]:
        with RawServer() as server:
            return [
                await _call(provider, server, whole + end + tail) for tail in (error, UNREADABLE)
            ]

    assert asyncio.run(main()) == ["hello world", "hello world"]


ECHOING = {
    # a gateway that echoes the key it was sent as the answer's model, id and finish reason
    "openai": "".join(
        f"data: {json.dumps({'id': KEY, 'model': KEY, 'choices': [chunk]})}\n\n"
        for chunk in (
            {"index": 0, "delta": {"content": "hi"}, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": KEY},
        )
    )
    + "data: [DONE]\n\n",
    "anthropic": anthropic_event(
        "message_start", message={"id": KEY, "model": KEY, "usage": {"input_tokens": 1}}
    )
    + anthropic_event("content_block_delta", index=0, delta={"type": "text_delta", "text": "hi"})
    + anthropic_event("message_delta", delta={"stop_reason": KEY})
    + anthropic_event("message_stop"),
    "gemini": gemini_data(
        {
            "candidates": [{"content": {"parts": [{"text": "hi"}]}, "finishReason": KEY}],
            "modelVersion": KEY,
            "responseId": KEY,
        }
    ),
}


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("stream", [True, False])
def test_a_key_echoed_in_the_answers_telemetry_fields_is_redacted(
    provider: str, stream: bool, spans: Spans
) -> None:
    """The answer's model, id and finish reason are the provider's words recorded on the
    spans: a key echoed in them is redacted there and in the result."""
    body = ECHOING[provider]
    if not stream:
        body = json.dumps(NON_STREAMED[provider])

    async def main() -> ChatResult:
        with RawServer() as server:
            server.content_type = "text/event-stream" if stream else "application/json"
            server.pieces = [body.encode()]
            source = _source(provider, server.url)
            async with Client([source], tracer_provider=spans.provider) as client:
                return await client.chat([{"role": "user", "content": "hi"}], stream=stream)

    result = asyncio.run(main())
    assert result.text == "hi"
    assert (result.response_model, result.response_id) == ("[REDACTED]", "[REDACTED]")
    assert result.finish_reason == "[REDACTED]"
    assert spans.finished()
    for span in spans.finished():
        assert KEY not in span.to_json()


NON_STREAMED = {
    "openai": {
        "id": KEY,
        "model": KEY,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": KEY}
        ],
    },
    "anthropic": {
        "type": "message",
        "id": KEY,
        "model": KEY,
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": KEY,
    },
    "gemini": {
        "candidates": [{"content": {"parts": [{"text": "hi"}]}, "finishReason": KEY}],
        "modelVersion": KEY,
        "responseId": KEY,
    },
}
