"""The streaming watchdog: no incremental chunk for too long kills the attempt.

Liveness counts incremental chunks only — the chunk clock — so SSE keepalives and empty deltas
cannot keep a dead stream alive. The watchdog adds nothing to the per-chunk path: one timer
callback wakes at the current deadline, looks at the clock's last arrival, and either sleeps
until the new deadline or — once the loop has read what its sockets already hold, so that a
busy loop's own lateness is never taken for the provider's silence — fires. Deadlines are on
the event loop's clock (the chunk clock maps its arrivals onto it), so a loop with virtual time
runs the watchdog on virtual time.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from otel_llm._errors import WatchdogTimeout
from otel_llm._measure._chunks import ChunkClock


class Watchdog:
    """``async with Watchdog(clock, ttft_s, inter_s, source=...)`` around a streamed read.

    Raises :class:`WatchdogTimeout` when the first chunk takes longer than ``ttft_s`` or a
    later gap longer than ``inter_s``.
    """

    def __init__(self, clock: ChunkClock, ttft_s: float, inter_s: float, *, source: str) -> None:
        self._clock = clock
        self._ttft_s = ttft_s
        self._inter_s = inter_s
        self._source = source
        self._timeout: asyncio.Timeout | None = None
        self._handle: asyncio.Handle | None = None
        self.fired: str | None = None

    def _deadline_s(self) -> float:
        """When, on the loop's clock, the current budget runs out."""
        clock = self._clock
        if clock.count == 0:
            return clock.on_loop(clock.start_ns) + self._ttft_s
        return clock.on_loop(clock.arrivals_ns[-1]) + self._inter_s

    def _next_check_s(self, now: float) -> float:
        """Seconds until the next look: the deadline, or sooner while no chunk has come (the
        first chunk moves the deadline to an inter-chunk budget that may end earlier)."""
        remaining = self._deadline_s() - now
        if self._clock.count == 0:
            remaining = min(remaining, self._inter_s)
        return remaining

    def _check(self) -> None:
        self._handle = None
        if self._clock.finished:
            return  # the finish reason came: the rest (usage, [DONE]) is the read timeout's
        loop = asyncio.get_running_loop()
        now = loop.time()
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
        if self._clock.count != chunks or self._deadline_s() > now:
            self._handle = loop.call_later(max(0.0, self._next_check_s(now)), self._check)
            return
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
        loop = asyncio.get_running_loop()
        self._handle = loop.call_later(max(0.0, self._next_check_s(loop.time())), self._check)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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
