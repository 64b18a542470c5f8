"""The Anthropic Messages API, spoken natively: ``POST {base}/messages`` with the key in
``x-api-key`` and the ``anthropic-version`` header.

The stream is named events: ``message_start`` (id, model, input usage), ``content_block_start``
/ ``content_block_delta`` / ``content_block_stop`` per content block, ``message_delta`` (the
stop reason and the output usage), ``message_stop``; ``ping`` keeps the connection open and
``error`` is the provider's error. The chunk rule: a ``content_block_delta`` carrying text
(``text_delta``), reasoning (``thinking_delta``) or tool-call arguments (``input_json_delta``);
never a ``signature_delta``, a ``ping``, an empty block start or a block's stop (a ``tool_use``
block's start names the tool; its input follows in chunks), or metadata — the rule the wrapper of
the anthropic SDK and the simulated provider use too. The API starts text and thinking blocks
empty; a block start that carries text or thinking all the same (a gateway's) is output: in the
answer, and a chunk. An answer is complete once its stop reason came; ``message_stop`` ends the
stream.

Stop reasons become chat completions' finish reasons (:data:`FINISH_REASONS`); a ``refusal`` is
the :class:`~otel_llm.ContentFiltered` error, its category and explanation kept.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from otel_llm import _errors as e
from otel_llm._act._completion import Completion, ShapeError, ToolCall, ToolCallParts, expect
from otel_llm._act._http_errors import (
    CONTEXT_CODES,
    FILTER_CODES,
    ErrorContext,
    make_error,
    parse_retry_after,
    provider_words,
    status_class,
)
from otel_llm._act._wire._format import (
    WireRequest,
    context_of,
    error_payload,
    event_object,
    request_headers,
    with_extra,
    without_secrets,
)
from otel_llm._act._wire._translate import Translated, Translation
from otel_llm._defaults import DEFAULTS
from otel_llm._measure._response import Usage, text_or_none

if TYPE_CHECKING:
    from otel_llm._act._source import Source
    from otel_llm._measure._chunks import ChunkClock

FINISH_REASONS: Final[dict[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
}
"""Anthropic stop reasons → chat completions' finish reasons. ``refusal`` is an error; any other
(``pause_turn`` …) is kept as Anthropic wrote it."""

REFUSAL: Final = "refusal"

ERROR_TYPES: Final[dict[str, type[e.ProviderError]]] = {
    "invalid_request_error": e.BadRequest,
    "request_too_large": e.BadRequest,
    "authentication_error": e.AuthenticationError,
    "permission_error": e.AuthenticationError,
    "billing_error": e.PermanentError,
    "not_found_error": e.NotFound,
    "rate_limit_error": e.RateLimited,
    "api_error": e.ServerError,
    "timeout_error": e.ServerError,
    "overloaded_error": e.ServerError,
}
"""Anthropic error types → the hierarchy (``overloaded_error``, HTTP 529, is transient)."""

_CONTEXT_WORDS: Final = ("prompt is too long", "context window", "context length")


def _finish(reason: str) -> str:
    return FINISH_REASONS.get(reason, reason)


def _usage(usage: Any, earlier: Usage | None) -> Usage | None:
    """Anthropic usage (input counts include cache reads and writes; thinking tokens, where
    reported, are the reasoning tokens). Wrong types are ignored: usage is telemetry."""
    if not isinstance(usage, Mapping):
        return earlier
    read = Usage.from_anthropic(usage, earlier=earlier)
    details = usage.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, Mapping) else None
    if isinstance(thinking, int) and not isinstance(thinking, bool):
        read = dataclasses.replace(read, reasoning_tokens=thinking)
    return read


def refusal(details: Any, context: ErrorContext) -> e.ContentFiltered:
    """The error of a ``refusal`` stop: its category and explanation, when Anthropic gave
    them (secrets redacted)."""
    said = ""
    if isinstance(details, Mapping):
        category = text_or_none(details.get("category"))
        explanation = text_or_none(details.get("explanation"))
        parts = [text for text in (category, explanation) if text]
        said = f": {provider_words('; '.join(parts), context.secrets)}" if parts else ""
    return e.ContentFiltered(
        f"answered with stop reason refusal{said}", code=REFUSAL, source=context.source
    )


def anthropic_error(status: int | None, body: Any, context: ErrorContext) -> e.ProviderError:
    """The error of an Anthropic error body ``{"type": "error", "error": {"type",
    "message", "details": {"error_code"}}}`` (or its text when it is not one): 429 is rate
    limited (``retry-after`` honoured); an ``error_code`` of a content refusal or a
    context-length error is that error whatever the status; other 5xx and 529 are transient;
    then the error's type decides."""
    error = body.get("error", body) if isinstance(body, Mapping) else body
    message = kind = code = None
    if isinstance(error, Mapping):
        message = text_or_none(error.get("message"))
        kind = text_or_none(error.get("type"))
        details = error.get("details")
        if isinstance(details, Mapping):
            code = text_or_none(details.get("error_code"))
    elif isinstance(error, str):
        message = error
    if message is None:
        message = json.dumps(body)[:500] if isinstance(body, Mapping) else ""
    lowered = message.lower()
    retry = parse_retry_after(context.headers, context.now_epoch_s or time.time())
    if status == 429 or kind == "rate_limit_error":
        cls: type[e.ProviderError] = e.RateLimited
    elif code in FILTER_CODES:
        cls = e.ContentFiltered
    elif code in CONTEXT_CODES:
        cls = e.ContextLengthExceeded
    elif status is not None and (status == 408 or status >= 500):
        cls = e.ServerError
    elif kind == "invalid_request_error" and any(word in lowered for word in _CONTEXT_WORDS):
        cls = e.ContextLengthExceeded
    elif kind in ERROR_TYPES:
        cls = ERROR_TYPES[kind]
    else:
        cls = status_class(status)
    return make_error(cls, status, message, code=code or kind, context=context, retry_after_s=retry)


