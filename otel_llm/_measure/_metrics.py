"""Metrics beside the spans. Per call: operation duration, time to first chunk, stall, net
generation (histograms in seconds). Per attempt: attempts by outcome (a counter), stalls per
attempt, and -- when ``OTEL_LLM_METRICS_CHUNK_GAPS=true`` -- the time between chunks, one point
per gap.

Names follow the GenAI convention where it defines them, under the names
``OTEL_SEMCONV_STABILITY_OPT_IN`` chooses (:mod:`._metric_names`, their one owner with their
units and bucket boundaries: the current ``gen_ai.client.operation.*`` by default); the rest
live in the ``otel_llm.`` namespace. Every time histogram has a bucket boundary at the default
stall threshold (1 s), so "over the threshold" is one bucket query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING

from opentelemetry import metrics
from opentelemetry.util.types import AttributeValue

from otel_llm import _semconv as sc
from otel_llm._measure._faults import FAULTS
from otel_llm._measure._metric_names import (
    ATTEMPTS,
    BREAKER_TRANSITIONS,
    CHUNK_GAP,
    DURATION,
    GENERATION,
    HEDGE_WASTED_CHUNKS,
    HEDGE_WASTED_REQUESTS,
    HEDGE_WASTED_TOKENS,
    HEDGES,
    METRICS,
    STALL,
    STALL_COUNT,
    TIME_TO_FIRST_CHUNK,
    MetricName,
    Naming,
    chunk_gaps_from_env,
    naming_from_env,
)
from otel_llm._measure._stalls import StallFigures
from otel_llm._version import __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram


class LlmMetrics:
    """otel-llm's metrics, from a meter provider (default: the global one), under the names
    ``naming`` chooses (default: as ``OTEL_SEMCONV_STABILITY_OPT_IN`` says, read here); the
    per-gap histogram when ``chunk_gaps`` (default: ``OTEL_LLM_METRICS_CHUNK_GAPS``)."""

    def __init__(
        self,
        meter_provider: metrics.MeterProvider | None = None,
        naming: Naming | None = None,
        *,
        chunk_gaps: bool | None = None,
    ) -> None:
        provider = meter_provider or metrics.get_meter_provider()
        self.naming = naming_from_env() if naming is None else naming
        self.chunk_gaps = chunk_gaps_from_env() if chunk_gaps is None else chunk_gaps
        try:
            self._make_instruments(provider.get_meter("otel_llm", __version__))
        except Exception as exc:  # the application's meter provider never costs a client
            FAULTS.report("make otel-llm's metrics; none are recorded", exc)
            self._make_instruments(metrics.NoOpMeter("otel_llm", __version__))
        self._histograms_of: dict[tuple[str, str | None], tuple[Histogram, ...]] = {}
        self._counters_of: dict[tuple[str, str | None], tuple[Counter, ...]] = {}

    def _make_instruments(self, meter: metrics.Meter) -> None:
        """The instruments of every metric recorded, from ``meter``."""
        wanted = [m for m in METRICS if m is not CHUNK_GAP or self.chunk_gaps]
        self._histogram_named: dict[str, Histogram] = {
            name: meter.create_histogram(
                name,
                unit=metric.unit,
                description=metric.description,
                explicit_bucket_boundaries_advisory=list(metric.boundaries),
            )
            for metric in wanted
            if metric.instrument == "histogram"
            for name in metric.all_names(self.naming)
        }
        self._counter_named: dict[str, Counter] = {
            name: meter.create_counter(name, unit=metric.unit, description=metric.description)
            for metric in wanted
            if metric.instrument == "counter"
            for name in metric.all_names(self.naming)
        }

    def _histograms(self, metric: MetricName, operation: str | None) -> tuple[Histogram, ...]:
        """The instruments a point of ``metric`` for ``operation`` goes to."""
        found = self._histograms_of.get((metric.key, operation))
        if found is None:
            names = metric.names(self.naming, operation)
            found = self._histograms_of[(metric.key, operation)] = tuple(
                self._histogram_named[name] for name in names
            )
        return found

    def _counters(self, metric: MetricName, operation: str | None) -> tuple[Counter, ...]:
        found = self._counters_of.get((metric.key, operation))
        if found is None:
            names = metric.names(self.naming, operation)
            found = self._counters_of[(metric.key, operation)] = tuple(
                self._counter_named[name] for name in names
            )
        return found

    def record_call(
        self,
        duration_s: float,
        figures: StallFigures | None,
        attributes: Mapping[str, AttributeValue],
    ) -> None:
        """Record one call; stall and generation only when observable (never a fake zero)."""
        op = _operation(attributes)
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

    def record_attempt(
        self,
        outcome: str,
        figures: StallFigures | None,
        gaps_ns: Sequence[int],
        attributes: Mapping[str, AttributeValue],
    ) -> None:
        """Record one ended attempt: its outcome (counted under ``otel_llm.attempt.outcome``),
        its stalls when observable, and, when asked for, every provider-side gap between its
        chunks (the consumer's own pauses are not in them)."""
        op = _operation(attributes)
        counted = {**attributes, sc.ATTEMPT_OUTCOME: outcome}
        for counter in self._counters(ATTEMPTS, op):
            counter.add(1, counted)
        if figures is not None and figures.stall_count is not None:
            for histogram in self._histograms(STALL_COUNT, op):
                histogram.record(figures.stall_count, attributes)
        if self.chunk_gaps and gaps_ns:
            for histogram in self._histograms(CHUNK_GAP, op):
                record = histogram.record
                for gap in gaps_ns:
                    record(gap / 1e9, attributes)

    def record_hedge(
        self,
        trigger: str,
        outcome: str,
        wasted: tuple[int, int, int | None],
        attributes: Mapping[str, AttributeValue],
    ) -> None:
        """Record one hedged round: the hedge (by trigger and outcome) and what the losing leg
        cost — ``wasted`` is requests, chunks and tokens (``None``: not reported)."""
        op = _operation(attributes)
        by_trigger = {**attributes, sc.HEDGE_TRIGGER: trigger}
        for counter in self._counters(HEDGES, op):
            counter.add(1, {**by_trigger, sc.HEDGE_OUTCOME: outcome})
        requests, chunks, tokens = wasted
        for metric, amount in (
            (HEDGE_WASTED_REQUESTS, requests),
            (HEDGE_WASTED_CHUNKS, chunks),
            (HEDGE_WASTED_TOKENS, tokens),
        ):
            if amount:
                for counter in self._counters(metric, op):
                    counter.add(amount, by_trigger)

    def record_breaker_state(self, source: str, state: Enum) -> None:
        """Record a source's breaker moving to ``state`` (its value names it)."""
        for counter in self._counters(BREAKER_TRANSITIONS, None):
            counter.add(1, {sc.ATTEMPT_SOURCE: source, sc.BREAKER_STATE: str(state.value)})


def _operation(attributes: Mapping[str, AttributeValue]) -> str | None:
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    return operation if isinstance(operation, str) else None
