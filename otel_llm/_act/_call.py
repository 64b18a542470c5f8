"""One call from start to answer: the retry loop — source choice, rounds, retries, failover,
budgets.

Transient failures are retried with backoff and failed over, each costing one unit
of ``max_attempts``; 429s cost none but are waited out or failed over; permanent errors exclude
the source and, when no source is left, propagate unmasked. ``call_deadline_s`` bounds
everything; the stall budget (:mod:`otel_llm._act._stall_budget`) ends a call that waited too
long without any output. A round (:mod:`otel_llm._act._round`) runs the attempts; the ledger
(:mod:`otel_llm._act._legs`) books what they cost.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.util.types import AttributeValue

from otel_llm import _errors as e
from otel_llm import _semconv as sc
from otel_llm._act._admission import Admission
from otel_llm._act._backoff import backoff_delay
from otel_llm._act._hedge_budget import HedgeBudgets
from otel_llm._act._legs import CallContext, Leg, LegLedger, Request, UsageOf
from otel_llm._act._pool import Pool
from otel_llm._act._round import Round, RoundResult
from otel_llm._act._settings import ClientSettings
from otel_llm._act._source_state import Candidates, SourceState, Stay
from otel_llm._act._stall_budget import StallBudget
from otel_llm._act._wait_warning import WaitWarning, wait_message
from otel_llm._measure._faults import FAULTS
from otel_llm._measure._metrics import LlmMetrics

T = TypeVar("T")

logger = logging.getLogger("otel_llm")


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
    hedge_budget: HedgeBudgets
    rng: random.Random = field(default_factory=random.Random)
    metrics: LlmMetrics | None = None
    """Where each attempt records its outcome and stalls as it ends."""


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
        settings = shared.settings
        self.retry = settings.retry
        self.rng = shared.rng
        self.loop = asyncio.get_running_loop()
        now = self.loop.time()
        self.deadline = now + self.retry.call_deadline_s if self.retry.call_deadline_s else None
        self.budget = StallBudget(now, self.retry.stall_window_s)
        self.wait_warning = WaitWarning()
        self.operation = operation
        self.candidates = Candidates(shared.states)
        self.ledger = LegLedger[T](
            CallContext(
                tracer=shared.tracer,
                pool=shared.pool,
                admission=shared.admission,
                hedge_budget=shared.hedge_budget,
                retry=self.retry,
                threshold_ms=settings.stream.stall_threshold_ms,
                context=context,
                operation=operation,
                stream=stream,
                rng=shared.rng,
                metrics=shared.metrics,
            ),
            self.candidates,
            payload=payload,
            request=request,
            usage_of=usage_of,
        )
        self.hedge_budget = shared.hedge_budget
        self.metrics = shared.metrics
        self.round = Round[T](
            hedge=settings.hedge if hedge else type(settings.hedge)(),
            stream=stream,
            ledger=self.ledger,
            ends_call=self._propagates,
        )
        self.round_started = now
        self.fails = 0
        self.hedges = 0
        self.rounds = 0
        self.backoff_s = 0.0
        self.same_source: dict[str, int] = {}
        """Same-source retries each source has had in this call."""

    @property
    def attempts(self) -> int:
        """Attempts started so far."""
        return self.ledger.attempts

    @property
    def tried(self) -> list[str]:
        """Sources tried so far, in order."""
        return self.ledger.tried

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> CallOutcome[T]:
        """Retry, fail over and wait until a round has a winner or a budget is spent.

        Sources are tried in the user's order. After a transient failure — or a 429 asking to
        wait at most ``rate_limit_max_wait_s`` — the call stays on the same source (after the
        backoff, or the wait) for up to ``same_source_retries`` more rounds before it moves on;
        after a watchdog kill or a transport timeout (the source went silent) it moves on
        after the backoff, where another source can take it.
        """
        avoid: str | None = None
        stay: Stay | None = None
        while True:
            now = self.loop.time()
            self._give_up_if_spent(now)
            self._warn_if_waiting_long(now)
            pick = self.candidates.pick(now, avoid=avoid, stay=stay)
            if pick is None:
                raise self._no_source_left()
            if pick.wait_s > 0:
                await self._wait(pick.wait_s)
                continue
            state = pick.state
            if not await self.ledger.take(state):
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
                    raise error  # a verdict on the content, unmasked
            stay = self._stay_after(state, result)
            avoid = None if stay is not None else state.name
            await self._after_failure(result)

    def _propagates(self, error: BaseException) -> bool:
        """Permanent errors that end the call at once instead of moving to the next source —
        also while the round's other leg still runs (it is cancelled: a hedge never answers
        in place of a refusal the caller asked to see)."""
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
        if isinstance(error, e.WatchdogTimeout | e.ProviderTimeout):
            return None  # the source went silent: silence again is likelier than an answer
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
            output = self.ledger.last_output_at is not None
            since = "since the last output" if output else "without any output"
            raise self._exhausted(
                f"waited {self.budget.waited_s(now):.1f} s {since} "
                f"(stall_window_s={self.retry.stall_window_s:g})"
            )

    async def _wait(self, seconds: float) -> None:
        """Wait non-productively, never past the deadline or the stall window; a long wait
        wakes when the long-wait warning is due, to log it on time."""
        now = self.loop.time()
        bound = seconds
        if self.deadline is not None:
            bound = min(bound, self.deadline - now)
        end = now + min(bound, self.budget.remaining_s(now))
        while True:
            self._warn_if_waiting_long(now)
            step = min(end - now, self.wait_warning.until_due_s(self.budget.waited_s(now)))
            await asyncio.sleep(max(0.0, step))
            now = self.loop.time()
            if now >= end:
                return

    def _warn_if_waiting_long(self, now: float) -> None:
        """Log that the call has waited long without progress, once the warning is due."""
        waited = self.budget.waited_s(now)
        if not self.wait_warning.due(waited):
            return
        last = self.ledger.last_error_of
        sources = [
            (
                state.name,
                state.source.public_url,
                _why_waiting(self.candidates, state, last.get(state.name), now),
            )
            for state in self.candidates.remaining()
        ]
        logger.warning(
            "%s",
            wait_message(
                self.operation,
                waited,
                self.retry.stall_window_s,
                had_output=self.ledger.last_output_at is not None,
                sources=sources,
            ),
        )

    async def _run_round(self, state: SourceState) -> RoundResult[T]:
        self.rounds += 1
        if self.round.hedging:
            self.hedge_budget.earn()
        self.round_started = started = self.loop.time()
        try:
            async with asyncio.timeout_at(self.deadline) as deadline:
                result = await self.round.run(state, self.ledger.tokens)
        except TimeoutError:
            if not deadline.expired():
                raise  # not the deadline: another's own error (an admission backend's), as it is
        else:
            return self._account(result, started)
        raise self._exhausted(f"call deadline of {self.retry.call_deadline_s:g} s reached")

    def _account(self, result: RoundResult[T], started: float) -> RoundResult[T]:
        self.hedges += result.hedges
        if result.hedges and result.trigger is not None and self.metrics is not None:
            self._record_hedge(result, result.trigger)
        output_at = self.ledger.last_output_at
        if output_at is not None and output_at > self.budget.started_at:
            # Output was progress: the stall window starts again there, so the call is still
            # bounded if only 429s and waits follow (the window ends calls that never produced
            # output; this keeps later waiting bounded too).
            self.budget = StallBudget(output_at, self.retry.stall_window_s)
            self.wait_warning = WaitWarning()
        if result.winner is None and any(_costs_a_unit(leg) for leg in result.failed):
            self.fails += 1  # both legs failing costs one unit
            self.budget.burn(self.loop.time() - started)
        return result

    def _record_hedge(self, result: RoundResult[T], trigger: str) -> None:
        """The round's hedge in the metrics: its trigger, who answered, what the loser cost."""
        assert self.metrics is not None
        try:
            winner = result.winner
            if winner is None:
                outcome = sc.HEDGE_FAILED
            else:
                outcome = sc.HEDGE_WON if winner.is_hedge else sc.HEDGE_LOST
            legs = [*([winner] if winner else []), *result.losers, *result.failed]
            hedge = next((leg for leg in legs if leg.is_hedge), None)
            attributes: dict[str, AttributeValue] = {sc.GEN_AI_OPERATION_NAME: self.operation}
            if hedge is not None:
                attributes[sc.ATTEMPT_SOURCE] = hedge.state.name
                attributes[sc.GEN_AI_PROVIDER_NAME] = hedge.state.source.provider
            tokens, chunks = self.ledger.waste(result.losers) if winner else (None, None)
            wasted = (len(result.losers) if winner else 0, chunks or 0, tokens)
            self.metrics.record_hedge(trigger, outcome, wasted, attributes)
        except Exception as exc:  # telemetry never breaks the call
            FAULTS.report("record a hedge's metrics", exc)

    async def _after_failure(self, result: RoundResult[T]) -> None:
        transient = any(isinstance(leg.error, e.TransientError) for leg in result.failed)
        if transient and self.fails < self.retry.max_attempts:
            delay = backoff_delay(
                self.fails,
                base_s=self.retry.backoff_base_s,
                cap_s=self.retry.backoff_max_s,
                unit=self.rng.random(),
            )
            self.backoff_s += delay
            await self._wait(delay)

    # --- endings --------------------------------------------------------------------------------

    def _outcome(self, result: RoundResult[T]) -> CallOutcome[T]:
        winner = result.winner
        assert winner is not None
        waste_tokens, waste_chunks = self.ledger.waste(result.losers)
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
            hedge_waste_tokens=waste_tokens,
            hedge_waste_chunks=waste_chunks,
        )

    def _exhausted(self, why: str) -> e.AllSourcesExhausted:
        """The call gives up: each source's latest failure (or why it was never tried) as its
        reason, raised from an ExceptionGroup of the attempts' failures."""
        now = self.loop.time()
        ledger = self.ledger
        reasons = {name: error.reason for name, error in ledger.last_error_of.items()} or {
            state.name: f"no attempt was made: {self.candidates.why_unavailable(state, now)}"
            for state in self.candidates.remaining()
        }
        urls = {state.name: state.source.public_url for state in self.candidates.states}
        error = e.AllSourcesExhausted(
            why, reasons, urls=urls, attempts=self.attempts, hedges=self.hedges
        )
        if ledger.errors:
            error.__cause__ = ExceptionGroup(
                f"the call's failed attempts (the {len(ledger.errors)} most recent)",
                list(ledger.errors),
            )
        return error

    def _no_source_left(self) -> e.OtelLLMError:
        """Every source was excluded by a permanent error: the provider's reason, unmasked."""
        last = self.ledger.last_error
        if isinstance(last, e.PermanentError):
            return last
        return self._exhausted("no source left")


def _costs_a_unit(leg: Leg[Any]) -> bool:
    """Whether a failed leg costs its round a unit of ``max_attempts``: a transient failure,
    or a stream that gave output and then broke off with a rate limit (an error event inside
    it). A 429 that refused the request costs none — the source said when it can answer — but
    a stream that is cut mid-answer is a broken stream whatever reason it gives; without the
    unit, a provider doing it to every attempt kept the call going forever, as each attempt's
    output restarted the stall window."""
    error = leg.error
    if isinstance(error, e.TransientError):
        return True
    return isinstance(error, e.RateLimited) and leg.attempt.chunks > 0


def _why_waiting(
    candidates: Candidates, state: SourceState, last: e.ProviderError | None, now: float
) -> str:
    """Why a call is still waiting for ``state``: why it is unavailable now, and its latest
    failure in this call."""
    unavailable = candidates.why_unavailable(state, now)
    why = [] if unavailable == "not tried" else [unavailable]
    if not why and isinstance(last, e.RateLimited):
        why.append("rate limited")
    if last is not None:
        why.append(f"last failure: {last.reason}")
    return ", ".join(why) or "available"
