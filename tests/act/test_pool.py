"""The connection pool (issue: a poisoned pool): cancellations never leak slots on httpx2, the
same traffic does on httpcore 1.0.9, and a pool that stops serving is replaced (or reported)."""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from otel_llm import Client, Source
from otel_llm._act._pool import Pool
from otel_llm._act._transport import chat_completion
from otel_llm.simulator import Script, SimulatedProvider
from otel_llm.testing import run_virtual
from tests.conftest import Spans, require

MESSAGES = [{"role": "user", "content": "hi"}]
SCRIPTS = {
    "slow": Script(first_chunk_delay_s=1.0),
    "ok": Script(first_chunk_delay_s=0.01, chunk_interval_s=0.001, chunk_count=5),
}
KILL_AFTER_S = 0.2
"""The reproduction's first-chunk timeout (the watchdog kills, or the caller cancels)."""
HEALTHY_WITHIN_S = 10.0
"""How long a healthy call may take: far beyond what 20 calls at once take on a loaded machine
(each one's first chunk waits while the event loop serves the others), so that only a pool
that stopped serving fails one."""


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider(scripts=SCRIPTS) as running:
        yield running


def body(model: str) -> dict[str, Any]:
    return {"model": model, "messages": MESSAGES, "stream": True}


async def cancelled_traffic(http: Any, url: str, calls: int, concurrency: int) -> None:
    """``calls`` streamed requests to the slow model, each given up after ``KILL_AFTER_S`` —
    what the watchdog does to a late first chunk."""
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            try:
                async with asyncio.timeout(KILL_AFTER_S):
                    request = http.build_request("POST", url, json=body("slow"))
                    response = await http.send(request, stream=True)
                    try:
                        async for _ in response.aiter_bytes():
                            pass
                    finally:
                        await response.aclose()
            except TimeoutError:
                pass

    await asyncio.gather(*(one() for _ in range(calls)))


async def healthy_failures(http: Any, url: str, calls: int, within_s: float) -> int:
    """Healthy requests after the traffic: how many got no answer within ``within_s``."""

    async def one() -> bool:
        try:
            async with asyncio.timeout(within_s):
                response = await http.post(url, json=body("ok"))
                return response.status_code != 200
        except TimeoutError:
            return True

    return sum(await asyncio.gather(*(one() for _ in range(calls))))


async def test_httpcore_1_0_9_is_poisoned_by_the_reproduction(
    provider: SimulatedProvider,
) -> None:
    """The reproduction is real: on httpx 0.28 / httpcore 1.0.9 the cancelled traffic leaves
    the pool's slots held, and every healthy request after it times out. (This is why the
    client's transport is httpx2; if it ever passes on a fixed httpcore, the pin can go.)"""
    require(importlib.util.find_spec("httpx") is not None, "httpx 0.28 (dev extra) not installed")
    import httpx

    url = f"{provider.base_url}/chat/completions"
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=5)) as http:
        await cancelled_traffic(http, url, calls=200, concurrency=20)
        assert await healthy_failures(http, url, calls=20, within_s=KILL_AFTER_S * 5) == 20
        assert "Connections: 5 active" in repr(http._transport._pool)


async def test_httpx2_survives_the_reproduction(provider: SimulatedProvider) -> None:
    """The same traffic on httpx2 leaves no slot held: every healthy request is answered."""
    url = f"{provider.base_url}/chat/completions"
    async with httpx2.AsyncClient(limits=httpx2.Limits(max_connections=5)) as http:
        await cancelled_traffic(http, url, calls=200, concurrency=20)
        assert await healthy_failures(http, url, calls=20, within_s=HEALTHY_WITHIN_S) == 0
        assert "Connections: 0 active" in repr(http._transport._pool)


def source(provider: SimulatedProvider, model: str) -> Source:
    """The slow model killed at :data:`KILL_AFTER_S`; the healthy one given its time."""
    return Source(
        name=model, provider="sim", base_url=provider.base_url, model=model,
        ttft_timeout_s=KILL_AFTER_S if model == "slow" else HEALTHY_WITHIN_S,
    )  # fmt: skip


