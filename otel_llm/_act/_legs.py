"""The ledger of one call's legs: what each attempt costs and says about its source.

:class:`~otel_llm._act._round.Round` owns the tasks of a round; this module owns the accounting
it drives — the attempt numbers and sources tried, the verdict each outcome gives the source's
breaker (a watchdog kill is a failure; a 429, a permanent error or a cancellation is none),
rate-limit marks, admission (pre-deducted before an attempt, settled after it), the choice and
admission of a hedge target, and the failures themselves, kept as exceptions.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context

from otel_llm import _errors as e
from otel_llm import _semconv as sc
from otel_llm._act._admission import Admission, estimate_prompt_tokens, estimate_tokens
from otel_llm._act._attempt import Attempt
from otel_llm._act._breaker import Permit
from otel_llm._act._groups import RetrySettings
from otel_llm._act._hedge_budget import HedgeBudgets, Trigger
from otel_llm._act._pool import Pool
from otel_llm._act._source_state import Candidates, SourceState
from otel_llm._defaults import DEFAULTS
from otel_llm._measure._metrics import LlmMetrics
from otel_llm._measure._response import Usage

T = TypeVar("T")
logger = logging.getLogger("otel_llm")

Request = Callable[[Attempt, Pool, Mapping[str, Any]], Awaitable[T]]
"""Runs one attempt (chat or embeddings) and returns its answer."""
UsageOf = Callable[[T], Usage | None]


@dataclass(eq=False)
class Leg(Generic[T]):
    """One attempt of a round; the round gives it its task."""

    state: SourceState
    attempt: Attempt
    tokens: int
    permit: Permit | None = None
    """What the source's breaker let it through with (whether it is the half-open probe)."""
    finished_at: float | None = None
    task: asyncio.Task[T] = field(init=False)

    @property
    def is_hedge(self) -> bool:
        """True for the hedge leg."""
        return self.attempt.leg == sc.LEG_HEDGE

    @property
    def error(self) -> BaseException | None:
        """The leg's failure, once it finished with one."""
        if not self.task.done() or self.task.cancelled():
            return None
        return self.task.exception()


@dataclass
class CallContext:
    """What every attempt of one call shares."""

    tracer: trace.Tracer
    pool: Pool
    admission: Admission
    hedge_budget: HedgeBudgets
    retry: RetrySettings
    threshold_ms: int
    context: Context
    operation: str
    stream: bool
    rng: random.Random
    metrics: LlmMetrics | None = None