class AnthropicStreamReader:
    """Reads the events of one streamed Messages API answer."""

    __slots__ = (
        "_blocks",
        "_clock",
        "_id",
        "_model",
        "_name",
        "_reasoning",
        "_secrets",
        "_text",
        "_tools",
        "ended",
        "finish_reason",
        "usage",
    )

    def __init__(self, source: Source, clock: ChunkClock | None) -> None:
        self._name = source.name
        self._secrets = source.secrets()
        self._clock = clock
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._tools: dict[int, ToolCallParts] = {}
        self._blocks: dict[int, str] = {}
        self._id: str | None = None
        self._model: str | None = None
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.ended = False

    @property
    def complete(self) -> bool:
        """True once the stop reason came."""
        return self.finish_reason is not None

    def _context(self) -> ErrorContext:
        return ErrorContext(source=self._name, secrets=self._secrets)

    def read(self, event: str, data: str) -> bool:
        """Take one event; True when it is an incremental chunk."""
        if event == "ping":
            return False
        if event == "error":
            raise anthropic_error(None, error_payload(data) or data, self._context())
        if not data:
            return False
        document = event_object(data, self._name, self._clock)
        kind = expect(document.get("type"), str, "type", "a string")
        if kind == "content_block_delta":
            return self._delta(document)
        if kind == "content_block_start":
            return self._start(document)
        if kind == "message_delta":
            self._message_delta(document)
        elif kind == "message_start":
            self._message_start(document)
        elif kind == "message_stop":
            self.ended = True
        elif kind == "error":
            raise anthropic_error(None, document, self._context())
        return False  # content_block_stop, ping, and event types added later

    def _delta(self, document: Mapping[str, Any]) -> bool:
        index = _index(document, "content_block_delta")
        delta = expect(document.get("delta"), dict, "content_block_delta.delta", "an object")
        if not delta:
            return False
        kind = expect(delta.get("type"), str, "content_block_delta.delta.type", "a string")
        if kind == "text_delta":
            text = expect(delta.get("text"), str, "content_block_delta.delta.text", "a string")
            if text:
                self._text.append(text)
            return bool(text)
        if kind == "thinking_delta":
            thinking = expect(
                delta.get("thinking"), str, "content_block_delta.delta.thinking", "a string"
            )
            if thinking:
                self._reasoning.append(thinking)
            return bool(thinking)
        if kind == "input_json_delta":
            partial = expect(
                delta.get("partial_json"), str, "content_block_delta.delta.partial_json", "a string"
            )
            tool = self._tools.get(index)
            if partial and tool is not None:
                tool.arguments.append(partial)
            return bool(partial)
        return False  # signature_delta, citations_delta: no output of their own

    def _start(self, document: Mapping[str, Any]) -> bool:
        index = _index(document, "content_block_start")
        where = "content_block_start.content_block"
        block = expect(document.get("content_block"), dict, where, "an object")
        if not block:
            return False
        kind = expect(block.get("type"), str, f"{where}.type", "a string")
        self._blocks[index] = kind or ""
        if kind == "text":
            text = expect(block.get("text"), str, f"{where}.text", "a string")
            if text:  # the API starts a block empty; text here is output all the same
                self._text.append(text)
            return bool(text)
        if kind == "thinking":
            thinking = expect(block.get("thinking"), str, f"{where}.thinking", "a string")
            if thinking:
                self._reasoning.append(thinking)
            return bool(thinking)
        if kind == "tool_use":
            parts = ToolCallParts(
                id=expect(block.get("id"), str, f"{where}.id", "a string"),
                name=expect(block.get("name"), str, f"{where}.name", "a string"),
            )
            given = expect(block.get("input"), dict, f"{where}.input", "an object")
            if given:
                parts.arguments.append(json.dumps(given))
            self._tools[index] = parts
        return False

    def _message_start(self, document: Mapping[str, Any]) -> None:
        message = document.get("message")
        if not isinstance(message, Mapping):
            return  # id, model and usage are telemetry: a wrong type is ignored
        self._id = self._id or text_or_none(message.get("id"))
        self._model = self._model or text_or_none(message.get("model"))
        self.usage = _usage(message.get("usage"), self.usage)

    def _message_delta(self, document: Mapping[str, Any]) -> None:
        delta = expect(document.get("delta"), dict, "message_delta.delta", "an object") or {}
        reason = expect(
            delta.get("stop_reason"), str, "message_delta.delta.stop_reason", "a string"
        )
        self.usage = _usage(document.get("usage"), self.usage)
        if reason == REFUSAL:
            raise refusal(delta.get("stop_details"), self._context())
        if reason:
            self.finish_reason = _finish(reason)

    def result(self) -> Completion:
        """The assembled answer."""
        answer = Completion(
            text="".join(self._text),
            reasoning="".join(self._reasoning) or None,
            tool_calls=tuple(
                ToolCall(parts.id, parts.name, "".join(parts.arguments) or "{}")
                for _, parts in sorted(self._tools.items())
            ),
            finish_reason=self.finish_reason,
            usage=self.usage,
            response_model=self._model,
            response_id=self._id,
        )
        return without_secrets(answer, self._secrets)

    def truncation(self) -> str:
        """Why the stream is not a whole answer."""
        marker = "" if not self.ended else " (message_stop came without it)"
        return f"stream ended without a stop reason{marker}"