async def test_client_pool_survives_watchdog_kills(
    provider: SimulatedProvider, spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's reproduction through the client: 200 calls killed by the watchdog at
    concurrency 20 on a 5-connection pool, then 20 healthy calls — all answered, no slot held,
    and the defence never fires on a healthy pool (ours held connections while the rest
    queued)."""
    http = httpx2.AsyncClient(limits=httpx2.Limits(max_connections=5))
    options: dict[str, Any] = {
        "http_client": http,
        "tracer_provider": spans.provider,
        "max_attempts": 1,
        "same_source_retries": 0,
        "breaker_failure_threshold": 1000,
    }
    gate = asyncio.Semaphore(20)

    async def one(client: Client) -> str | None:
        async with gate:
            try:
                await client.chat(MESSAGES)
            except Exception as exc:
                return type(exc).__name__
            return None

    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        async with Client([source(provider, "slow")], **options) as slow:
            killed = await asyncio.gather(*(one(slow) for _ in range(200)))
        async with Client([source(provider, "ok")], **options) as ok:
            healthy = await asyncio.gather(*(one(ok) for _ in range(20)))
    try:
        assert killed == ["AllSourcesExhausted"] * 200
        assert healthy == [None] * 20
        assert "Connections: 0 active" in repr(http._transport._pool)
        assert "pool" not in caplog.text
    finally:
        await http.aclose()


async def occupied(http: httpx2.AsyncClient, url: str, slots: int) -> list[httpx2.Response]:
    """Hold ``slots`` connections of ``http``'s pool with responses nobody will read or
    close — the state a leaking pool is left in."""
    held = []
    for _ in range(slots):
        request = http.build_request("POST", url, json=body("slow"))
        held.append(await http.send(request, stream=True))
    return held


async def starve(pool: Pool, provider: SimulatedProvider) -> None:
    """One request through ``pool`` that is given up while it waits for a connection."""
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(KILL_AFTER_S):
            await chat_completion(pool, source(provider, "ok"), {"messages": MESSAGES}, stream=True)


async def test_a_pool_that_cannot_serve_is_replaced_and_warned_about_once(
    provider: SimulatedProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """Defence in depth: a client-made pool whose slots are all held by requests that are gone
    is replaced after the first request that starved, with one warning; calls then succeed,
    and the old client is closed once its last request of ours ended."""
    made: list[httpx2.AsyncClient] = []

    def factory() -> httpx2.AsyncClient:
        made.append(httpx2.AsyncClient(limits=httpx2.Limits(max_connections=2)))
        return made[-1]

    pool = Pool(factory=factory)
    url = f"{provider.base_url}/chat/completions"
    ok = source(provider, "ok")
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        await chat_completion(pool, ok, {"messages": MESSAGES}, stream=True)  # arms the check
        held = await occupied(made[0], url, 2)
        await starve(pool, provider)
        assert pool.replacements == 1
        completion = await chat_completion(pool, ok, {"messages": MESSAGES}, stream=True)
        assert completion.finish_reason == "stop"
    assert len(made) == 2
    assert pool.retired == 0, "the poisoned client had no request of ours left: closed"
    assert made[0].is_closed
    assert caplog.text.count("was replaced with a new pool") == 1
    for response in held:
        await response.aclose()
    await pool.aclose()
    assert made[1].is_closed


async def test_a_users_pool_is_reported_not_replaced(
    provider: SimulatedProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """A pool passed in as ``http_client`` is not ours to replace: it is reported once."""
    url = f"{provider.base_url}/chat/completions"
    async with httpx2.AsyncClient(limits=httpx2.Limits(max_connections=1)) as http:
        pool = Pool(client=http)
        with caplog.at_level(logging.WARNING, logger="otel_llm"):
            await chat_completion(pool, source(provider, "ok"), {"messages": MESSAGES}, stream=True)
            held = await occupied(http, url, 1)
            await starve(pool, provider)
            await starve(pool, provider)
        assert pool.http is http
        assert pool.replacements == 0
        assert caplog.text.count("does not replace a client it does not own") == 1
        await held[0].aclose()
        await pool.aclose()
        assert not http.is_closed, "the user's client is the user's to close"


async def test_a_transport_that_reports_no_connections_never_arms_the_check(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``MockTransport`` says nothing about connections: a request it never answers is not
    taken for a poisoned pool."""

    async def never(request: httpx2.Request) -> httpx2.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    made = []

    def factory() -> httpx2.AsyncClient:
        made.append(httpx2.AsyncClient(transport=httpx2.MockTransport(never)))
        return made[-1]

    pool = Pool(factory=factory)
    mock = Source(name="m", provider="sim", base_url="http://m.test/v1", model="m")
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        for _ in range(2):
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.1):
                    await chat_completion(pool, mock, {"messages": MESSAGES}, stream=True)
    assert (pool.replacements, len(made), caplog.text) == (0, 1, "")
    await pool.aclose()


