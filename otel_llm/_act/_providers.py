"""The providers a :class:`~otel_llm.Source` may name, and what each name means: the wire format
the client speaks to it, its ``gen_ai.provider.name``, its public base URL.

Four names are known: ``openai``, ``anthropic`` (the Messages API, natively), ``gemini`` (the
Gemini API, natively) and ``azure`` (Azure OpenAI: chat completions on a deployment). The
convention's own names ``gcp.gemini`` and ``azure.ai.openai`` mean the same. Any other name is an
OpenAI-compatible endpoint (``deepseek``, ``vllm``, a gateway …) reported under that name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS

Api = Literal["chat", "anthropic", "gemini"]
"""The wire formats of the client: OpenAI-compatible chat completions (Azure OpenAI included),
the Anthropic Messages API, the Gemini API."""


@dataclass(frozen=True, slots=True)
class Provider:
    """What one provider name means to the client."""

    api: Api
    """The wire format spoken to it."""
    telemetry_name: str
    """Its ``gen_ai.provider.name``."""
    base_url: str | None = None
    """The public base URL a source may leave out (``None``: the source must name one)."""
    azure: bool = False
    """Azure OpenAI: deployments, ``api-version`` on every request, the ``api-key`` header."""


KNOWN: Final[dict[str, Provider]] = {
    "openai": Provider("chat", sc.PROVIDER_OPENAI, DEFAULTS.openai_base_url),
    "anthropic": Provider("anthropic", sc.PROVIDER_ANTHROPIC, DEFAULTS.anthropic_base_url),
    "gemini": Provider("gemini", sc.PROVIDER_GEMINI, DEFAULTS.gemini_base_url),
    "azure": Provider("chat", sc.PROVIDER_AZURE_OPENAI, azure=True),
}
"""The providers the client knows by name."""

ALIASES: Final[dict[str, str]] = {
    sc.PROVIDER_GEMINI: "gemini",
    sc.PROVIDER_AZURE_OPENAI: "azure",
}
"""The GenAI convention's names of known providers, taken as those providers."""

UNSUPPORTED: Final[dict[str, str]] = {
    sc.PROVIDER_VERTEX_AI: "Vertex AI",
    "vertex_ai": "Vertex AI",
    "vertex": "Vertex AI",
}
"""Names of APIs the client cannot speak (Vertex AI authenticates with Google Cloud OAuth
tokens and routes by project and region): refused rather than sent chat completions."""

API_LABELS: Final[dict[Api, str]] = {
    "chat": "OpenAI-compatible chat completions",
    "anthropic": "the Anthropic Messages API",
    "gemini": "the Gemini API",
}
"""How messages name a wire format."""

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


def provider_of(name: str) -> Provider:
    """What the provider ``name`` means (checked by :func:`check_provider_name`): a known
    provider, or an OpenAI-compatible endpoint reported under ``name``."""
    known = KNOWN.get(ALIASES.get(name, name))
    return known if known is not None else Provider("chat", name)


def check_provider_name(name: str) -> str:
    """``name`` if a source may use it, else a ValueError saying why."""
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"must be a lower-case name such as openai, anthropic, gemini or azure (letters, "
            f"digits, '.', '_', '-'; it is gen_ai.provider.name), got {name!r}"
        )
    api = UNSUPPORTED.get(name)
    if api is not None:
        raise ValueError(
            f"{name!r} names {api}, whose authentication and routes the client does not speak; "
            "use provider='gemini' with a Gemini API key, or an OpenAI-compatible gateway in "
            "front of it under its own name"
        )
    return name
