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
