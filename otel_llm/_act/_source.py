"""A source: one OpenAI-compatible endpoint (provider, deployment, model) a call can use."""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Iterator
from typing import Any, Final, Literal, Self
from urllib.parse import urlsplit, urlunsplit

import httpx2
from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from otel_llm._act._admission import Limits
from otel_llm._act._config_model import StrictModel
from otel_llm._defaults import DEFAULTS
from otel_llm._errors import ConfigurationError
from otel_llm._redact import public_url, redact_url, url_secrets


def positive_finite(value: float | None, field: str) -> float | None:
    """``value`` if it is ``None`` or a finite number > 0, else a ValueError naming ``field``."""
    if value is None:
        return None
    if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{field} must be a finite number > 0, got {value!r}")
    return value


class Source(StrictModel):
    """One endpoint. ``api_key`` is a secret, and so is a password in ``base_url``: neither
    appears in reprs, spans or errors. An invalid field is a :class:`ConfigurationError` naming
    it (``Source.base_url``), never repeating the value given."""

    def __init__(self, **fields: Any) -> None:
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            error = _source_error(exc)
        else:
            return
        raise error  # unchained: pydantic's error is about the input, which may be a secret

    name: str = Field(min_length=1)
    """Unique name within a client, e.g. ``openai-1``."""
    provider: str = Field(min_length=1)
    """Provider name as the GenAI convention's ``gen_ai.provider.name`` (``openai`` …)."""
    base_url: str = Field(min_length=1)
    """Base URL up to and including the API version, e.g. ``https://api.openai.com/v1``."""
    model: str = Field(min_length=1)
    api_key: SecretStr | None = None
    timeout_s: float = DEFAULTS.timeout_s
    """Read timeout of one attempt; also the watchdog's budgets when those are unset (between
    chunks only when given: see :attr:`effective_inter_chunk_timeout_s`)."""
    connect_timeout_s: float = DEFAULTS.connect_timeout_s
    ttft_timeout_s: float | None = None
    """Watchdog: longest wait for the first incremental chunk."""
    inter_token_timeout_s: float | None = None
    """Watchdog: longest wait between incremental chunks (falls back to ``timeout_s`` when that
    is given, else to 30 s)."""
    api_key_header: Literal["Authorization", "api-key"] | None = None
    """Where the key is sent: ``Authorization: Bearer <key>`` or Azure's ``api-key: <key>``
    (``None``: by ``provider``, see :attr:`key_header`)."""
    priority: int = 0
    """Lower is tried first."""
    requests_per_minute: float | None = None
    """Admission: at most this many requests a minute to this source (``None``: unlimited)."""
    tokens_per_minute: float | None = None
    """Admission: at most this many tokens a minute (estimated up front, settled from usage)."""

    @field_validator(
        "timeout_s",
        "connect_timeout_s",
        "ttft_timeout_s",
        "inter_token_timeout_s",
        "requests_per_minute",
        "tokens_per_minute",
    )
    @classmethod
    def _check_positive(cls, value: float | None, info: ValidationInfo) -> float | None:
        return positive_finite(value, info.field_name or "value")

    @field_validator("api_key")
    @classmethod
    def _check_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        key = value.get_secret_value().strip()
        if not key:
            raise ValueError("api_key is empty")
        if not (key.isascii() and key.isprintable()) or " " in key:
            raise ValueError(
                "api_key must be printable ASCII without spaces (a pasted key may carry a "
                "curly quote or a non-breaking space); the value is not shown"
            )
        return SecretStr(key)

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must start with http:// or https://, got {redact_url(value)!r}"
            )
        try:
            host = httpx2.URL(value).host
        except (httpx2.InvalidURL, ValueError):
            host = ""
        if not host:
            raise ValueError(f"base_url must name a host, got {redact_url(value)!r}")
        secret = sorted(
            name
            for name, _ in httpx2.URL(value).params.multi_items()
            if name.lower() in _SECRET_QUERY_NAMES
        )
        if secret:
            raise ValueError(
                f"base_url must not carry a credential in its query ({', '.join(secret)}): an "
                "HTTP library logs request URLs; pass it as api_key (sent as a header)"
            )
        return value if "?" in value else value.rstrip("/")  # a query's own "/" stays

    @model_validator(mode="after")
    def _one_authorization(self) -> Self:
        both = self.api_key is not None and self.key_header == "Authorization"
        if both and httpx2.URL(self.base_url).userinfo:
            raise ValueError(
                "base_url has user information and api_key is set: both would be the "
                "Authorization header; keep one"
            )
        return self

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            yield name, redact_url(value) if name == "base_url" else value

    @property
    def limits(self) -> Limits:
        """The admission limits of this source."""
        return Limits(self.requests_per_minute, self.tokens_per_minute)

    @property
    def effective_ttft_timeout_s(self) -> float:
        """The watchdog's budget for the first chunk: ``ttft_timeout_s`` or ``timeout_s``."""
        return self.ttft_timeout_s or self.timeout_s

    @property
    def effective_inter_chunk_timeout_s(self) -> float:
        """The watchdog's budget between chunks (see :func:`inter_chunk_budget_s`)."""
        given = self.timeout_s if "timeout_s" in self.model_fields_set else None
        return inter_chunk_budget_s(self.inter_token_timeout_s, given)

    @property
    def chat_url(self) -> str:
        """The chat completions endpoint (the base URL's query string kept, as Azure's
        ``?api-version=…`` needs)."""
        return _endpoint(self.base_url, "chat/completions")

    @property
    def embeddings_url(self) -> str:
        """The embeddings endpoint."""
        return _endpoint(self.base_url, "embeddings")

    @property
    def userinfo_header(self) -> str | None:
        """``Authorization: Basic …`` for the user information of ``base_url`` (what an HTTP
        client would make of it), sent as a header so that the URL never carries it."""
        url = httpx2.URL(self.base_url)
        if not url.userinfo:
            return None
        pair = f"{url.username}:{url.password}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")

    @property
    def key_header(self) -> str:
        """The header the API key goes in: ``api-key`` for Azure OpenAI (a ``provider``
        starting with ``azure``) unless ``api_key_header`` says otherwise, else
        ``Authorization`` (as ``Bearer <key>``)."""
        if self.api_key_header is not None:
            return self.api_key_header
        return "api-key" if self.provider.lower().startswith("azure") else "Authorization"

    @property
    def public_url(self) -> str:
        """The base URL as messages show it: no user information, no query."""
        return public_url(self.base_url)

    @property
    def host(self) -> str:
        """``server.address`` of the endpoint."""
        return httpx2.URL(self.base_url).host

    @property
    def port(self) -> int | None:
        """``server.port`` of the endpoint when the URL names one."""
        return httpx2.URL(self.base_url).port

    def secrets(self) -> tuple[str, ...]:
        """Values to redact from any text that leaves the library: the API key and what the
        base URL carries."""
        key = (self.api_key.get_secret_value(),) if self.api_key else ()
        return key + url_secrets(self.base_url)


