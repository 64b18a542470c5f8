"""Anthropic's Messages API (``POST /v1/messages``) played from a script.

Every event is named. The mapping:

- the opening (``role_chunk``): ``message_start`` (the message with ``usage.input_tokens``, and
  ``output_tokens`` 1 as the real API sends) and a ``ping``, as the real API sends one before its
  first delta; without it ``message_start`` goes out with the first event that needs it;
- the reasoning phase: a ``thinking`` block whose chunks are ``thinking_delta`` deltas, closed by
  a ``signature_delta`` (not a chunk) and ``content_block_stop``;
- content (or a refusal): a ``text`` block of ``text_delta`` deltas;
- a tool call: a ``tool_use`` block of ``input_json_delta`` deltas (the arguments in ``N``
  non-empty pieces);
- each block opens (``content_block_start``) at its first chunk and closes
  (``content_block_stop``) when the next opens or the answer ends; only ``content_block_delta``
  is a chunk;
- the finish: ``message_delta`` with the stop reason (``stop`` → ``end_turn``, ``length`` →
  ``max_tokens``, ``tool_calls`` → ``tool_use``, ``content_filter`` → ``refusal``; any other
  finish reason verbatim) and the usage (``output_tokens``, with
  ``output_tokens_details.thinking_tokens``), then ``message_stop`` (left out when ``done`` is
  false);
- keepalives: ``event: ping`` with ``data: {"type": "ping"}``;
- the ``error`` fault: ``event: error`` with ``{"type": "error", "error": {"type", "message"}}``,
  the type derived from ``fault_status`` (529: ``overloaded_error``).

Error answers have Anthropic's body ``{"type": "error", "error": {"type", "message"}}`` with the
status's type (``overloaded_error`` for 529, ``rate_limit_error`` for 429 …). The simulator reads
the ``x-api-key`` / ``Authorization`` and ``anthropic-version`` headers the SDK sends and, like
every route of the simulator, does not check the key.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from otel_llm.simulator._chat import body_model, retry_headers
from otel_llm.simulator._frames import (
    TOOL_NAME,
    Output,
    Phase,
    Reply,
    Send,
    Step,
    cut,
    output,
    output_tokens,
    prompt_tokens,
    reasoning_tokens,
    split,
    timeline,
)
from otel_llm.simulator._script import Script
from otel_llm.simulator._select import BadRequest
from otel_llm.simulator._wire import SSE, Asked, Body, Framing, ScriptedError, Wire

PING = Send(json.dumps({"type": "ping"}), event="ping")
"""Anthropic's keepalive event (never a chunk)."""

STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
"""Chat finish reasons in Anthropic's words; any other finish reason is sent as written."""

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
"""Anthropic's error type of each status; other 4xx are ``invalid_request_error``, other 5xx
``api_error``."""


def error_type(status: int) -> str:
    """Anthropic's error type of an HTTP status."""
    return ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def stop_reason(script: Script) -> str:
    """The stop reason of a finished answer."""
    return STOP_REASONS.get(script.final_reason, script.final_reason)


def _error(script: Script, status: int) -> dict[str, Any]:
    error: dict[str, Any] = {
        "type": script.error_type or error_type(status),
        "message": script.error_message,
    }
    if script.error_code is not None:
        error["details"] = {"error_code": script.error_code}
    return {"type": "error", "error": error}


def _usage(reply: Reply, output_count: int) -> dict[str, Any]:
    return {
        "input_tokens": reply.prompt_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_count,
    }


def _final_usage(script: Script, reply: Reply) -> dict[str, Any]:
    return {
        **_usage(reply, output_tokens(script)),
        "output_tokens_details": {"thinking_tokens": reasoning_tokens(script)},
    }


def _signature(text: str) -> str:
    """An opaque, deterministic signature of a thinking block."""
    return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _tool_id(reply: Reply) -> str:
    return f"toolu_{reply.id.removeprefix('msg_')}"


def _message(
    script: Script, reply: Reply, content: list[dict[str, Any]], stop: str | None
) -> dict[str, Any]:
    return {
        "id": reply.id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _final_usage(script, reply) if stop else _usage(reply, 1),
    }


