"""What a wire format is to the client: one small object per API that builds the request (URL,
headers, body — translating the caller's chat request where the API is not OpenAI's), reads the
streamed answer event by event, parses a complete answer, and classifies the API's error bodies.

The transport (:mod:`otel_llm._act._transport`) has one request flow and one event loop for
every format; a :class:`Wire` supplies everything that differs. A source picks its wire once,
when it is made (:attr:`~otel_llm.Source.wire`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

from otel_llm import _errors as e
from otel_llm._act import _json
from otel_llm._act._http_errors import ErrorContext
from otel_llm._redact import redact

if TYPE_CHECKING:
    from otel_llm._act._completion import Completion
    from otel_llm._act._source import Source
    from otel_llm._measure._chunks import ChunkClock


EXTRA_BODY: Final = "extra_body"
"""The request field holding fields sent as they are, in the body of whichever API answers
(``Client.chat(extra_body=…)``): provider options otel-llm does not translate."""


def with_extra(body: dict[str, Any], payload: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with the call's :data:`EXTRA_BODY` fields set on top, as given — except that an
    object the body holds already (Gemini's ``generationConfig``, chat completions'
    ``stream_options``) is merged with the extra one key by key, the extra keys winning: a
    thinking budget must not drop the output limit the call set."""
    extra = payload.get(EXTRA_BODY)
    return _merged(body, extra) if extra else body


def _merged(body: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(body)
    for key, value in extra.items():
        held = merged.get(key)
        if isinstance(held, Mapping) and isinstance(value, Mapping):
            value = _merged(held, value)
        merged[key] = value
    return merged


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One HTTP request of a wire format: where it goes, its headers and its JSON body."""

    url: str
    headers: dict[str, str]
    body: dict[str, Any]


class StreamReader(Protocol):
    """Reads one streamed answer, one server-sent event at a time, into a
    :class:`~otel_llm._act._completion.Completion`.

    :meth:`read` applies the API's chunk rule: it returns ``True`` for an incremental chunk
    (an event carrying generated output — text, reasoning, a tool call) and ``False`` for
    anything else (keepalives, metadata, usage, the end marker). It raises
    :class:`~otel_llm._act._completion.ShapeError` for a field of the wrong JSON type (the
    transport makes it a ``MalformedStream`` naming the field), and the library's error for an
    event that is not JSON, an error event, or a refusal.
    """

    finish_reason: str | None
    """The answer's finish reason (normalized to chat completions' words) once one arrived."""
    ended: bool
    """The API's end-of-stream marker arrived (``[DONE]``, ``message_stop``)."""

    @property
    def complete(self) -> bool:
        """Whether what arrived is a whole answer (its finish reasons all came)."""
        ...

    def read(self, event: str, data: str) -> bool:
        """Take one event (its type — ``message`` when unnamed — and its data)."""
        ...

    def result(self) -> Completion:
        """The answer assembled so far."""
        ...

    def truncation(self) -> str:
        """Why the stream is not a whole answer (the ``TruncatedStream`` message)."""
        ...


class Wire(Protocol):
    """One API the client speaks (see the module's docstring)."""

    api: str
    """``chat``, ``anthropic`` or ``gemini``."""
    embeddings: bool
    """Whether the API has the embeddings endpoint the client calls."""

    def check(self, source: Source, payload: Mapping[str, Any]) -> None:
        """Refuse, with a :class:`~otel_llm.ConfigurationError` naming the field, a chat
        request this API cannot take as it is or as translated (nothing is sent)."""
        ...

    def request(self, source: Source, payload: Mapping[str, Any], *, stream: bool) -> WireRequest:
        """The HTTP request of one chat attempt at ``source``."""
        ...

    def reader(self, source: Source, clock: ChunkClock | None) -> StreamReader:
        """A reader for one streamed answer (``clock`` only names how far it got)."""
        ...

    def answer(self, source: Source, document: dict[str, Any]) -> Completion:
        """A complete (non-streamed) answer; ShapeError for the wrong shape, the library's
        error for an error or a refusal inside it."""
        ...

    def error(self, status: int | None, body: str, context: ErrorContext) -> e.ProviderError:
        """The most specific error for an error answer (``status`` ``None``: sent inside a
        successful answer), the provider's own reason kept."""
        ...


def request_headers(source: Source) -> dict[str, str]:
    """The headers every request to ``source`` carries: JSON, and the key in the header its API
    reads it from (the only place the key is read); the base URL's user information, when it
    has some, as ``Authorization: Basic`` (an HTTP client would make the same of it)."""
    headers = {"Content-Type": "application/json"}
    basic = source.userinfo_header
    if basic is not None:
        headers["Authorization"] = basic
    if source.api_key is not None:
        key = source.api_key.get_secret_value()
        header = source.key_header
        headers[header] = f"Bearer {key}" if header == "Authorization" else key
    return headers


def where(clock: ChunkClock | None) -> str:
    """How far a stream got, for a message: ``after 3 chunks`` or ``in the stream``."""
    return f"after {clock.count} chunks" if clock is not None else "in the stream"


def json_problem(exc: ValueError) -> str:
    """Where JSON parsing failed, without the document (it may hold content)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at position {exc.pos}"
    return type(exc).__name__


def event_object(data: str, source: str, clock: ChunkClock | None) -> dict[str, Any]:
    """The JSON object an event carries; a ``MalformedStream`` (which never repeats the
    document) when it is not JSON or not an object."""
    try:
        document = _json.loads(data)
    except ValueError as exc:
        failure = e.MalformedStream(
            f"sent an event that is not JSON ({len(data)} bytes, {where(clock)}; "
            f"{json_problem(exc)})",
            source=source,
        )
    else:
        if isinstance(document, dict):
            return document
        failure = e.MalformedStream(
            f"sent a chunk that is not an object ({where(clock)})", source=source
        )
    raise failure  # outside the except: the JSON error holds the document


def error_payload(data: str) -> Any:
    """An error event's data as JSON when it is JSON (``None`` otherwise: its text is the
    message)."""
    try:
        return _json.loads(data)
    except ValueError:
        return None


def context_of(source: Source) -> ErrorContext:
    """The error context of an error sent inside a successful answer of ``source``."""
    return ErrorContext(source=source.name, secrets=source.secrets())


def without_secrets(completion: Completion, secrets: tuple[str, ...]) -> Completion:
    """``completion`` with the source's secrets redacted from the fields the spans record as the
    provider wrote them — its model, id and finish reason (kept in lower case by some wires):
    a gateway may echo what it was sent, the key included."""
    cases = {case for secret in secrets if len(secret) >= 4 for case in (secret, secret.lower())}
    known = tuple(sorted(cases, key=len, reverse=True))  # a secret inside another: the longer

    def scrubbed(value: str | None) -> str | None:
        if value is None or not any(secret in value for secret in known):
            return value
        return redact(value, known)

    model, ident, finish = (
        scrubbed(completion.response_model),
        scrubbed(completion.response_id),
        scrubbed(completion.finish_reason),
    )
    if (model, ident, finish) == (
        completion.response_model,
        completion.response_id,
        completion.finish_reason,
    ):
        return completion
    return dataclasses.replace(
        completion, response_model=model, response_id=ident, finish_reason=finish
    )
