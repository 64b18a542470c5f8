"""Histograms beside the spans: operation duration, time to first chunk, stall, net generation.

Names follow the GenAI convention where it defines them (``gen_ai.client.operation.duration``,
``gen_ai.client.operation.time_to_first_chunk``); the stall and net-generation histograms live
in the ``otel_llm.`` namespace. Every histogram is in seconds and has a bucket boundary at the
default stall threshold (1 s), so "stalls over the threshold" is one bucket query.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import metrics
from opentelemetry.util.types import AttributeValue

from otel_llm._defaults import DEFAULTS
from otel_llm._measure._stalls import StallFigures
from otel_llm._version import __version__

BOUNDARIES_S = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64,
    DEFAULTS.stall_threshold_ms / 1000,
    1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84, 327.68,
)  # fmt: skip
"""Bucket boundaries (seconds); 1.0 is the default stall threshold."""

OPERATION_DURATION = "gen_ai.client.operation.duration"
TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
STALL_DURATION = "otel_llm.client.stall.duration"
GENERATION_DURATION = "otel_llm.client.generation.duration"


class LlmMetrics:
    """The four histograms, from a meter provider (default: the global one)."""

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        provider = meter_provider or metrics.get_meter_provider()
        meter = provider.get_meter("otel_llm", __version__)
        advisory = list(BOUNDARIES_S)
        self.duration = meter.create_histogram(
            OPERATION_DURATION,
            unit="s",
            description="Duration of the GenAI operation (the whole call).",
            explicit_bucket_boundaries_advisory=advisory,
        )
        self.ttft = meter.create_histogram(
            TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time from the request to the first incremental chunk.",
            explicit_bucket_boundaries_advisory=advisory,
        )
        self.stall = meter.create_histogram(
            STALL_DURATION,
            unit="s",
            description="Mid-stream silence longer than the stall threshold, per call.",
            explicit_bucket_boundaries_advisory=advisory,
        )
        self.generation = meter.create_histogram(
            GENERATION_DURATION,
            unit="s",
            description="Net generation time: wall time minus stalls.",
            explicit_bucket_boundaries_advisory=advisory,
        )

    def record_call(
        self,
        duration_s: float,
        figures: StallFigures | None,
        attributes: Mapping[str, AttributeValue],
    ) -> None:
        """Record one call; stall and generation only when observable (never a fake zero)."""
        self.duration.record(duration_s, attributes)
        if figures is None:
            return
        if figures.ttft_ms is not None:
            self.ttft.record(figures.ttft_ms / 1000, attributes)
        if figures.stall_ms is not None:
            self.stall.record(figures.stall_ms / 1000, attributes)
        self.generation.record(figures.generation_ms / 1000, attributes)
