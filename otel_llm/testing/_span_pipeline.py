"""An in-memory span pipeline for tests: the deriving processor into memory, and a tracker that
proves every started span ended exactly once."""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_llm import _semconv as sc
from otel_llm._errors import ConfigurationError
from otel_llm._figures import FIGURES
from otel_llm._measure._processor import DerivingSpanProcessor
from otel_llm._measure._stalls import StallFigures


class SpanTracker(SpanProcessor):
    """Remembers every span started and ended, to prove each started span ended exactly once."""

    def __init__(self) -> None:
        self.started: dict[int, str] = {}
        self.ended: dict[int, int] = {}
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        with self._lock:
            self.started[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        with self._lock:
            self.ended[span.context.span_id] = self.ended.get(span.context.span_id, 0) + 1

    def open_spans(self) -> list[str]:
        """Names of the spans started and not ended."""
        with self._lock:
            return [name for sid, name in self.started.items() if sid not in self.ended]

    def ended_twice(self) -> list[int]:
        """Ids of the spans ended more than once."""
        with self._lock:
            return [sid for sid, count in self.ended.items() if count > 1]


class Spans:
    """An SDK tracer provider whose spans go through the deriving processor into memory:
    ``Client(tracer_provider=spans.provider)``, then ``spans.calls()`` / ``spans.attempts()``
    (with the derived figures), and ``spans.check()`` at the end."""

    def __init__(self, *, max_events: int | None = None, threshold_ms: int = 1000) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracker = SpanTracker()
        try:
            self.processor = DerivingSpanProcessor(
                [SimpleSpanProcessor(self.exporter)], default_threshold_ms=threshold_ms
            )
        except ConfigurationError as exc:  # the processor's rule, under the name given here
            if exc.key != "default_threshold_ms":
                raise
            raise ConfigurationError("threshold_ms", exc.reason) from None
        limits = SpanLimits(max_events=max_events) if max_events is not None else None
        self.provider = TracerProvider(span_limits=limits)
        self.provider.add_span_processor(self.tracker)
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("tests")

    def finished(self) -> list[ReadableSpan]:
        """Every span that ended, derived figures included."""
        return list(self.exporter.get_finished_spans())

    def attempts(self) -> list[ReadableSpan]:
        """The attempt spans (one HTTP request each)."""
        return [s for s in self.finished() if (s.attributes or {}).get(sc.SPAN_ROLE) == "attempt"]

    def calls(self) -> list[ReadableSpan]:
        """The call spans (one logical request each)."""
        return [s for s in self.finished() if (s.attributes or {}).get(sc.SPAN_ROLE) == "call"]

    def check(self) -> None:
        """Every started span ended exactly once (raises AssertionError otherwise)."""
        self.provider.force_flush()
        assert self.tracker.open_spans() == [], "spans left open"
        assert self.tracker.ended_twice() == [], "spans ended twice"


def figures_of(span: ReadableSpan) -> StallFigures:
    """The figures the deriving processor wrote onto an attempt span (compare them with
    ``CallStats`` or a client's own: the processor's figures equal the client's)."""
    attributes = span.attributes or {}
    values: dict[str, Any] = {figure.name: attributes.get(figure.attribute) for figure in FIGURES}
    return StallFigures(**values)
