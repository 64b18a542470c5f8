"""An event loop on virtual time: when nothing is ready, time jumps to the next timer.

For tests of waiting behaviour (stall windows, breaker cool-downs, watchdogs) that would take
minutes or hours on the real clock.

``run_virtual(main())`` runs a coroutine where ``asyncio.sleep(3600)`` takes no real time and
``loop.time()`` — and the metering clock, so chunk arrivals and figures too — report the
virtual clock — for tests of hour-long waiting behaviour. In-memory
I/O (httpx2.MockTransport) works; real sockets would see the jumps, so tests keep to the former.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

from otel_llm._measure._clock import use_clock

T = TypeVar("T")


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that, instead of waiting for a timer, moves the virtual clock to it."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or not timeout or timeout <= 0:
            return ready
        self.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` is virtual."""

    def __init__(self) -> None:
        self._jumping = _JumpingSelector()
        super().__init__(self._jumping)

    def time(self) -> float:
        return self._jumping.now


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a fresh virtual-time loop; like the shared fixture, fail if
    it leaves a task of its own running (``asyncio.Runner`` would cancel it silently)."""

    async def checked() -> T:
        loop = asyncio.get_running_loop()
        with use_clock(lambda: int(loop.time() * 1e9)):  # metering on the same virtual time
            result = await main
        current = asyncio.current_task()
        leftover = [
            task
            for task in asyncio.all_tasks()
            if task is not current
            and not task.done()
            and type(task.get_coro()).__name__ != "async_generator_athrow"
        ]
        assert leftover == [], f"tasks left running: {leftover}"
        return result

    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(checked())
