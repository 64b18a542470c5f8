"""OpenAI chat completions (and embeddings): the simulator's first wire format, also served on
Azure OpenAI's deployment route.

A script maps one to one: the role chunk is a ``{"role": "assistant"}`` delta, each incremental
chunk one ``chat.completion.chunk`` whose delta carries reasoning (``reasoning_key``), content,
a refusal or a tool-call piece; then a finish chunk, the usage-only frame (``choices: []``) when
the request set ``stream_options.include_usage``, and ``data: [DONE]``. The ``error`` fault is an
``{"error": {…}}`` data line, the keepalive a ``: ping`` comment (or an empty-delta chunk,
``keepalive="empty_delta"``). A script with ``choices`` > 1 sends each chunk once per choice
(``index`` 0, 1, …, at the same moment) and a finish chunk per choice; ``finish_chunk=False``
leaves the finish chunks out. Errors have OpenAI's body ``{"error": {"message", "type",
"code"}}``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from otel_llm.simulator._frames import (
    TOOL_NAME,
    Reply,
    Send,
    Step,
    output,
    output_tokens,
    prompt_tokens,
    reasoning_tokens,
    split,
    timeline,
)
from otel_llm.simulator._script import Script
from otel_llm.simulator._select import BadRequest
from otel_llm.simulator._wire import OPENAI_SSE, SSE, Asked, Body, Framing, ScriptedError, Wire

MALFORMED_DATA = '{"id": "chatcmpl-sim", "choices": [{"index": 0, "delta": {"content": "trunc'
"""The payload of the one ``data:`` line a ``malformed`` fault sends: cut-off JSON."""


def tool_call_id(reply: Reply) -> str:
    """The id of the scripted tool call of one answer."""
    return f"call_{reply.id.removeprefix('chatcmpl-')}"


def _tool_deltas(script: Script, reply: Reply) -> list[dict[str, Any]]:
    """Id, type and name first, then the arguments in pieces (all in one delta if only one)."""
    said = output(script)
    count, arguments = said.tool_chunks, said.arguments
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
            for piece in split(arguments, count - 1)
        )
    return deltas


def incremental_deltas(script: Script, reply: Reply) -> list[dict[str, Any]]:
    """The ``delta`` of each of the ``chunk_count`` incremental chunks, in order."""
    said = output(script)
    deltas: list[dict[str, Any]] = [{script.reasoning_key: text} for text in said.reasoning]
    if script.tool_call:
        deltas.extend(_tool_deltas(script, reply))
    else:
        key = "refusal" if script.refusal else "content"
        deltas.extend({key: text} for text in said.content)
    return deltas


def chunk(
    reply: Reply, delta: Mapping[str, Any], finish_reason: str | None = None, choice: int = 0
) -> str:
    """One ``chat.completion.chunk`` of choice ``choice`` as JSON text."""
    return json.dumps(
        {
            "id": reply.id,
            "object": "chat.completion.chunk",
            "created": reply.created,
            "model": reply.model,
            "choices": [{"index": choice, "delta": dict(delta), "finish_reason": finish_reason}],
        }
    )


def empty_delta_keepalive(reply: Reply) -> bytes:
    """The keepalive of ``keepalive="empty_delta"``: a chunk whose delta is ``{"content": ""}``."""
    return Send(chunk(reply, {"content": ""})).encoded()


def usage(script: Script, reply: Reply) -> dict[str, Any]:
    """The ``usage`` object: one token per word, reasoning words reported as reasoning tokens."""
    completion_tokens = output_tokens(script)
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": reply.prompt_tokens + completion_tokens,
        "completion_tokens_details": {"reasoning_tokens": reasoning_tokens(script)},
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


@dataclass(frozen=True, slots=True)
class _ChatFrames:
    """The chat completions events of one answer."""

    script: Script
    reply: Reply
    deltas: list[dict[str, Any]]

    def opening(self) -> list[Send]:
        return [Send(chunk(self.reply, {"role": "assistant"}))]

    def chunk(self, index: int) -> list[Send]:
        delta = self.deltas[index]
        return [Send(chunk(self.reply, delta, choice=k)) for k in range(self.script.choices)]

    def closing(self) -> list[Send]:
        script = self.script
        sends: list[Send] = []
        if script.finish_chunk:
            sends.extend(
                Send(chunk(self.reply, {}, script.final_reason, choice=k))
                for k in range(script.choices)
            )
        if self.script.usage and self.reply.include_usage:
            sends.append(Send(usage_frame(self.script, self.reply)))
        if self.script.done:
            sends.append(Send("[DONE]"))
        return sends

    def failure(self) -> list[Send]:
        script = self.script
        error = error_body(
            script.error_message,
            status=script.fault_status,
            code=script.error_code,
            kind=script.error_type,
        )
        return [Send(json.dumps(error))]

    def malformed(self) -> Send:
        return Send(MALFORMED_DATA)


def stream_plan(script: Script, reply: Reply) -> list[Step]:
    """Every step of the streamed chat completion (see :mod:`._script`)."""
    return timeline(script, _ChatFrames(script, reply, incremental_deltas(script, reply)))


def completion(script: Script, reply: Reply) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` answer; always carries usage."""
    said = output(script)
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if script.refusal:
        message["refusal"] = said.text
    else:
        message["content"] = said.text or None
    if said.reasoning:
        message[script.reasoning_key] = said.reasoning_text
    if script.tool_call:
        message["tool_calls"] = [
            {
                "id": tool_call_id(reply),
                "type": "function",
                "function": {"name": TOOL_NAME, "arguments": said.arguments},
            }
        ]
    return {
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "choices": [
            {"index": k, "message": message, "finish_reason": script.final_reason}
            for k in range(script.choices)
        ],
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


def retry_headers(script: Script) -> dict[str, str]:
    """The ``Retry-After`` / ``retry-after-ms`` headers a script's error answer carries."""
    headers: dict[str, str] = {}
    if script.retry_after is not None:
        headers["Retry-After"] = script.retry_after
    if script.retry_after_ms is not None:
        headers["retry-after-ms"] = script.retry_after_ms
    return headers


def scripted_error(
    script: Script, status: int | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, body and headers of a script's OpenAI-style error answer (``status`` defaults to
    ``error_status``, which must then be set)."""
    status = status or script.error_status or 500
    body = error_body(
        script.error_message, status=status, code=script.error_code, kind=script.error_type
    )
    return status, body, retry_headers(script)


def openai_error(script: Script, status: int) -> ScriptedError:
    """The OpenAI-style error answer with ``status`` (chat completions and Responses)."""
    status, body, headers = scripted_error(script, status)
    return ScriptedError(status, body, headers)


def openai_rejection(message: str, code: str) -> dict[str, Any]:
    """The OpenAI-style body of a 400 answer."""
    return error_body(message, status=400, code=code)


def body_model(body: Body) -> str:
    """The ``model`` a request body names."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' must be a non-empty string", code="invalid_model")
    return model


