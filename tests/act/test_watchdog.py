"""The streaming watchdog: liveness is incremental chunks only."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator

import httpx2
import pytest

from otel_llm import Client, Source, WatchdogTimeout
from otel_llm import _semconv as sc
from otel_llm._act._watchdog import ConnectionWait, Watchdog
from otel_llm._measure._chunks import ChunkClock
from otel_llm.simulator import Script, SimulatedProvider
from otel_llm.testing import Spans, run_virtual

BUDGET = 0.1


async def test_no_first_chunk_within_ttft_kills() -> None:
    """No first chunk within ttft_s raises WatchdogTimeout naming it."""
    clock = ChunkClock()
    with pytest.raises(WatchdogTimeout, match=r"no first chunk within 0\.1 s"):
        async with Watchdog(clock, BUDGET, 60.0, source="a"):
            await asyncio.sleep(60)


async def test_gap_after_first_chunk_kills_even_with_a_long_ttft_budget() -> None:
    """The inter-chunk budget applies from the first chunk on, however long ttft_s is."""
    clock = ChunkClock()
    dog = Watchdog(clock, 60.0, BUDGET, source="a")

    async def two_chunks_then_silence() -> None:
        async with dog:
            clock.mark()
            await asyncio.sleep(BUDGET / 4)
            clock.mark()
            await asyncio.sleep(60)

    with pytest.raises(WatchdogTimeout, match="after chunk 2"):
        await two_chunks_then_silence()
    assert dog.fired is not None


async def test_steady_chunks_keep_the_stream_alive() -> None:
    """Chunks arriving within the budget never trip the watchdog."""
    clock = ChunkClock()
    async with Watchdog(clock, BUDGET, BUDGET, source="a") as dog:
        for _ in range(20):
            clock.mark()
            await asyncio.sleep(BUDGET / 5)
    assert dog.fired is None


async def test_outside_cancellation_is_not_a_watchdog_kill() -> None:
    """Cancelling the reader is a cancellation, never turned into a WatchdogTimeout."""
    clock = ChunkClock()
    started = asyncio.Event()

    async def read() -> None:
        async with Watchdog(clock, 60.0, 60.0, source="a"):
            started.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(read())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_chunk_that_came_while_the_loop_was_busy_is_not_silence() -> None:
    """The provider's chunk reaches the socket within the budget, but this loop is busy (a
    blocking callback, as a long collection pass would be) until well past the deadline: the
    chunk is read first and the watchdog never fires. Only silence is the provider's."""
    clock = ChunkClock()
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    loop = asyncio.get_running_loop()

    def busy() -> None:
        theirs.sendall(b"chunk\n")  # in time...
        time.sleep(BUDGET * 3)  # ...and read only once the loop is free, past the budget

    try:
        async with Watchdog(clock, BUDGET, 60.0, source="a") as dog:
            loop.call_later(BUDGET / 2, busy)
            assert await reader.readline() == b"chunk\n"
            clock.mark()
            await asyncio.sleep(BUDGET)  # past the first deadline: nothing more fires
        assert dog.fired is None
    finally:
        writer.close()
        theirs.close()


async def test_a_silent_stream_is_killed_even_while_the_loop_is_busy() -> None:
    """The same busy loop and no chunk: the watchdog fires once the loop is free."""
    clock = ChunkClock()
    loop = asyncio.get_running_loop()
    loop.call_later(BUDGET / 2, time.sleep, BUDGET * 3)
    started = loop.time()
    with pytest.raises(WatchdogTimeout, match="no first chunk"):
        async with Watchdog(clock, BUDGET, 60.0, source="a"):
            await asyncio.sleep(60)
    assert loop.time() - started < 30, "fired as soon as the loop was free, not at the sleep's end"


def _stream_with_silence(silence_s: float) -> httpx2.Response:
    async def body() -> AsyncIterator[bytes]:
        for word in ("a", "b", "c"):
            chunk = {"choices": [{"index": 0, "delta": {"content": word}}]}
            yield f"data: {json.dumps(chunk)}\n\n".encode()
            if word == "b":
                await asyncio.sleep(silence_s)
        yield b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
        yield b"data: [DONE]\n\n"

    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())


