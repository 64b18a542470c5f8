"""Translate HTTP failures into the error hierarchy: the parts every wire format shares (the
``Retry-After`` headers, what an HTTP status alone calls for, transport failures) and the
classifier of OpenAI-compatible error bodies. The Anthropic and Gemini classifiers live with their
wire formats (:mod:`otel_llm._act._wire`) and build their errors with :func:`make_error`."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx2

from otel_llm import _errors as e
from otel_llm._act import _json
from otel_llm._defaults import DEFAULTS
from otel_llm._redact import redact
from otel_llm._visible import visible

CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})
"""Provider error codes of a prompt that does not fit the model (whatever the status)."""
FILTER_CODES = frozenset({"content_filter", "content_policy_violation", "content_filtered"})
"""Provider error codes of a refusal on content grounds (whatever the status)."""
RATE_LIMIT_CODES = frozenset({"rate_limit_exceeded", "rate_limit_error"})
"""Provider error codes (or types) of a rate limit: an error event of a 200 stream that names
one is a 429 (OpenAI-compatible servers send it when a limit cuts a stream)."""
STATUSLESS_TYPES: dict[str, type[e.ProviderError]] = {
    "invalid_request_error": e.BadRequest,
    "authentication_error": e.AuthenticationError,
    "permission_error": e.AuthenticationError,
    "not_found_error": e.NotFound,
}
"""OpenAI-style error types that say what an error sent inside a stream (no HTTP status) is;
any other is a transient ``ServerError``."""


def parse_retry_after(headers: Mapping[str, str], now_epoch_s: float) -> float | None:
    """Seconds to wait from ``Retry-After`` / ``retry-after-ms`` headers, or ``None``.

    ``retry-after-ms`` (milliseconds, OpenAI) wins over ``Retry-After``, which is either a number
    of seconds or an HTTP date. Negative, non-finite or absurd values are ignored; a date in the
    past means 0.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000
        except ValueError:
            value = math.nan
        if math.isfinite(value) and 0 <= value <= DEFAULTS.max_retry_after_s:
            return value
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
    except ValueError:
        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        return min(max(0.0, when.timestamp() - now_epoch_s), DEFAULTS.max_retry_after_s)
    if math.isfinite(value) and 0 <= value <= DEFAULTS.max_retry_after_s:
        return value
    return None


def _error_fields(body: str) -> tuple[str | None, str | None, str | None]:
    """(message, code, type) from an OpenAI-style error body, when it is one."""
    try:
        payload: Any = _json.loads(body)
    except ValueError:
        return None, None, None
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, str):
        return error, None, None
    if not isinstance(error, dict):
        return None, None, None
    message = error.get("message")
    code = error.get("code")
    kind = error.get("type")
    return (
        message if isinstance(message, str) else None,
        str(code) if code is not None else None,
        kind if isinstance(kind, str) else None,
    )


_VERSION_SEGMENT = re.compile(r"/v\d+[a-z0-9]*(?:/|$)")
"""A path segment naming an API version: ``/v1``, ``/v1beta``, ``/v2``."""


_AZURE_DEPLOYMENT = re.compile(r"/openai/deployments/([^/?#]+)/")
"""The deployment an Azure OpenAI route names."""


def not_found_hint(base_url: str, requested_url: str) -> str:
    """What a 404 adds to its message: the URL requested (already redacted) and, when the
    source's base URL names no API version, the base URL to try instead — or, below an Azure
    OpenAI deployment route (whose resource endpoint names no version by design), the
    deployment to check."""
    hint = f" (requested {requested_url}"
    deployment = _AZURE_DEPLOYMENT.search(urlsplit(requested_url).path)
    if deployment is not None:
        name = unquote(deployment.group(1))
        return hint + f"; check that the resource has the deployment {name!r})"
    url = httpx2.URL(base_url)
    if not _VERSION_SEGMENT.search(url.path + "/") and "?" not in base_url:  # (Azure: ?api-version)
        suggested = str(url.copy_with(path=url.path.rstrip("/") + "/v1", query=None))
        hint += f"; the base URL ends in its API version: try {suggested!r}"
    return hint + ")"


def provider_words(text: str, secrets: Iterable[str]) -> str:
    """What a provider wrote (an error's message or code, a refusal's explanation) as a message
    of the library shows it: the source's secrets redacted, at most 500 characters, on one line
    — every control or format character and line break written as an escape, so that a
    provider's text can neither forge a log line nor restyle or reorder a terminal's."""
    return visible(redact(text.strip(), secrets)[:500])


@dataclass(frozen=True, slots=True)
class ErrorContext:
    """What a classifier needs besides the error body: the source's name and secrets (redacted
    from every message), the answer's headers (``Retry-After``), the time and, for a 404, what
    the message adds (:func:`not_found_hint`)."""

    source: str
    secrets: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    now_epoch_s: float = 0.0
    not_found_hint: str = ""


