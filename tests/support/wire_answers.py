"""Answers in the Anthropic Messages API's and the Gemini API's own wire shapes (as their SDKs,
anthropic 2.17 and google-genai 3.6.1, read them), for in-memory upstreams (``httpx2``'s
``MockTransport``): whole streams, single events, error bodies."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import httpx2

# --- Anthropic --------------------------------------------------------------------------------


def anthropic_event(kind: str, **fields: Any) -> str:
    """One named Messages API event: ``event: <kind>`` and its JSON data (``type`` = kind)."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n"


def text_delta(text: str, index: int = 0) -> str:
    return anthropic_event(
        "content_block_delta", index=index, delta={"type": "text_delta", "text": text}
    )


def anthropic_message_start(model: str = "claude-m", input_tokens: int = 3) -> str:
    return anthropic_event(
        "message_start",
        message={
            "id": "msg_sim",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "cache_read_input_tokens": 2,
                "cache_creation_input_tokens": 1,
                "output_tokens": 1,
            },
        },
    )


def anthropic_finish(stop_reason: str = "end_turn", output_tokens: int = 2, **delta: Any) -> str:
    """``message_delta`` with the stop reason, and ``message_stop``."""
    return anthropic_event(
        "message_delta",
        delta={"stop_reason": stop_reason, "stop_sequence": None, **delta},
        usage={"output_tokens": output_tokens},
    ) + anthropic_event("message_stop")


def anthropic_sse(
    words: Iterable[str] = ("hello", " world"),
    *,
    thinking: Sequence[str] = (),
    tool: tuple[str, Sequence[str]] | None = None,
    stop_reason: str = "end_turn",
    model: str = "claude-m",
) -> str:
    """A whole streamed answer: a thinking block (when ``thinking``), a text block of
    ``words``, a ``tool_use`` block (``tool``: its name and argument pieces), the stop."""
    out = anthropic_message_start(model)
    index = 0
    if thinking:
        out += anthropic_event(
            "content_block_start",
            index=index,
            content_block={"type": "thinking", "thinking": "", "signature": ""},
        )
        for piece in thinking:
            out += anthropic_event(
                "content_block_delta",
                index=index,
                delta={"type": "thinking_delta", "thinking": piece},
            )
        out += anthropic_event(
            "content_block_delta", index=index, delta={"type": "signature_delta", "signature": "s"}
        )
        out += anthropic_event("content_block_stop", index=index)
        index += 1
    out += anthropic_event(
        "content_block_start", index=index, content_block={"type": "text", "text": ""}
    )
    out += anthropic_event("ping")
    for word in words:
        out += text_delta(word, index)
    out += anthropic_event("content_block_stop", index=index)
    if tool is not None:
        index += 1
        name, pieces = tool
        out += anthropic_event(
            "content_block_start",
            index=index,
            content_block={"type": "tool_use", "id": "toolu_1", "name": name, "input": {}},
        )
        for piece in pieces:
            out += anthropic_event(
                "content_block_delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": piece},
            )
        out += anthropic_event("content_block_stop", index=index)
    return out + anthropic_finish(stop_reason, output_tokens=len(list(words)) or 1)


def anthropic_error_body(kind: str, message: str) -> dict[str, Any]:
    """An Anthropic error body (``{"type": "error", "error": {...}}``)."""
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}


# --- Gemini -----------------------------------------------------------------------------------


def gemini_response(
    parts: Sequence[dict[str, Any]] = (),
    *,
    finish: str | None = None,
    index: int | None = 0,
    usage: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """One ``GenerateContentResponse`` with one candidate of ``parts``."""
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if index is not None:
        candidate["index"] = index
    if finish is not None:
        candidate["finishReason"] = finish
    response: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": "gemini-m",
        "responseId": "resp_sim",
        **fields,
    }
    if usage is not None:
        response["usageMetadata"] = usage
    return response


def gemini_data(response: dict[str, Any]) -> str:
    return f"data: {json.dumps(response)}\n\n"


GEMINI_USAGE = {
    "promptTokenCount": 3,
    "candidatesTokenCount": 2,
    "thoughtsTokenCount": 1,
    "cachedContentTokenCount": 1,
    "totalTokenCount": 6,
}


def gemini_sse(
    words: Iterable[str] = ("hello", " world"),
    *,
    thoughts: Sequence[str] = (),
    call: tuple[str, dict[str, Any]] | None = None,
    finish: str = "STOP",
) -> str:
    """A whole ``streamGenerateContent?alt=sse`` answer: thoughts, one response per word, a
    function call (``call``), then the finish with usage."""
    out = "".join(
        gemini_data(gemini_response([{"text": thought, "thought": True}])) for thought in thoughts
    )
    out += "".join(gemini_data(gemini_response([{"text": word}])) for word in words)
    if call is not None:
        name, args = call
        out += gemini_data(gemini_response([{"functionCall": {"name": name, "args": args}}]))
    return out + gemini_data(gemini_response([{"text": ""}], finish=finish, usage=GEMINI_USAGE))


def gemini_error_body(
    code: int, status: str, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A Google API error body."""
    error: dict[str, Any] = {"code": code, "message": message, "status": status}
    if details is not None:
        error["details"] = details
    return {"error": error}


# --- as answers ---------------------------------------------------------------------------------


def sse_response(text: str) -> httpx2.Response:
    """A 200 event stream of ``text``."""
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=text)


def json_response(status: int, body: Any, **headers: str) -> httpx2.Response:
    return httpx2.Response(status, json=body, headers=headers)
