"""What a source puts into a request's headers and URL, checked when the source is made: an
Anthropic ``api_version`` that no HTTP header can carry is refused naming the field (it was a raw
``UnicodeEncodeError`` at the first call), while a model, a deployment or an Azure
``api-version`` in any script reaches the provider (they go escaped into a URL or into the
body)."""

from __future__ import annotations

from typing import Any

import pytest

from otel_llm import Client, ConfigurationError, Source
from otel_llm.simulator import Script, SimulatedProvider
from tests.support.sim_sources import PROVIDERS, sim_source


def make(**fields: Any) -> Source:
    given: dict[str, Any] = {"name": "s", "model": "m"}
    return Source(**{**given, **fields})


@pytest.mark.parametrize(
    "version", ["2023-06-01é", "2023-06-01\u00a0", "\u00a02023-06-01", "2023-06-01 ", "2023 06 01"]
)
def test_an_anthropic_version_no_header_can_carry_is_refused_when_made(version: str) -> None:
    """A non-ASCII ``anthropic-version`` (an accent, a pasted non-breaking space) or one with a
    space is a ``ConfigurationError`` naming ``api_version`` when the source is made, without
    repeating the value."""
    with pytest.raises(ConfigurationError, match=r"Source\.api_version.*ASCII") as caught:
        make(provider="anthropic", api_version=version)
    assert version not in str(caught.value)


def test_an_anthropic_version_in_its_usual_form_is_taken() -> None:
    """The date the Messages API names its versions by is taken as it is."""
    assert make(provider="anthropic", api_version="2023-06-01").api_version == "2023-06-01"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_model_deployment_or_azure_version_in_any_script_reaches_the_provider(
    provider: str,
) -> None:
    """A model (and an Azure deployment and ``api-version``) with non-ASCII letters and a
    non-breaking space goes escaped into the URL or into the body: the call is answered."""
    extra = {"deployment": "dé\u00a01", "api_version": "2024-10-21é"} if provider == "azure" else {}
    async with SimulatedProvider(default=Script(chunk_count=1)) as sim:
        async with Client([sim_source(provider, sim, model="mödel\u00a0x", **extra)]) as client:
            result = await client.chat([{"role": "user", "content": "hi"}])
        assert result.text
        assert sim.stats.requests == 1


AZURE_TARGET = (
    "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"
)
"""The Azure portal's "Target URI" of a deployment."""


@pytest.mark.parametrize(
    ("provider", "base_url", "words"),
    [
        ("azure", AZURE_TARGET,
         "base_url='https://x.openai.azure.com', the deployment as model='d'"),
        ("azure", "https://x.openai.azure.com/openai/deployments/d/embeddings?api-version=1",
         "base_url='https://x.openai.azure.com', the deployment as model='d'"),
        ("azure", "https://x.openai.azure.com/openai/v1/chat/completions",
         "base_url='https://x.openai.azure.com/openai/v1'"),
        ("anthropic", "https://api.anthropic.com/v1/messages",
         "base_url='https://api.anthropic.com/v1'"),
        ("anthropic", "https://api.anthropic.com/v1/messages/", "base_url='https://api.anthropic.com/v1'"),
        ("gemini",
         "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash"
         ":streamGenerateContent?alt=sse",
         "base_url='https://generativelanguage.googleapis.com/v1beta' and the model as "
         "model='gemini-2.0-flash'"),
        ("gemini",
         "https://generativelanguage.googleapis.com/v1/models/gemini-2.0-flash:generateContent",
         "base_url='https://generativelanguage.googleapis.com/v1'"),
        ("gemini", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash",
         "base_url='https://generativelanguage.googleapis.com/v1beta'"),
        ("gemini", "https://generativelanguage.googleapis.com/v1beta/models",
         "base_url='https://generativelanguage.googleapis.com/v1beta'"),
        ("openai", "https://api.openai.com/v1/chat/completions",
         "base_url='https://api.openai.com/v1'"),
        ("deepseek", "https://api.deepseek.com/v1/chat/completions/",
         "base_url='https://api.deepseek.com/v1'"),
        ("vllm", "http://127.0.0.1:8000/v1/embeddings", "base_url='http://127.0.0.1:8000/v1'"),
        ("vllm", "http://127.0.0.1:8000/v1/completions", "base_url='http://127.0.0.1:8000/v1'"),
    ],
)  # fmt: skip
def test_a_base_url_that_names_the_endpoint_is_refused_when_made(
    provider: str, base_url: str, words: str
) -> None:
    """A base URL that already names the endpoint the client adds (the Azure portal's Target
    URI, ``…/v1/messages``, a Gemini model's method, ``…/v1/chat/completions``) would make
    every call a 404 (``…/chat/completions/chat/completions``): a ``ConfigurationError`` naming
    ``base_url`` when the source is made, saying which base to give instead."""
    with pytest.raises(ConfigurationError) as caught:
        make(provider=provider, base_url=base_url)
    assert caught.value.key == "Source.base_url"
    assert words in str(caught.value)


def test_the_azure_target_uri_names_its_api_version() -> None:
    """Refusing the Azure portal's Target URI, the error names its ``api-version`` as the
    ``api_version`` to give."""
    with pytest.raises(ConfigurationError, match="api_version='2024-10-21'"):
        make(provider="azure", base_url=AZURE_TARGET)


@pytest.mark.parametrize(
    ("provider", "base_url"),
    [
        ("openai", "https://api.openai.com/v1"),
        ("azure", "https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21"),
        ("azure", "https://x.openai.azure.com/openai/v1"),
        ("azure", "https://apim.example.com/chat/v1"),
        ("anthropic", "https://api.anthropic.com/v1"),
        ("anthropic", "https://gw.example.com/messages-proxy/v1"),
        ("gemini", "https://generativelanguage.googleapis.com/v1beta"),
        ("gemini", "https://gw.example.com/gemini:proxy/v1beta"),
        ("gemini", "https://gw.example.com/models/v1beta"),
        ("gemini", "https://gateway.ai.cloudflare.com/v1/acct/models/google-ai-studio/v1beta"),
        ("vllm", "http://gw.test/completions/v1"),
        ("vllm", "http://gw.test/v1?route=chat/completions"),
    ],
)
def test_a_base_that_only_resembles_an_endpoint_is_taken(provider: str, base_url: str) -> None:
    """Bases that end before the endpoint are taken, whatever words earlier segments (or the
    query) hold."""
    fields = {"api_version": "2024-10-21"} if provider == "azure" else {}
    if provider == "azure" and "api-version" in base_url:
        fields = {}
    assert make(provider=provider, base_url=base_url, **fields).base_url
