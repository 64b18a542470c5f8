"""Attempt spans whose timestamps all come from one monotonic clock.

The span start is anchored to ``time.time_ns()`` once; every chunk event and the span end are that
anchor plus a ``time.monotonic_ns()`` offset. So differences between span timestamps are exactly
the differences the client measured, and the span processor derives the same figures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from time import time_ns
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.util.types import AttributeValue

from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm._errors import error_type
from otel_llm._measure import _clock
from otel_llm._measure._call_span import end_span, record_error, start_span
from otel_llm._measure._chunks import ChunkClock
from otel_llm._measure._events import (
    CHUNK_EVENT_ATTRIBUTES,
    choose_event_indices,
    chunk_event_attributes,
)
from otel_llm._measure._faults import FAULTS
from otel_llm._measure._metrics import LlmMetrics
from otel_llm._measure._span_events import ChunkRun, add_events
from otel_llm._measure._stalls import StallFigures, meter, stall_sum

_METRIC_KEYS = (
    sc.GEN_AI_OPERATION_NAME,
    sc.GEN_AI_PROVIDER_NAME,
    sc.GEN_AI_REQUEST_MODEL,
    sc.ATTEMPT_SOURCE,
    sc.ATTEMPT_LEG,
)
"""The attempt attributes its metrics carry: what it was, never which one (bounded)."""


def _event_budget(span: trace.Span) -> int:
    """Chunk events this span can hold without the SDK dropping any."""
    limits = getattr(span, "_limits", None)  # SDK spans expose their limits here; others don't
    limit = getattr(limits, "max_events", None)
    if isinstance(limit, int) and limit > 0:
        return max(3, min(DEFAULTS.chunk_event_budget, limit - DEFAULTS.chunk_event_headroom))
    return DEFAULTS.chunk_event_budget


class AttemptSpan:
    """The span of one attempt and the chunk clock that meters it.

    ``finish()`` ends the span exactly once, on every path, and returns the attempt's figures.
    """

    __slots__ = (
        "_anchor_ns",
        "_figures",
        "_metric_attributes",
        "_metrics",
        "clock",
        "secrets",
        "span",
        "streamed",
        "threshold_ms",
    )

    def __init__(
        self,
        tracer: trace.Tracer,
        name: str,
        *,
        attributes: Mapping[str, AttributeValue],
        threshold_ms: int,
        streamed: bool,
        context: Context | None = None,
        signal: asyncio.Event | None = None,
        consumer_aware: bool = False,
        start_ns: int | None = None,
        secrets: Iterable[str] = (),
        metrics: LlmMetrics | None = None,
    ) -> None:
        """``start_ns`` (a ``time.monotonic_ns()`` value) defaults to now; ``secrets`` are
        redacted from any error text the span records; ``metrics`` records the attempt's
        outcome, stalls and (when asked) gaps as it ends."""
        self._anchor_ns = time_ns()
        start = _clock.now_ns() if start_ns is None else start_ns
        self.clock = ChunkClock(start, signal, consumer_aware=consumer_aware)
        self.streamed = streamed
        self.threshold_ms = threshold_ms
        self.secrets = tuple(secrets)
        self._figures: StallFigures | None = None
        attrs: dict[str, AttributeValue] = {
            sc.SPAN_ROLE: sc.SPAN_ROLE_ATTEMPT,
            sc.STALL_THRESHOLD_MS: threshold_ms,
        }
        if streamed:  # the GenAI convention sets it if and only if the request streams
            attrs[sc.GEN_AI_REQUEST_STREAM] = True
        attrs.update(attributes)
        self._metrics = metrics
        self._metric_attributes: dict[str, AttributeValue] = (
            {key: attrs[key] for key in _METRIC_KEYS if key in attrs} if metrics else {}
        )
        self.span = start_span(
            tracer, name, attributes=attrs, context=context, start_time=self._anchor_ns
        )

    @property
    def finished(self) -> bool:
        """True once ``finish()`` has ended the span."""
        return self._figures is not None

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        """Add response attributes before the span ends."""
        if self._figures is not None:
            return
        try:
            self.span.set_attributes(attributes)
        except Exception as exc:  # telemetry must never break the call
            FAULTS.report("record an attempt's response", exc)

    def finish(
        self,
        outcome: str,
        *,
        error: BaseException | None = None,
        attributes: Mapping[str, Any] | None = None,
        end_ns: int | None = None,
        error_text: bool = True,
    ) -> StallFigures:
        """End the span with ``outcome`` and return the attempt's figures (idempotent).

        ``end_ns`` (a ``time.monotonic_ns()`` value) defaults to now, and is never before the
        last chunk's arrival (arrivals marked ahead of the clock end the span with them, so that
        its times stay possible: :data:`~otel_llm._semconv.METERING_INCOMPLETE_TIMING`);
        ``error_text`` false records ``error`` by its type only (:func:`record_error`).
        """
        if self._figures is not None:
            return self._figures
        end_ns = _clock.now_ns() if end_ns is None else end_ns
        arrivals = self.clock.arrivals_ns
        if arrivals and arrivals[-1] > end_ns:  # marked ahead of the clock (a replay, a test):
            end_ns = arrivals[-1]  # the attempt did not end before its last chunk came
        gaps = self.clock.gaps_ns() if self.streamed else []
        timeline = self.clock.timeline(end_ns, streamed=self.streamed, gaps_ns=gaps)
        self._figures = figures = meter(timeline, self.threshold_ms)
        span = self.span
        try:
            if attributes:
                span.set_attributes(attributes)
            span.set_attribute(sc.ATTEMPT_OUTCOME, outcome)
            if self.streamed:
                self._record_chunk_events(span, gaps)
                if timeline.ttft_ns is not None:
                    span.set_attribute(
                        sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, timeline.ttft_ns / 1e9
                    )
            if error is not None:
                record_error(span, error, self.secrets, text=error_text)
            elif outcome in sc.OUTCOMES_WITHOUT_FIGURES:
                span.set_attribute(sc.ERROR_TYPE, outcome)
        except Exception as exc:  # telemetry must never break the call
            FAULTS.report("record how an attempt ended", exc)
        finally:
            end_span(span, self._anchor_ns + (end_ns - self.clock.start_ns))
        if self._metrics is not None:
            self._record_metrics(outcome, figures, gaps, error, attributes)
        return figures

    def _record_metrics(
        self,
        outcome: str,
        figures: StallFigures,
        gaps_ns: list[int],
        error: BaseException | None,
        attributes: Mapping[str, Any] | None,
    ) -> None:
        """The attempt's metrics, under the span's bounded attributes (never its ids)."""
        assert self._metrics is not None
        try:
            attrs = dict(self._metric_attributes)
            model = (attributes or {}).get(sc.GEN_AI_RESPONSE_MODEL)
            if isinstance(model, str):
                attrs[sc.GEN_AI_RESPONSE_MODEL] = model
            if error is not None:
                attrs[sc.ERROR_TYPE] = error_type(error)
            observable = None if outcome in sc.OUTCOMES_WITHOUT_FIGURES else figures
            self._metrics.record_attempt(outcome, observable, gaps_ns, attrs)
        except Exception as exc:  # telemetry must never break the call
            FAULTS.report("record an attempt's metrics", exc)

    def _record_chunk_events(self, span: trace.Span, gaps_ns: list[int]) -> None:
        clock = self.clock
        indices, floor_ms = choose_event_indices(
            clock.count,
            gaps_ns,
            floor_ms=min(DEFAULTS.chunk_event_floor_ms, self.threshold_ms),
            budget=_event_budget(span),
        )
        span.set_attributes(
            {
                sc.CHUNK_COUNT_RECORDED: clock.count,
                sc.CHUNK_EVENTS_RECORDED: len(indices),
                sc.CHUNK_EVENTS_FLOOR_MS: floor_ms,
            }
        )
        if floor_ms > self.threshold_ms:  # events thinned above the threshold
            stall_ns, stall_count = stall_sum(gaps_ns, self.threshold_ms)
            span.set_attributes({sc.CHUNK_STALL_NS: stall_ns, sc.CHUNK_STALL_COUNT: stall_count})
        arrivals = clock.arrivals_ns
        base = self._anchor_ns - clock.start_ns  # event time = anchor + offset from the start
        stamps = [base + arrivals[index] for index in indices]
        first_alone = bool(indices) and indices[0] == 0
        gaps = [gaps_ns[index - 1] for index in indices[first_alone:]]
        add_events(
            span,
            sc.CHUNK_EVENT,
            stamps,
            chunk_event_attributes(indices, gaps_ns),
            most_attributes=CHUNK_EVENT_ATTRIBUTES,
            chunks=ChunkRun(stamps, indices, gaps, first_alone),
        )
