"""One round of a call: the primary leg and, when its first chunk is late or its stream stalls,
one hedge leg on another source: one hedge per round, never a hedge of a hedge, the first
success wins and cancelling the caller cancels every leg. A first-token hedge the ledger refuses (no
eligible source, no budget, admission, the breaker) has not hedged the round: its window goes on
to the stall phase, so the stall trigger may still start the round's one hedge.

The shape is trio's happy eyeballs (``open_tcp_stream``): :meth:`Round.run` alone creates the
tasks of a round — the legs and the waiter on the chunk signal — races them, and reaps them.
Nothing survives it: on every path (a winner, both legs failed, the caller cancelled) the legs
still running are cancelled and awaited before it returns; a leg that will not end within
``round_cleanup_s`` is logged and kept referenced until it does (never dropped unseen). What a leg
costs and says about its source is booked by the ledger the round drives
(:mod:`otel_llm._act._legs`). Only this code waits on the chunk signal, and only the primary leg
has one (no hedge of a hedge). The chunk path itself only sets that signal: the stall timer is
armed from the chunk clock's last arrival, so the orchestrator wakes once per window, never once
per chunk.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from otel_llm import _semconv as sc
from otel_llm._act._groups import HedgeSettings
from otel_llm._act._hedge_budget import FIRST_TOKEN, STALL, Trigger
from otel_llm._act._legs import Leg
from otel_llm._act._source_state import SourceState
from otel_llm._defaults import DEFAULTS

T = TypeVar("T")
logger = logging.getLogger("otel_llm")

_UNENDED: set[asyncio.Task[Any]] = set()
"""Legs that outlived their round's cleanup bound, referenced until they end."""


@dataclass
class RoundResult(Generic[T]):
    """How a round ended: a winner, or the legs that failed."""

    winner: Leg[T] | None
    failed: list[Leg[T]] = field(default_factory=list)
    losers: list[Leg[T]] = field(default_factory=list)
    hedges: int = 0
    trigger: Trigger | None = None
    """What started the round's hedge (``None``: it did not hedge)."""


Hedge = tuple[SourceState, int, Trigger]
"""A hedge to start: its source, its pre-admitted tokens, and the trigger that asked for it."""


class LegAccounting(Protocol[T]):
    """What a round needs from the call's ledger (:class:`~otel_llm._act._legs.LegLedger`)."""

    def new_leg(
        self, state: SourceState, tokens: int, role: str, signal: asyncio.Event | None
    ) -> Leg[T]:
        """The next attempt, at ``state``, with pre-admitted tokens (no task yet)."""
        ...

    def run_leg(self, leg: Leg[T]) -> Coroutine[Any, Any, T]:
        """The leg's work: its attempt and the accounting of its outcome."""
        ...

    async def find_hedge(
        self, primary: SourceState, trigger: Trigger
    ) -> tuple[SourceState, int] | None:
        """An eligible, admitted hedge target other than the primary's source, paid from
        ``trigger``'s share of the hedge budget, or ``None``."""
        ...

    async def give_back_hedge(self, target: SourceState, tokens: int, trigger: Trigger) -> None:
        """Give back what :meth:`find_hedge` took for a hedge that will not start."""
        ...


def _owned(leg: Leg[T]) -> Leg[T]:
    """``leg``, its failure marked as seen once it ends: when the round is cancelled before it
    looked at a leg that had just failed, asyncio would otherwise log "Task exception was never
    retrieved" for it. (The round still reads every failure it waits for.)"""
    leg.task.add_done_callback(_mark_retrieved)
    return leg