def _index(document: Mapping[str, Any], event: str) -> int:
    index = expect(document.get("index", 0), int, f"{event}.index", "an integer")
    return 0 if index is None else index


def message_from_json(document: Mapping[str, Any], source: Source) -> Completion:
    """A :class:`Completion` from a non-streamed ``message``; ShapeError for the wrong shape,
    the provider's error for an error body, ContentFiltered for a refusal."""
    if document.get("type") == "error":
        raise anthropic_error(None, document, context_of(source))
    content = expect(document.get("content"), list, "content", "a list")
    if content is None:
        raise ShapeError("content", "a list", None)
    text: list[str] = []
    reasoning: list[str] = []
    tools: list[ToolCall] = []
    for position, block in enumerate(content):
        at = f"content[{position}]"
        if not isinstance(block, dict):
            raise ShapeError(at, "an object", block)
        kind = expect(block.get("type"), str, f"{at}.type", "a string")
        if kind == "text":
            text.append(expect(block.get("text"), str, f"{at}.text", "a string") or "")
        elif kind == "thinking":
            reasoning.append(expect(block.get("thinking"), str, f"{at}.thinking", "a string") or "")
        elif kind == "tool_use":
            given = expect(block.get("input"), dict, f"{at}.input", "an object")
            tools.append(
                ToolCall(
                    expect(block.get("id"), str, f"{at}.id", "a string"),
                    expect(block.get("name"), str, f"{at}.name", "a string"),
                    json.dumps(given if given is not None else {}),
                )
            )
    reason = expect(document.get("stop_reason"), str, "stop_reason", "a string")
    if reason == REFUSAL:
        raise refusal(document.get("stop_details"), context_of(source))
    answer = Completion(
        text="".join(text),
        reasoning="".join(reasoning) or None,
        tool_calls=tuple(tools),
        finish_reason=_finish(reason) if reason else None,
        usage=_usage(document.get("usage"), None),
        response_model=text_or_none(document.get("model")),
        response_id=text_or_none(document.get("id")),
    )
    return without_secrets(answer, source.secrets())


