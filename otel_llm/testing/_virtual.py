"""An event loop on virtual time: when nothing is ready, time jumps to the next timer.

For tests of waiting behaviour (stall windows, breaker cool-downs, watchdogs) that would take
minutes or hours on the real clock.

``run_virtual(main())`` runs a coroutine where ``asyncio.sleep(3600)`` takes no real time and
``loop.time()`` — and the metering clock, so chunk arrivals and figures too — report the
virtual clock — for tests of hour-long waiting behaviour. In-memory I/O (httpx2.MockTransport)
works as it is. Real sockets work when both ends run on this loop (a server on 127.0.0.1 started
in the same ``main``) and the loop is made with ``real_io=True``: before each jump it waits a
few real milliseconds for what the kernel still carries (loopback delivers within the sending
call, so this is a margin, not a race), and it never jumps while a job it handed to a thread
(a DNS lookup) is running. A peer in another process or thread would see the jumps.
"""

from __future__ import annotations

import asyncio
import contextvars
import selectors
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Executor
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final, TypeVar

from otel_llm._measure import _clock
from otel_llm._measure._clock import use_clock

T = TypeVar("T")

SETTLE_S = 0.005
"""Real seconds a loop with ``real_io`` waits for socket events before it jumps."""

CLOCK_RESOLUTION_S = 1e-6
"""Timers due within this of now run now (a real loop's is its clock's resolution, about 1 ns).
Past 2**24 s (194 days) of virtual time a float's step is wider than 1 ns: a loop that looked
1 ns ahead for due timers found none and jumped nowhere, for ever. A timer run early still
sees the clock at its due time (:meth:`VirtualTimeLoop.call_at`)."""

_JOB: Final = threading.local()
"""``loop``: the virtual loop whose job (``run_in_executor``, ``asyncio.to_thread``) this
thread is running, if any."""


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that, instead of waiting for a timer, moves the virtual clock to it."""

    def __init__(self, settle_s: float, busy: Callable[[], bool]) -> None:
        super().__init__()
        self.now = 0.0
        self._settle_s = settle_s
        self._busy = busy

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or (timeout is not None and timeout <= 0):
            return ready
        if timeout is None:  # no timer: only I/O or another thread can wake the loop
            return super().select(None)
        # a thread's job wakes the loop through its self-pipe when it is done
        while self._settle_s and self._busy():
            ready = super().select(self._settle_s)
            if ready:
                return ready
        if self._settle_s:
            ready = super().select(self._settle_s)
            if ready:
                return ready
        if timeout:
            self.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` is virtual (``real_io``: see the module)."""

    def __init__(self, real_io: bool = False) -> None:
        self._in_threads = 0
        self._jumping = _JumpingSelector(SETTLE_S if real_io else 0.0, self._threads_busy)
        super().__init__(self._jumping)
        self._clock_resolution = CLOCK_RESOLUTION_S

    def _threads_busy(self) -> bool:
        return self._in_threads > 0

    def time(self) -> float:
        return self._jumping.now

    def call_at(  # type: ignore[override]  # same call, the typeshed generics aside
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """A timer that runs with the clock at least at ``when``. The loop runs every timer
        due within its clock resolution (1 ns) of now; on the real clock time moves on anyway,
        here it would not, and a caller that waits for a deadline and reads the clock again
        would wait for the same instant forever (a deadline one float step ahead)."""
        return super().call_at(when, self._at, when, callback, *args, context=context)

    def _at(self, when: float, callback: Callable[..., object], *args: Any) -> None:
        if self._jumping.now < when:
            self._jumping.now = when
        callback(*args)

    def run_in_executor(  # type: ignore[override]  # same call, the typeshed generics aside
        self, executor: Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        loop = self

        def in_virtual_time(*given: Any) -> T:
            """``func`` in a worker thread that meters this loop's virtual time."""
            _JOB.loop = loop
            try:
                return func(*given)
            finally:
                _JOB.loop = None

        future = super().run_in_executor(executor, in_virtual_time, *args)
        self._in_threads += 1

        def done(_: object) -> None:
            self._in_threads -= 1

        future.add_done_callback(done)
        return future


class _Metering:
    """The metering clock while virtual loops run, one for all of them (the metering clock is
    the process's): in a thread running a virtual loop, or a job of one (``asyncio.to_thread``),
    that loop's time; in any other thread, the clock in place before the first started. It is
    put back when the last one ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._swap: AbstractContextManager[None] | None = None
        self._outside: Callable[[], int] = _clock.now_ns

    def now_ns(self) -> int:
        loop: asyncio.AbstractEventLoop | None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a thread without a loop: a virtual loop's job, or not
            loop = getattr(_JOB, "loop", None)
        if isinstance(loop, VirtualTimeLoop):
            # to the nearest nanosecond: 0.7 + 0.1 is 0.7999999999999999 as a float, and
            # truncated it would meter 799.999999 ms
            return round(loop.time() * 1e9)
        return self._outside()

    @contextmanager
    def virtual(self) -> Iterator[None]:
        """Meter on virtual time in this thread's virtual loop for the ``with`` block."""
        with self._lock:
            if self._running == 0:
                outside = _clock.now_ns
                # never itself: a use_clock() of another thread that began before a virtual
                # loop and ended after it puts this clock back as the process's, and taken as
                # the outside clock it would ask itself for ever (RecursionError)
                mine = getattr(outside, "__self__", None) is self
                self._outside = time.monotonic_ns if mine else outside
                self._swap = use_clock(self.now_ns)
                self._swap.__enter__()
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                swap = self._swap
                if self._running == 0 and swap is not None:
                    self._swap = None
                    swap.__exit__(None, None, None)


_METERING = _Metering()


def run_virtual(main: Coroutine[Any, Any, T], *, real_io: bool = False) -> T:
    """Run ``main`` to completion on a fresh virtual-time loop; like the shared fixture, fail if
    it leaves a task of its own running (``asyncio.Runner`` would cancel it silently).
    ``real_io``: ``main`` talks over real sockets to servers it runs on the same loop.

    It runs a loop of its own, so it is called where no event loop runs (a synchronous test);
    from a running one it closes ``main`` and raises :class:`RuntimeError`."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # none runs here: the virtual loop may
    else:
        main.close()
        raise RuntimeError(
            "run_virtual runs its own event loop and cannot be called from a running event "
            "loop (an async test): call it from a synchronous test"
        )

    async def checked() -> T:
        with _METERING.virtual():
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

    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(real_io)) as runner:
        return runner.run(checked())
