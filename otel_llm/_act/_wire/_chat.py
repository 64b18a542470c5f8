"""OpenAI-compatible chat completions (``POST {base}/chat/completions``), Azure OpenAI's
deployments included: the caller's request goes as it is, with the source's model, the stream
flag and usage asked for.

A refusal (``delta.refusal``, ``message.refusal``) or a ``content_filter`` finish is the
:class:`~otel_llm.ContentFiltered` error, as a refusal or a safety stop is on the other APIs.

This is the client's hot path. :meth:`ChatStreamReader.read` is the whole per-event work: the
event type, ``[DONE]``, one JSON parse, and the chunk assembler (which checks the chunk's shape
and applies the chunk rule in the same pass).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from otel_llm import _errors as e
from otel_llm._act import _json
from otel_llm._act._completion import Completion, StreamAssembler, completion_from_json
from otel_llm._act._http_errors import ErrorContext, provider_error
from otel_llm._act._wire._format import (
    EXTRA_BODY,
    WireRequest,
    error_payload,
    json_problem,
    request_headers,
    where,
    with_extra,
    without_secrets,
)
from otel_llm._redact import redact

if TYPE_CHECKING:
    from otel_llm._act._source import Source
    from otel_llm._measure._chunks import ChunkClock


def chat_body(source: Source, payload: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """The JSON body of a chat request: the caller's fields, the source's model (an Azure
    ``…/v1`` route's deployment: :attr:`~otel_llm._act._source.Source.request_model`), the
    stream flag, and the source's ``max_tokens`` when the call sets no output limit (``None``
    sets none)."""
    body = dict(payload)
    body.pop(EXTRA_BODY, None)
    body["model"] = source.request_model
    body["stream"] = stream
    if stream:
        options = dict(body.get("stream_options") or {})
        options.setdefault("include_usage", True)
        body["stream_options"] = options
    else:
        body.pop("stream_options", None)
    if (
        source.max_tokens is not None
        and body.get("max_tokens") is None  # a limit set to None is not set
        and body.get("max_completion_tokens") is None
    ):
        body.pop("max_completion_tokens", None)
        body["max_tokens"] = source.max_tokens
    return with_extra(body, payload)


def stream_error(
    payload: Mapping[str, Any], *, source: str, secrets: tuple[str, ...]
) -> e.ProviderError:
    """An error object sent inside an otherwise successful answer (its own ``status_code``,
    when it carries one, is taken as the status)."""
    body = json.dumps({"error": payload.get("error")})
    status = payload.get("status_code")
    error = payload.get("error")
    if isinstance(error, dict) and isinstance(error.get("status_code"), int):
        status = error["status_code"]
    known = status if isinstance(status, int) and not isinstance(status, bool) else None
    return provider_error(known, body, ErrorContext(source=source, secrets=secrets))


def error_event(data: str, *, source: str, secrets: tuple[str, ...]) -> e.ProviderError:
    """The provider's error, from an ``event: error`` of a stream."""
    payload = error_payload(data)
    if not isinstance(payload, dict):
        payload = {"error": {"message": data[:500]}}
    elif "error" not in payload:
        payload = {"error": payload}
    return stream_error(payload, source=source, secrets=secrets)


