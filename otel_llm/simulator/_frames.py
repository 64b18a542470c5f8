"""Pure builders of what the simulated provider sends: chunks, completions, errors, vectors.

Nothing here waits or does I/O. :func:`stream_plan` turns a :class:`Script` into the list of
steps a streamed answer consists of — events to send, pauses, an abort — and the server only
interprets that list, so the shape of every answer can be read (and tested) without a clock.
Streamed and non-streamed answers are built from the same :func:`incremental_deltas`, so they
always carry the same text.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from otel_llm.simulator._script import Script

TOOL_NAME = "lookup"
"""Name of the function a scripted tool call asks for."""

MALFORMED_DATA = '{"id": "chatcmpl-sim", "choices": [{"index": 0, "delta": {"content": "trunc'
"""The payload of the one ``data:`` line a ``malformed`` fault sends: cut-off JSON."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What every frame of one answer repeats, and what the request asked for."""

    id: str
    created: int
    model: str
    prompt_tokens: int
    include_usage: bool = False


@dataclass(frozen=True, slots=True)
class Send:
    """Send one SSE event ``data: <data>``, preceded by ``event: <event>`` when it is named
    (the Anthropic and Responses wire formats name every event; chat completions none)."""

    data: str
    event: str | None = None

    def encoded(self) -> bytes:
        """The event as written to the socket."""
        if self.event is None:
            return f"data: {self.data}\n\n".encode()
        return f"event: {self.event}\ndata: {self.data}\n\n".encode()


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait ``seconds`` (scripted), writing ``: ping`` every ``keepalive_every_s`` if set.

    A *silence* (``cadence=False``) runs from the previous write's actual end, so a late write
    never shortens it. A *cadence* pause (the first-chunk delay, the interval between chunks)
    runs on the stream's own timeline: it absorbs the lateness of the writes before it, so a
    loaded machine does not stretch a stream by a little per chunk.
    """

    seconds: float
    keepalive_every_s: float | None = None
    cadence: bool = False

    def keepalive_count(self) -> int:
        """How many pings fall strictly inside the pause (at every multiple of the period
        before its end; a multiple that equals the end up to float rounding sends none)."""
        every = self.keepalive_every_s
        if every is None:
            return 0
        return max(0, math.ceil(self.seconds / every - 1e-9) - 1)


@dataclass(frozen=True, slots=True)
class Abort:
    """Abort the TCP connection (a ``reset`` fault)."""


Step = Send | Pause | Abort


def _words(stem: str, index: int, per_chunk: int) -> str:
    """Text of chunk ``index``: ``stem0 stem1 …``, with a leading space after the first chunk."""
    start = index * per_chunk
    text = " ".join(f"{stem}{k}" for k in range(start, start + per_chunk))
    return text if index == 0 else f" {text}"


def _split(text: str, pieces: int) -> list[str]:
    """``text`` cut into ``pieces`` non-empty parts of nearly equal length (``len ≥ pieces``)."""
    bounds = [len(text) * k // pieces for k in range(pieces + 1)]
    return [text[bounds[k] : bounds[k + 1]] for k in range(pieces)]


def tool_arguments(script: Script) -> str:
    """The JSON arguments text of a scripted tool call."""
    words = (script.chunk_count - script.reasoning_chunks) * script.words_per_chunk
    return json.dumps({"query": " ".join(f"arg{k}" for k in range(words))})


def tool_call_id(reply: Reply) -> str:
    """The id of the scripted tool call of one answer."""
    return f"call_{reply.id.removeprefix('chatcmpl-')}"


def _tool_deltas(script: Script, reply: Reply) -> list[dict[str, Any]]:
    """Id, type and name first, then the arguments in pieces (all in one delta if only one)."""
    count = script.chunk_count - script.reasoning_chunks
    arguments = tool_arguments(script)
    head = {
        "index": 0,
        "id": tool_call_id(reply),
        "type": "function",
        "function": {"name": TOOL_NAME, "arguments": arguments if count == 1 else ""},
    }
    deltas: list[dict[str, Any]] = [{"tool_calls": [head]}]
    if count > 1:
        deltas.extend(
            {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
            for piece in _split(arguments, count - 1)
        )
    return deltas


def incremental_deltas(script: Script, reply: Reply) -> list[dict[str, Any]]:
    """The ``delta`` of each of the ``chunk_count`` incremental chunks, in order."""
    per_chunk = script.words_per_chunk
    deltas: list[dict[str, Any]] = [
        {script.reasoning_key: _words("thought", k, per_chunk)}
        for k in range(script.reasoning_chunks)
    ]
    if script.tool_call:
        deltas.extend(_tool_deltas(script, reply))
    else:
        rest = script.chunk_count - script.reasoning_chunks
        deltas.extend({"content": _words("word", k, per_chunk)} for k in range(rest))
    return deltas


def chunk(reply: Reply, delta: Mapping[str, Any], finish_reason: str | None = None) -> str:
    """One ``chat.completion.chunk`` as JSON text."""
    return json.dumps(
        {
            "id": reply.id,
            "object": "chat.completion.chunk",
            "created": reply.created,
            "model": reply.model,
            "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}],
        }
    )


def usage(script: Script, reply: Reply) -> dict[str, Any]:
    """The ``usage`` object: one token per word, reasoning words reported as reasoning tokens."""
    completion_tokens = script.chunk_count * script.words_per_chunk
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": reply.prompt_tokens + completion_tokens,
        "completion_tokens_details": {
            "reasoning_tokens": script.reasoning_chunks * script.words_per_chunk
        },
    }


def usage_frame(script: Script, reply: Reply) -> str:
    """The usage-only frame (``choices: []``) sent before ``[DONE]``."""
    return json.dumps(
        {
            "id": reply.id,
            "object": "chat.completion.chunk",
            "created": reply.created,
            "model": reply.model,
            "choices": [],
            "usage": usage(script, reply),
        }
    )


def stream_plan(script: Script, reply: Reply) -> list[Step]:
    """Every step of the streamed answer to one request, in order (see :mod:`._script`)."""
    steps: list[Step] = []
    if script.role_chunk:
        steps.append(Send(chunk(reply, {"role": "assistant"})))
    steps.append(Pause(script.first_chunk_delay_s, cadence=True))
    if script.fault is not None and script.fault_after_chunk == -1 and _fault(script, steps):
        return steps
    for index, delta in enumerate(incremental_deltas(script, reply)):
        if index:
            steps.append(Pause(script.chunk_interval_s, cadence=True))
        steps.append(Send(chunk(reply, delta)))
        if script.fault is not None and script.fault_after_chunk == index and _fault(script, steps):
            return steps
        steps.extend(
            Pause(silence.duration_s, silence.keepalive_every_s)
            for silence in script.silences
            if silence.after_chunk == index
        )
    steps.append(Send(chunk(reply, {}, script.final_reason)))
    if script.usage and reply.include_usage:
        steps.append(Send(usage_frame(script, reply)))
    if script.done:
        steps.append(Send("[DONE]"))
    return steps


def _fault(script: Script, steps: list[Step]) -> bool:
    """Append the scripted fault; True when the stream ends there."""
    if script.fault == "malformed":
        steps.append(Send(MALFORMED_DATA))
        return False
    if script.fault == "reset":
        steps.append(Abort())
    return True


def completion(script: Script, reply: Reply) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` answer; always carries usage."""
    deltas = incremental_deltas(script, reply)
    content = "".join(delta.get("content", "") for delta in deltas)
    reasoning = "".join(delta.get(script.reasoning_key, "") for delta in deltas)
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if reasoning:
        message[script.reasoning_key] = reasoning
    if script.tool_call:
        message["tool_calls"] = [
            {
                "id": tool_call_id(reply),
                "type": "function",
                "function": {"name": TOOL_NAME, "arguments": tool_arguments(script)},
            }
        ]
    return {
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "choices": [{"index": 0, "message": message, "finish_reason": script.final_reason}],
        "usage": usage(script, reply),
    }


