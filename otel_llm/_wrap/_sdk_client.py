"""What a wrapped call's SDK client says about where the call goes: provider, server, secrets.

The openai and anthropic SDKs keep their client on every resource (``resource._client``) with
its ``base_url`` and keys; an attribute that is missing or of another type is left out (these
are telemetry, never a reason to fail a call). The provider is the convention's name for the
platform the client calls: Azure OpenAI for ``AzureOpenAI``, AWS Bedrock and Vertex AI for
``AnthropicBedrock`` and ``AnthropicVertex``; their credentials (AWS keys and session token, a
Google access token) are redacted like an API key.

A call that ends with an error looks for its credentials again (:func:`call_credentials`): a
key the client fetches from a function it was given (``api_key=`` a callable) is set only as
the request goes out, and a key may be sent in a header — the client's ``default_headers`` or
the call's ``extra_headers`` — rather than as the client's key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from otel_llm import _semconv as sc

CREDENTIAL_NAME: Final = re.compile(
    r"(?:KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)$|_BEARER_TOKEN_", re.IGNORECASE
)
"""The names credentials go by: arguments and settings (``api_key``, ``azure_ad_token``,
``aws_session_token``), environment variables (``OPENAI_API_KEY``, ``WATSONX_APIKEY``,
``AWS_SECRET_ACCESS_KEY``, ``GIGACHAT_CREDENTIALS``, ``AWS_BEARER_TOKEN_BEDROCK``) and headers
(``x-api-key``, ``api-key``, ``x-goog-api-key``)."""

_KEY_ATTRIBUTES: Final = (
    "api_key",
    "admin_api_key",  # openai's, for the admin endpoints
    "auth_token",
    "access_token",  # AnthropicVertex
    "aws_secret_key",  # AnthropicBedrock
    "aws_session_token",
    "aws_access_key",
)
"""Attributes of an SDK client that hold a credential (the Bedrock and Vertex AI clients'
too)."""

_ANTHROPIC_PLATFORMS: Final = (
    ("Bedrock", ".amazonaws.com", sc.PROVIDER_AWS_BEDROCK),
    ("Vertex", "aiplatform.googleapis.com", sc.PROVIDER_VERTEX_AI),
)
"""``(in the client's class name, or the host ends with, provider)``: the clouds that serve
Anthropic's models through the anthropic SDK's own clients (``AnthropicBedrock``,
``AnthropicVertex``)."""


@dataclass(frozen=True, slots=True)
class ClientFacts:
    """Where a call goes, read from its SDK client."""

    provider: str
    host: str | None = None
    port: int | None = None
    secrets: tuple[str, ...] = ()
    """Credentials of the client, redacted from any error text a span records."""


def client_facts(resource: Any, *, default_provider: str) -> ClientFacts:
    """The facts of ``resource``'s SDK client (``resource._client``)."""
    client = getattr(resource, "_client", None)
    url = getattr(client, "base_url", None)
    host = getattr(url, "host", None)
    port = getattr(url, "port", None)
    provider = default_provider
    if default_provider == sc.PROVIDER_OPENAI and _is_azure(client, host):
        provider = sc.PROVIDER_AZURE_OPENAI
    elif default_provider == sc.PROVIDER_ANTHROPIC:
        provider = _anthropic_platform(client, host)
    return ClientFacts(
        provider,
        host if isinstance(host, str) and host else None,
        port if isinstance(port, int) and not isinstance(port, bool) else None,
        _client_keys(client),
    )


def _client_keys(client: Any) -> tuple[str, ...]:
    """The credentials an SDK client holds as it is now."""
    values = [getattr(client, name, None) for name in _KEY_ATTRIBUTES]
    values.append(getattr(getattr(client, "credentials", None), "token", None))  # Google's
    return tuple(value for value in values if isinstance(value, str) and value)


def header_credentials(headers: Any) -> Iterator[str]:
    """The credentials among ``headers`` (a mapping; anything else has none): an
    ``Authorization`` value, also without its scheme (the bare token is what a provider
    echoes), and any header named like a credential."""
    if not isinstance(headers, Mapping):
        return
    for name, value in list(headers.items()):
        named = isinstance(name, str) and (
            name.lower() in ("authorization", "proxy-authorization")
            or CREDENTIAL_NAME.search(name) is not None
        )
        if named and isinstance(value, str) and value:
            yield value
            token = value.partition(" ")[2]
            if token:
                yield token


def call_credentials(resource: Any, kwargs: Mapping[str, Any]) -> tuple[str, ...]:
    """Every credential a call of ``resource``'s SDK client with these arguments may have sent,
    looked up when it ends with an error: the client's keys as they are now (a key the client
    fetched from a function as the request went out among them), the credential headers it
    sends with every request and those of the call's ``extra_headers``."""
    client = getattr(resource, "_client", None)
    found = [
        *_client_keys(client),
        *header_credentials(getattr(client, "_custom_headers", None)),
        *header_credentials(kwargs.get("extra_headers")),
    ]
    return tuple(dict.fromkeys(found))


def _anthropic_platform(client: Any, host: Any) -> str:
    """Where an anthropic SDK client sends its calls: AWS Bedrock, Vertex AI, or Anthropic."""
    name = type(client).__name__
    for marker, host_suffix, provider in _ANTHROPIC_PLATFORMS:
        if marker in name or (isinstance(host, str) and host.endswith(host_suffix)):
            return provider
    return sc.PROVIDER_ANTHROPIC


def _is_azure(client: Any, host: Any) -> bool:
    """An ``AzureOpenAI`` client, or one pointed at an Azure OpenAI host."""
    if "Azure" in type(client).__name__:
        return True
    return isinstance(host, str) and host.endswith((".openai.azure.com", ".azure.com"))
