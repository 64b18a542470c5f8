"""The virtual-time loop (``otel_llm.testing.run_virtual``): a timer closer than one float step
to the current virtual time still fires with the clock at its due time, so a caller that waits
until a deadline and checks the clock again is never stuck in the same instant.

A loop that cannot advance spins, so each test here runs under a wall-clock guard that cancels
it: a regression fails in seconds instead of hanging the run."""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import sys
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from types import FrameType
from typing import Any, TypeVar

import httpx2
import pytest

from otel_llm import CallStats, ChatResult
from otel_llm._measure import _clock
from otel_llm.testing import Scripted, Spans, figures_of, run_virtual
from otel_llm.testing._virtual import _JumpingSelector
from tests.support.scripted_clients import MESSAGES, client, source, timed_stream

T = TypeVar("T")

GUARD_S = 20.0
"""Real seconds a test's coroutine may run before the guard cancels it (it needs milliseconds)."""


def guarded(main: Coroutine[Any, Any, T]) -> T:
    """``run_virtual(main)``, cancelled from another thread after ``GUARD_S`` real seconds: a
    loop stuck in one virtual instant still runs its callbacks, so the cancellation lands."""
    spun = threading.Event()

    async def watched() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def cancel() -> None:
            spun.set()
            loop.call_soon_threadsafe(task.cancel)

        timer = threading.Timer(GUARD_S, cancel)
        timer.start()
        try:
            return await main
        finally:
            timer.cancel()

    try:
        return run_virtual(watched())
    except asyncio.CancelledError:
        assert not spun.is_set(), f"virtual time stood still for {GUARD_S:g} real seconds"
        raise


def test_a_timer_one_float_step_ahead_fires_with_the_clock_at_its_time() -> None:
    """At t=18.1 a deadline one float step later (3.55e-15 s): each wait for it ends with the
    clock at the deadline, as on the real clock, so the check-and-wait loop ends (it spun)."""

    async def main() -> tuple[int, float, float]:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(18.1)
        deadline = math.nextafter(loop.time(), math.inf)
        waits = 0
        never = asyncio.Event()
        while deadline - loop.time() > 0:
            waits += 1
            assert waits < 100, f"stuck at {loop.time()!r} before {deadline!r}"
            # something else is ready in the same pass, as a hedge's fresh waiters are
            ready = asyncio.create_task(asyncio.sleep(0))
            waiter = asyncio.create_task(never.wait())
            await asyncio.wait({waiter}, timeout=deadline - loop.time())
            waiter.cancel()
            await asyncio.wait({ready, waiter})
        return waits, loop.time(), deadline

    waits, now, deadline = guarded(main())
    assert (waits, now) == (1, deadline)


def test_timers_keep_their_exact_times() -> None:
    """The fix moves no other time: sleeps land exactly where float arithmetic puts them."""

    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        seen = []
        for delay in (0.1, 0.2, 5.0, 3600.0, 0.0):
            await asyncio.sleep(delay)
            seen.append(loop.time())
        return seen

    hour = 0.1 + 0.2 + 5.0 + 3600.0
    assert guarded(main()) == [0.1, 0.1 + 0.2, 0.1 + 0.2 + 5.0, hour, hour]


@pytest.mark.parametrize("start_s", [1.1, 18.1 - 0.3, 1234.5])
def test_a_first_token_hedge_due_one_float_step_after_another_timer_starts(
    spans: Spans, start_s: float
) -> None:
    """A first-token hedge (0.3 s) whose deadline, start + 0.3, is one float step after an
    unrelated timer of the application: the hedge starts and answers (the round spun forever
    in the instant before its deadline)."""
    script = Scripted({"a": [timed_stream(500.0)], "b": [timed_stream(0.5)]})

    async def main() -> tuple[ChatResult, float]:
        loop = asyncio.get_running_loop()
        async with client(script, spans, hedge_after_s=0.3) as c:
            await asyncio.sleep(start_s)
            started = loop.time()
            tick = loop.create_future()
            before = math.nextafter(started + 0.3, -math.inf)
            loop.call_at(before, tick.set_result, None)  # e.g. the app's own periodic job
            result = await c.chat(MESSAGES)
            await tick
            return result, loop.time() - started

    result, elapsed = guarded(main())
    assert (result.source, result.stats.hedges, result.stats.hedge_won) == ("b", 1, True)
    assert elapsed == pytest.approx(0.3 + 1.1), "hedged at 0.3 s; b's stream takes 1.1 s"


