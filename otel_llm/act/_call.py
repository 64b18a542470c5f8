"""One call from start to answer: source choice, admission, rounds, retries, failover, budgets.

SPEC R1–R5: transient failures are retried with backoff and failed over, each costing one unit
of ``max_attempts``; 429s cost none but are waited out or failed over; permanent errors exclude
the source and, when no source is left, propagate unmasked. ``call_deadline_s`` bounds
everything; the stall budget (:mod:`otel_llm.act._stall_budget`) ends a call that waited too
long without any output.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context

from otel_llm import _errors as e
from otel_llm import _semconv as sc
from otel_llm.act._admission import Admission, estimate_prompt_tokens, estimate_tokens
from otel_llm.act._attempt import Attempt
from otel_llm.act._backoff import backoff_delay
from otel_llm.act._completion import Usage
from otel_llm.act._hedge_budget import HedgeBudget
from otel_llm.act._pool import Pool
from otel_llm.act._round import Leg, Round, RoundResult
from otel_llm.act._settings import ClientSettings
from otel_llm.act._source_state import Candidates, SourceState, Stay
from otel_llm.act._stall_budget import StallBudget

T = TypeVar("T")
logger = logging.getLogger("otel_llm")

Request = Callable[[Attempt, Pool, Mapping[str, Any]], Awaitable[T]]
"""Runs one attempt (chat or embeddings) and returns its answer."""
UsageOf = Callable[[T], Usage | None]


@dataclass
class CallOutcome(Generic[T]):
    """The winning leg and what the call cost."""

    winner: Leg[T]
    answer: T
    attempts: int
    hedges: int
    sources_tried: tuple[str, ...]
    retries: int
    backoff_s: float
    waited_s: float
    hedge_waste_tokens: int | None
    hedge_waste_chunks: int | None


@dataclass
class CallShared:
    """Everything a call borrows from its client."""

    pool: Pool
    tracer: trace.Tracer
    settings: ClientSettings
    states: list[SourceState]
    admission: Admission
    hedge_budget: HedgeBudget
    rng: random.Random = field(default_factory=random.Random)


class CallRun(Generic[T]):
    """The retry loop of one call."""

    def __init__(
        self,
        shared: CallShared,
        *,
        payload: Mapping[str, Any],
        stream: bool,
        hedge: bool,
        request: Request[T],
        usage_of: UsageOf[T],
        context: Context,
        operation: str = sc.OPERATION_CHAT,
    ) -> None:
        self.shared = shared
        self.payload = payload
        self.stream = stream
        self.request = request
        self.usage_of = usage_of
        self.context = context
        self.operation = operation
        settings = shared.settings
        self.retry = settings.retry
        self.threshold_ms = settings.stream.stall_threshold_ms
        self.loop = asyncio.get_running_loop()
        now = self.loop.time()
        self.deadline = now + self.retry.call_deadline_s if self.retry.call_deadline_s else None
        self.budget = StallBudget(now, self.retry.stall_window_s)
        self.candidates = Candidates(shared.states)
        self.round = Round[T](
            hedge=settings.hedge if hedge else type(settings.hedge)(),
            stream=stream,
            start_leg=self._start_leg,
            find_hedge=self._find_hedge,
        )
        self.tokens = estimate_tokens(payload)
        self.prompt_tokens = estimate_prompt_tokens(payload)
        self.round_started = now
        self.fails = 0
        self.attempts = 0
        self.hedges = 0
        self.rounds = 0
        self.backoff_s = 0.0
        self.produced_output = False
        self.reasons: dict[str, str] = {}
        self.same_source: dict[str, int] = {}
        """Same-source retries each source has had in this call."""
        self.tried: list[str] = []
        self.last_error: BaseException | None = None

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> CallOutcome[T]:
        """Retry, fail over and wait until a round has a winner or a budget is spent.

        Sources are tried in the user's order. After a transient failure — or a 429 asking to
        wait at most ``rate_limit_max_wait_s`` — the call stays on the same source (after the
        backoff, or the wait) for up to ``same_source_retries`` more rounds before it moves on.
        """
        avoid: str | None = None
        stay: Stay | None = None
        while True:
            now = self.loop.time()
            self._give_up_if_spent(now)
            pick = self.candidates.pick(now, avoid=avoid, stay=stay)
            if pick is None:
                raise self._no_source_left()
            if pick.wait_s > 0:
                await self._wait(pick.wait_s)
                continue
            state = pick.state
            if not await self._admit(state, self.tokens):
                continue
            if not state.breaker.acquire(now):
                await self._refund(state, self.tokens)
                continue
            if stay is not None and stay.source == state.name:
                self.same_source[state.name] = self.same_source.get(state.name, 0) + 1
            stay = None
            result = await self._run_round(state)
            if result.winner is not None:
                return self._outcome(result)
            for leg in result.failed:
                error = leg.error
                if error is not None and not isinstance(error, e.ProviderError):
                    raise error  # not a provider's failure (a bug, a fatal error): never retry
                if error is not None and self._propagates(error):
                    raise error  # a verdict on the content, unmasked (R1)
            stay = self._stay_after(state, result)
            avoid = None if stay is not None else state.name
            await self._after_failure(result)

    def _propagates(self, error: BaseException) -> bool:
        """Permanent errors that end the call at once instead of moving to the next source."""
        if isinstance(error, e.ContentFiltered):
            return not self.retry.failover_on_content_filter
        if isinstance(error, e.ContextLengthExceeded):
            return not self.retry.failover_on_context_length
        return False

    def _stay_after(self, state: SourceState, result: RoundResult[T]) -> Stay | None:
        """Whether the next round stays on ``state`` (the failed round's primary source): a
        same-source retry, while the call has some left for that source."""
        if self.same_source.get(state.name, 0) >= self.retry.same_source_retries:
            return None
        primary = next((leg for leg in result.failed if not leg.is_hedge), None)
        error = primary.error if primary is not None else None
        if isinstance(error, e.RateLimited):
            wait = max(0.0, state.rate_limited_until - self.loop.time())
            bound = self.retry.rate_limit_max_wait_s
            return Stay(state.name, max_wait_s=wait) if bound > 0 and wait <= bound else None
        if isinstance(error, e.TransientError):
            return Stay(state.name, max_wait_s=0.0)
        return None

    def _give_up_if_spent(self, now: float) -> None:
        if self.deadline is not None and now >= self.deadline:
            raise self._exhausted(f"call deadline of {self.retry.call_deadline_s:g} s reached")
        if self.fails >= self.retry.max_attempts:
            raise self._exhausted(
                f"max_attempts={self.retry.max_attempts} reached: {self.fails} failed rounds, "
                f"{self.attempts} attempts"
            )
        if self.budget.exhausted(now):
            since = "since the last output" if self.produced_output else "without any output"
            raise self._exhausted(
                f"waited {self.budget.waited_s(now):.1f} s {since} "
                f"(stall_window_s={self.retry.stall_window_s:g})"
            )

    async def _wait(self, seconds: float) -> None:
        """Wait non-productively, never past the deadline or the stall window."""
        now = self.loop.time()
        bound = seconds
        if self.deadline is not None:
            bound = min(bound, self.deadline - now)
        bound = min(bound, self.budget.remaining_s(now))
        await asyncio.sleep(max(0.0, bound))

    async def _run_round(self, state: SourceState) -> RoundResult[T]:
        self.rounds += 1
        if self.round.hedging:
            self.shared.hedge_budget.earn()
        self.round_started = started = self.loop.time()
        try:
            async with asyncio.timeout_at(self.deadline):
                result = await self.round.run(state, self.tokens)
        except TimeoutError:
            pass
        else:
            return self._account(result, started)
        raise self._exhausted(f"call deadline of {self.retry.call_deadline_s:g} s reached")

    def _account(self, result: RoundResult[T], started: float) -> RoundResult[T]:
        self.hedges += result.hedges
        if result.winner is None and any(
            isinstance(leg.error, e.TransientError) for leg in result.failed
        ):
            self.fails += 1  # both legs failing costs one unit (R10)
            self.budget.burn(self.loop.time() - started)
        return result

    async def _after_failure(self, result: RoundResult[T]) -> None:
        transient = any(isinstance(leg.error, e.TransientError) for leg in result.failed)
        if transient and self.fails < self.retry.max_attempts:
            delay = backoff_delay(
                self.fails,
                base_s=self.retry.backoff_base_s,
                cap_s=self.retry.backoff_max_s,
                unit=self.shared.rng.random(),
            )
            self.backoff_s += delay
            await self._wait(delay)

    # --- legs ---------------------------------------------------------------------------------

    def _start_leg(
        self, state: SourceState, tokens: int, role: str, signal: asyncio.Event | None
    ) -> Leg[T]:
        self.attempts += 1
        if state.name not in self.tried:
            self.tried.append(state.name)
        attempt = Attempt(
            self.shared.tracer,
            state.source,
            number=self.attempts,
            stream=self.stream,
            threshold_ms=self.threshold_ms,
            leg=role,
            context=self.context,
            signal=signal,
            operation=self.operation,
        )
        leg: Leg[T] = Leg(state, attempt, tokens)
        leg.task = asyncio.create_task(self._run_leg(leg), name=f"otel-llm {role} {state.name}")
        return leg

    async def _run_leg(self, leg: Leg[T]) -> T:
        """One attempt with its accounting: breaker, rate limits, admission settlement."""
        state, attempt = leg.state, leg.attempt
        try:
            answer = await self.request(attempt, self.shared.pool, self.payload)
        except asyncio.CancelledError:
            state.breaker.release()  # a cancelled leg gives no verdict on the source
            self._note_output(attempt)
            leg.finished_at = self.loop.time()
            await self._settle_unknown(state, leg.tokens, attempt.chunks)
            raise
        except e.ProviderError as exc:
            leg.finished_at = self.loop.time()
            self._note_failure(leg, exc)
            self._note_output(attempt)
            await self._settle_unknown(state, leg.tokens, attempt.chunks)
            raise
        except BaseException:
            state.breaker.release()
            leg.finished_at = self.loop.time()
            raise
        leg.finished_at = self.loop.time()
        state.breaker.record_success()
        self.produced_output = True
        usage = self.usage_of(answer)
        await self._settle(state, leg.tokens, _usage_total(usage))
        return answer

    def _note_output(self, attempt: Attempt) -> None:
        """A failed leg that streamed output was progress: the stall window starts again, so
        the call is still bounded if only 429s and waits follow (R3 holds for calls that never
        produced output; this keeps later waiting bounded too)."""
        if attempt.chunks:
            self.produced_output = True
            self.budget = StallBudget(self.loop.time(), self.retry.stall_window_s)

    def _note_failure(self, leg: Leg[T], exc: e.ProviderError) -> None:
        state = leg.state
        now = self.loop.time()
        self.last_error = exc
        self.reasons[state.name] = str(exc)
        if isinstance(exc, e.RateLimited):
            wait = (
                exc.retry_after_s if exc.retry_after_s is not None else self.retry.rate_limit_wait_s
            )
            state.rate_limited_until = max(state.rate_limited_until, now + wait)
            state.breaker.release()
        elif isinstance(exc, e.PermanentError):
            self.candidates.excluded.add(state.name)
            state.breaker.release()
        else:  # transient, watchdog kills included (R4)
            state.breaker.record_failure(now, unit=self.shared.rng.random())

    # --- admission ------------------------------------------------------------------------

    async def _admit(self, state: SourceState, tokens: int) -> bool:
        """Take the source's admission for one request; mark it out of quota if it has none."""
        wait = await self.shared.admission.acquire(state.name, state.source.limits, tokens)
        if wait <= 0:
            return True
        state.quota_until = self.loop.time() + wait
        return False

    async def _settle(self, state: SourceState, tokens: int, actual: int | None) -> None:
        """Settle a reservation: ``actual`` tokens used (``None``: unknown, keep the estimate)."""
        if actual is None or state.source.limits.tokens_per_minute is None:
            return
        await self.shared.admission.settle(state.name, state.source.limits, actual - tokens)

    async def _settle_unknown(self, state: SourceState, tokens: int, chunks: int) -> None:
        """Settle a leg whose usage is unknown (failed or cancelled): nothing if it produced
        nothing, else the prompt estimate plus one token a chunk — an estimate, for admission
        only. A backend failure here is logged: the leg's own outcome stands."""
        actual = self.prompt_tokens + chunks if chunks else 0
        try:
            await self._settle(state, tokens, actual)
        except e.BackendUnavailable as exc:
            logger.warning("otel-llm: could not settle admission for %s: %s", state.name, exc)

    async def _refund(self, state: SourceState, tokens: int) -> None:
        await self._settle(state, tokens, 0)

    async def _find_hedge(self, primary: SourceState) -> tuple[SourceState, int] | None:
        """A different, eligible source with quota, within the hedge budget; else ``None``
        (then the round silently does not hedge, R10)."""
        target = self.candidates.hedge_target(self.loop.time(), primary=primary.name)
        if target is None or not self.shared.hedge_budget.spend():
            return None
        try:
            admitted = await self._admit(target, self.tokens)
        except e.BackendUnavailable:
            admitted = False  # the primary runs on; only a hedge needs the backend now
        if not admitted:
            self.shared.hedge_budget.refund()
            return None
        if not target.breaker.acquire(self.loop.time()):
            await self._refund(target, self.tokens)
            self.shared.hedge_budget.refund()
            return None
        return target, self.tokens

    # --- endings --------------------------------------------------------------------------------

    def _outcome(self, result: RoundResult[T]) -> CallOutcome[T]:
        winner = result.winner
        assert winner is not None
        waste = [
            _usage_total(self.usage_of(leg.task.result()))
            for leg in result.losers
            if leg.task.done() and not leg.task.cancelled() and leg.task.exception() is None
        ]
        known = [tokens for tokens in waste if tokens is not None]
        now = self.loop.time()
        return CallOutcome(
            winner=winner,
            answer=winner.task.result(),
            attempts=self.attempts,
            hedges=self.hedges,
            sources_tried=tuple(self.tried),
            retries=self.rounds - 1,
            backoff_s=self.backoff_s,
            waited_s=max(0.0, self.budget.waited_s(now) - (now - self.round_started)),
            hedge_waste_tokens=sum(known) if known else None,
            hedge_waste_chunks=sum(leg.attempt.chunks for leg in result.losers)
            if result.losers
            else None,
        )

    def _exhausted(self, why: str) -> e.AllSourcesExhausted:
        now = self.loop.time()
        reasons = dict(self.reasons) or {
            state.name: f"no attempt was made: {state.why_unavailable(now)}"
            for state in self.candidates.remaining()
        }
        error = e.AllSourcesExhausted(why, reasons, attempts=self.attempts, hedges=self.hedges)
        error.__cause__ = self.last_error
        return error

    def _no_source_left(self) -> e.OtelLLMError:
        """Every source was excluded by a permanent error: the provider's reason, unmasked."""
        if isinstance(self.last_error, e.PermanentError):
            return self.last_error
        return self._exhausted("no source left")


def _usage_total(usage: Usage | None) -> int | None:
    if usage is None:
        return None
    if usage.total_tokens is not None:
        return usage.total_tokens
    if usage.input_tokens is None and usage.output_tokens is None:
        return None
    return (usage.input_tokens or 0) + (usage.output_tokens or 0)