def deployment_model(asked: Asked) -> str:
    """Azure OpenAI: the model is the deployment named in the URL path."""
    return asked.path["deployment"]


def _reply(script: Script, asked: Asked, model: str, serial: int, created: int) -> Reply:
    options = asked.body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    return Reply(
        id=f"chatcmpl-sim{serial:06d}",
        created=created,
        model=script.model_name or model,
        prompt_tokens=prompt_tokens(asked.body.get("messages")),
        include_usage=include_usage,
        empty_keepalive=script.keepalive == "empty_delta",
    )


def _check(body: Body) -> None:
    if not isinstance(body.get("messages"), list):
        raise BadRequest("'messages' must be a list", code="invalid_messages")


CHAT_COMPLETIONS = Wire(
    name="chat",
    model=lambda asked: body_model(asked.body),
    check=_check,
    streamed=lambda asked: asked.body.get("stream") is True,
    reply=_reply,
    plan=stream_plan,
    answer=completion,
    error=openai_error,
    rejection=openai_rejection,
    framing=lambda reply: (
        Framing(SSE, empty_delta_keepalive(reply)) if reply.empty_keepalive else OPENAI_SSE
    ),
)
"""OpenAI-compatible chat completions (``POST /v1/chat/completions``)."""

AZURE_CHAT_COMPLETIONS = replace(CHAT_COMPLETIONS, model=deployment_model)
"""Azure OpenAI's chat completions: the same wire, the model from the deployment in the path
(``POST /openai/deployments/{deployment}/chat/completions?api-version=…``)."""


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
