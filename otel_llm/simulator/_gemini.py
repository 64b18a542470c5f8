"""Google's Gemini API (``POST /{version}/models/{model}:generateContent`` and
``:streamGenerateContent``) played from a script.

A streamed answer is a sequence of ``GenerateContentResponse`` objects: server-sent events with
``?alt=sse`` (what google-genai asks for), otherwise one JSON array written element by element.
The model comes from the URL path. The mapping:

- the opening (``role_chunk``): a usage-only response (``usageMetadata`` with the prompt's
  tokens, no candidates; without usage, an empty response) — not a chunk;
- each reasoning chunk: a response whose part is ``{"text": …, "thought": true}``;
- each content chunk (a refusal too: Gemini has no refusal channel): a ``{"text": …}`` part;
- a tool call: Gemini sends a function call whole, so the ``N`` chunks of a tool-call phase are
  one ``functionCall`` part sent at the time of the phase's last chunk (see
  :func:`gemini_chunks`);
- every chunk carries the usage so far (``usageMetadata``: ``promptTokenCount``,
  ``candidatesTokenCount``, ``thoughtsTokenCount`` when there was reasoning,
  ``totalTokenCount``), as the real API does; none without usage;
- the finish: a response whose candidate has an empty text part and the ``finishReason``
  (``stop`` and ``tool_calls`` → ``STOP``, ``length`` → ``MAX_TOKENS``, ``content_filter`` →
  ``SAFETY``; any other finish reason verbatim) with the final usage — not a chunk;
- keepalives: none. google-genai's stream reader takes every line that is not ``data: …`` for
  a piece of a raw JSON error and fails on an SSE comment (``UnknownApiResponseError``), and
  Google's servers send nothing during a silence; a silence with keepalives is a plain silence;
- the ``error`` fault: an ``{"error": {"code", "message", "status"}}`` response (google.rpc's
  shape), which google-genai raises as ``ClientError`` / ``ServerError`` by its code.

Error answers have google.rpc's body ``{"error": {"code", "message", "status", "details"}}``
(429 ``RESOURCE_EXHAUSTED`` with a ``RetryInfo`` when ``retry_after`` is a number of seconds,
503 ``UNAVAILABLE`` …).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from otel_llm.simulator._chat import retry_headers
from otel_llm.simulator._frames import (
    TOOL_NAME,
    Output,
    Reply,
    Send,
    Step,
    cut,
    output,
    output_tokens,
    prompt_tokens,
    reasoning_tokens,
    timeline,
)
from otel_llm.simulator._script import Script
from otel_llm.simulator._select import BadRequest
from otel_llm.simulator._wire import SSE, Asked, Body, Framing, ScriptedError, Wire

STREAM_ACTION = "streamGenerateContent"
ACTIONS = f"generateContent|{STREAM_ACTION}"
VERSIONS = "v1|v1beta|v1alpha"
ROUTE = f"/{{version:{VERSIONS}}}/models/{{model:[^/:]+}}:{{action:{ACTIONS}}}"
"""The route of both Gemini actions, in aiohttp's pattern syntax."""

FINISH_REASONS = {
    "stop": "STOP",
    "tool_calls": "STOP",
    "length": "MAX_TOKENS",
    "content_filter": "SAFETY",
}
"""Chat finish reasons in Gemini's words; any other finish reason is sent as written."""

STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
"""google.rpc's status of each HTTP status; other 4xx are ``FAILED_PRECONDITION``, other 5xx
``INTERNAL``."""

_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_ARRAY_SEPARATOR = ",\r\n"


def rpc_status(status: int) -> str:
    """google.rpc's status name of an HTTP status."""
    return STATUSES.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")


def gemini_chunks(script: Script) -> tuple[int, ...]:
    """The scripted chunks Gemini sends as chunk events.

    Gemini streams reasoning and text piece by piece, but sends a function call whole: the
    ``N`` chunks of a tool-call phase become one chunk, the ``functionCall``, at the time of the
    phase's last chunk (the call is complete only once all its arguments would have streamed).
    A tool-call script thus has ``reasoning_chunks + 1`` chunks on Gemini, and the gaps within
    the tool-call phase add up to one gap; the scripted timeline, silences and keepalive
    periods included, is the same as on every other format.
    """
    if not script.tool_call:
        return tuple(range(script.chunk_count))
    return (*range(script.reasoning_chunks), script.chunk_count - 1)


def finish_reason(script: Script) -> str:
    """The finish reason of a finished answer."""
    return FINISH_REASONS.get(script.final_reason, script.final_reason)


def _error(script: Script, status: int) -> dict[str, Any]:
    error: dict[str, Any] = {
        "code": status,
        "message": script.error_message,
        "status": script.error_type or rpc_status(status),
    }
    details: list[dict[str, Any]] = []
    if script.error_code is not None:
        details.append(
            {"@type": _ERROR_INFO, "reason": script.error_code, "domain": "googleapis.com"}
        )
    delay = _seconds(script.retry_after)
    if delay is not None:
        details.append({"@type": _RETRY_INFO, "retryDelay": _duration(delay)})
    if details:
        error["details"] = details
    return {"error": error}


def _seconds(value: str | None) -> float | None:
    """A ``Retry-After`` value as seconds, when it is a finite number."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _duration(seconds: float) -> str:
    """A protobuf ``Duration`` in JSON: decimal seconds, at most nine fractional digits, no
    exponent (``0.00001s``, not ``1e-05s``)."""
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


@dataclass(frozen=True, slots=True)
class _Usage:
    """Gemini's ``usageMetadata`` after some of the answer."""

    prompt: int
    candidates: int
    thoughts: int

    def metadata(self) -> dict[str, Any]:
        metadata = {"promptTokenCount": self.prompt}
        if self.candidates:
            metadata["candidatesTokenCount"] = self.candidates
        if self.thoughts:
            metadata["thoughtsTokenCount"] = self.thoughts
        metadata["totalTokenCount"] = self.prompt + self.candidates + self.thoughts
        return metadata


