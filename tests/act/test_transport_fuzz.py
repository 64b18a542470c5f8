"""Hostile streams (hypothesis): random SSE byte streams, in random splits, through the transport
and through the wrapped openai SDK.

Each generated event carries what a correct reader must make of it, so the property is exact:
the transport returns the answer the delivered events add up to, or raises the error they call
for — and never an exception outside the library's hierarchy, never hangs, never presents an
incomplete stream as an answer. The wrapper never changes what the SDK returns or raises.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_llm import Source, instrument_openai, uninstrument_openai
from otel_llm import _errors as e
from otel_llm._act._pool import Pool
from otel_llm._act._transport import chat_completion
from otel_llm.testing import Spans
from tests.support.hostile_sse import (
    BAD_BYTE,
    DEEP,
    Event,
    Stream,
    expected,
    fail,
    serving,
    serving_pieces,
    skip,
)
from tests.support.hostile_sse import streams as hostile_streams
from tests.support.hostile_sse import through_transport as transport_outcome


def data(payload: Any) -> tuple[bytes, ...]:
    return (b"data: " + json.dumps(payload).encode(),)


def choice_chunk(choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": "c", "object": "chat.completion.chunk", "model": "m", "created": 1,
            "choices": choices}  # fmt: skip


words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)


@st.composite
def content_events(draw: st.DrawFn) -> Event:
    text = draw(words)
    index = draw(st.sampled_from([0, 0, 0, 1]))
    finish = draw(st.sampled_from([None, None, "stop", "length"]))
    kind = draw(st.sampled_from(["content", "reasoning", "tool"]))
    if kind == "content":
        delta: dict[str, Any] = {"content": text}
    elif kind == "reasoning":
        delta = {"reasoning_content": text}
    else:
        call = {"index": 0, "id": "t", "function": {"name": "f", "arguments": text}}
        delta = {"tool_calls": [call]}
    payload = choice_chunk([{"index": index, "delta": delta, "finish_reason": finish}])
    lines = data(payload)
    expected = text if kind == "content" and index == 0 else ""
    if kind == "content" and index == 0 and draw(st.booleans()):  # an undecodable byte inside
        lines = (lines[0].replace(b'"content": "', b'"content": "' + BAD_BYTE, 1),)
        expected = "\ufffd" + text
    return Event(lines, "chunk", expected, (index,) if finish else (), (index,))


wrong_shapes = st.sampled_from(
    [
        {"choices": 5},
        {"choices": "x"},
        {"choices": {"index": 0}},
        {"choices": [7]},
        {"choices": [{"index": "0", "delta": {"content": "x"}}]},
        {"choices": [{"index": 0, "delta": ["x"]}]},
        {"choices": [{"index": 0, "delta": {"content": ["x"]}}]},
        {"choices": [{"index": 0, "delta": {"content": 3}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": {"a": 1}}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": 3}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": ["x"]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": [0]}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"arguments": 1}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": 1}]},
        {"choices": [{"index": True, "delta": {"content": "x"}}]},
    ]
)


@st.composite
def events(draw: st.DrawFn) -> Event:
    kind = draw(
        st.sampled_from(
            ["content"] * 6
            + ["role", "usage", "finish", "comment", "field", "typed", "empty", "wrong", "junk",
               "notobject", "error", "error-event", "done"]
        )
    )  # fmt: skip
    if kind == "content":
        return draw(content_events())
    if kind == "role":
        return Event(data(choice_chunk([{"index": 0, "delta": {"role": "assistant"}}])), "chunk",
                     seen=(0,))  # fmt: skip
    if kind == "usage":
        return Event(data({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}),
                     "chunk")  # fmt: skip
    if kind == "finish":
        index = draw(st.sampled_from([0, 0, 1]))
        payload = choice_chunk([{"index": index, "delta": {}, "finish_reason": "stop"}])
        return Event(data(payload), "chunk", finished=(index,), seen=(index,))
    if kind == "comment":
        return skip(b": ping")
    if kind == "field":  # id / retry / an unknown field: no data, nothing dispatched
        line = draw(st.sampled_from([b"id: 7", b"retry: 1000", b"retry: soon", b"foo: bar", b"x"]))
        return skip(line)
    if kind == "typed":  # another event type is not a chunk, whatever it carries
        return skip(b"event: ping", b"data: {not json")
    if kind == "empty":
        return skip(b"data:")
    if kind == "wrong":
        return fail(e.MalformedStream, *data(draw(wrong_shapes)))
    if kind == "junk":
        junk = draw(st.sampled_from([b"{", b"nope", b'{"a": ', b"[1,", DEEP]))
        return fail(e.MalformedStream, b"data: " + junk)
    if kind == "notobject":
        return fail(e.MalformedStream, *data(draw(st.sampled_from([[1], "s", 3, None]))))
    if kind == "error":
        return fail(
            e.ServerError, *data({"error": {"message": "overloaded", "code": "server_error"}})
        )
    if kind == "error-event":
        return fail(e.ServerError, b"event: error", b'data: {"message": "boom"}')
    return Event((b"data: [DONE]",), "end")


SOURCE = Source(name="fuzz", provider="sim", base_url="http://fuzz.test/v1", model="m")


def streams() -> st.SearchStrategy[Stream]:
    """Hostile chat completions streams."""
    return hostile_streams(events())


async def through_transport(handler: Any) -> str | type[BaseException]:
    return await transport_outcome(SOURCE, handler, {"messages": []})


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(streams())
def test_transport_reads_hostile_streams_exactly(stream: Stream) -> None:
    """Any stream: the exact answer or the exact library error; nothing else, no hang, no
    incomplete stream taken for an answer."""
    assert asyncio.run(through_transport(serving(stream))) == expected(stream)


def test_the_fuzzer_covers_every_outcome() -> None:
    """The generator reaches answers and every error the property distinguishes."""
    outcomes: set[object] = set()

    @settings(max_examples=300, deadline=None, database=None)
    @given(streams())
    def collect(stream: Stream) -> None:
        result = expected(stream)
        outcomes.add(str if isinstance(result, str) else result)

    collect()
    assert outcomes == {
        str,
        e.MalformedStream,
        e.ServerError,
        e.ProviderConnectionError,
        e.TruncatedStream,
    }


async def through_sdk(stream: Stream) -> tuple[list[Any], str | None]:
    """Items (as dicts) and the exception (type and text) the openai SDK gives for ``stream``."""
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(serving(stream)))
    items: list[Any] = []
    failure = None
    async with openai.AsyncOpenAI(base_url="http://fuzz.test/v1", api_key="sk-fuzz",
                                  http_client=http, max_retries=0) as client:  # fmt: skip
        try:
            async with asyncio.timeout(5):
                response = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "x"}], stream=True
                )
                async with response:  # as a careful application does: closed on any exit
                    async for item in response:
                        items.append(item.model_dump() if hasattr(item, "model_dump") else item)
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}"
    return items, failure


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_the_wrapper_never_changes_what_the_sdk_returns(stream: Stream) -> None:
    """Instrumented or not, the SDK yields the same items and raises the same errors."""
    bare = asyncio.run(through_sdk(stream))
    spans = Spans()
    instrument_openai(tracer_provider=spans.provider)
    try:
        wrapped = asyncio.run(through_sdk(stream))
    finally:
        uninstrument_openai()
    assert wrapped == bare
    spans.provider.force_flush()
    assert spans.tracker.open_spans() == []
    spans.provider.shutdown()


@pytest.mark.parametrize(
    ("body", "outcome"),
    [
        pytest.param(b"data: [DONE]\n\n", e.TruncatedStream, id="done-alone"),
        pytest.param(b"foo: {}\nbar: x\n\ndata: [DONE]\n\n", e.TruncatedStream, id="no-data"),
        pytest.param(b"", e.TruncatedStream, id="empty-body"),
        pytest.param(
            b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n',
            e.TruncatedStream,
            id="done-without-finish",
        ),
        pytest.param(
            b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason":'
            b' "stop"}]}\n\n',
            "hi",
            id="finish-without-done",
        ),
        pytest.param(
            b'data: {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason":'
            b' "stop"}, {"index": 1, "delta": {"content": "b"}}]}\n\ndata: [DONE]\n\n',
            e.TruncatedStream,
            id="second-choice-unfinished",
        ),
    ],
)
async def test_one_rule_decides_complete(body: bytes, outcome: object) -> None:
    """Complete means a finish reason for every choice streamed; [DONE] or a clean end alone is
    not an answer (the rule is ``stream_complete``, shared with the wrappers)."""
    assert await through_transport(serving_pieces([body])) == outcome


@pytest.mark.parametrize(
    ("status", "content_type", "body", "stream", "outcome"),
    [
        pytest.param(200, "text/event-stream", b"data: " + DEEP + b"\n\n", True,
                     e.MalformedStream, id="stream-event"),
        pytest.param(200, "text/event-stream", b"event: error\ndata: " + DEEP + b"\n\n", True,
                     e.ServerError, id="error-event"),
        pytest.param(200, "application/json", DEEP, False, e.MalformedStream, id="body"),
        pytest.param(500, "application/json", DEEP, False, e.ServerError, id="error-body"),
    ],
)  # fmt: skip
async def test_deeply_nested_json_is_an_error_of_the_library(
    status: int, content_type: str, body: bytes, stream: bool, outcome: type[Exception]
) -> None:
    """A document nested too deep for ``json`` (it raises RecursionError) is malformed — in a
    stream, an error event, a body, an error body — never a raw RecursionError."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers={"content-type": content_type}, content=body)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
        with pytest.raises(outcome):
            await chat_completion(Pool(client=http), SOURCE, {"messages": []}, stream=stream)