def test_a_wait_for_a_thread_without_timers_blocks_instead_of_spinning() -> None:
    """Without a timer, the loop waits for the thread's wake-up as a real loop does: a handful
    of selector calls while a job runs half a second in a thread (it polled without end)."""
    calls = 0

    def count(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call" and frame.f_code is _JumpingSelector.select.__code__:
            calls += 1

    async def main() -> bool:
        job = threading.Event()
        sys.setprofile(count)
        try:
            return await asyncio.to_thread(job.wait, 0.5)
        finally:
            sys.setprofile(None)

    assert guarded(main()) is False
    assert calls < 20, f"the loop polled {calls} times while it had nothing to do"


def test_figures_on_virtual_time_are_the_scripted_ones_despite_float_noise(spans: Spans) -> None:
    """A first chunk at 0.7 + 0.1 virtual seconds (0.7999999999999999 as a float) is 800 ms, and
    the stream's 1 s is 1000 ms: the metering clock rounds virtual time to the nearest
    nanosecond (it truncated: 799 ms and 999 ms)."""

    async def late_pair(request: httpx2.Request) -> httpx2.Response:
        async def body() -> AsyncIterator[bytes]:
            await asyncio.sleep(0.7)
            await asyncio.sleep(0.1)
            for word in ("a", "b"):
                delta = {"choices": [{"index": 0, "delta": {"content": word}}]}
                yield f"data: {json.dumps(delta)}\n\n".encode()
                await asyncio.sleep(0.1)
            yield b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
            yield b"data: [DONE]\n\n"

        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    script = Scripted({"a": [late_pair]})

    async def main() -> CallStats:
        async with client(script, spans, source("a")) as c:
            return (await c.chat(MESSAGES)).stats

    stats = guarded(main())
    assert (stats.ttft_ms, stats.max_inter_chunk_ms, stats.wall_ms) == (800, 100, 1000)
    (attempt,) = spans.attempts()
    assert (figures_of(attempt).ttft_ms, figures_of(attempt).wall_ms) == (800, 1000)


def test_virtual_loops_in_two_threads_each_meter_their_own_time(
    spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads each run a virtual loop; the first ends while the second's stream runs. The
    second still meters its own virtual time (it read real time: ttft 0 ms), and once both
    ended the process meters on the real clock again (it was left on the first loop's frozen
    clock: every later gap 0 ns)."""
    monkeypatch.setattr(_clock, "now_ns", _clock.now_ns)  # should this fail, later tests do not
    a_in, b_in, a_may_end, b_may_end = (threading.Event() for _ in range(4))

    async def hold(entered: threading.Event, may_end: threading.Event) -> None:
        entered.set()
        assert await asyncio.to_thread(may_end.wait, GUARD_S)

    script = Scripted({"a": [timed_stream(2.0, chunks=4)]})
    figures: list[CallStats] = []

    async def held_then_call() -> None:
        await hold(b_in, b_may_end)
        async with client(script, spans, source("a")) as c:
            figures.append((await c.chat(MESSAGES)).stats)

    first = threading.Thread(target=guarded, args=(hold(a_in, a_may_end),))
    second = threading.Thread(target=guarded, args=(held_then_call(),))
    first.start()
    assert a_in.wait(GUARD_S)
    second.start()
    assert b_in.wait(GUARD_S)
    a_may_end.set()
    first.join(GUARD_S)
    b_may_end.set()
    second.join(GUARD_S)
    assert not first.is_alive()
    assert not second.is_alive()
    (stats,) = figures
    assert (stats.ttft_ms, stats.wall_ms) == (2000, 2400), "2 s, then 4 chunks 0.1 s apart"
    assert _clock.now_ns is time.monotonic_ns


async def test_run_virtual_inside_a_running_loop_says_why_and_closes_the_coroutine() -> None:
    """Called from an async test, ``run_virtual`` refuses naming itself and closes the
    coroutine it was given (it left it, and one of its own, never awaited: two warnings at
    garbage collection, errors under ``filterwarnings=error``)."""

    async def main() -> None:
        await asyncio.sleep(1)

    coroutine = main()  # a coroutine object, as inspect.getcoroutinestate needs
    with pytest.raises(RuntimeError, match=r"run_virtual.*running event loop.*synchronous"):
        run_virtual(coroutine)
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED


def test_a_job_of_the_virtual_loop_in_a_worker_thread_meters_its_virtual_time() -> None:
    """A stream consumed in a worker thread (``asyncio.to_thread``) meters the loop's virtual
    time, as the loop's own thread does: it read the real clock (a first chunk 10 s into a
    run read some 39,000 s, labelled exact)."""

    async def main() -> tuple[int, int]:
        await asyncio.sleep(10.0)
        in_thread = await asyncio.to_thread(_clock.now_ns)
        return in_thread, _clock.now_ns()

    assert guarded(main()) == (10 * 10**9, 10 * 10**9)


def test_timers_past_194_days_of_virtual_time_still_fire() -> None:
    """Past 2**24 s a float's step is wider than the 1 ns a real loop looks ahead for due
    timers: a sleep there found no timer due and the loop jumped nowhere, for ever."""

    async def main() -> float:
        await asyncio.sleep(2**24 + 0.3)
        await asyncio.sleep(2.5)
        return asyncio.get_running_loop().time()

    assert guarded(main()) == 2**24 + 0.3 + 2.5


def test_a_clock_swap_of_another_thread_straddling_a_virtual_run_leaves_no_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another thread's ``use_clock`` begins while a ``run_virtual`` runs and ends after it:
    last in, first out, it puts the virtual runs' clock back as the process's. The next run
    took that clock for the outside one, and a metering read outside a loop asked itself for
    ever (RecursionError)."""
    from otel_llm.testing import use_clock

    monkeypatch.setattr(_clock, "now_ns", _clock.now_ns)  # should this fail, later tests do not
    swapped, run_ended = threading.Event(), threading.Event()

    def other_thread() -> None:
        with use_clock(lambda: 42):
            swapped.set()
            assert run_ended.wait(GUARD_S)

    other = threading.Thread(target=other_thread)

    async def first_run() -> None:
        other.start()
        assert await asyncio.to_thread(swapped.wait, GUARD_S)

    async def idle() -> None:
        await asyncio.sleep(1.0)

    guarded(first_run())
    run_ended.set()
    other.join(GUARD_S)
    guarded(idle())
    read: list[int | BaseException] = []

    def outside() -> None:
        try:
            read.append(_clock.now_ns())
        except BaseException as exc:  # the test reads what it was
            read.append(exc)

    reader = threading.Thread(target=outside)
    reader.start()
    reader.join(GUARD_S)
    (value,) = read
    assert isinstance(value, int), value
    assert value > 0
