"""Histograms beside the spans: operation duration, time to first chunk, stall, net generation.

Names follow the GenAI convention where it defines them, under the names
``OTEL_SEMCONV_STABILITY_OPT_IN`` chooses (:mod:`._metric_names`, their one owner: the current
``gen_ai.client.operation.*`` by default); the stall and net-generation histograms live in the
``otel_llm.`` namespace. Every histogram is in seconds and has a bucket boundary at the default
stall threshold (1 s), so "stalls over the threshold" is one bucket query.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from opentelemetry import metrics
from opentelemetry.util.types import AttributeValue

from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm._measure._metric_names import (
    DURATION,
    GENERATION,
    METRICS,
    STALL,
    TIME_TO_FIRST_CHUNK,
    MetricName,
    Naming,
    naming_from_env,
)
from otel_llm._measure._stalls import StallFigures
from otel_llm._version import __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram

BOUNDARIES_S = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64,
    DEFAULTS.stall_threshold_ms / 1000,
    1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84, 327.68,
)  # fmt: skip
"""Bucket boundaries (seconds); 1.0 is the default stall threshold."""


class LlmMetrics:
    """The four histograms, from a meter provider (default: the global one), under the names
    ``naming`` chooses (default: as ``OTEL_SEMCONV_STABILITY_OPT_IN`` says, read here)."""

    def __init__(
        self, meter_provider: metrics.MeterProvider | None = None, naming: Naming | None = None
    ) -> None:
        provider = meter_provider or metrics.get_meter_provider()
        meter = provider.get_meter("otel_llm", __version__)
        self.naming = naming_from_env() if naming is None else naming
        self._instruments: dict[str, Histogram] = {
            name: meter.create_histogram(
                name,
                unit=metric.unit,
                description=metric.description,
                explicit_bucket_boundaries_advisory=list(BOUNDARIES_S),
            )
            for metric in METRICS
            for name in metric.all_names(self.naming)
        }
        self._by_operation: dict[tuple[str, str | None], tuple[Histogram, ...]] = {}

    def _histograms(self, metric: MetricName, operation: str | None) -> tuple[Histogram, ...]:
        """The instruments a point of ``metric`` for ``operation`` goes to."""
        found = self._by_operation.get((metric.key, operation))
        if found is None:
            names = metric.names(self.naming, operation)
            found = self._by_operation[(metric.key, operation)] = tuple(
                self._instruments[name] for name in names
            )
        return found

    def record_call(
        self,
        duration_s: float,
        figures: StallFigures | None,
        attributes: Mapping[str, AttributeValue],
    ) -> None:
        """Record one call; stall and generation only when observable (never a fake zero)."""
        operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
        op = operation if isinstance(operation, str) else None
        for histogram in self._histograms(DURATION, op):
            histogram.record(duration_s, attributes)
        if figures is None:
            return
        if figures.ttft_ms is not None:
            for histogram in self._histograms(TIME_TO_FIRST_CHUNK, op):
                histogram.record(figures.ttft_ms / 1000, attributes)
        if figures.stall_ms is not None:
            for histogram in self._histograms(STALL, op):
                histogram.record(figures.stall_ms / 1000, attributes)
        for histogram in self._histograms(GENERATION, op):
            histogram.record(figures.generation_ms / 1000, attributes)
