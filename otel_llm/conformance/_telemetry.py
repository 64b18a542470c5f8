"""Where an instrumentation under test records: an SDK tracer provider into memory and a meter
provider with an in-memory reader, read back case by case.

Every case runs inside a root span of a separate tracer provider (never exported), so the
instrumentation's spans of that case share its trace id and a span that ends late (an
abandoned stream collected afterwards) is never taken for the next case's. The metric reader
uses delta temporality: each read returns what was recorded since the previous one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    MeterProvider,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
)
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_KINDS = (
    Counter,
    UpDownCounter,
    Histogram,
    ObservableCounter,
    ObservableUpDownCounter,
    ObservableGauge,
)
_DELTA: dict[type, AggregationTemporality] = dict.fromkeys(_KINDS, AggregationTemporality.DELTA)


@dataclass(frozen=True, slots=True)
class Point:
    """One recorded metric point: a histogram's count and sum, or a counter's value."""

    name: str
    attributes: Mapping[str, Any]
    count: int
    total: float


@dataclass(frozen=True, slots=True)
class Recorded:
    """What an instrumentation recorded during one case."""

    spans: tuple[ReadableSpan, ...]
    """Its spans of the case (ended ones only: an SDK exports a span when it ends)."""
    points: tuple[Point, ...]

    def points_named(self, name: str) -> list[Point]:
        """The points of one metric."""
        return [point for point in self.points if point.name == name]

    def attribute(self, name: str) -> Any:
        """The first value of a span attribute among the case's spans."""
        for span in self.spans:
            value = (span.attributes or {}).get(name)
            if value is not None:
                return value
        return None


class Telemetry:
    """The providers handed to the instrumentation, and the case-by-case reading."""

    def __init__(
        self, processor: Callable[[InMemorySpanExporter], SpanProcessor] = SimpleSpanProcessor
    ) -> None:
        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader(preferred_temporality=_DELTA)
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(processor(self.exporter))
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self._cases = TracerProvider()  # the roots of the cases: never exported
        self._tracer = self._cases.get_tracer("otel_llm.conformance")

    @contextmanager
    def case(self, name: str) -> Iterator[list[Recorded]]:
        """Run one case inside its own trace; the list holds its :class:`Recorded` after."""
        self._points()  # what earlier cases recorded late is not this case's
        out: list[Recorded] = []
        with self._tracer.start_as_current_span(f"conformance {name}") as root:
            trace_id = root.get_span_context().trace_id
            yield out
        self.tracer_provider.force_flush()
        spans = tuple(
            span
            for span in self.exporter.get_finished_spans()
            if span.context is not None and span.context.trace_id == trace_id
        )
        out.append(Recorded(spans, tuple(self._points())))

    def _points(self) -> Sequence[Point]:
        data = self.reader.get_metrics_data()
        points: list[Point] = []
        if data is None:
            return points
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        count = getattr(point, "count", None)
                        total = float(getattr(point, "sum", 0) or 0)
                        if count is None:  # a counter or gauge: its value
                            count, total = 1, float(getattr(point, "value", 0))
                        if count:
                            points.append(
                                Point(metric.name, dict(point.attributes or {}), count, total)
                            )
        return points

    def shutdown(self) -> None:
        """Shut both providers down."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
        self._cases.shutdown()
