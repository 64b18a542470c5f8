"""The streaming watchdog: no incremental chunk for too long kills the attempt.

Liveness counts incremental chunks only — the chunk clock — so SSE keepalives and empty deltas
cannot keep a dead stream alive. The watchdog adds nothing to the per-chunk path: one timer
callback wakes at the current deadline, looks at the clock's last arrival, and either sleeps
until the new deadline or — once the loop has read what its sockets already hold, so that a
busy loop's own lateness is never taken for the provider's silence — fires. Deadlines are on
the event loop's clock (the chunk clock maps its arrivals onto it), so a loop with virtual time
runs the watchdog on virtual time.

The first chunk's budget starts when the request gets its connection from the client's own pool
(:class:`ConnectionWait`): time spent queued behind other requests for a connection is the
client's, not the provider's silence (with ``pool_max_connections`` streams running, the rest
wait there). A transport that reports no connections (``MockTransport``) never says when; there
the budget starts with the attempt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType

from otel_llm._errors import WatchdogTimeout
from otel_llm._measure._chunks import ChunkClock


class ConnectionWait:
    """One request's wait for a connection of the client's own pool, the one owner of when it
    got one and whether it still waits (the watchdog's first-chunk budget and the first-token
    hedge both count from the connection). ``reports_connections`` says whether the transport
    reports when a request gets its connection; a wait is taken for one for at most ``queue_s``
    from the attempt's start (the pool's own timeout): past it, a request still without one is
    served by a transport that reports none (one mounted beside a reporting one)."""

    def __init__(
        self, clock: ChunkClock, queue_s: float, reports_connections: Callable[[], bool]
    ) -> None:
        self._clock = clock
        self._queue_s = queue_s
        self._reports_connections = reports_connections
        self.connected_at: float | None = None
        """When (on the loop's clock) the request got its connection from the pool."""
        self.connected = asyncio.Event()
        """Set when the request got its connection from the pool."""
        self.on_connected: Callable[[], None] | None = None
        """Called once the request got its connection (the watchdog, while it runs)."""

    def mark(self) -> None:
        """The pool gave the request its connection: the first chunk's budgets start now."""
        if self.connected_at is None:
            self.connected_at = asyncio.get_running_loop().time()
            self.connected.set()
            if self.on_connected is not None:
                self.on_connected()

    @property
    def ends_s(self) -> float:
        """When (on the loop's clock) a wait for a connection is no longer taken for one."""
        return self._clock.on_loop(self._clock.start_ns) + self._queue_s

    def queued(self) -> bool:
        """Whether the request still waits for a connection from the client's own pool."""
        return (
            self.connected_at is None
            and self._reports_connections()
            and asyncio.get_running_loop().time() < self.ends_s
        )


class Watchdog:
    """``async with Watchdog(clock, ttft_s, inter_s, source=...)`` around a streamed read.

    Raises :class:`WatchdogTimeout` when the first chunk takes longer than ``ttft_s`` after
    the request got its connection (``wait``: no first-chunk budget runs while it waits for
    one), or a later gap longer than ``inter_s``; without ``wait``, the first chunk's budget
    starts with the watchdog.
    """

    def __init__(
        self,
        clock: ChunkClock,
        ttft_s: float,
        inter_s: float,
        *,
        source: str,
        wait: ConnectionWait | None = None,
    ) -> None:
        self._clock = clock
        self._ttft_s = ttft_s
        self._inter_s = inter_s
        self._source = source
        self._wait = wait
        self._running = False
        self._timeout: asyncio.Timeout | None = None
        self._handle: asyncio.Handle | None = None
        self.fired: str | None = None

    def _connected(self) -> None:
        """The request got its connection: look again at the new deadline (the queue's check
        is moot now)."""
        if not self._running:
            return
        loop = asyncio.get_running_loop()
        if self._handle is not None:
            self._handle.cancel()
        self._handle = loop.call_later(self._next_check_s(loop.time()), self._check)

    def _connected_at(self) -> float | None:
        return self._wait.connected_at if self._wait is not None else None

    def _queue_ends_s(self) -> float:
        assert self._wait is not None
        return self._wait.ends_s

    def _queued(self) -> bool:
        """Whether the request still waits for a connection from the client's own pool."""
        return self._wait is not None and self._wait.queued()

    def _deadline_s(self) -> float:
        """When, on the loop's clock, the current budget runs out."""
        clock = self._clock
        if clock.count == 0:
            started = self._connected_at()
            if started is None:
                started = clock.on_loop(clock.start_ns)
            return started + self._ttft_s
        return clock.on_loop(clock.arrivals_ns[-1]) + self._inter_s

    def _next_check_s(self, now: float) -> float:
        """Seconds until the next look: the deadline, or sooner while no chunk has come (the
        first chunk moves the deadline to an inter-chunk budget that may end earlier; the
        connection, once the request gets it, starts the first chunk's budget)."""
        remaining = self._deadline_s() - now
        if self._clock.count == 0:
            remaining = min(remaining, self._inter_s)
        return remaining

    def _waiting_for_pool(self) -> bool:
        """No chunk yet, and the request still waits for its connection: no budget runs
        (:meth:`connected` arms the first chunk's)."""
        return self._clock.count == 0 and self._queued()

    def _check(self) -> None:
        self._handle = None
        if self._clock.finished:
            return  # the finish reason came: the rest (usage, [DONE]) is the read timeout's
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._waiting_for_pool():  # the connection arms the first chunk's budget, or this
            self._handle = loop.call_later(self._queue_ends_s() - now, self._check)
            return
        if self._deadline_s() > now:
            self._handle = loop.call_later(self._next_check_s(now), self._check)
            return
        # The budget ran out; but a chunk may be waiting unread, because this loop was busy
        # (a long callback, a collection pass) rather than the provider silent. Look once the
        # loop has polled its sockets again (a timer due now runs after that poll's callbacks)
        # and the reading task has run on what they delivered (``call_soon`` from there runs
        # after the task's wake-up): only then is the silence the provider's.
        self._handle = loop.call_later(0.0, self._after_poll, self._clock.count)

    def _after_poll(self, chunks: int) -> None:
        self._handle = asyncio.get_running_loop().call_soon(self._decide, chunks)

    def _decide(self, chunks: int) -> None:
        self._handle = None
        if self._clock.finished:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._waiting_for_pool():  # the connection arms the first chunk's budget, or this
            self._handle = loop.call_later(self._queue_ends_s() - now, self._check)
            return
        if self._clock.count != chunks or self._deadline_s() > now:
            self._handle = loop.call_later(max(0.0, self._next_check_s(now)), self._check)
            return
        self._running = False
        self.fired = (
            f"no first chunk within {self._ttft_s:g} s"
            if chunks == 0
            else f"no chunk for {self._inter_s:g} s after chunk {chunks}"
        )
        if self._timeout is not None:
            self._timeout.reschedule(now)

    async def __aenter__(self) -> Watchdog:
        self._timeout = asyncio.timeout(None)
        await self._timeout.__aenter__()
        self._running = True
        if self._wait is not None:
            self._wait.on_connected = self._connected
        loop = asyncio.get_running_loop()
        self._handle = loop.call_later(max(0.0, self._next_check_s(loop.time())), self._check)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._running = False
        if self._wait is not None:
            self._wait.on_connected = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        assert self._timeout is not None
        try:
            await self._timeout.__aexit__(exc_type, exc, tb)
        except TimeoutError:
            if self.fired is None:
                raise
        else:
            return
        # raised outside the except: the cancellation it replaces came through the HTTP
        # library, whose errors may hold the request (see otel_llm._errors)
        raise WatchdogTimeout(f"watchdog: {self.fired}", source=self._source)
