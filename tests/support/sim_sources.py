"""Sources of every provider the client speaks, pointed at one simulated provider: the same
script plays on each API (OpenAI-compatible chat completions, Azure OpenAI's deployment route,
the Anthropic Messages API, the Gemini API)."""

from __future__ import annotations

from typing import Any, Final

from otel_llm import Source
from otel_llm.simulator import SimulatedProvider

PROVIDERS: Final = ("openai", "azure", "anthropic", "gemini")
"""The providers, by ``Source.provider``."""
WIRE: Final = {"openai": "chat", "azure": "chat", "anthropic": "anthropic", "gemini": "gemini"}
"""The simulator's name of each provider's wire format (for ``scripted_figures(wire=…)``)."""
TELEMETRY: Final = {
    "openai": "openai",
    "azure": "azure.ai.openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
}
"""Each provider's ``gen_ai.provider.name``."""
KEYS: Final = {
    "openai": "sk-openai-0123456789SECRET",
    "azure": "azure-0123456789SECRETKEY",
    "anthropic": "sk-ant-api03-0123456789SECRET",
    "gemini": "AIzaSy0123456789SECRETKEY",
}
"""A key per provider, to look for where it must never appear."""
AZURE_API_VERSION: Final = "2024-10-21"


def sim_source(
    provider: str, sim: SimulatedProvider, *, name: str | None = None, model: str = "m",
    **fields: Any,
) -> Source:  # fmt: skip
    """A ``provider`` source at ``sim`` named ``name`` (default: the provider) asking for
    ``model`` (for Azure, the deployment)."""
    azure = provider == "azure"
    given: dict[str, Any] = {
        "name": name or provider,
        "provider": provider,
        "base_url": sim.url if azure else sim.base_url,
        "model": model,
        "api_key": KEYS[provider],
    }
    if azure:
        given["api_version"] = AZURE_API_VERSION
    return Source(**{**given, **fields})
