"""The legacy functions API of chat completions (``functions=``, answered with
``function_call`` instead of ``tool_calls``): the client's answer carries the call as its one
tool call, without an id, streamed or not — it was dropped (``text=''``, no tool calls, the
finish reason ``function_call``), while the chunk rule counted its deltas as output. On virtual
time over the scripted transport."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from otel_llm import ChatResult, ToolCall
from otel_llm.testing import Scripted, Spans, run_virtual
from tests.support.scripted_clients import MESSAGES, client

FUNCTIONS = [{"name": "weather", "parameters": {"type": "object", "properties": {}}}]
DELTAS: list[dict[str, Any]] = [
    {"role": "assistant", "function_call": {"name": "weather", "arguments": ""}},
    {"function_call": {"arguments": '{"city": '}},
    {"function_call": {"arguments": '"Paris"}'}},
]


def streamed_function_call() -> httpx2.Response:
    chunks = [{"id": "x", "model": "m", "choices": [{"index": 0, "delta": d}]} for d in DELTAS]
    chunks.append(
        {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "function_call"}]}
    )
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=body)


def answered_function_call() -> httpx2.Response:
    message = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "weather", "arguments": '{"city": "Paris"}'},
    }
    choice = {"index": 0, "message": message, "finish_reason": "function_call"}
    return httpx2.Response(200, json={"id": "x", "model": "m", "choices": [choice]})


def chat(answer: httpx2.Response, spans: Spans, *, stream: bool) -> ChatResult:
    script = Scripted({"a": [answer]})

    async def main() -> ChatResult:
        async with client(script, spans) as c:
            return await c.chat(MESSAGES, stream=stream, functions=FUNCTIONS)

    return run_virtual(main())


def test_a_streamed_function_call_is_the_answers_tool_call(spans: Spans) -> None:
    result = chat(streamed_function_call(), spans, stream=True)
    assert result.tool_calls == (ToolCall(None, "weather", '{"city": "Paris"}'),)
    assert (result.text, result.finish_reason) == ("", "function_call")
    assert result.stats.chunk_count == 3


def test_a_function_call_answered_whole_is_the_answers_tool_call(spans: Spans) -> None:
    result = chat(answered_function_call(), spans, stream=False)
    assert result.tool_calls == (ToolCall(None, "weather", '{"city": "Paris"}'),)
    assert (result.text, result.finish_reason) == ("", "function_call")


def test_a_call_sent_as_both_tool_calls_and_function_call_is_one_call(spans: Spans) -> None:
    """A server that fills both fields in each delta (for older clients) sends one call twice:
    the answer's tool calls are its ``tool_calls`` (the legacy field's arguments were appended
    to the same call: '{"city": "Paris"}{"city": "Paris"}', no JSON)."""
    both: list[dict[str, Any]] = []
    for delta in DELTAS:
        call = delta["function_call"]
        tool = {"index": 0, "function": dict(call)}
        if "name" in call:
            tool |= {"id": "call_1", "type": "function"}
        both.append({**delta, "tool_calls": [tool]})
    chunks = [{"id": "x", "model": "m", "choices": [{"index": 0, "delta": d}]} for d in both]
    chunks.append(
        {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    )
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
    answer = httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=body)
    result = chat(answer, spans, stream=True)
    assert result.tool_calls == (ToolCall("call_1", "weather", '{"city": "Paris"}'),)