def _mark_retrieved(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()


class Round(Generic[T]):
    """A primary leg, maybe a hedge leg, first success wins."""

    def __init__(
        self,
        *,
        hedge: HedgeSettings,
        stream: bool,
        ledger: LegAccounting[T],
        ends_call: Callable[[BaseException], bool] = lambda error: False,
        make_signal: Callable[[], asyncio.Event] = asyncio.Event,
        cleanup_s: float = DEFAULTS.round_cleanup_s,
    ) -> None:
        """``ends_call`` tells the failures that end the call whatever another leg might
        still answer (a refusal on content grounds the user wants to see); ``make_signal``
        builds the primary's chunk signal and ``cleanup_s`` bounds the wait for cancelled legs
        (seams for tests)."""
        self._ends_call = ends_call
        self._cleanup_s = cleanup_s
        self._after_s = hedge.after_s
        self._stall_after_s = hedge.stall_after_s if stream else None
        self._stream = stream
        self._ledger = ledger
        self._make_signal = make_signal

    @property
    def hedging(self) -> bool:
        """Whether this round may hedge at all (stall-only hedging needs a stream)."""
        return self._after_s is not None or self._stall_after_s is not None

    async def run(self, primary: SourceState, tokens: int) -> RoundResult[T]:
        """Run the round to its end; no leg is left running afterwards."""
        signal = self._make_signal() if self.hedging and self._stream else None
        legs = [self._start(primary, tokens, sc.LEG_PRIMARY, signal)]
        try:
            hedge = await self._hedge_window(legs[0], signal) if self.hedging else None
            trigger = None
            if hedge is not None:
                state, hedge_tokens, trigger = hedge
                legs.append(self._start(state, hedge_tokens, sc.LEG_HEDGE, None))
            result = await self._race(legs)
            result.hedges = len(legs) - 1
            result.trigger = trigger
            return result
        finally:
            try:
                await self._cancel_running(legs)
            finally:
                _release_frames(legs)

    def _start(
        self, state: SourceState, tokens: int, role: str, signal: asyncio.Event | None
    ) -> Leg[T]:
        """A new leg of this round, running as a task the round owns."""
        leg = self._ledger.new_leg(state, tokens, role, signal)
        leg.task = asyncio.create_task(
            self._ledger.run_leg(leg), name=f"otel-llm {role} {state.name}"
        )
        return _owned(leg)

    # --- the hedge window ---------------------------------------------------------------------

    async def _hedge_window(self, leg: Leg[T], signal: asyncio.Event | None) -> Hedge | None:
        """Wait until a hedge is due and find it its target, until the primary finished first
        (``None``), or until no hedge is left to try (``None``). A first-token hedge the ledger
        refuses — no eligible source, no budget, no admission, an open breaker — has not hedged
        the round, so the window goes on: the stall trigger may still start the round's one
        hedge."""
        primary = leg.task
        if signal is None:  # not streamed: only the first-token trigger applies
            if self._after_s is None or not await self._first_token_late(leg, None):
                return None
            return await self._target(leg, FIRST_TOKEN)
        # Phase 1, before the first chunk: AFTER_S if set; otherwise wait for the first chunk
        # without a timer (pre-first-chunk silence is never judged by the stall timer).
        if self._after_s is not None:
            await self._first_token_late(leg, signal)
        else:
            await self._wait_for_signal(primary, signal, None)
        if primary.done():
            return None
        if not signal.is_set():  # no first chunk within AFTER_S
            target = await self._target(leg, FIRST_TOKEN)
            if target is not None or self._stall_after_s is None:
                return target
            # Refused: wait for the first chunk without a timer, then the stall phase.
            await self._wait_for_signal(primary, signal, None)
            if primary.done():
                return None
        if self._stall_after_s is None or not await self._stalled(leg, signal):
            return None
        return await self._target(leg, STALL)

    async def _first_token_late(self, leg: Leg[T], signal: asyncio.Event | None) -> bool:
        """Wait until the primary is AFTER_S late with its first chunk (non-streamed: its
        answer) — counted from when its request got its connection from the client's pool,
        since a hedge while it waits there would wait in the same pool — (True), or until the
        chunk came or the primary finished first (False)."""
        assert self._after_s is not None
        primary, wait = leg.task, leg.attempt.wait
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            base = wait.connected_at if wait.connected_at is not None else started
            remaining_s = base + self._after_s - loop.time()
            if remaining_s <= 0 and not wait.queued():
                return True
            if remaining_s > 0:
                await self._wait_for_signal(primary, signal, remaining_s)
            else:  # late, but only because it waits for a connection of our own pool
                queued_s = max(0.0, wait.ends_s - loop.time())
                await self._wait_for_signal(primary, signal, queued_s, wait.connected)
            if primary.done() or (signal is not None and signal.is_set()):
                return False

    async def _target(self, leg: Leg[T], trigger: Trigger) -> Hedge | None:
        """The hedge ``trigger`` asks for, if the ledger finds and admits one while the primary
        ``leg`` runs. The search races the primary: if the primary finishes while admission
        answers (a shared backend's round trip, a slow one's timeout), or as the search does,
        the search is abandoned — what it took goes back — and the round ends with the primary
        at once, unhedged. So is it when the call is cancelled meanwhile."""
        finding = asyncio.ensure_future(self._ledger.find_hedge(leg.state, trigger))
        try:
            await asyncio.wait({finding, leg.task}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # the call was cancelled (its deadline, its caller)
            await self._abandon(finding, trigger)
            raise
        if leg.task.done():
            await self._abandon(finding, trigger)
            return None
        target = finding.result()
        return None if target is None else (*target, trigger)

    async def _abandon(
        self, finding: asyncio.Future[tuple[SourceState, int] | None], trigger: Trigger
    ) -> None:
        """Stop the search for a hedge no longer wanted: cancelled while it runs (which gives
        back what it took), or, done, what it found given back — also while the call itself is
        being cancelled (a half-open probe kept by a hedge that never started would keep its
        source refused for good). Its own failure no longer matters: read, not raised."""
        if not finding.done():
            finding.cancel()
            await asyncio.wait({finding})  # never swallows a cancellation of our own task
        if finding.cancelled() or finding.exception() is not None:
            return
        found = finding.result()
        if found is not None:
            await asyncio.shield(self._ledger.give_back_hedge(*found, trigger))

    async def _stalled(self, leg: Leg[T], signal: asyncio.Event) -> bool:
        """Phase 2, after the first chunk: wait until a gap lasts STALL_AFTER_S (True) or the
        primary finished first (False). The timer is armed from the last chunk's arrival on the
        chunk clock, so this wakes once per window rather than once per chunk; on waking, the
        signal tells whether chunks came in the meantime."""
        assert self._stall_after_s is not None
        primary = leg.task
        chunks = leg.attempt.span.clock
        window_s = self._stall_after_s
        loop = asyncio.get_running_loop()
        while True:
            if signal.is_set():  # check-then-clear, no await in between
                signal.clear()
            remaining_s = chunks.on_loop(chunks.arrivals_ns[-1]) + window_s - loop.time()
            if remaining_s > 0:  # on the loop's clock; the arrival mapped onto it
                await asyncio.wait({primary}, timeout=remaining_s)
            if primary.done():
                return False
            if signal.is_set():
                continue  # a chunk arrived meanwhile, even in the timeout's own iteration
            return not chunks.finished  # after the finish reason, silence is just the end

    @staticmethod
    async def _wait_for_signal(
        primary: asyncio.Task[T],
        signal: asyncio.Event | None,
        within_s: float | None,
        also: asyncio.Event | None = None,
    ) -> None:
        """Wait for a chunk (``signal``), the primary's end, ``also`` or the timeout; fresh
        waiters each time."""
        waiters = {asyncio.create_task(event.wait()) for event in (signal, also) if event}
        try:
            await asyncio.wait(
                {primary, *waiters}, timeout=within_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in waiters:
                waiter.cancel()
            if waiters:
                await asyncio.wait(waiters)  # never swallows a cancellation of our own task

    # --- the race: first success wins, the loser is cancelled -----------------------------------

    async def _race(self, legs: list[Leg[T]]) -> RoundResult[T]:
        """First success wins; if the first to finish failed, wait for the other — unless it is
        the primary and its failure ends the call (``ends_call``): then the round ends with it
        at once, and the hedge is cancelled like any loser. A hedge's such failure is a failed
        hedge: the primary, which the call would have had without hedging, may still answer."""
        running = {leg.task: leg for leg in legs}
        failed: list[Leg[T]] = []
        while running:
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            finished = sorted(
                (running.pop(task) for task in done),
                key=lambda leg: leg.finished_at if leg.finished_at is not None else 0.0,
            )
            for position, leg in enumerate(finished):
                error = leg.error
                if error is None and not leg.task.cancelled():
                    losers = [*finished[position + 1 :], *running.values()]
                    return RoundResult(winner=leg, failed=failed, losers=losers)
                failed.append(leg)
                if error is not None and not leg.is_hedge and self._ends_call(error):
                    losers = [*finished[position + 1 :], *running.values()]
                    return RoundResult(winner=None, failed=failed, losers=losers)
        return RoundResult(winner=None, failed=failed)

    async def _cancel_running(self, legs: list[Leg[T]]) -> None:
        """Cancel legs still running — a loser is recorded as ``hedge_cancelled`` unless the
        whole round is being cancelled — and wait (bounded) until they have cleaned up. The
        caller's first cancellation, should it come during that wait (the round had ended and
        was reaping its loser), waits for the same bound before it propagates, as it does when
        it comes earlier; a cancellation after that one propagates at once."""
        running = [leg for leg in legs if not leg.task.done()]
        if not running:
            return
        current = asyncio.current_task()
        round_cancelled = current is not None and current.cancelling() > 0
        for leg in running:
            if not round_cancelled:
                leg.attempt.cancel_outcome = sc.OUTCOME_HEDGE_CANCELLED
            leg.task.cancel()
        tasks = [leg.task for leg in running]
        loop = asyncio.get_running_loop()
        until = loop.time() + self._cleanup_s
        unended: set[asyncio.Task[T]] = set(tasks)
        cancelled: asyncio.CancelledError | None = None
        while unended:
            try:
                _, unended = await asyncio.wait(unended, timeout=max(0.0, until - loop.time()))
            except asyncio.CancelledError as error:
                if round_cancelled or cancelled is not None:  # cancelled again: keep the rest
                    _keep([task for task in tasks if not task.done()], "its round was cancelled")
                    raise
                cancelled = error  # the first cancellation: reap within the bound, then raise it
                unended = {task for task in unended if not task.done()}
            else:
                break
        _keep(unended, f"it did not end within {self._cleanup_s:g} s of being cancelled")
        if cancelled is not None:
            raise cancelled


def _release_frames(legs: Iterable[Leg[T]]) -> None:
    """Clear the local variables of the finished frames an ended leg's exception holds. Such a
    traceback runs through the leg's own frames, whose locals hold the leg, its task and the
    ledger, which hold the exception again: a cycle of the whole attempt (its request, span,
    events, timers — ~130 objects) that only the collector's oldest generation frees, as the
    attempt lived long enough to be promoted there. Thousands of them made full collections of
    40,000–70,000 objects at a time (170 ms of CPU each) in the soak; cleared, an attempt is
    freed by reference counting when the call lets go of it. The exceptions and their
    tracebacks stay whole for printing and for ``AllSourcesExhausted``; only a debugger loses
    those frames' locals."""
    for leg in legs:
        task = leg.task
        if not task.done():
            continue  # kept running past the clean-up bound: its frames are live
        try:
            error = task.exception()
        except asyncio.CancelledError as cancelled:
            error = cancelled
        seen: set[int] = set()
        while error is not None and id(error) not in seen:
            seen.add(id(error))
            traceback.clear_frames(error.__traceback__)
            error = error.__cause__ or error.__context__


def _keep(tasks: Iterable[asyncio.Task[Any]], why: str) -> None:
    """Hold a reference to legs that have not ended (the loop holds tasks weakly) until they do."""
    for task in tasks:
        logger.warning("otel-llm: %s is kept and reported when it ends: %s", task.get_name(), why)
        _UNENDED.add(task)
        task.add_done_callback(_unended_finished)


def _unended_finished(task: asyncio.Task[Any]) -> None:
    _UNENDED.discard(task)
    logger.warning("otel-llm: %s ended at last", task.get_name())
