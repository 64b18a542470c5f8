"""The one error hierarchy of otel-llm.

::

    OtelLLMError
    ├── ConfigurationError            invalid settings; names the key (also a ValueError)
    ├── BackendUnavailable            admission or breaker backend unreachable (fails closed)
    ├── AllSourcesExhausted           a call gave up; carries the reason per source
    ├── InvalidRequest                the request cannot be sent as given (also a TypeError)
    ├── NotAStore                     a file to read spans from is not an otel-llm store
    │   └── UnsupportedSchema         a ClickHouse table lacks a column the views read
    ├── CollectorError                the OpenTelemetry Collector could not be built or run
    └── ProviderError                 one attempt against one source failed
        ├── TransientError            worth retrying or failing over
        │   ├── ProviderConnectionError   connect / read failure, connection reset
        │   ├── ProviderTimeout           transport timeout
        │   ├── ServerError               HTTP 5xx and 408
        │   ├── MalformedStream           a chunk that is not SSE / JSON, or of the wrong shape
        │   ├── TruncatedStream           stream ended without a finish reason or [DONE]
        │   └── WatchdogTimeout           no incremental chunk within the watchdog budget
        ├── RateLimited               HTTP 429; ``retry_after_s`` from Retry-After
        └── PermanentError            never retried on the same source
            ├── BadRequest                400 / 422
            ├── AuthenticationError       401 / 403
            ├── NotFound                  404
            ├── ContextLengthExceeded     the prompt does not fit the model
            ├── ContentFiltered           the provider refused the content
            └── MalformedResponse         a complete answer of the wrong shape

Lower-layer errors (httpx2, json, pydantic, duckdb, redis) are translated at the boundary into
the most specific class. Those that may carry secrets — an HTTP error holds its request (URL and
``Authorization`` header), a validation error its input values, a JSON error its document — are
not chained: the library's error is raised outside the ``except`` block, with the lower-layer
error's type and redacted text in its message. No message, ``repr``, attribute or chained error
contains an API key, an ``Authorization`` value or a password from a URL.
"""

from __future__ import annotations

from collections.abc import Mapping


class OtelLLMError(Exception):
    """Base class of every error otel-llm raises."""


class ConfigurationError(OtelLLMError, ValueError):
    """A configuration value is invalid. The message names the key and the rule.

    ``fields`` holds ``(field, reason)`` pairs when the error is about fields of one object
    (a ``Source``), so a caller that knows where the object came from can name its keys.
    """

    def __init__(self, key: str, message: str, *, fields: tuple[tuple[str, str], ...] = ()) -> None:
        self.key = key
        self.reason = message
        self.fields = fields
        super().__init__(f"{key}: {message}")


class BackendUnavailable(OtelLLMError):
    """The admission or breaker backend cannot be reached; the call fails closed."""


class ProviderError(OtelLLMError):
    """One attempt against one source failed.

    ``status_code`` is the HTTP status when there was one; ``code`` the provider's own error code
    (``context_length_exceeded``, ``content_filter`` …); ``source`` the source's name and ``url``
    its base URL without credentials (set by the attempt that failed). ``reason`` says what went
    wrong without naming the source; ``str()`` names it once, with its URL, before the reason.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        code: str | None = None,
        source: str | None = None,
        url: str | None = None,
    ) -> None:
        self.message = message
        self.status_code = status_code
        self.code = code
        self.source = source
        self.url = url
        super().__init__(message)

    @property
    def reason(self) -> str:
        """What went wrong: the message, with the status and the provider's code when the
        message does not already say them."""
        details = [
            f"{name}={value}"
            for name, value in (("status", self.status_code), ("code", self.code))
            if value is not None and str(value) not in self.message
        ]
        return f"{self.message} ({', '.join(details)})" if details else self.message

    def __str__(self) -> str:
        if self.source is None and self.url is None:
            return self.reason
        return f"{source_label(self.source, self.url)}: {self.reason}"

    @property
    def error_type(self) -> str:
        """Value for the ``error.type`` span attribute."""
        return type(self).__name__


class TransientError(ProviderError):
    """Worth a retry or a failover: the same request may succeed later or elsewhere."""


class ProviderConnectionError(TransientError):
    """The connection could not be made or broke (reset, refused, protocol error)."""


class ProviderTimeout(TransientError):
    """The transport timed out (connect, read or pool)."""


class ServerError(TransientError):
    """The provider answered 5xx or 408."""


class MalformedStream(TransientError):
    """A streamed event could not be parsed (invalid JSON, wrong content type)."""


class TruncatedStream(TransientError):
    """The stream ended without a finish reason or ``[DONE]``; the partial answer is discarded."""


class WatchdogTimeout(TransientError):
    """No incremental chunk arrived within the watchdog budget; the attempt was killed."""


class RateLimited(ProviderError):
    """HTTP 429. ``retry_after_s`` is the provider's ``Retry-After`` when it sent one."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = 429,
        code: str | None = None,
        source: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, code=code, source=source)
        self.retry_after_s = retry_after_s


