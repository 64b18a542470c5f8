"""The span processor that derives stall figures from chunk events.

SDK spans are immutable once ended, so :class:`DerivingSpanProcessor` wraps the downstream
processors: it derives the figures of each attempt span from its chunk events, hands the
downstream an enriched copy, and copies the winning attempt's figures onto the call span. Like
every span processor it is synchronous, never blocks and never raises.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any, Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.util.types import AttributeValue

from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm._figures import FIGURES
from otel_llm._measure._events import read_chunk_columns, read_chunk_run
from otel_llm._measure._faults import FAULTS
from otel_llm._measure._span_events import leading_chunk_run
from otel_llm._measure._stalls import (
    NS_PER_MS,
    StallFigures,
    Timeline,
    meter,
    to_ms,
    validate_threshold_ms,
)

_NAME, _ATTRIBUTES, _TIMESTAMP = (
    attrgetter("name"),
    attrgetter("attributes"),
    attrgetter("timestamp"),
)
"""An event's fields, read over all of a span's events in C (``map``), not per event."""


def figure_attributes(figures: StallFigures) -> dict[str, AttributeValue]:
    """The derived figures as span attributes (the table of figures); ``None`` figures are
    left out."""
    attrs: dict[str, AttributeValue] = {}
    for figure in FIGURES:
        value = getattr(figures, figure.name)
        if value is not None:
            attrs[figure.attribute] = value
    return attrs


class _EnrichedSpan(ReadableSpan):
    """A copy of a finished span with more attributes; keeps the original's dropped counts."""

    def __init__(self, original: ReadableSpan, extra: dict[str, AttributeValue]) -> None:
        attributes = dict(original.attributes or {})
        attributes.update(extra)
        super().__init__(
            name=original.name,
            context=original.context,
            parent=original.parent,
            resource=original.resource,
            attributes=attributes,
            events=original.events,
            links=original.links,
            kind=original.kind,
            status=original.status,
            start_time=original.start_time,
            end_time=original.end_time,
            instrumentation_scope=original.instrumentation_scope,
        )
        self._dropped = (
            original.dropped_attributes,
            original.dropped_events,
            original.dropped_links,
        )

    @property
    def dropped_attributes(self) -> int:
        return self._dropped[0]

    @property
    def dropped_events(self) -> int:
        return self._dropped[1]

    @property
    def dropped_links(self) -> int:
        return self._dropped[2]


def derive_attempt(
    span: ReadableSpan, default_threshold_ms: int
) -> tuple[StallFigures | None, dict[str, AttributeValue]]:
    """Derive one attempt span's figures; returns them and the attributes to add."""
    figures, extra, _ = _derive_attempt(span, default_threshold_ms)
    return figures, extra


def winner_attributes(
    attributes: Mapping[str, Any], timeline: Timeline, started_at_ns: int
) -> dict[str, AttributeValue]:
    """What the call span carries of its winning attempt beside the figures: when it started,
    its model, source and provider, and its gaps longer than
    :attr:`~otel_llm._defaults.Defaults.winner_gap_floor_ms` (or than its chunk-event floor, if
    higher: shorter gaps may be missing there)."""
    floor_ms = max(DEFAULTS.winner_gap_floor_ms, timeline.complete_above_ms)
    floor_ns = floor_ms * NS_PER_MS
    extra: dict[str, AttributeValue] = {
        sc.CALL_WINNER_STARTED_AT_NS: started_at_ns,
        sc.CALL_WINNER_GAPS_FLOOR_MS: floor_ms,
        sc.CALL_WINNER_GAPS_NS: tuple(gap for gap in timeline.gaps_ns if gap > floor_ns),
    }
    for key, carried in _CARRIED_NAMES:
        value = attributes.get(key)
        if isinstance(value, str):
            extra[carried] = value
    return extra


_CARRIED_NAMES: Final = (
    (sc.GEN_AI_REQUEST_MODEL, sc.CALL_WINNER_MODEL),
    (sc.ATTEMPT_SOURCE, sc.CALL_WINNER_SOURCE),
    (sc.GEN_AI_PROVIDER_NAME, sc.CALL_WINNER_PROVIDER),
)
"""The attempt's attributes that name what answered, and the call span's names for the
winner's."""


_NO_GAPS_FLOOR: Final = DEFAULTS.winner_gap_floor_ms
"""The gap floor a call without a winner carries (it has no gaps above any)."""


def _derive_attempt(
    span: ReadableSpan, default_threshold_ms: int
) -> tuple[StallFigures | None, dict[str, AttributeValue], Timeline | None]:
    attributes = span.attributes or {}
    start, end = span.start_time, span.end_time
    if start is None or end is None:
        return None, {}, None
    threshold = attributes.get(sc.STALL_THRESHOLD_MS, default_threshold_ms)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold <= 0:
        threshold = default_threshold_ms
    # an end before the start has no wall time (only a span otel-llm did not write has one)
    wall_only: dict[str, AttributeValue] = {sc.WALL_MS: to_ms(end - start)} if end >= start else {}
    outcome = attributes.get(sc.ATTEMPT_OUTCOME)
    if type(outcome) is str and outcome in sc.OUTCOMES_WITHOUT_FIGURES:  # (a list: no hash)
        return None, wall_only, None
    events = span.events
    run = None if span.dropped_events else leading_chunk_run(events, sc.CHUNK_EVENT)
    if run is not None:  # otel-llm's own chunk events, as added (an error's event after them)
        recorded = read_chunk_run(attributes, run, start_ns=start, end_ns=end)
    else:
        recorded = read_chunk_columns(
            attributes,
            list(map(_NAME, events)),
            list(map(_ATTRIBUTES, events)),
            list(map(_TIMESTAMP, events)),
            start_ns=start,
            end_ns=end,
            dropped_events=span.dropped_events,
        )
    if recorded.timeline is None:
        return None, {**wall_only, sc.METERING_STATUS: recorded.status}, None
    try:
        figures = meter(recorded.timeline, threshold)
    except ValueError:  # below the event floor, and not the threshold measured at
        return None, {**wall_only, sc.METERING_STATUS: sc.METERING_INCOMPLETE_FLOOR}, None
    extra = figure_attributes(figures)
    extra[sc.METERING_STATUS] = recorded.status
    extra[sc.STALL_THRESHOLD_MS] = threshold
    return figures, extra, recorded.timeline


