"""The streaming watchdog (SPEC R6): liveness is incremental chunks only."""

from __future__ import annotations

import asyncio

import pytest

from otel_llm import WatchdogTimeout
from otel_llm.act._watchdog import Watchdog
from otel_llm.measure._chunks import ChunkClock

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