@dataclass(slots=True)
class _AnthropicFrames:
    """The Messages API events of one answer."""

    script: Script
    reply: Reply
    said: Output
    started: bool = False
    open: Phase | None = None

    def _index(self, phase: Phase) -> int:
        return 0 if phase == "reasoning" or not self.said.reasoning else 1

    def _start(self) -> list[Send]:
        if self.started:
            return []
        self.started = True
        start = {"type": "message_start", "message": _message(self.script, self.reply, [], None)}
        return [Send(json.dumps(start), event="message_start")]

    def opening(self) -> list[Send]:
        return [*self._start(), PING]

    def _block(self, phase: Phase) -> dict[str, Any]:
        if phase == "reasoning":
            return {"type": "thinking", "thinking": "", "signature": ""}
        if phase == "tool":
            return {"type": "tool_use", "id": _tool_id(self.reply), "name": TOOL_NAME, "input": {}}
        return {"type": "text", "text": ""}

    def _pieces(self, phase: Phase) -> tuple[str, ...]:
        if phase == "reasoning":
            return self.said.reasoning
        if phase == "tool":
            return tuple(split(self.said.arguments, self.said.tool_chunks))
        return self.said.content

    def _delta(self, phase: Phase, text: str) -> dict[str, Any]:
        if phase == "reasoning":
            return {"type": "thinking_delta", "thinking": text}
        if phase == "tool":
            return {"type": "input_json_delta", "partial_json": text}
        return {"type": "text_delta", "text": text}

    def _send(self, kind: str, **fields: Any) -> Send:
        return Send(json.dumps({"type": kind, **fields}), event=kind)

    def _close(self) -> list[Send]:
        phase, self.open = self.open, None
        if phase is None:
            return []
        index = self._index(phase)
        sends = []
        if phase == "reasoning":
            signature = {
                "type": "signature_delta",
                "signature": _signature(self.said.reasoning_text),
            }
            sends.append(self._send("content_block_delta", index=index, delta=signature))
        sends.append(self._send("content_block_stop", index=index))
        return sends

    def chunk(self, index: int) -> list[Send]:
        phase = self.said.phase(index)
        sends = self._start()
        if phase != self.open:
            sends.extend(self._close())
            block = self._block(phase)
            sends.append(
                self._send("content_block_start", index=self._index(phase), content_block=block)
            )
            self.open = phase
        first = 0 if phase == "reasoning" else len(self.said.reasoning)
        delta = self._delta(phase, self._pieces(phase)[index - first])
        sends.append(self._send("content_block_delta", index=self._index(phase), delta=delta))
        return sends

    def closing(self) -> list[Send]:
        sends = [*self._start(), *self._close()]
        delta = {"stop_reason": stop_reason(self.script), "stop_sequence": None}
        usage = _final_usage(self.script, self.reply)
        sends.append(self._send("message_delta", delta=delta, usage=usage))
        if self.script.done:
            sends.append(self._send("message_stop"))
        return sends

    def failure(self) -> list[Send]:
        return [Send(json.dumps(_error(self.script, self.script.fault_status)), event="error")]

    def malformed(self) -> Send:
        delta = {"type": "text_delta", "text": "truncated"}
        payload = {"type": "content_block_delta", "index": 0, "delta": delta}
        return Send(cut(json.dumps(payload)), event="content_block_delta")


def anthropic_plan(script: Script, reply: Reply) -> list[Step]:
    """Every step of the streamed Messages answer."""
    return timeline(script, _AnthropicFrames(script, reply, output(script)))


def anthropic_answer(script: Script, reply: Reply) -> dict[str, Any]:
    """The non-streamed ``message``."""
    said = output(script)
    content: list[dict[str, Any]] = []
    if said.reasoning:
        thinking = said.reasoning_text
        content.append(
            {"type": "thinking", "thinking": thinking, "signature": _signature(thinking)}
        )
    if script.tool_call:
        content.append(
            {
                "type": "tool_use",
                "id": _tool_id(reply),
                "name": TOOL_NAME,
                "input": json.loads(said.arguments),
            }
        )
    elif said.content:
        content.append({"type": "text", "text": said.text})
    return _message(script, reply, content, stop_reason(script))


def _scripted_error(script: Script, status: int) -> ScriptedError:
    return ScriptedError(status, _error(script, status), retry_headers(script))


def _rejection(message: str, code: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _reply(script: Script, asked: Asked, model: str, serial: int, created: int) -> Reply:
    return Reply(
        id=f"msg_sim{serial:06d}",
        created=created,
        model=script.model_name or model,
        prompt_tokens=prompt_tokens(asked.body.get("messages"), asked.body.get("system")),
    )


def _check(body: Body) -> None:
    if not isinstance(body.get("messages"), list):
        raise BadRequest("messages: Input should be a valid list", code="invalid_messages")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise BadRequest("max_tokens: a positive integer is required", code="invalid_max_tokens")


ANTHROPIC_MESSAGES = Wire(
    name="anthropic",
    model=lambda asked: body_model(asked.body),
    check=_check,
    streamed=lambda asked: asked.body.get("stream") is True,
    reply=_reply,
    plan=anthropic_plan,
    answer=anthropic_answer,
    error=_scripted_error,
    rejection=_rejection,
    framing=lambda _: Framing(SSE, PING.encoded()),
)
"""Anthropic's Messages API (``POST /v1/messages``)."""