class DerivingSpanProcessor(SpanProcessor):
    """Derives ``ttft_ms``, ``wall_ms``, ``stall_ms``, ``stall_count``, ``generation_ms``,
    ``max_inter_chunk_ms`` and ``chunk_count`` and forwards enriched spans downstream.

    ``default_threshold_ms`` applies only to attempt spans that do not record the threshold
    they were measured with.
    """

    def __init__(
        self,
        downstream: Sequence[SpanProcessor],
        *,
        default_threshold_ms: int = DEFAULTS.stall_threshold_ms,
        max_pending_calls: int = DEFAULTS.pending_call_figures,
    ) -> None:
        self._downstream = tuple(downstream)
        self._default_threshold_ms = validate_threshold_ms(
            default_threshold_ms, "default_threshold_ms"
        )
        self._max_pending = max_pending_calls
        self._winners: OrderedDict[tuple[int, int], dict[int, dict[str, AttributeValue]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()
        self._shut = False
        """Set by :meth:`shutdown`: the SDK cannot detach a processor from its provider, so one
        shut down stays attached and lets every later span pass untouched, without handing it
        to downstream processors that are shut down too (each would log a warning per span)."""

    @property
    def downstream(self) -> tuple[SpanProcessor, ...]:
        """The processors that receive the enriched spans."""
        return self._downstream

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self._shut:
            return
        for processor in self._downstream:
            try:
                processor.on_start(span, parent_context=parent_context)
            except Exception as exc:
                FAULTS.report("hand a started span to a downstream processor", exc)

    def _on_ending(self, span: Span) -> None:
        if self._shut:
            return
        for processor in self._downstream:
            hook = getattr(processor, "_on_ending", None)
            if hook is not None:
                try:
                    hook(span)
                except Exception as exc:
                    FAULTS.report("hand an ending span to a downstream processor", exc)

    def on_end(self, span: ReadableSpan) -> None:
        if self._shut:
            return
        try:
            forwarded = self._enrich(span)
        except Exception as exc:  # forwarded unchanged: the span goes on without figures
            FAULTS.report("derive a span's figures", exc)
            forwarded = span
        for processor in self._downstream:
            try:
                processor.on_end(forwarded)
            except Exception as exc:
                FAULTS.report("hand an ended span to a downstream processor", exc)

    def shutdown(self) -> None:
        if self._shut:
            return
        self._shut = True
        for processor in self._downstream:
            try:
                processor.shutdown()
            except Exception as exc:
                FAULTS.report("shut a downstream span processor down", exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if self._shut:
            return True
        ok = True
        for processor in self._downstream:
            try:
                ok = processor.force_flush(timeout_millis) and ok
            except Exception as exc:
                FAULTS.report("flush a downstream span processor", exc)
                ok = False
        return ok

    def _enrich(self, span: ReadableSpan) -> ReadableSpan:
        attributes = span.attributes or {}
        role = attributes.get(sc.SPAN_ROLE)
        if role == sc.SPAN_ROLE_ATTEMPT:
            figures, extra, timeline = _derive_attempt(span, self._default_threshold_ms)
            if (
                figures is not None
                and timeline is not None
                and attributes.get(sc.ATTEMPT_OUTCOME) == sc.OUTCOME_OK
            ):
                ttft_s = attributes.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
                started = span.start_time or 0  # derived figures mean it has one
                copied = {**extra, **winner_attributes(attributes, timeline, started)}
                if ttft_s is not None:
                    copied[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = ttft_s
                self._remember(span, copied)
            return _EnrichedSpan(span, extra) if extra else span
        if role == sc.SPAN_ROLE_CALL:
            extra = self._winner_figures(span)
            return _EnrichedSpan(span, extra) if extra else span
        return span

    def _remember(self, span: ReadableSpan, extra: dict[str, AttributeValue]) -> None:
        parent = span.parent
        context = span.context
        number = (span.attributes or {}).get(sc.ATTEMPT_NUMBER, 0)
        if parent is None or context is None or not isinstance(number, int):
            return
        key = (context.trace_id, parent.span_id)
        with self._lock:
            self._winners.setdefault(key, {})[number] = extra
            self._winners.move_to_end(key)
            while len(self._winners) > self._max_pending:
                self._winners.popitem(last=False)

    def _winner_figures(self, span: ReadableSpan) -> dict[str, AttributeValue]:
        context = span.context
        if context is None:
            return {}
        with self._lock:
            attempts = self._winners.pop((context.trace_id, context.span_id), None)
        winner: Any = (span.attributes or {}).get(sc.CALL_WINNER_ATTEMPT)
        if not attempts:
            # no winner: the row says all there is of it (a store skips it when it looks for
            # rows that do not carry their winner); a winner not seen here: nothing
            return {} if winner is not None else {sc.CALL_WINNER_GAPS_FLOOR_MS: _NO_GAPS_FLOOR}
        if type(winner) is int and winner in attempts:  # (a value the SDK keeps: no list)
            return dict(attempts[winner])
        if winner is None and len(attempts) == 1:
            return dict(next(iter(attempts.values())))
        return {}