def _error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status in (401, 403):
        return "authentication_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def error_body(
    message: str, *, status: int, code: str | None, kind: str | None = None
) -> dict[str, Any]:
    """An OpenAI-style error body ``{"error": {"message", "type", "code"}}``."""
    return {"error": {"message": message, "type": kind or _error_type(status), "code": code}}


def scripted_error(script: Script) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, body and headers of a script's error answer (``error_status`` must be set)."""
    status = script.error_status or 500
    headers: dict[str, str] = {}
    if script.retry_after is not None:
        headers["Retry-After"] = script.retry_after
    if script.retry_after_ms is not None:
        headers["retry-after-ms"] = script.retry_after_ms
    body = error_body(
        script.error_message, status=status, code=script.error_code, kind=script.error_type
    )
    return status, body, headers


def _text_of(content: object) -> str:
    """The text of a message's ``content``: a string or a list of ``{"type": "text"}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def prompt_tokens(messages: object) -> int:
    """A deterministic token estimate of the request's messages: one per word, at least 1."""
    if not isinstance(messages, list):
        return 1
    words = sum(
        len(_text_of(message.get("content")).split())
        for message in messages
        if isinstance(message, Mapping)
    )
    return max(1, words)


def embedding(text: str, dimensions: int) -> list[float]:
    """A deterministic unit vector of ``dimensions`` floats derived from a hash of ``text``."""
    raw = b""
    block = 0
    while len(raw) < 4 * dimensions:
        raw += hashlib.sha256(f"{block}\x00{text}".encode()).digest()
        block += 1
    values = [
        (word / 0xFFFFFFFF) * 2.0 - 1.0
        for word in struct.unpack(f"<{dimensions}I", raw[: 4 * dimensions])
    ]
    norm = math.sqrt(sum(value * value for value in values)) or 1.0
    return [value / norm for value in values]


def embeddings_answer(
    texts: Sequence[str], *, model: str, dimensions: int, encoding: str
) -> dict[str, Any]:
    """The ``/v1/embeddings`` answer; ``encoding`` ``base64`` packs little-endian float32."""
    data: list[dict[str, Any]] = []
    for index, text in enumerate(texts):
        vector = embedding(text, dimensions)
        packed: list[float] | str = vector
        if encoding == "base64":
            packed = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": packed})
    tokens = sum(max(1, len(text.split())) for text in texts)
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
