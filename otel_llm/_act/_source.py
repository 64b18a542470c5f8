"""A source: one endpoint (provider, deployment, model) a call can use, and the wire format the
client speaks to it, chosen once, when the source is made (:attr:`Source.wire`)."""

from __future__ import annotations

import base64
import functools
import math
import re
import typing
from collections.abc import Iterator
from typing import Any, Final, Literal, Self
from urllib.parse import SplitResult, quote, unquote, urlencode, urlsplit, urlunsplit

import httpx2
from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from otel_llm._act._admission import Limits
from otel_llm._act._config_model import StrictModel
from otel_llm._act._providers import API_LABELS, Provider, check_provider_name, provider_of
from otel_llm._act._wire import Wire, wire_for
from otel_llm._arguments import type_name
from otel_llm._defaults import DEFAULTS
from otel_llm._errors import ConfigurationError
from otel_llm._redact import public_url, redact_url, url_secrets
from otel_llm._visible import shown_as_is


def positive_finite(value: float | None, field: str) -> float | None:
    """``value`` if it is ``None`` or a finite number > 0, else a ValueError naming ``field``."""
    if value is None:
        return None
    if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{field} must be a finite number > 0, got {value!r}")
    return value


class Source(StrictModel):
    """One endpoint. ``provider`` chooses the wire format: ``anthropic`` speaks the Messages
    API, ``gemini`` the Gemini API, ``azure`` Azure OpenAI's deployments, anything else
    OpenAI-compatible chat completions (see :mod:`otel_llm._act._providers`). ``api_key`` is a
    secret, and so is a password in ``base_url``: neither appears in reprs, spans or errors. An
    invalid field, or fields that cannot go together, is a :class:`ConfigurationError` naming it
    (``Source.base_url``), never repeating the value given."""

    def __init__(self, **fields: Any) -> None:
        if not fields.pop(NUMBERS_AS_TEXT, False):
            _check_numbers(fields)
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
    """``openai``, ``anthropic``, ``gemini``, ``azure``, or the name of any other
    OpenAI-compatible provider (lower case). It chooses the wire format and, for the known
    four, the ``gen_ai.provider.name`` (``anthropic``, ``gcp.gemini``, ``azure.ai.openai``);
    another name is reported as given."""
    base_url: str = Field(min_length=1)
    """Base URL up to and including the API version, e.g. ``https://api.openai.com/v1``;
    ``openai``, ``anthropic`` and ``gemini`` sources may leave it out (their public URLs). For
    ``azure``: the resource endpoint, ``https://{resource}.openai.azure.com`` (or a whole
    deployment URL with its ``?api-version=``, or a ``…/v1`` route: Azure's v1 API,
    ``…/openai/v1``, or a gateway's)."""
    model: str = Field(min_length=1)
    """The model asked for (for ``azure``, also the deployment unless ``deployment`` names
    another)."""
    api_key: SecretStr | None = None
    """Sent as ``Authorization: Bearer`` (OpenAI-compatible), ``api-key`` (Azure),
    ``x-api-key`` (Anthropic) or ``x-goog-api-key`` (Gemini) — in a header, never in a URL."""
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
    deployment: str | None = None
    """``azure`` only: the deployment the requests go to — in the route below a resource
    endpoint, as the body's ``model`` on a ``…/v1`` route (:attr:`request_model`); ``None``: the
    ``model``."""
    api_version: str | None = Field(default=None, validate_default=True)
    """``azure``: the ``api-version`` query kept on every request (required unless
    ``base_url`` carries it or is a ``…/v1`` route). ``anthropic``: the
    ``anthropic-version`` header (default: the one the pinned SDK sends). Other providers
    name their version in ``base_url``."""
    max_tokens: int | None = Field(default=None, ge=1)
    """The output limit of a call that sets none (``max_tokens`` or ``max_completion_tokens``).
    The Anthropic Messages API requires one: an ``anthropic`` source without it sends 4096
    (``anthropic_max_tokens`` in :mod:`otel_llm._defaults`)."""

    _provider: Provider = PrivateAttr()

    @model_validator(mode="before")
    @classmethod
    def _public_base_url(cls, data: Any) -> Any:
        """A known provider's public base URL where the source names none."""
        if isinstance(data, dict) and data.get("base_url") is None:
            provider = data.get("provider")
            if isinstance(provider, str):
                default = provider_of(provider).base_url
                if default is not None:
                    return {**data, "base_url": default}
        return data

    @field_validator("provider")
    @classmethod
    def _check_provider(cls, value: str) -> str:
        return check_provider_name(value)

    @field_validator("name", "model")
    @classmethod
    def _check_text(cls, value: str) -> str:
        return printable(value)

    def model_post_init(self, context: Any, /) -> None:
        self._provider = provider_of(self.provider)

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
    def _check_url(cls, value: str, info: ValidationInfo) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must start with http:// or https://, got {redact_url(value)!r}"
            )
        try:
            host = httpx2.URL(value).host
        except (httpx2.InvalidURL, ValueError):
            host = ""
        written = (urlsplit(value).hostname or "") if host else ""
        if (
            not host
            or any(character.isspace() for character in written)  # httpx2 escapes it
            or ("%" in host and ":" not in host)  # an escape in a name (an IPv6 zone id may)
        ):  # a name no resolver finds: every call would fail later, as a transient error
            raise ValueError(f"base_url must name a host, got {redact_url(value)!r}")
        try:
            port = urlsplit(value).port
        except ValueError:  # a number beyond 65535
            port = -1
        if port is not None and not 0 < port <= _MAX_PORT:
            raise ValueError(f"base_url's port must be 1 to {_MAX_PORT}, got {redact_url(value)!r}")
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
        provider = info.data.get("provider")
        if isinstance(provider, str):
            instead = _base_instead_of_endpoint(provider_of(provider), value)
            if instead is not None:
                raise ValueError(instead)
        return value if "?" in value else value.rstrip("/")  # a query's own "/" stays

    @field_validator("api_key_header")
    @classmethod
    def _key_header_for_chat(cls, value: str | None, info: ValidationInfo) -> str | None:
        api = _api_of(info)
        if value is not None and api is not None and api != "chat":
            raise ValueError(
                f"is for OpenAI-compatible and Azure sources; a {info.data['provider']} source "
                "sends its key in its API's own header"
            )
        return value

    @field_validator("deployment")
    @classmethod
    def _deployment_for_azure(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        provider = info.data.get("provider")
        if provider is not None and not provider_of(provider).azure:
            raise ValueError("names an Azure OpenAI deployment: only for provider='azure'")
        if not value.strip() or "/" in value or "?" in value or not shown_as_is(value):
            raise ValueError("must be a deployment name (no '/', no '?', no control characters)")
        base = info.data.get("base_url")
        if isinstance(base, str) and "/deployments/" in httpx2.URL(base).path:
            raise ValueError("is set, and base_url names a deployment too; keep one")
        return value

    @field_validator("api_version")
    @classmethod
    def _version_for_provider(cls, value: str | None, info: ValidationInfo) -> str | None:
        provider = info.data.get("provider")
        if provider is None:
            return value
        kind = provider_of(provider)
        if value is not None and not value.strip():
            raise ValueError("is empty")
        if value is not None:
            printable(value)
        if kind.azure:
            base = info.data.get("base_url")
            if not isinstance(base, str):
                return value
            if value is None and not _azure_route_is_versioned(base):
                raise ValueError(
                    "Azure OpenAI needs its api-version (such as 2024-10-21) on every request: "
                    "set api_version, or pass the whole deployment URL with ?api-version=… as "
                    "base_url"
                )
            carried = httpx2.URL(base).params.get_list("api-version")
            if value is not None and any(version != value for version in carried):
                raise ValueError("is set, and base_url carries another api-version; keep one")
            return value
        if value is not None and kind.api != "anthropic":
            raise ValueError(
                f"is for azure (the api-version query) and anthropic (the anthropic-version "
                f"header); {API_LABELS[kind.api]} names its version in base_url"
            )
        if value is not None and (not value.isascii() or " " in value):
            # A header carries ASCII only: else every call would fail with the HTTP client's
            # UnicodeEncodeError (an Azure api-version and a model go escaped into the URL).
            raise ValueError(
                "is the anthropic-version header: printable ASCII without spaces (such as "
                "2023-06-01; a pasted version may carry a non-breaking space); the value is not "
                "shown"
            )
        return value

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
    def wire(self) -> Wire:
        """The wire format the client speaks to this source (chosen by ``provider``)."""
        return wire_for(self._provider.api)

    @property
    def api(self) -> str:
        """The wire format's name: ``chat``, ``anthropic`` or ``gemini``."""
        return self._provider.api

    @property
    def provider_name(self) -> str:
        """``gen_ai.provider.name`` of this source."""
        return self._provider.telemetry_name

    @property
    def request_model(self) -> str:
        """The ``model`` a request body names: on an Azure ``…/v1`` route, where the body's model
        picks the deployment, the ``deployment`` when one is set; else the ``model`` (which the
        spans report as the model asked for either way)."""
        if self.deployment is not None and _is_v1_route(urlsplit(self.base_url).path):
            return self.deployment
        return self.model

    @property
    def chat_url(self) -> str:
        """The chat completions endpoint of an OpenAI-compatible or Azure source (the base URL's
        query string kept, as Azure's ``?api-version=…`` needs)."""
        return self._route("chat/completions")

    @property
    def embeddings_url(self) -> str:
        """The embeddings endpoint of an OpenAI-compatible or Azure source."""
        return self._route("embeddings")

    def endpoint(self, name: str, query: str = "") -> str:
        """``base_url`` with ``/name`` added to its path and ``query`` to its query (the base
        URL's own query kept, its user information left out)."""
        url = _endpoint(self.base_url, name)
        return f"{url}{'&' if '?' in url else '?'}{query}" if query else url

    def _route(self, name: str) -> str:
        if not self._provider.azure:
            return _endpoint(self.base_url, name)
        return _azure_endpoint(self.base_url, self.deployment or self.model, self.api_version, name)

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
        """The header the API key goes in: ``x-api-key`` (Anthropic), ``x-goog-api-key``
        (Gemini); ``api-key`` for Azure OpenAI (a ``provider`` starting with ``azure``) unless
        ``api_key_header`` says otherwise, else ``Authorization`` (as ``Bearer <key>``)."""
        if self._provider.api == "anthropic":
            return "x-api-key"
        if self._provider.api == "gemini":
            return "x-goog-api-key"
        if self.api_key_header is not None:
            return self.api_key_header
        return "api-key" if self.provider.startswith("azure") else "Authorization"

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


def printable(value: str) -> str:
    """``value`` if it is text a message, a span or a header can carry as it is — what
    otel-llm shows without an escape, whatever the Python's Unicode tables — else a
    ValueError (the value is not repeated: it may hold what a terminal or a log would act on)."""
    if not value.strip() or not shown_as_is(value):
        raise ValueError(
            "must be printable text: not blank, no line breaks or other control characters"
        )
    return value


_MAX_PORT: Final = 65535

NUMBERS_AS_TEXT: Final = "_numbers_as_text"
"""Marks the fields of a source read from a settings object or the environment, where a
number may be written as text (``"60"``) and is parsed; a ``Source(...)`` made in code takes
numbers only, as ``Client(...)``'s arguments do."""


@functools.cache
def _number_fields() -> tuple[str, ...]:
    """The fields of :class:`Source` that hold a number."""
    return tuple(
        name
        for name, info in Source.model_fields.items()
        if {int, float} & {info.annotation, *typing.get_args(info.annotation)}
    )


def _check_numbers(fields: dict[str, Any]) -> None:
    """A number given as text is refused, as a ``Client`` argument is: only the environment
    and settings objects spell numbers as text (see :data:`NUMBERS_AS_TEXT`)."""
    text = [name for name in _number_fields() if isinstance(fields.get(name), str)]
    if text:
        problems = tuple(
            (name, f"must be a number, got {type_name(fields[name])}") for name in text
        )
        (key, first), *rest = problems
        more = "".join(f"; Source.{name}: {why}" for name, why in rest)
        raise ConfigurationError(f"Source.{key}", first + more, fields=problems)


def inter_chunk_budget_s(inter_token_timeout_s: float | None, timeout_s: float | None) -> float:
    """The watchdog's budget between chunks of a source that sets ``inter_token_timeout_s``
    and ``timeout_s`` (``None``: not set): the first, else the second, else 30 s
    (:attr:`~otel_llm._defaults.Defaults.inter_token_timeout_s`)."""
    return inter_token_timeout_s or timeout_s or DEFAULTS.inter_token_timeout_s


def _api_of(info: ValidationInfo) -> str | None:
    """The wire format of the source being validated (``None``: its provider was refused)."""
    provider = info.data.get("provider")
    return provider_of(provider).api if isinstance(provider, str) else None


_ENDPOINTS: Final = {
    "chat": ("chat/completions", "completions", "embeddings"),
    "anthropic": ("messages",),
}
"""By API, the endpoints the client adds below a base URL (Gemini's: ``models/{model}:method``)."""


def _base_instead_of_endpoint(provider: Provider, base_url: str) -> str | None:
    """What to give instead of a base URL that already names an endpoint the client adds below
    it — the Azure portal's Target URI, ``…/v1/messages``, a Gemini model's method,
    ``…/v1/chat/completions`` — where every call would be a 404
    (``…/chat/completions/chat/completions``); ``None`` for a base URL."""
    parts = urlsplit(base_url)
    segments = parts.path.rstrip("/").split("/")
    named = ""
    if provider.api == "gemini":
        at = _gemini_models_at(segments)
        if at is not None:  # …/models/{model}[:method]: the client adds both
            model = unquote("/".join(segments[at + 1 :]).partition(":")[0])
            named, segments = "/".join(segments[at:]), segments[:at]
            base = _public_base(parts, segments)
            return (
                f"base_url names the endpoint …/{named}, which the client adds itself (every "
                f"call would be a 404): give base_url={base!r}"
                + (f" and the model as model={model!r}" if model else "")
            )
        return None
    for endpoint in _ENDPOINTS.get(provider.api, ()):
        words = endpoint.split("/")
        if segments[-len(words) :] == words:
            named, segments = endpoint, segments[: -len(words)]
            break
    if not named:
        return None
    if provider.azure and "deployments" in segments[:-1]:  # the portal's Target URI
        at = segments.index("deployments")
        deployment = unquote(segments[at + 1])
        resource = segments[: at - 1] if segments[at - 1] == "openai" else segments[:at]
        version = httpx2.URL(base_url).params.get("api-version")
        return (
            f"base_url names the endpoint …/{named}, which the client adds itself (every call "
            "would be a 404): give the resource endpoint, "
            f"base_url={_public_base(parts, resource)!r}, the deployment as model={deployment!r} "
            "(or deployment=…)" + (f", and api_version={version!r}" if version else "")
        )
    base = _public_base(parts, segments)
    return (
        f"base_url names the endpoint …/{named}, which the client adds itself (every call would "
        f"be a 404): give the base up to the API version, base_url={base!r}"
    )


_API_VERSION: Final = re.compile(r"v\d+((alpha|beta)\d*)?")
"""A path segment that is an API version (``v1``, ``v1beta``, ``v1alpha2``)."""


def _gemini_models_at(segments: list[str]) -> int | None:
    """Where a Gemini path ends in the endpoint the client adds — ``…/models``,
    ``…/models/{model}`` or ``…/models/{model}:{method}`` — or ``None``: a ``models`` segment
    elsewhere (a gateway's id, ``…/models/v1beta``) is the caller's base."""
    if segments[-1:] == ["models"]:
        return len(segments) - 1
    if len(segments) >= 2 and segments[-2] == "models":
        last = segments[-1]
        if ":" in last or not _API_VERSION.fullmatch(last):
            return len(segments) - 2
    return None


def _public_base(parts: SplitResult, segments: list[str]) -> str:
    """The base URL of ``parts`` with the path ``segments``, as a message may show it (no user
    information, no query)."""
    return public_url(urlunsplit((parts.scheme, parts.netloc, "/".join(segments), "", "")))


def _azure_route_is_versioned(base_url: str) -> bool:
    """Whether an Azure base URL needs no ``api_version``: it carries ``api-version`` in its
    query, or is a ``…/v1`` route — Azure's versionless v1 API, ``…/openai/v1``, or a gateway
    exposing it — which takes the model in the body."""
    url = httpx2.URL(base_url)
    return "api-version" in url.params or _is_v1_route(url.path)


def _is_v1_route(path: str) -> bool:
    """Whether a base URL's path is a ``…/v1`` route: Azure's v1 API or a gateway exposing it,
    where requests go below the URL and the body's ``model`` names the deployment."""
    return path.rstrip("/").endswith("/v1")


@functools.lru_cache(maxsize=256)
def _azure_endpoint(base_url: str, deployment: str, api_version: str | None, name: str) -> str:
    """Azure OpenAI's endpoint ``name``: below the deployment route when ``base_url`` is a
    resource endpoint (``…/openai/deployments/{deployment}/{name}``), below ``base_url`` when it
    names a deployment or is a ``…/v1`` route; ``api-version`` added to the query unless it is
    there already."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if "/deployments/" not in path and not _is_v1_route(path):
        path = path.removesuffix("/openai") + f"/openai/deployments/{quote(deployment, safe='')}"
    query = parts.query
    if api_version is not None and "api-version" not in httpx2.URL(base_url).params:
        query = "&".join(filter(None, (query, urlencode({"api-version": api_version}))))
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, f"{path}/{name}", query, ""))


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
