"""Counters of a simulated provider, and a way to await them instead of sleeping.

The server updates one :class:`ProviderStats` from its event loop; tests read it and wait on it
from the same loop, another loop or another thread. Every outcome of a request is counted once:

``completed``     the answer was written to the end (including error answers and streams that
                  end cleanly without ``[DONE]``);
``disconnected``  the client went away before the answer was finished — the handler was
                  cancelled or a write failed (how a test proves a hedge loser was closed);
``aborted``       the server reset the connection itself (a ``reset`` fault);
``interrupted``   the server shut down while answering;
``failed``        the handler raised (a simulator bug; aiohttp answers 500).

It also keeps the script that answered each *keyed* request of any format (one that carried the
body field ``sim_key``), by the response id of the answer and by key: the scripted ground truth a
meter's figures can be checked against (``otel-llm demo`` does). At most :data:`SCRIPTS_KEPT` are
kept.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Literal

from otel_llm.simulator._script import Script

SCRIPTS_KEPT = 100_000
"""Scripts of keyed requests a :class:`ProviderStats` keeps; the oldest go first."""

Outcome = Literal["completed", "disconnected", "aborted", "interrupted", "failed"]


@dataclass(slots=True)
class RequestRecord:
    """The outcome of one request, set by the handler when it is not ``completed``."""

    outcome: Outcome = "completed"


@dataclass(frozen=True, slots=True)
class _Waiter:
    predicate: Callable[[ProviderStats], bool]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _fail(future: asyncio.Future[None], error: Exception) -> None:
    if not future.done():
        future.set_exception(error)


class ProviderStats:
    """Thread-safe counters of one simulated provider."""

    __slots__ = (
        "_changed",
        "_drawn",
        "_in_flight",
        "_lock",
        "_outcomes",
        "_requests",
        "_scripts",
        "_shutting_down",
        "_waiters",
    )

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._requests: Counter[str] = Counter()
        self._outcomes: Counter[Outcome] = Counter()
        self._in_flight = 0
        self._shutting_down = False
        self._waiters: list[_Waiter] = []
        self._scripts: dict[str, Script] = {}
        self._drawn: dict[str, list[Script]] = {}

    # Reading.

    @property
    def requests(self) -> int:
        """Requests received on every route (answers and embeddings)."""
        with self._lock:
            return self._requests.total()

    @property
    def requests_by_model(self) -> dict[str, int]:
        """Requests received per requested model name (``""`` when the body named none)."""
        with self._lock:
            return dict(self._requests)

    @property
    def in_flight(self) -> int:
        """Requests being answered now."""
        with self._lock:
            return self._in_flight

    @property
    def completed(self) -> int:
        """Requests answered to the end."""
        return self._count("completed")

    @property
    def disconnected(self) -> int:
        """Requests whose client went away before the answer was finished."""
        return self._count("disconnected")

    @property
    def aborted(self) -> int:
        """Requests whose connection the server reset (``reset`` fault)."""
        return self._count("aborted")

    @property
    def outcomes(self) -> dict[Outcome, int]:
        """Finished requests per outcome."""
        with self._lock:
            return dict(self._outcomes)

    def script_of(self, response_id: str) -> Script | None:
        """The script of the keyed request whose answer carried ``response_id`` (``None`` for
        an id this server did not give a keyed request, or one evicted past
        :data:`SCRIPTS_KEPT`)."""
        with self._lock:
            return self._scripts.get(response_id)

    def scripts_for(self, key: str) -> tuple[Script, ...]:
        """The scripts this server drew for ``key``, in the order of its requests."""
        with self._lock:
            return tuple(self._drawn.get(key, ()))

    def _count(self, outcome: Outcome) -> int:
        with self._lock:
            return self._outcomes[outcome]

    # Waiting.

    async def wait_for(self, predicate: Callable[[ProviderStats], bool]) -> None:
        """Return once ``predicate(stats)`` holds; safe from any event loop or thread.

        The predicate runs under the stats lock whenever a counter changes: it should only read
        the counters. Should it raise, the wait raises that error (the server answers on).
        Bound the wait with ``asyncio.timeout`` if the caller needs a deadline.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        waiter = _Waiter(predicate, loop, future)
        with self._lock:
            if self._holds(predicate):
                return
            self._waiters.append(waiter)
        try:
            await future
        finally:
            with self._lock, suppress(ValueError):
                self._waiters.remove(waiter)

    async def wait_for_requests(self, count: int) -> None:
        """Return once at least ``count`` requests have been received."""
        await self.wait_for(lambda stats: stats.requests >= count)

    async def wait_for_disconnects(self, count: int) -> None:
        """Return once at least ``count`` clients have gone away before their answer ended."""
        await self.wait_for(lambda stats: stats.disconnected >= count)

    async def wait_for_completed(self, count: int) -> None:
        """Return once at least ``count`` answers have been written to the end."""
        await self.wait_for(lambda stats: stats.completed >= count)

    def wait_blocking(
        self, predicate: Callable[[ProviderStats], bool], *, timeout_s: float
    ) -> bool:
        """Block the calling thread until ``predicate(stats)`` holds; False on timeout.

        For synchronous code using a provider served from its own thread.
        """
        with self._changed:
            return self._changed.wait_for(lambda: self._holds(predicate), timeout=timeout_s)

    def _holds(self, predicate: Callable[[ProviderStats], bool]) -> bool:
        return bool(predicate(self))

    # Recording (the server's side).

    @contextmanager
    def track(self, model: str) -> Iterator[RequestRecord]:
        """Count one request from start to outcome; the handler runs inside the block."""
        record = RequestRecord()
        with self._lock:
            self._requests[model] += 1
            self._in_flight += 1
            self._notify()
        try:
            yield record
        except asyncio.CancelledError:
            record.outcome = "interrupted" if self._shutting_down else "disconnected"
            raise
        except Exception:
            record.outcome = "failed"
            raise
        finally:
            with self._lock:
                self._in_flight -= 1
                self._outcomes[record.outcome] += 1
                self._notify()

    def record_script(self, response_id: str, key: str, script: Script) -> None:
        """Keep the script that answered a keyed request, by its answer's id and by its key."""
        with self._lock:
            self._scripts[response_id] = script
            self._drawn.setdefault(key, []).append(script)
            if len(self._scripts) > SCRIPTS_KEPT:
                del self._scripts[next(iter(self._scripts))]
            if len(self._drawn) > SCRIPTS_KEPT:
                del self._drawn[next(iter(self._drawn))]

    def mark_shutting_down(self) -> None:
        """From now on a cancelled request is ``interrupted``, not ``disconnected``."""
        with self._lock:
            self._shutting_down = True

    def mark_serving(self) -> None:
        """The server (re)started: a cancelled request is ``disconnected`` again."""
        with self._lock:
            self._shutting_down = False

    def _notify(self) -> None:
        """Wake the waiters whose predicate now holds (lock held)."""
        self._changed.notify_all()
        for waiter in list(self._waiters):
            if waiter.future.done():
                self._waiters.remove(waiter)
                continue
            try:
                holds = self._holds(waiter.predicate)
            except Exception as exc:  # raised to the waiter, never into the server's handler
                self._waiters.remove(waiter)
                with suppress(RuntimeError):  # the waiter's loop is closed
                    waiter.loop.call_soon_threadsafe(_fail, waiter.future, exc)
                continue
            if holds:
                self._waiters.remove(waiter)
                with suppress(RuntimeError):  # the waiter's loop is closed
                    waiter.loop.call_soon_threadsafe(_resolve, waiter.future)

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"ProviderStats(requests={self._requests.total()}, in_flight={self._in_flight}, "
                f"outcomes={dict(self._outcomes)})"
            )