class PermanentError(ProviderError):
    """Retrying the same request on the same source cannot help."""


class BadRequest(PermanentError):
    """HTTP 400 or 422."""


class AuthenticationError(PermanentError):
    """HTTP 401 or 403."""


class NotFound(PermanentError):
    """HTTP 404: unknown model or endpoint."""


class ContextLengthExceeded(PermanentError):
    """The request does not fit the model's context window."""


class ContentFiltered(PermanentError):
    """The provider refused the request or the answer on content grounds.

    ``refusal`` holds the model's own words when it answered with a refusal instead of content
    (chat completions' ``refusal``). They are the model's output, so the message does not
    repeat them: spans, logs and the summary of a failed call carry messages, and output stays
    out of telemetry unless content capture is on."""

    def __init__(
        self,
        message: str,
        *,
        refusal: str | None = None,
        status_code: int | None = None,
        code: str | None = None,
        source: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, code=code, source=source, url=url)
        self.refusal = refusal


class MalformedResponse(PermanentError):
    """A complete, well-formed non-streamed answer of the wrong shape (embeddings that are not
    one float vector per input, a chat completion whose ``choices`` is not a list): asking the
    same source again would get the same shape."""


class InvalidRequest(OtelLLMError, TypeError):
    """The request cannot be sent as given: its messages are no list of messages (a string,
    nothing, something other than objects) or its body is not JSON (an ``object()`` among the
    messages, a circular list). Raised before any source is asked; no source is charged."""


class NotAStore(OtelLLMError):
    """A file given to read spans from is not an otel-llm store: missing, unreadable, not a
    DuckDB database, or a DuckDB database without the otel-llm tables. The message says which,
    and how to get a store."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        super().__init__(f"{path} {problem}")


class UnsupportedSchema(NotAStore):
    """A table otel-llm reads spans from (the Collector ClickHouse exporter's ``otel_traces``)
    lacks a column its views and dashboards read, or has it in another type — an exporter
    schema otel-llm does not support. ``problems`` lists each such column with what was found;
    the message names them all and the schema that is supported."""

    def __init__(self, table: str, problems: tuple[str, ...], supported: str) -> None:
        self.table = table
        self.problems = problems
        super().__init__(
            table, f"is not the schema otel-llm reads ({supported}): " + "; ".join(problems)
        )


class CollectorError(OtelLLMError):
    """The OpenTelemetry Collector could not be built, started or stopped (``otel-llm
    collector``); the message says what to do (install Go, free a port, read its log)."""


class AllSourcesExhausted(OtelLLMError):
    """A call gave up. ``reasons`` maps each source tried to why it failed (its latest failure's
    ``reason``, or why no attempt was made); ``urls`` maps sources to their base URLs without
    credentials; ``attempts`` and ``hedges`` count the requests it made (every one may have been
    billed). The message names each source once, with its URL, before its reason."""

    def __init__(
        self,
        message: str,
        reasons: Mapping[str, str],
        *,
        urls: Mapping[str, str] | None = None,
        attempts: int = 0,
        hedges: int = 0,
    ) -> None:
        self.reasons = dict(reasons)
        self.urls = dict(urls or {})
        self.attempts = attempts
        self.hedges = hedges
        detail = "; ".join(
            f"{source_label(name, self.urls.get(name))}: {why}"
            for name, why in self.reasons.items()
        )
        super().__init__(f"{message} ({detail})" if detail else message)


def source_label(source: str | None, url: str | None) -> str:
    """How a message names a source: ``name at url`` (either alone when the other is unknown)."""
    if source is None:
        return url or "a source"
    return f"{source} at {url}" if url else source


def error_type(error: BaseException) -> str:
    """The ``error.type`` of ``error``: the library error's class name, or the exception's."""
    kind = getattr(error, "error_type", None)
    return kind if isinstance(kind, str) else type(error).__name__


__all__ = [
    "AllSourcesExhausted",
    "AuthenticationError",
    "BackendUnavailable",
    "BadRequest",
    "CollectorError",
    "ConfigurationError",
    "ContentFiltered",
    "ContextLengthExceeded",
    "InvalidRequest",
    "MalformedResponse",
    "MalformedStream",
    "NotAStore",
    "NotFound",
    "OtelLLMError",
    "PermanentError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimited",
    "ServerError",
    "TransientError",
    "TruncatedStream",
    "WatchdogTimeout",
]