def inter_chunk_budget_s(inter_token_timeout_s: float | None, timeout_s: float | None) -> float:
    """The watchdog's budget between chunks of a source that sets ``inter_token_timeout_s``
    and ``timeout_s`` (``None``: not set): the first, else the second, else 30 s
    (:attr:`~otel_llm._defaults.Defaults.inter_token_timeout_s`)."""
    return inter_token_timeout_s or timeout_s or DEFAULTS.inter_token_timeout_s


@functools.lru_cache(maxsize=256)
def _endpoint(base_url: str, name: str) -> str:
    """``base_url`` with ``/name`` added to its path as written (percent-escapes kept), its
    query string kept and its user information left out (it is sent as a header:
    :attr:`Source.userinfo_header`)."""
    parts = urlsplit(base_url)
    host = parts.netloc.rpartition("@")[2]
    path = f"{parts.path.rstrip('/')}/{name}"
    return urlunsplit((parts.scheme, host, path, parts.query, ""))


_SECRET_QUERY_NAMES: Final = frozenset(
    {
        "access_token",
        "access-token",
        "api_key",
        "api-key",
        "apikey",
        "auth",
        "client_secret",
        "code",
        "key",
        "password",
        "secret",
        "sig",
        "signature",
        "subscription-key",
        "token",
        "x-api-key",
    }
)
"""Query parameters that hold a credential: never sent in a URL (an HTTP library logs URLs)."""


def _source_error(exc: ValidationError) -> ConfigurationError:
    """A ConfigurationError naming every field of ``exc`` (messages only, never inputs)."""
    problems = tuple(
        (
            ".".join(str(part) for part in error["loc"]) or "fields",
            str(error["msg"]).removeprefix("Value error, "),
        )
        for error in exc.errors()
    )
    key, first = problems[0]
    rest = "".join(f"; Source.{field}: {message}" for field, message in problems[1:])
    return ConfigurationError(f"Source.{key}", first + rest, fields=problems)
