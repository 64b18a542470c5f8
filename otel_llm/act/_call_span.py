"""The span of one call (one logical request), parent of its attempt spans."""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping
from types import TracebackType
from typing import Protocol, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from otel_llm import _semconv as sc
from otel_llm._redact import redact
from otel_llm.act._stats import CallStats

T = TypeVar("T")


class CallCounts(Protocol):
    """How far a call got: attempts and hedge legs started, sources tried."""

    attempts: int
    hedges: int
    tried: list[str]


class CallSpan:
    """Context manager around a call: ends the span exactly once with the call's outcome."""

    def __init__(
        self,
        tracer: trace.Tracer,
        *,
        operation: str,
        model: str | None,
        stream: bool,
        attributes: Mapping[str, AttributeValue] | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        self.secrets = tuple(secrets)
        attrs: dict[str, AttributeValue] = {
            sc.SPAN_ROLE: sc.SPAN_ROLE_CALL,
            sc.GEN_AI_OPERATION_NAME: operation,
            sc.GEN_AI_REQUEST_STREAM: stream,
        }
        if model:
            attrs[sc.GEN_AI_REQUEST_MODEL] = model
        attrs.update(attributes or {})
        self.span = tracer.start_span(
            sc.span_name(operation, model), kind=SpanKind.CLIENT, attributes=attrs
        )
        self.context: Context = trace.set_span_in_context(self.span)

    def __enter__(self) -> CallSpan:
        return self

    async def guard(self, counts: CallCounts, work: Awaitable[T]) -> T:
        """Await the call's work; if it fails, record how far it got on the call span."""
        try:
            return await work
        except BaseException:
            self.span.set_attributes(
                {
                    sc.CALL_ATTEMPTS: counts.attempts,
                    sc.CALL_HEDGES: counts.hedges,
                    sc.CALL_SOURCES_TRIED: tuple(counts.tried),
                }
            )
            raise

    def record(
        self, stats: CallStats, attributes: Mapping[str, AttributeValue], winner: int
    ) -> None:
        """Record the successful call: winner, counts and response attributes."""
        self.span.set_attributes(attributes)
        self.span.set_attributes(call_attributes(stats))
        self.span.set_attribute(sc.CALL_WINNER_ATTEMPT, winner)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self.span.set_attribute(sc.ERROR_TYPE, getattr(exc, "error_type", type(exc).__name__))
            message = redact(str(exc), self.secrets)
            self.span.set_status(Status(StatusCode.ERROR, message or type(exc).__name__))
            if not isinstance(exc, Exception):
                self.span.set_attribute(sc.ATTEMPT_OUTCOME, sc.OUTCOME_CANCELLED)
        self.span.end()


def call_attributes(stats: CallStats) -> dict[str, AttributeValue]:
    """The call-level counters the call span carries."""
    attrs: dict[str, AttributeValue] = {
        sc.CALL_ATTEMPTS: stats.attempts,
        sc.CALL_HEDGES: stats.hedges,
        sc.CALL_HEDGE_WON: stats.hedge_won,
        sc.CALL_SOURCES_TRIED: stats.sources_tried,
    }
    if stats.hedge_waste_tokens is not None:
        attrs[sc.CALL_HEDGE_WASTE_TOKENS] = stats.hedge_waste_tokens
    if stats.hedge_waste_chunks is not None:
        attrs[sc.CALL_HEDGE_WASTE_CHUNKS] = stats.hedge_waste_chunks
    return attrs
