"""The Gemini API, spoken natively: ``POST {base}/models/{model}:streamGenerateContent?alt=sse``
(``:generateContent`` when not streamed), the key in the ``x-goog-api-key`` header, never in
the URL.

Each event is one ``GenerateContentResponse``. The chunk rule: a response whose candidates
carry new text, thought (reasoning) or function-call parts; a usage-only or empty response is
not a chunk. An answer is complete once every candidate it streamed has its ``finishReason``,
and the stream then ends with the body (the API sends no end marker).

Finish reasons become chat completions' (:data:`FINISH_REASONS`); one that stops on content
grounds (``SAFETY``, ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT`` … :data:`FILTERED`),
and a prompt blocked by ``promptFeedback.blockReason``, is the
:class:`~otel_llm.ContentFiltered` error with Gemini's reason.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from otel_llm import _errors as e
from otel_llm._act._completion import Completion, ShapeError, ToolCall, expect
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
from otel_llm._measure._chunks import stream_complete
from otel_llm._measure._response import Usage, text_or_none

if TYPE_CHECKING:
    from otel_llm._act._source import Source
    from otel_llm._measure._chunks import ChunkClock

FINISH_REASONS: Final[dict[str, str]] = {"STOP": "stop", "MAX_TOKENS": "length"}
"""Gemini finish reasons → chat completions' (``STOP`` with function calls: ``tool_calls``);
any other that is not :data:`FILTERED` is kept in lower case (``malformed_function_call`` …)."""

FILTERED: Final = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)
"""Finish reasons that stop on content grounds: the content-filter error."""

STATUSES: Final[dict[str, type[e.ProviderError]]] = {
    "INVALID_ARGUMENT": e.BadRequest,
    "OUT_OF_RANGE": e.BadRequest,
    "FAILED_PRECONDITION": e.PermanentError,
    "UNAUTHENTICATED": e.AuthenticationError,
    "PERMISSION_DENIED": e.AuthenticationError,
    "NOT_FOUND": e.NotFound,
    "RESOURCE_EXHAUSTED": e.RateLimited,
    "UNAVAILABLE": e.ServerError,
    "INTERNAL": e.ServerError,
    "DEADLINE_EXCEEDED": e.ServerError,
    "UNKNOWN": e.ServerError,
    "ABORTED": e.ServerError,
}
"""Google API statuses → the hierarchy (``RESOURCE_EXHAUSTED`` is a 429)."""

_KEY_REASONS: Final = frozenset({"API_KEY_INVALID", "API_KEY_EXPIRED"})
"""``ErrorInfo`` reasons of a 400 that is really a bad key."""
_CONTEXT_WORDS: Final = ("exceeds the maximum number of tokens", "input token count")
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _finish(reason: str) -> str:
    return FINISH_REASONS.get(reason, reason.lower())


def _retry_delay(details: Any) -> float | None:
    """Seconds from a ``google.rpc.RetryInfo`` detail (``"retryDelay": "12s"``)."""
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith("RetryInfo"):
            match = _DELAY.match(str(detail.get("retryDelay", "")))
            if match:
                seconds = float(match.group(1))
                if math.isfinite(seconds) and seconds <= DEFAULTS.max_retry_after_s:
                    return seconds
    return None


def _reasons(details: Any) -> set[str]:
    return {
        detail["reason"]
        for detail in (details if isinstance(details, list) else ())
        if isinstance(detail, Mapping) and isinstance(detail.get("reason"), str)
    }


def gemini_error(status: int | None, body: Any, context: ErrorContext) -> e.ProviderError:
    """The error of a Google API error body ``{"error": {"code", "message", "status",
    "details"}}`` (a list of one, too): the HTTP status first (429 rate limited, honouring
    ``Retry-After`` or the ``RetryInfo`` delay); an ``ErrorInfo`` reason of a content refusal
    or a context-length error is that error whatever the status; other 5xx are transient; a
    400 whose reason is an invalid key is an authentication error; then the status name."""
    if isinstance(body, list) and len(body) == 1:
        body = body[0]
    error = body.get("error", body) if isinstance(body, Mapping) else body
    message = name = None
    details: Any = None
    if isinstance(error, Mapping):
        message = text_or_none(error.get("message"))
        name = text_or_none(error.get("status"))
        details = error.get("details")
        code = error.get("code")
        if status is None and isinstance(code, int) and not isinstance(code, bool):
            status = code if 400 <= code <= 599 else None
    elif isinstance(error, str):
        message = error
    if message is None:
        message = json.dumps(body)[:500] if isinstance(body, Mapping | list) else str(body or "")
    retry = parse_retry_after(context.headers, context.now_epoch_s or time.time())
    if retry is None:
        retry = _retry_delay(details)
    lowered = message.lower()
    reasons = _reasons(details)
    if status == 429 or name == "RESOURCE_EXHAUSTED":
        cls: type[e.ProviderError] = e.RateLimited
    elif reasons & FILTER_CODES:
        cls = e.ContentFiltered
    elif reasons & CONTEXT_CODES:
        cls = e.ContextLengthExceeded
    elif status is not None and (status == 408 or status >= 500):
        cls = e.ServerError
    elif reasons & _KEY_REASONS:
        cls = e.AuthenticationError
    elif name == "INVALID_ARGUMENT" and any(word in lowered for word in _CONTEXT_WORDS):
        cls = e.ContextLengthExceeded
    elif name in STATUSES:
        cls = STATUSES[name]
    else:
        cls = status_class(status)
    return make_error(cls, status, message, code=name, context=context, retry_after_s=retry)


def _blocked(feedback: Any, context: ErrorContext) -> e.ContentFiltered | None:
    """The error of a prompt Gemini blocked (``promptFeedback.blockReason``)."""
    if not isinstance(feedback, Mapping):
        return None
    reason = text_or_none(feedback.get("blockReason"))
    if reason is None:
        return None
    said = text_or_none(feedback.get("blockReasonMessage"))
    code = provider_words(reason, context.secrets)
    text = f"blocked the prompt: {code}" + (
        f" ({provider_words(said, context.secrets)})" if said else ""
    )
    return e.ContentFiltered(text, code=code, source=context.source)


def _filtered(
    reason: str, candidate: Mapping[str, Any], context: ErrorContext
) -> e.ContentFiltered:
    """The error of a candidate stopped on content grounds: the reason, Gemini's message and
    the blocked safety categories (secrets redacted)."""
    said = text_or_none(candidate.get("finishMessage"))
    ratings = candidate.get("safetyRatings")
    blocked = [
        rating["category"]
        for rating in (ratings if isinstance(ratings, list) else ())
        if isinstance(rating, Mapping)
        and rating.get("blocked") is True
        and isinstance(rating.get("category"), str)
    ]
    detail = provider_words("; ".join(filter(None, (said, ", ".join(blocked)))), context.secrets)
    code = provider_words(reason, context.secrets)
    text = f"answered with finish reason {code}" + (f": {detail}" if detail else "")
    return e.ContentFiltered(text, code=code, source=context.source)


class GeminiResponses:
    """Builds one answer from ``GenerateContentResponse`` objects: the streamed ones in turn,
    or the one complete answer. Candidate 0 is the answer; others are read and must finish too
    (:attr:`complete`)."""

    __slots__ = (
        "_context",
        "_finished",
        "_id",
        "_model",
        "_reasoning",
        "_seen",
        "_text",
        "_tools",
        "finish_reason",
        "usage",
    )

    def __init__(self, context: ErrorContext) -> None:
        self._context = context
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._tools: list[ToolCall] = []
        self._seen: set[int] = set()
        self._finished: set[int] = set()
        self._id: str | None = None
        self._model: str | None = None
        self.usage: Usage | None = None
        self.finish_reason: str | None = None

    @property
    def complete(self) -> bool:
        """Every candidate seen has its finish reason (and at least one came)."""
        return stream_complete(self._seen, self._finished)

    def take(self, response: Mapping[str, Any]) -> bool:
        """Take one response; True when its candidates carry new output."""
        if self._model is None:
            self._model = text_or_none(response.get("modelVersion"))
            self._id = text_or_none(response.get("responseId"))
        usage = response.get("usageMetadata")
        if isinstance(usage, Mapping):
            read = Usage.from_gemini(usage)
            self.usage = read if self.usage is None else self.usage.updated(read)
        blocked = _blocked(response.get("promptFeedback"), self._context)
        if blocked is not None:
            raise blocked
        candidates = expect(response.get("candidates"), list, "candidates", "a list")
        output = False
        for position, candidate in enumerate(candidates or ()):
            if not isinstance(candidate, dict):
                raise ShapeError(f"candidates[{position}]", "an object", candidate)
            if self._candidate(candidate, position):
                output = True
        return output

    def _candidate(self, candidate: Mapping[str, Any], position: int) -> bool:
        where = f"candidates[{position}]"
        index = expect(candidate.get("index", 0), int, f"{where}.index", "an integer")
        index = 0 if index is None else index
        self._seen.add(index)
        output = False
        content = expect(candidate.get("content"), dict, f"{where}.content", "an object")
        parts = expect(
            content.get("parts") if content else None, list, f"{where}.content.parts", "a list"
        )
        for number, part in enumerate(parts or ()):
            if self._part(part, index, f"{where}.content.parts[{number}]"):
                output = True
        reason = expect(candidate.get("finishReason"), str, f"{where}.finishReason", "a string")
        if reason:
            if reason in FILTERED:
                raise _filtered(reason, candidate, self._context)
            self._finished.add(index)
            if index == 0:
                self.finish_reason = _finish(reason)
        return output

    def _part(self, part: Any, index: int, at: str) -> bool:
        if not isinstance(part, dict):
            raise ShapeError(at, "an object", part)
        text = expect(part.get("text"), str, f"{at}.text", "a string")
        thought = part.get("thought")
        if thought is not None and not isinstance(thought, bool):
            raise ShapeError(f"{at}.thought", "a boolean", thought)
        call = expect(part.get("functionCall"), dict, f"{at}.functionCall", "an object")
        if call:
            name = expect(call.get("name"), str, f"{at}.functionCall.name", "a string")
            args = expect(call.get("args"), dict, f"{at}.functionCall.args", "an object")
            ident = expect(call.get("id"), str, f"{at}.functionCall.id", "a string")
            if index == 0:
                self._tools.append(ToolCall(ident, name, json.dumps(args or {})))
            return True
        if not text:
            return False
        if index == 0:
            (self._reasoning if thought else self._text).append(text)
        return True

    def result(self) -> Completion:
        """The answer so far."""
        reason = self.finish_reason
        if reason == "stop" and self._tools:
            reason = "tool_calls"
        answer = Completion(
            text="".join(self._text),
            reasoning="".join(self._reasoning) or None,
            tool_calls=tuple(self._tools),
            finish_reason=reason,
            usage=self.usage,
            response_model=self._model,
            response_id=self._id,
        )
        return without_secrets(answer, self._context.secrets)


class GeminiStreamReader(GeminiResponses):
    """Reads the events of one ``streamGenerateContent?alt=sse`` answer."""

    __slots__ = ("_clock", "ended")

    def __init__(self, source: Source, clock: ChunkClock | None) -> None:
        super().__init__(context_of(source))
        self._clock = clock
        self.ended = False

    def read(self, event: str, data: str) -> bool:
        """Take one event; True when it is an incremental chunk."""
        if event != "message":
            if event == "error":
                raise gemini_error(None, error_payload(data) or data, self._context)
            return False
        if not data:
            return False
        response = event_object(data, self._context.source, self._clock)
        if "error" in response and not response.get("candidates"):
            raise gemini_error(None, response, self._context)
        return self.take(response)

    def truncation(self) -> str:
        """Why the stream is not a whole answer."""
        return "stream ended without a finish reason" + (
            "" if self.finish_reason is None else " for every candidate"
        )


def response_from_json(document: Mapping[str, Any], source: Source) -> Completion:
    """A :class:`Completion` from a non-streamed ``GenerateContentResponse``."""
    if "error" in document and not document.get("candidates"):
        raise gemini_error(None, document, context_of(source))
    responses = GeminiResponses(context_of(source))
    responses.take(document)
    if not responses.complete:
        raise ShapeError("candidates", "candidates with their finishReason", got="none finished")
    return responses.result()


def contents_body(translated: Translated, source: Source) -> dict[str, Any]:
    """The ``generateContent`` body of a translated request."""
    body: dict[str, Any] = {
        "contents": [
            {
                "role": "model" if turn.role == "assistant" else "user",
                "parts": [{"text": text} for text in turn.texts],
            }
            for turn in translated.turns
        ]
    }
    if translated.system:
        body["systemInstruction"] = {
            "parts": [{"text": text} for text in translated.system],
            "role": "user",  # as the google-genai SDK sends it
        }
    generation = translated.generation
    config = {
        key: value
        for key, value in (
            ("maxOutputTokens", generation.max_tokens or source.max_tokens),
            ("temperature", generation.temperature),
            ("topP", generation.top_p),
            ("stopSequences", list(generation.stop) or None),
            ("seed", generation.seed),
            ("presencePenalty", generation.presence_penalty),
            ("frequencyPenalty", generation.frequency_penalty),
        )
        if value is not None
    }
    if config:
        body["generationConfig"] = config
    return body


def model_path(model: str) -> str:
    """The model's resource name: ``models/{model}`` (a name given with its collection,
    ``models/…`` or ``tunedModels/…``, as it is)."""
    if model.startswith(("models/", "tunedModels/")):
        collection, _, name = model.partition("/")
        return f"{collection}/{quote(name, safe='')}"
    return f"models/{quote(model, safe='')}"


class GeminiWire:
    """The Gemini API."""

    api = "gemini"
    embeddings = False

    def _translation(self, source: Source) -> Translation:
        return Translation(
            source,
            "gemini",
            extra=frozenset(
                {"temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"}
            ),
        )

    def check(self, source: Source, payload: Mapping[str, Any]) -> None:
        """Refuse what does not cross to the Gemini API."""
        self._translation(source).read(payload)

    def request(self, source: Source, payload: Mapping[str, Any], *, stream: bool) -> WireRequest:
        """``streamGenerateContent?alt=sse`` or ``generateContent``, the request translated."""
        method = "streamGenerateContent" if stream else "generateContent"
        url = source.endpoint(f"{model_path(source.model)}:{method}", "alt=sse" if stream else "")
        translated = self._translation(source).read(payload)
        body = with_extra(contents_body(translated, source), payload)
        return WireRequest(url, request_headers(source), body)

    def reader(self, source: Source, clock: ChunkClock | None) -> GeminiStreamReader:
        """A reader of streamed ``GenerateContentResponse`` events."""
        return GeminiStreamReader(source, clock)

    def answer(self, source: Source, document: dict[str, Any]) -> Completion:
        """A non-streamed ``GenerateContentResponse``."""
        return response_from_json(document, source)

    def error(self, status: int | None, body: str, context: ErrorContext) -> e.ProviderError:
        """A Google API error body."""
        return gemini_error(status, error_payload(body) or body, context)


GEMINI = GeminiWire()