@pytest.mark.parametrize(("silence_s", "killed"), [(30.0, False), (90.0, True)])
def test_the_watchdog_runs_on_the_loops_clock(silence_s: float, killed: bool) -> None:
    """On virtual time (a loop whose clock jumps): a 30 s silence is a stall the client
    measures, a 90 s one is killed by the 60 s watchdog — timers run on the loop's clock, the
    figures on the metering clock, and the two agree."""
    from otel_llm import Client, Source

    async def main() -> object:
        http = httpx2.AsyncClient(
            transport=httpx2.MockTransport(lambda request: _stream_with_silence(silence_s))
        )
        source = Source(name="a", provider="sim", base_url="http://a.test/v1", model="m",
                        inter_token_timeout_s=60)  # fmt: skip
        async with Client([source], http_client=http, max_attempts=1) as client:
            try:
                return (await client.chat([{"role": "user", "content": "x"}])).stats
            except Exception as exc:
                return exc.__cause__.exceptions[0] if exc.__cause__ else exc  # type: ignore[attr-defined]
            finally:
                await http.aclose()

    outcome = run_virtual(main())
    if killed:
        assert isinstance(outcome, WatchdogTimeout)
        assert "no chunk for 60 s" in str(outcome)
    else:
        assert getattr(outcome, "stall_ms", None) == 30_000


def test_the_watchdog_does_not_depend_on_the_metering_clock() -> None:
    """With the metering clock stopped (swapped for a replay, say), the watchdog still fires on
    the loop's clock: 60 s of loop time without a chunk kill the stream."""
    from otel_llm.testing import use_clock

    async def main() -> float:
        loop = asyncio.get_running_loop()
        clock = ChunkClock()
        started = loop.time()
        with pytest.raises(WatchdogTimeout):
            async with Watchdog(clock, 60.0, 60.0, source="s"):
                await asyncio.sleep(3600)
        return loop.time() - started

    async def frozen() -> float:
        with use_clock(lambda: 0):
            return await main()

    assert 60.0 <= run_virtual(frozen()) < 61.0


async def test_no_first_chunk_budget_runs_while_the_request_waits_for_a_connection() -> None:
    """A request queued for a connection of the client's own pool is not the provider's
    silence: the first chunk's budget starts when the pool gives it its connection."""
    clock = ChunkClock()
    wait = ConnectionWait(clock, 60.0, lambda: True)
    dog = Watchdog(clock, BUDGET, 60.0, source="a", wait=wait)
    queued_while_silent: list[str | None] = []

    async def queued_then_connected() -> None:
        async with dog:
            await asyncio.sleep(5 * BUDGET)  # waiting for a pooled connection
            queued_while_silent.append(dog.fired)
            wait.mark()
            await asyncio.sleep(60)

    with pytest.raises(WatchdogTimeout, match=r"no first chunk within 0\.1 s"):
        await queued_then_connected()
    assert queued_while_silent == [None]


async def test_a_request_that_never_reports_its_connection_is_judged_after_the_pool_timeout() -> (
    None
):
    """The pool reports connections, but this request never does (a transport that reports
    none, mounted beside one that does): past the pool's own timeout it is no longer taken for
    queued, and the first chunk's budget, run from the start, kills it — never an endless
    wait."""
    clock = ChunkClock()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(WatchdogTimeout, match="no first chunk"):
        async with Watchdog(
            clock, BUDGET, 60.0, source="a", wait=ConnectionWait(clock, 3 * BUDGET, lambda: True)
        ):
            await asyncio.sleep(60)
    assert 3 * BUDGET <= loop.time() - started < 60


async def test_a_transport_that_reports_no_connections_runs_the_budget_from_the_start() -> None:
    """A transport that never says when a request got its connection (``MockTransport``):
    the first chunk's budget runs from the attempt's start, as before."""
    clock = ChunkClock()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(WatchdogTimeout):
        async with Watchdog(clock, BUDGET, 60.0, source="a"):
            await asyncio.sleep(60)
    assert loop.time() - started < 60


def test_streams_queued_behind_a_full_pool_are_not_killed_as_silent() -> None:
    """``pool_max_connections=1`` and three streams at once, each longer than the first-chunk
    timeout: the later calls wait for the connection (ten seconds for the last), then stream —
    none is killed by the watchdog and blamed on its healthy source (on virtual time: exact)."""
    spans = Spans()
    long_stream = Script(first_chunk_delay_s=0.5, chunk_count=20, chunk_interval_s=0.2)

    async def three_at_once() -> list[str]:
        async with SimulatedProvider(default=long_stream) as sim:
            source = Source(
                name="a", provider="sim", base_url=sim.base_url, model="m", ttft_timeout_s=1.0
            )
            async with Client(
                [source], pool_max_connections=1, tracer_provider=spans.provider
            ) as client:
                results = await asyncio.gather(
                    *(client.chat([{"role": "user", "content": "hi"}]) for _ in range(3))
                )
        return [result.source for result in results]

    assert run_virtual(three_at_once(), real_io=True) == ["a", "a", "a"]
    outcomes = [dict(span.attributes or {})[sc.ATTEMPT_OUTCOME] for span in spans.attempts()]
    assert outcomes == [sc.OUTCOME_OK] * 3
    spans.provider.shutdown()
