"""One attempt: one HTTP request to one source, inside its own span."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.util.types import AttributeValue

from otel_llm import _errors as e
from otel_llm import _semconv as sc
from otel_llm._act._completion import Completion, Embeddings
from otel_llm._act._pool import Pool
from otel_llm._act._source import Source
from otel_llm._act._transport import chat_completion, embeddings
from otel_llm._act._watchdog import ConnectionWait, Watchdog
from otel_llm._measure._metrics import LlmMetrics
from otel_llm._measure._spans import AttemptSpan
from otel_llm._measure._stalls import StallFigures

R = TypeVar("R")


def source_attributes(source: Source, operation: str) -> dict[str, AttributeValue]:
    """Request attributes that describe ``source``."""
    attrs: dict[str, AttributeValue] = {
        sc.GEN_AI_OPERATION_NAME: operation,
        sc.GEN_AI_PROVIDER_NAME: source.provider_name,
        sc.GEN_AI_REQUEST_MODEL: source.model,
        sc.SERVER_ADDRESS: source.host,
        sc.ATTEMPT_SOURCE: source.name,
    }
    if source.port is not None:
        attrs[sc.SERVER_PORT] = source.port
    return attrs


class Attempt:
    """A chat attempt at one source. Its span ends exactly once on every path.

    ``cancel_outcome`` is what a cancellation is recorded as: the hedge orchestrator sets it to
    ``hedge_cancelled`` before it cancels a losing leg.
    """

    def __init__(
        self,
        tracer: trace.Tracer,
        source: Source,
        *,
        number: int,
        stream: bool,
        threshold_ms: int,
        leg: str = sc.LEG_PRIMARY,
        context: Context | None = None,
        signal: asyncio.Event | None = None,
        request_attributes: Mapping[str, AttributeValue] | None = None,
        operation: str = sc.OPERATION_CHAT,
        metrics: LlmMetrics | None = None,
    ) -> None:
        self.source = source
        self.number = number
        self.leg = leg
        self.stream = stream
        self.cancel_outcome = sc.OUTCOME_CANCELLED
        self._pool: Pool | None = None
        self.figures: StallFigures | None = None
        self.completion: Completion | None = None
        self.error: BaseException | None = None
        attrs = source_attributes(source, operation)
        attrs[sc.ATTEMPT_NUMBER] = number
        attrs[sc.ATTEMPT_LEG] = leg
        attrs.update(request_attributes or {})
        self.span = AttemptSpan(
            tracer,
            sc.span_name(operation, source.model),
            attributes=attrs,
            threshold_ms=threshold_ms,
            streamed=stream,
            context=context,
            signal=signal,
            secrets=source.secrets(),
            metrics=metrics,
        )
        self.wait = ConnectionWait(
            self.span.clock,
            source.timeout_s,  # the pool's timeout (request_timeout)
            self._reports_connections,
        )
        """The request's wait for a connection of the client's pool."""

    @property
    def chunks(self) -> int:
        """Incremental chunks received so far."""
        return self.span.clock.count

    def _reports_connections(self) -> bool:
        return self._pool is not None and self._pool.reports_connections

    async def _request(self, pool: Pool, payload: Mapping[str, Any]) -> Completion:
        source, clock = self.source, self.span.clock
        self._pool = pool
        if not self.stream:
            return await chat_completion(
                pool, source, payload, stream=False, clock=clock, on_connected=self.wait.mark
            )
        async with Watchdog(
            clock,
            source.effective_ttft_timeout_s,
            source.effective_inter_chunk_timeout_s,
            source=source.name,
            wait=self.wait,
        ):
            return await chat_completion(
                pool, source, payload, stream=True, clock=clock, on_connected=self.wait.mark
            )

    async def run(self, pool: Pool, payload: Mapping[str, Any]) -> Completion:
        """Send the chat request and return the completion; the span records the outcome.

        A streamed attempt runs under the watchdog: a kill is a
        :class:`WatchdogTimeout` and the partial answer is discarded.
        """
        completion = await self._recorded(self._request(pool, payload))
        self.completion = completion
        self.figures = self.span.finish(sc.OUTCOME_OK, attributes=completion.facts.attributes())
        return completion

    async def run_embeddings(self, pool: Pool, payload: Mapping[str, Any]) -> Embeddings:
        """Send the embeddings request; the span records the outcome."""
        answer = await self._recorded(embeddings(pool, self.source, payload))
        self.figures = self.span.finish(sc.OUTCOME_OK, attributes=answer.facts.attributes())
        return answer

    async def _recorded(self, request: Awaitable[R]) -> R:
        """Await ``request``; on any failure end the span with the matching outcome."""
        try:
            return await request
        except asyncio.CancelledError:
            self.figures = self.span.finish(self.cancel_outcome)
            raise
        except e.ProviderError as exc:
            exc.source, exc.url = self.source.name, self.source.public_url
            self.error = exc
            outcome = (
                sc.OUTCOME_WATCHDOG_KILLED
                if isinstance(exc, e.WatchdogTimeout)
                else sc.OUTCOME_ERROR
            )
            self.figures = self.span.finish(outcome, error=exc)
            raise
        except BaseException as exc:
            self.error = exc
            self.figures = self.span.finish(sc.OUTCOME_ERROR, error=exc)
            raise