def _final_usage(script: Script, reply: Reply) -> _Usage:
    thoughts = reasoning_tokens(script)
    return _Usage(reply.prompt_tokens, output_tokens(script) - thoughts, thoughts)


@dataclass(slots=True)
class _GeminiFrames:
    """The ``GenerateContentResponse`` objects of one answer."""

    script: Script
    reply: Reply
    said: Output

    def _response(
        self, parts: list[dict[str, Any]] | None, usage: _Usage | None, finish: str | None = None
    ) -> Send:
        response: dict[str, Any] = {}
        if parts is not None:
            candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
            if finish is not None:
                candidate["finishReason"] = finish
            candidate["index"] = 0
            response["candidates"] = [candidate]
        if usage is not None and self.script.usage:
            response["usageMetadata"] = usage.metadata()
        response["modelVersion"] = self.reply.model
        response["responseId"] = self.reply.id
        return Send(json.dumps(response))

    def _usage_after(self, chunks: int) -> _Usage:
        per_chunk = self.script.words_per_chunk
        thoughts = min(chunks, len(self.said.reasoning)) * per_chunk
        return _Usage(self.reply.prompt_tokens, chunks * per_chunk - thoughts, thoughts)

    def opening(self) -> list[Send]:
        return [self._response(None, _Usage(self.reply.prompt_tokens, 0, 0))]

    def chunk(self, index: int) -> list[Send]:
        said = self.said
        phase = said.phase(index)
        part: dict[str, Any]
        if phase == "reasoning":
            part = {"text": said.reasoning[index], "thought": True}
        elif phase == "content":
            part = {"text": said.content[index - len(said.reasoning)]}
        elif index == self.script.chunk_count - 1:
            part = {"functionCall": {"name": TOOL_NAME, "args": json.loads(said.arguments)}}
        else:
            return []  # the function call goes out whole, at the phase's last chunk
        return [self._response([part], self._usage_after(index + 1))]

    def closing(self) -> list[Send]:
        usage = _final_usage(self.script, self.reply)
        return [self._response([{"text": ""}], usage, finish_reason(self.script))]

    def failure(self) -> list[Send]:
        return [Send(json.dumps(_error(self.script, self.script.fault_status)))]

    def malformed(self) -> Send:
        parts = [{"text": "truncated"}]
        response = {"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0}]}
        return Send(cut(json.dumps(response)))


def _as_json_array(script: Script, steps: list[Step]) -> list[Step]:
    """The same plan written as one JSON array: ``[`` before the first response, a comma
    between responses, ``]`` at the end of an answer that was not cut short."""
    written: list[Step] = []
    first = True
    for step in steps:
        if isinstance(step, Send):
            written.append(Send(("[" if first else _ARRAY_SEPARATOR) + step.data, raw=True))
            first = False
        else:
            written.append(step)
    if script.fault not in ("truncate", "reset"):
        written.append(Send("[]" if first else "]", raw=True))
    return written


def gemini_plan(script: Script, reply: Reply) -> list[Step]:
    """Every step of the streamed Gemini answer."""
    steps = timeline(script, _GeminiFrames(script, reply, output(script)))
    return _as_json_array(script, steps) if reply.json_array else steps


def gemini_answer(script: Script, reply: Reply) -> dict[str, Any]:
    """The non-streamed ``GenerateContentResponse``."""
    said = output(script)
    parts: list[dict[str, Any]] = []
    if said.reasoning:
        parts.append({"text": said.reasoning_text, "thought": True})
    if script.tool_call:
        parts.append({"functionCall": {"name": TOOL_NAME, "args": json.loads(said.arguments)}})
    elif said.content:
        parts.append({"text": said.text})
    usage = _final_usage(script, reply)
    answer: dict[str, Any] = {
        "candidates": [
            {
                "content": {"parts": parts, "role": "model"},
                "finishReason": finish_reason(script),
                "index": 0,
            }
        ]
    }
    if script.usage:
        answer["usageMetadata"] = usage.metadata()
    answer["modelVersion"] = reply.model
    answer["responseId"] = reply.id
    return answer


def _scripted_error(script: Script, status: int) -> ScriptedError:
    return ScriptedError(status, _error(script, status), retry_headers(script))


def _rejection(message: str, code: str) -> dict[str, Any]:
    return {"error": {"code": 400, "message": message, "status": rpc_status(400)}}


def _reply(script: Script, asked: Asked, model: str, serial: int, created: int) -> Reply:
    return Reply(
        id=f"sim{serial:06d}",
        created=created,
        model=script.model_name or model,
        prompt_tokens=prompt_tokens(
            asked.body.get("contents"), asked.body.get("systemInstruction")
        ),
        json_array=asked.query.get("alt") != "sse",
    )


def _check(body: Body) -> None:
    if not isinstance(body.get("contents"), list):
        raise BadRequest("'contents' must be a list of contents", code="invalid_contents")


def _framing(reply: Reply) -> Framing:
    return Framing("application/json" if reply.json_array else SSE, b"")


GEMINI = Wire(
    name="gemini",
    model=lambda asked: asked.path["model"],
    check=_check,
    streamed=lambda asked: asked.path["action"] == STREAM_ACTION,
    reply=_reply,
    plan=gemini_plan,
    answer=gemini_answer,
    error=_scripted_error,
    rejection=_rejection,
    framing=_framing,
    chunk_indices=gemini_chunks,
)
"""Google's Gemini API (``…/models/{model}:generateContent`` / ``:streamGenerateContent``)."""