def messages_body(translated: Translated, source: Source, *, stream: bool) -> dict[str, Any]:
    """The Messages API body of a translated request."""
    generation = translated.generation
    body: dict[str, Any] = {
        "model": source.model,
        "max_tokens": generation.max_tokens or source.max_tokens or DEFAULTS.anthropic_max_tokens,
        "messages": [
            {
                "role": turn.role,
                "content": turn.texts[0]
                if len(turn.texts) == 1
                else [{"type": "text", "text": text} for text in turn.texts],
            }
            for turn in translated.turns
        ],
        "stream": stream,
    }
    system = translated.system
    if system:
        body["system"] = (
            system[0] if len(system) == 1 else [{"type": "text", "text": text} for text in system]
        )
    if generation.stop:
        body["stop_sequences"] = list(generation.stop)
    return body


class AnthropicWire:
    """The Anthropic Messages API."""

    api = "anthropic"
    embeddings = False

    def _translation(self, source: Source) -> Translation:
        return Translation(source, "anthropic")

    def check(self, source: Source, payload: Mapping[str, Any]) -> None:
        """Refuse what does not cross to the Messages API."""
        self._translation(source).read(payload)

    def request(self, source: Source, payload: Mapping[str, Any], *, stream: bool) -> WireRequest:
        """``POST {base}/messages``, the request translated."""
        headers = request_headers(source)
        headers["anthropic-version"] = source.api_version or DEFAULTS.anthropic_version
        translated = self._translation(source).read(payload)
        return WireRequest(
            source.endpoint("messages"),
            headers,
            with_extra(messages_body(translated, source, stream=stream), payload),
        )

    def reader(self, source: Source, clock: ChunkClock | None) -> AnthropicStreamReader:
        """A reader of Messages API events."""
        return AnthropicStreamReader(source, clock)

    def answer(self, source: Source, document: dict[str, Any]) -> Completion:
        """A non-streamed ``message``."""
        return message_from_json(document, source)

    def error(self, status: int | None, body: str, context: ErrorContext) -> e.ProviderError:
        """An Anthropic error body."""
        return anthropic_error(status, error_payload(body) or body, context)


ANTHROPIC = AnthropicWire()
