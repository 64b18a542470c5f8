"""What a wrapped call's SDK client says about where the call goes: provider, server, secrets.

The openai and anthropic SDKs keep their client on every resource (``resource._client``) with
its ``base_url`` and keys; an attribute that is missing or of another type is left out (these
are telemetry, never a reason to fail a call).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from otel_llm import _semconv as sc

_KEY_ATTRIBUTES: Final = ("api_key", "auth_token")
"""Attributes of an SDK client that hold a credential."""


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
    secrets = tuple(
        value
        for name in _KEY_ATTRIBUTES
        if isinstance(value := getattr(client, name, None), str) and value
    )
    return ClientFacts(
        provider,
        host if isinstance(host, str) and host else None,
        port if isinstance(port, int) and not isinstance(port, bool) else None,
        secrets,
    )


def _is_azure(client: Any, host: Any) -> bool:
    """An ``AzureOpenAI`` client, or one pointed at an Azure OpenAI host."""
    if "Azure" in type(client).__name__:
        return True
    return isinstance(host, str) and host.endswith((".openai.azure.com", ".azure.com"))