def test_an_httpx_client_is_refused_with_the_reason() -> None:
    """A legacy ``httpx.AsyncClient`` as ``http_client`` is a ConfigurationError naming the
    leak, not a pool that will be poisoned later."""
    require(importlib.util.find_spec("httpx") is not None, "httpx 0.28 (dev extra) not installed")
    import httpx

    from otel_llm import ConfigurationError

    legacy = httpx.AsyncClient()
    s = Source(name="a", provider="p", base_url="http://a.test/v1", model="m")
    with pytest.raises(ConfigurationError, match="httpcore#1093"):
        Client([s], http_client=legacy)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_client_serves_calls_from_one_event_loop_after_another() -> None:
    """``asyncio.run`` for each call of one client (a synchronous application): the pool's
    connections belong to the loop that made them, so each new loop gets a fresh pool — every
    call is answered, none fails with ``RuntimeError: Event loop is closed``. (The warnings
    ignored are the earlier loops' own: each was closed with a kept-alive connection open.)"""
    with SimulatedProvider(default=Script(chunk_count=3)).start_in_thread() as provider:
        client = Client([Source(name="a", provider="sim", base_url=provider.base_url, model="m")])

        async def one() -> str:
            return (await client.chat(MESSAGES)).text

        answers = [asyncio.run(one()) for _ in range(3)]

        async def close() -> None:
            await client.aclose()

        asyncio.run(close())
        gc.collect()  # the earlier loops' connections go now, under this test's filters
    assert len(answers) == 3
    assert len(set(answers)) == 1
    assert answers[0].startswith("word0 word1")


def test_a_call_waiting_for_a_connection_of_the_pool_is_not_hedged() -> None:
    """On virtual time, real HTTP: ``pool_max_connections=2``, six calls at once, each stream
    longer than ``hedge_after_s``. The calls that wait for a connection are late with their
    first chunk only because of the client's own pool, where a hedge would wait too: none is
    hedged (four were, and the hedges never reached the other source)."""

    async def six_at_once() -> tuple[list[int], int]:
        long_stream = Script(first_chunk_delay_s=0.2, chunk_count=10, chunk_interval_s=0.3)
        async with (
            SimulatedProvider(default=long_stream) as first,
            SimulatedProvider(default=long_stream) as second,
        ):
            sources = [
                Source(name="a", provider="sim", base_url=first.base_url, model="m"),
                Source(name="b", provider="sim", base_url=second.base_url, model="m", priority=1),
            ]
            async with Client(sources, pool_max_connections=2, hedge_after_s=1.0) as client:
                results = await asyncio.gather(*(client.chat(MESSAGES) for _ in range(6)))
            return [result.stats.hedges for result in results], second.stats.requests

    hedges, hedge_requests = run_virtual(six_at_once(), real_io=True)
    assert hedges == [0] * 6
    assert hedge_requests == 0


def test_a_request_of_an_earlier_loop_ends_cleanly_after_another_loop_used_the_pool() -> None:
    """One client used from two event loops at once (two threads, each running its own): a
    request of the first loop that ends after a request of the second started afresh ends
    without an error of the pool's own bookkeeping (it raised a bare ``KeyError`` naming the
    earlier loop's client, failing the call), and the counts stay those of the current loop."""
    pool = Pool(factory=httpx2.AsyncClient)
    entered, release = threading.Event(), threading.Event()
    ended: list[str] = []

    async def earlier() -> None:
        async with pool.lease() as lease:
            await lease._trace("connection.connect_tcp.started", {})
            entered.set()
            await asyncio.to_thread(release.wait, 60)
        ended.append("earlier")

    async def current() -> None:
        async with pool.lease():
            pass
        ended.append("current")

    thread = threading.Thread(target=asyncio.run, args=(earlier(),))
    thread.start()
    try:
        assert entered.wait(60)
        asyncio.run(current())
    finally:
        release.set()
        thread.join(60)
    assert ended == ["current", "earlier"]
    assert pool.connected == 0
    assert sum(pool.in_flight.values()) == 0