class ChatStreamReader(StreamAssembler):
    """Reads a stream of ``chat.completion.chunk`` events (see :class:`StreamAssembler`)."""

    __slots__ = ("_clock", "_name", "_secrets", "ended")

    def __init__(self, source: Source, clock: ChunkClock | None) -> None:
        super().__init__()
        self._name = source.name
        self._secrets = source.secrets()
        self._clock = clock
        self.ended = False

    def read(self, event: str, data: str) -> bool:
        """Take one event; True when it is an incremental chunk."""
        if event != "message":
            if event == "error":
                raise error_event(data, source=self._name, secrets=self._secrets)
            return False  # another event type is not a chunk, whatever it carries
        if not data:
            return False
        if data == "[DONE]":
            self.ended = True
            return False
        try:
            chunk = _json.loads(data)
        except ValueError as exc:
            failure: e.ProviderError = e.MalformedStream(
                f"sent an event that is not JSON ({len(data)} bytes, {where(self._clock)}; "
                f"{json_problem(exc)})",
                source=self._name,
            )
        else:
            if not isinstance(chunk, dict):
                failure = e.MalformedStream(
                    f"sent a chunk that is not an object ({where(self._clock)})",
                    source=self._name,
                )
            elif "error" in chunk and not chunk.get("choices"):
                failure = stream_error(chunk, source=self._name, secrets=self._secrets)
            else:
                return self.feed(chunk)
        raise failure  # outside the except: the JSON error holds the document

    def result(self) -> Completion:
        """The assembled answer; a refusal streamed in its place, or a stop on content
        grounds, is the content-filter error (as on every API)."""
        refused = self.refusal
        if refused is not None:
            raise refusal_error(refused, self._name, self._secrets)
        if self.finish_reason == CONTENT_FILTER:
            raise filtered_error(self._name)
        return without_secrets(super().result(), self._secrets)

    def truncation(self) -> str:
        """Why the stream is not a whole answer."""
        return "stream ended without a finish reason" + (
            "" if self.finish_reason is None else " for every choice"
        )


CONTENT_FILTER = "content_filter"
"""The finish reason of an answer stopped on content grounds."""


def filtered_error(source: str) -> e.ContentFiltered:
    """The error of an answer whose finish reason is ``content_filter`` (what came before it
    is not the answer asked for)."""
    return e.ContentFiltered(
        f"answered with finish reason {CONTENT_FILTER}", code=CONTENT_FILTER, source=source
    )


def refusal_error(text: str, source: str, secrets: tuple[str, ...]) -> e.ContentFiltered:
    """The error of an answer the model refused (``refusal`` instead of content): its words,
    the model's output, in ``refusal`` (secrets redacted), never in the message."""
    return e.ContentFiltered(
        f"answered with a refusal of {len(text):,} characters instead of content (its words: "
        "the error's refusal)",
        refusal=redact(text, secrets),
        code="refusal",
        source=source,
    )


class ChatWire:
    """OpenAI-compatible chat completions."""

    api = "chat"
    embeddings = True

    def check(self, source: Source, payload: Mapping[str, Any]) -> None:
        """Nothing to refuse: the request goes as the caller wrote it."""

    def request(self, source: Source, payload: Mapping[str, Any], *, stream: bool) -> WireRequest:
        """``POST {base}/chat/completions`` (Azure: below the deployment, ``api-version``
        kept) with the caller's body."""
        return WireRequest(
            source.chat_url, request_headers(source), chat_body(source, payload, stream=stream)
        )

    def reader(self, source: Source, clock: ChunkClock | None) -> ChatStreamReader:
        """A reader of ``chat.completion.chunk`` events."""
        return ChatStreamReader(source, clock)

    def answer(self, source: Source, document: dict[str, Any]) -> Completion:
        """A ``chat.completion`` object (an ``error`` object in its place is the provider's
        error)."""
        if "error" in document and "choices" not in document:
            raise stream_error(document, source=source.name, secrets=source.secrets())
        completion = completion_from_json(document)
        choices = document["choices"]  # a non-empty list: completion_from_json checked it
        message = choices[0].get("message")
        refused = message.get("refusal") if isinstance(message, dict) else None
        if isinstance(refused, str) and refused:
            raise refusal_error(refused, source.name, source.secrets())
        if completion.finish_reason == CONTENT_FILTER:
            raise filtered_error(source.name)
        return without_secrets(completion, source.secrets())

    def error(self, status: int | None, body: str, context: ErrorContext) -> e.ProviderError:
        """An OpenAI-style error body (``{"error": {"message", "type", "code"}}``)."""
        return provider_error(status, body, context)


CHAT = ChatWire()
