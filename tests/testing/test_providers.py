"""The simulated provider as a test's upstream (``otel_llm.testing.SimulatedProvider`` and
``ThreadedProvider``): what it is given is checked when it is made, in the library's own
words, and a stopped provider has no address."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest

from otel_llm import ConfigurationError
from otel_llm.testing import Script, SimulatedProvider


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"time_scale": 0.0}, r"time_scale: must be a positive finite number"),
        ({"time_scale": float("nan")}, r"time_scale: must be a positive finite number"),
        ({"time_scale": "1"}, r"time_scale: must be a positive finite number, not '1'"),
        ({"time_scale": True}, r"time_scale: must be a positive finite number, not True"),
        ({"default": "nope"}, r"default: unknown default script 'nope'; known: .*stall"),
        ({"scripts": [Script()]}, r"scripts: must map model names to scripts, not list"),
        ({"scripts": {1: Script()}}, r"scripts: a model name must be text, not 1"),
        ({"port": 70_000}, r"port: must be a port number from 0 to 65535, not 70000"),
        ({"port": -1}, r"port: must be a port number from 0 to 65535, not -1"),
        ({"port": "8080"}, r"port: must be a port number from 0 to 65535, not '8080'"),
    ],
)
def test_a_provider_is_refused_when_made_with_what_cannot_serve(
    given: dict[str, Any], said: str
) -> None:
    """A bad time scale, default, registry or port is a ConfigurationError naming the key when
    the provider is made (it was a ValueError, TypeError or AttributeError there, or an
    OverflowError from bind() only when it started)."""
    with pytest.raises(ConfigurationError, match=said):
        SimulatedProvider(**given)


async def test_a_stopped_provider_has_no_address() -> None:
    """After ``stop()`` (or the ``async with``), ``url`` says the provider is not running instead
    of naming the closed port; started again, it names the new one."""
    provider = SimulatedProvider()
    async with provider:
        assert provider.url.startswith("http://127.0.0.1:")
    with pytest.raises(RuntimeError, match="not running"):
        _ = provider.base_url
    async with provider:
        assert provider.base_url.endswith("/v1")
    with pytest.raises(RuntimeError, match="not running"):
        _ = provider.url


async def test_a_restarted_provider_counts_a_client_going_away_as_a_disconnect() -> None:
    """Stopped and started again, the provider counts a client that drops its stream as
    ``disconnected`` (it stayed 'shutting down' forever: ``interrupted``, and
    ``wait_for_disconnects`` never returned)."""
    provider = SimulatedProvider(scripts={"slow": Script(first_chunk_delay_s=30)})
    async with provider:
        pass
    async with provider, httpx2.AsyncClient(base_url=provider.base_url) as http:
        body = {"model": "slow", "messages": [], "stream": True}
        async with http.stream("POST", "/chat/completions", json=body):
            await provider.stats.wait_for_requests(1)
        async with asyncio.timeout(10):
            await provider.stats.wait_for_disconnects(1)
    assert provider.stats.outcomes == {"disconnected": 1}


async def test_a_wait_whose_predicate_fails_raises_in_the_waiter_not_in_the_server() -> None:
    """A predicate that raises once a later request comes in (a lookup of a count it did not
    foresee) raises in ``wait_for``'s caller; the request is answered as scripted (the
    predicate ran in the server's handler: HTTP 500, and the wait never ended)."""
    seen = {0: False, 1: False}
    async with SimulatedProvider() as provider, httpx2.AsyncClient() as http:
        waiting = asyncio.create_task(provider.stats.wait_for(lambda s: seen[s.requests]))
        await asyncio.sleep(0)  # the wait is registered
        body = {"model": "m", "messages": []}
        statuses = [
            (await http.post(f"{provider.base_url}/chat/completions", json=body)).status_code
            for _ in range(2)
        ]
        async with asyncio.timeout(10):
            with pytest.raises(KeyError):
                await waiting
    assert statuses == [200, 200]
    assert provider.stats.outcomes == {"completed": 2}


async def test_a_preset_that_draws_no_script_is_named_in_the_servers_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A registered preset (any callable) that returns no Script fails its request with an
    error naming the preset and what it returned (it was an AttributeError deep in the
    simulator: ``'dict' object has no attribute 'hold_s'``)."""

    def draws_a_dict(rng: object) -> object:
        return {"chunk_count": 3}

    async with (
        SimulatedProvider(scripts={"odd": draws_a_dict}) as provider,  # type: ignore[dict-item]
        httpx2.AsyncClient() as http,
    ):
        body = {"model": "odd", "messages": []}
        response = await http.post(f"{provider.base_url}/chat/completions", json=body)
    assert response.status_code == 500
    assert provider.stats.outcomes == {"failed": 1}
    assert "draws_a_dict" in caplog.text
    assert "drew dict, not a Script" in caplog.text
