"""The HTTP connection pool of one client, and the defence against a pool that stopped serving.

The transport is ``httpx2`` (the maintained fork the openai SDK uses): ``httpx`` 0.28 with
``httpcore`` 1.0.9 leaks a pool slot whenever a request is cancelled after the pool assigned it
a new connection and before that connection was made (encode/httpcore#1093, fixed in
httpcore2 2.6.0), and the watchdog and hedging cancel requests all the time.

Defence in depth: every request of ours is a :class:`Lease` that learns, through the HTTP
library's public ``trace`` extension, whether the pool gave it a connection. A request that
waited (at least ``pool_starved_after_s``) and ended without ever getting one, while *no* request
of ours held a connection at any time during its wait, means the pool could not serve although
nothing of ours was using it: its slots are held by something that is gone. (Requests queued
behind ours that are cancelled together with them do not count: ours held connections while
they waited.)
A pool the client made itself is then replaced (the old one is closed once its last request has
ended) and a warning is logged once; a pool the user passed in (``http_client=``) is not ours to
replace, so that is only logged, once. Transports that never report connections (``MockTransport``)
never arm the check.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import httpx2

from otel_llm._defaults import DEFAULTS

logger = logging.getLogger("otel_llm")

PoolFactory = Callable[[], httpx2.AsyncClient]


class Pool:
    """The ``httpx2.AsyncClient`` requests go through, replaced if its pool is poisoned."""

    def __init__(
        self, *, factory: PoolFactory | None = None, client: httpx2.AsyncClient | None = None
    ) -> None:
        """Either ``factory`` makes the clients (owned: replaceable and closed by
        :meth:`aclose`), or ``client`` is the user's (never replaced, never closed here)."""
        if (factory is None) == (client is None):
            raise ValueError("a Pool needs exactly one of a factory or a client")
        self._factory = factory
        self.http: httpx2.AsyncClient = client if client is not None else factory()  # type: ignore[misc]
        self.owned = factory is not None
        self.in_flight: dict[httpx2.AsyncClient, int] = {}
        """Requests of ours under way, per client (the current one and retired ones)."""
        self.connected = 0
        """Requests of ours that hold a connection right now."""
        self.idle_since = time.monotonic()
        """Since when no request of ours has held a connection (while ``connected == 0``)."""
        self.reports_connections = False
        """Set once the transport has reported a connection: only then can a request that got
        none be told apart from one whose transport says nothing."""
        self.replacements = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        """The event loop of the latest request (see :meth:`_follow_loop`)."""
        self.epoch = 0
        """How many times the pool started afresh on a new loop: a lease of an earlier epoch
        (a request of another loop still running) leaves the counts of this one alone."""
        self._retired: list[httpx2.AsyncClient] = []
        self._warned = False

    def lease(self, on_connected: Callable[[], None] | None = None) -> Lease:
        """One request's use of the pool: ``async with pool.lease() as lease``.
        ``on_connected`` is called once, when the pool gives the request its connection (a
        transport that reports no connections never calls it: see :attr:`reports_connections`)."""
        self._follow_loop()
        return Lease(self, on_connected)

    def _follow_loop(self) -> None:
        """A pool of ours used from another event loop than before (``asyncio.run`` for each
        call) starts afresh: its connections belong to the earlier loop, perhaps closed, where
        reusing or even closing one raises ``RuntimeError: Event loop is closed``. They are
        left to that loop, not closed from this one."""
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return
        if self._loop is not None and self._factory is not None:
            self.http = self._factory()
            self.in_flight = {}
            self.connected = 0
            self._retired = []
            self.epoch += 1
        self._loop = loop

    def _starved(self) -> None:
        """A request ended without a connection while none of ours held one."""
        if self.owned:
            assert self._factory is not None
            self._retired.append(self.http)
            self.http = self._factory()
            self.replacements += 1
            if not self._warned:
                self._warned = True
                logger.warning(
                    "otel-llm: the HTTP connection pool could not serve a request while no "
                    "request of ours held a connection (its slots were held by requests that "
                    "are gone); it was replaced with a new pool. Further replacements are "
                    "counted, not logged."
                )
        elif not self._warned:
            self._warned = True
            logger.warning(
                "otel-llm: the http_client passed to Client could not serve a request while no "
                "request of ours held a connection: its pool may be poisoned (slots held by "
                "requests that are gone). otel-llm does not replace a client it does not own."
            )

    async def _close_drained(self) -> None:
        """Close the retired clients whose last request of ours has ended."""
        if not self._retired:
            return
        drained = [client for client in self._retired if not self.in_flight.get(client)]
        for client in drained:  # all taken off before the first await: no one closes twice
            self._retired.remove(client)
            self.in_flight.pop(client, None)
        for client in drained:
            await client.aclose()

    @property
    def retired(self) -> int:
        """Replaced clients still waiting for their last request to end."""
        return len(self._retired)

    async def aclose(self) -> None:
        """Close the clients this pool made (the user's own client is left open; those of an
        earlier event loop are left to it)."""
        self._follow_loop()
        retired, self._retired = self._retired, []
        for client in retired:
            await client.aclose()
        if self.owned:
            await self.http.aclose()


class Lease:
    """One request's use of a :class:`Pool`: the client to send with, and the ``trace``
    extension that tells the pool when the request got a connection."""

    __slots__ = ("_connected", "_epoch", "_on_connected", "_pool", "_started", "http")

    def __init__(self, pool: Pool, on_connected: Callable[[], None] | None = None) -> None:
        self._pool = pool
        self._on_connected = on_connected
        self._epoch = pool.epoch
        self.http = pool.http
        self._connected = False
        self._started = 0.0

    @property
    def extensions(self) -> dict[str, Any]:
        """Request extensions to send with (httpcore's ``trace`` hook)."""
        return {"trace": self._trace}

    async def _trace(self, event: str, info: dict[str, Any]) -> None:
        """Any event from the connection layer means the pool assigned us a connection."""
        if not self._connected:
            self._connected = True
            self._pool.reports_connections = True
            if self._current:
                self._pool.connected += 1
            if self._on_connected is not None:
                self._on_connected()

    @property
    def _current(self) -> bool:
        """Whether the pool has not started afresh on another loop since this lease began
        (then its counts are no longer this request's to keep)."""
        return self._epoch == self._pool.epoch

    async def __aenter__(self) -> Lease:
        pool = self._pool
        if self._current:
            pool.in_flight[self.http] = pool.in_flight.get(self.http, 0) + 1
        self._started = time.monotonic()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        pool, client = self._pool, self.http
        if not self._current:
            return  # a request of an earlier loop: its client is left to that loop
        pool.in_flight[client] -= 1
        if self._connected:
            pool.connected -= 1
            if pool.connected == 0:
                pool.idle_since = time.monotonic()
        elif (
            exc is not None
            and pool.reports_connections
            and pool.connected == 0
            and pool.idle_since <= self._started
            and time.monotonic() - self._started >= DEFAULTS.pool_starved_after_s
            and client is pool.http
        ):
            pool._starved()
        if exc is None or isinstance(exc, Exception):  # never await while being cancelled
            await pool._close_drained()