class LegLedger(Generic[T]):
    """Starts the attempts of one call and books their outcomes."""

    def __init__(
        self,
        call: CallContext,
        candidates: Candidates,
        *,
        payload: Mapping[str, Any],
        request: Request[T],
        usage_of: UsageOf[T],
    ) -> None:
        self.call = call
        self.candidates = candidates
        self.payload = payload
        self.request = request
        self.usage_of = usage_of
        self.loop = asyncio.get_running_loop()
        self.tokens = estimate_tokens(payload)
        self.prompt_tokens = estimate_prompt_tokens(payload)
        self.attempts = 0
        self.tried: list[str] = []
        self.errors: deque[e.ProviderError] = deque(maxlen=DEFAULTS.kept_errors)
        """The call's failed attempts, most recent last."""
        self.last_error_of: dict[str, e.ProviderError] = {}
        """Each source's latest failure."""
        self.last_output_at: float | None = None
        """When the latest failed or cancelled leg that had streamed output ended (the stall
        window restarts there)."""
        self._permits: dict[str, Permit] = {}
        """Breaker permits taken for legs not started yet, by source (the next leg at that
        source holds it)."""

    # --- legs ---------------------------------------------------------------------------------

    def new_leg(
        self, state: SourceState, tokens: int, role: str, signal: asyncio.Event | None
    ) -> Leg[T]:
        """The next attempt of the call at ``state`` (the round starts its task)."""
        self.attempts += 1
        if state.name not in self.tried:
            self.tried.append(state.name)
        call = self.call
        attempt = Attempt(
            call.tracer,
            state.source,
            number=self.attempts,
            stream=call.stream,
            threshold_ms=call.threshold_ms,
            leg=role,
            context=call.context,
            signal=signal,
            operation=call.operation,
            metrics=call.metrics,
        )
        return Leg(state, attempt, tokens, permit=self._permits.pop(state.name, None))

    def pass_breaker(self, state: SourceState) -> bool:
        """Ask ``state``'s breaker to let the call's next leg there through; the leg started
        next at that source holds the permit, so only a leg that is the half-open probe ever
        decides or frees the probe."""
        permit = state.breaker.acquire(self.loop.time())
        if permit is None:
            return False
        self._permits[state.name] = permit
        return True

    async def run_leg(self, leg: Leg[T]) -> T:
        """One attempt with its accounting: breaker, rate limits, admission settlement."""
        state, attempt = leg.state, leg.attempt
        try:
            answer = await self.request(attempt, self.call.pool, self.payload)
        except asyncio.CancelledError:
            state.breaker.release(leg.permit)  # a cancelled leg gives no verdict on the source
            self._ended(leg)
            await self._settle_unknown(state, leg.tokens, attempt.chunks)
            raise
        except e.ProviderError as exc:
            self._ended(leg)
            self._book_failure(leg, exc)
            await self._settle_unknown(state, leg.tokens, attempt.chunks)
            raise
        except BaseException:  # not the source's fault (a bug, an interpreter exit): no verdict
            state.breaker.release(leg.permit)
            leg.finished_at = self.loop.time()
            await self._settle_unknown(state, leg.tokens, attempt.chunks)
            raise
        leg.finished_at = self.loop.time()
        state.breaker.record_success()
        await self._settle_logged(state, leg.tokens, usage_total(self.usage_of(answer)))
        return answer

    def _ended(self, leg: Leg[T]) -> None:
        """A leg ended without an answer; one that streamed output was progress all the same
        (the stall window starts again there)."""
        leg.finished_at = now = self.loop.time()
        if leg.attempt.chunks:
            self.last_output_at = now

    def _book_failure(self, leg: Leg[T], exc: e.ProviderError) -> None:
        state = leg.state
        now = self.loop.time()
        self.errors.append(exc)
        self.last_error_of[state.name] = exc
        if isinstance(exc, e.RateLimited):
            wait = exc.retry_after_s
            if wait is None:
                wait = self.call.retry.rate_limit_wait_s
            state.rate_limited_until = max(state.rate_limited_until, now + wait)
            state.breaker.release(leg.permit)
        elif isinstance(exc, e.PermanentError):
            self.candidates.excluded.add(state.name)
            state.breaker.release(leg.permit)
        else:  # transient, watchdog kills included: they count on the breaker
            state.breaker.record_failure(now, unit=self.call.rng.random(), permit=leg.permit)

    @property
    def last_error(self) -> e.ProviderError | None:
        """The call's most recent failure."""
        return self.errors[-1] if self.errors else None

    # --- admission ----------------------------------------------------------------------------

    async def take(self, state: SourceState) -> bool:
        """The breaker's and admission's leave for the call's next leg at ``state``: both or
        neither. The breaker is asked first: it answers at once and what it lets through is
        given back whole (a half-open probe freed for the next attempt), where a request
        admission took stays taken. Asked the other way round, a call admitted while another
        call took the half-open probe (during a shared backend's round trip) lost a request
        of the source's quota that never reached the provider. A breaker that another call's
        attempt opened during admission's answer still stops the leg."""
        if not self.pass_breaker(state):
            return False
        try:
            admitted = await self.admit(state)
        except BaseException:  # the backend cannot be asked, or the call was cancelled
            self.drop_permit(state)
            raise
        if not admitted:
            self.drop_permit(state)
            return False
        if not state.breaker.still_lets_through(self._permits.get(state.name)):
            # another call's attempt opened the breaker while admission answered: the leg
            # does not start, its tokens go back (the request stays taken, as any admitted)
            self.drop_permit(state)
            await self._settle_logged(state, self.tokens, 0)
            return False
        return True

    def drop_permit(self, state: SourceState) -> None:
        """Give back the breaker permit taken for a leg at ``state`` that will not start."""
        state.breaker.release(self._permits.pop(state.name, None))

    async def admit(self, state: SourceState) -> bool:
        """Take the source's admission for one request of the call; if it has none for this
        request, mark the source out of quota for this call only (and return False) — until
        admission's estimate, or until it is asked again (what other calls reserved and did
        not use comes back when they settle)."""
        wait = await self.call.admission.acquire(state.name, state.source.limits, self.tokens)
        if wait <= 0:
            self.candidates.quota_until.pop(state.name, None)
            self.candidates.quota_estimate.pop(state.name, None)
            return True
        now = self.loop.time()
        self.candidates.quota_until[state.name] = now + min(wait, DEFAULTS.quota_recheck_s)
        self.candidates.quota_estimate[state.name] = now + wait
        return False

    async def _settle(self, state: SourceState, tokens: int, actual: int | None) -> None:
        """Settle a reservation: ``actual`` tokens used (``None``: unknown, keep the estimate).
        What was reserved is the estimate clamped to the limit, as admission took it."""
        limit = state.source.limits.tokens_per_minute
        if actual is None or limit is None:
            return
        reserved = int(min(tokens, limit))
        await self.call.admission.settle(state.name, state.source.limits, actual - reserved)

    async def _settle_unknown(self, state: SourceState, tokens: int, chunks: int) -> None:
        """Settle a leg whose usage is unknown (failed or cancelled): nothing if it produced
        nothing, else the prompt estimate plus one token a chunk — an estimate, for admission
        only."""
        await self._settle_logged(state, tokens, self.prompt_tokens + chunks if chunks else 0)

    async def _settle_logged(self, state: SourceState, tokens: int, actual: int | None) -> None:
        """Settle an attempt that has ended. A backend failure here is logged: the attempt's
        own outcome stands — an answer the provider gave (and billed) is returned."""
        try:
            await self._settle(state, tokens, actual)
        except e.BackendUnavailable as exc:
            logger.warning("otel-llm: could not settle admission for %s: %s", state.name, exc)

    # --- hedging ------------------------------------------------------------------------------

    async def find_hedge(
        self, primary: SourceState, trigger: Trigger
    ) -> tuple[SourceState, int] | None:
        """The first eligible source other than the primary's, by priority, that admission and
        its breaker let through, within ``trigger``'s share of the hedge budget; else ``None``
        (then this trigger silently does not hedge). A source whose admission refuses — or
        cannot be asked now: the primary runs on — or whose breaker refuses is passed over for
        the next. A budget token taken for a hedge that then cannot start goes back to the
        trigger's own bucket."""
        budget = self.call.hedge_budget
        targets = self.candidates.hedge_targets(self.loop.time(), primary=primary.name)
        if not targets or not budget.spend(trigger):
            return None
        for target in targets:
            if await self._take_for_hedge(target, budget, trigger):
                return target, self.tokens
        budget.refund(trigger)
        return None

    async def give_back_hedge(self, target: SourceState, tokens: int, trigger: Trigger) -> None:
        """Give back what a hedge admitted at ``target`` took, when it will not start after all
        (its primary finished while admission answered): the breaker permit, the budget token
        (to ``trigger``'s own bucket) and the estimated ``tokens`` — the request stays taken,
        as any admitted one does."""
        self.drop_permit(target)
        self.call.hedge_budget.refund(trigger)
        await self._settle_logged(target, tokens, 0)

    async def _take_for_hedge(
        self, target: SourceState, budget: HedgeBudgets, trigger: Trigger
    ) -> bool:
        """The breaker's and admission's leave for a hedge leg at ``target`` (both or
        neither)."""
        try:
            return await self.take(target)
        except e.BackendUnavailable:  # no quota this call can see now: the primary runs on
            return False
        except BaseException:  # cancelled while waiting for admission: no hedge was started
            budget.refund(trigger)
            raise

    # --- what the losers used -----------------------------------------------------------------

    def waste(self, losers: list[Leg[T]]) -> tuple[int | None, int | None]:
        """Tokens (where known) and chunks the losing legs used."""
        known = [
            tokens
            for leg in losers
            if leg.task.done() and not leg.task.cancelled() and leg.task.exception() is None
            if (tokens := usage_total(self.usage_of(leg.task.result()))) is not None
        ]
        chunks = sum(leg.attempt.chunks for leg in losers) if losers else None
        return (sum(known) if known else None), chunks


def usage_total(usage: Usage | None) -> int | None:
    """Total tokens of ``usage`` (``None`` when it says nothing)."""
    return usage.total if usage is not None else None