def status_class(status: int | None) -> type[e.ProviderError]:
    """The error an HTTP status alone calls for (``None``, an error inside a successful answer
    that names no status: a transient ``ServerError``)."""
    if status is None:
        return e.ServerError
    if status == 429:
        return e.RateLimited
    if status == 408 or status >= 500:
        return e.ServerError
    if status in (401, 403):
        return e.AuthenticationError
    if status == 404:
        return e.NotFound
    if status in (400, 422):
        return e.BadRequest
    if 400 <= status < 500:
        return e.PermanentError
    return e.ServerError


def make_error(
    kind: type[e.ProviderError],
    status: int | None,
    message: str,
    *,
    code: str | None,
    context: ErrorContext,
    retry_after_s: float | None = None,
) -> e.ProviderError:
    """``kind`` with the message every classifier writes — ``answered <status>: <the
    provider's own message>`` — a 404's hint added, a 429's wait kept. Everything the provider
    supplied (its message and its code) is shown by :func:`provider_words`: a provider may echo
    the key in any field of its error, or write what a terminal would act on."""
    said = provider_words(message, context.secrets)
    if status is None:
        text = f"answered an error: {said}" if said else "answered an error without a message"
    else:
        text = f"answered {status}: {said or f'HTTP {status}'}"
    code = None if code is None else provider_words(code, context.secrets)
    if kind is e.RateLimited:
        return e.RateLimited(
            text, status_code=status, code=code, source=context.source, retry_after_s=retry_after_s
        )
    if kind is e.NotFound:
        text += context.not_found_hint
    return kind(text, status_code=status, code=code, source=context.source)


def provider_error(status: int | None, body: str, context: ErrorContext) -> e.ProviderError:
    """The most specific :class:`ProviderError` for an OpenAI-style error answer.

    ``status`` is the HTTP status, or ``None`` for an error sent inside a successful answer (a
    stream's error event, a 200 body holding an error), where the provider's code alone decides:
    a ``content_filter`` or ``context_length_exceeded`` code is that permanent error whatever
    the transport said, a ``rate_limit_exceeded`` one a 429, anything else unknown is a
    transient ``ServerError``. The provider's own
    message and code are kept (unmasked except for secrets, see :func:`make_error`).
    """
    message, code, kind = _error_fields(body)
    lowered = " ".join(filter(None, (code, kind, message))).lower()
    explicit = code in CONTEXT_CODES or code in FILTER_CODES or kind in FILTER_CODES
    cls: type[e.ProviderError]
    if status == 429:
        cls = e.RateLimited
    elif status is not None and (status == 408 or status >= 500) and not explicit:
        cls = e.ServerError
    elif code in CONTEXT_CODES or "context length" in lowered or "context_length" in lowered:
        cls = e.ContextLengthExceeded
    elif code in FILTER_CODES or kind in FILTER_CODES:
        cls = e.ContentFiltered
    elif status is None and (code in RATE_LIMIT_CODES or kind in RATE_LIMIT_CODES):
        cls = e.RateLimited
    elif status is None and kind in STATUSLESS_TYPES:  # an error event of a stream
        cls = STATUSLESS_TYPES[kind]
    else:
        cls = status_class(status)
    retry = None
    if status == 429:
        retry = parse_retry_after(context.headers, context.now_epoch_s or time.time())
    return make_error(
        cls, status, message or body, code=code or kind, context=context, retry_after_s=retry
    )


TRANSPORT_FAILURES: tuple[type[Exception], ...] = (httpx2.HTTPError, OSError)
"""What a failed connection raises: ``httpx2``'s errors, and the operating system's (a reset,
a TLS failure, a name that does not resolve, a socket timeout), which a transport other than
``httpx2``'s own — one passed in with ``http_client=`` — lets through unwrapped."""


def transport_error(
    exc: Exception, *, source: str, chunks: int, secrets: Iterable[str] = ()
) -> e.TransientError:
    """A transient error for a failure of the connection itself (one of
    :data:`TRANSPORT_FAILURES`).

    The message keeps the lower-layer error's type and (redacted) text; the error is meant to be
    raised unchained, since ``exc`` holds the request with its URL and headers.
    """
    where = f"after {chunks} chunks" if chunks else "before the first chunk"
    name = type(exc).__name__
    detail = redact(str(exc), secrets)
    what = f"{name}: {detail}" if detail else name
    if isinstance(exc, httpx2.SSEError):
        return e.MalformedStream(f"sent an unreadable event stream {where} ({what})", source=source)
    if isinstance(exc, httpx2.TimeoutException | TimeoutError):
        return e.ProviderTimeout(f"timed out {where} ({what})", source=source)
    return e.ProviderConnectionError(f"connection failed {where} ({what})", source=source)
