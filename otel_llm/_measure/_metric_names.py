"""Every metric otel-llm records, under the name it has now and the name it is being renamed to:
the one owner of metric names, units and descriptions.

The GenAI conventions are moving the client's inference metrics from ``gen_ai.client.operation.*``
to ``gen_ai.client.inference.*`` (and an embeddings call's duration to
``gen_ai.client.embeddings.duration``); no tagged release has the new names yet. Following the
conventions' migration pattern, ``OTEL_SEMCONV_STABILITY_OPT_IN`` (a comma-separated list) chooses:

- nothing: the current names (what released conventions, dashboards and peers use);
- :data:`RENAMED_TOKEN`: the new names only;
- :data:`BOTH_TOKEN`: both, every point recorded under each (for a migration window; it doubles
  the metrics' cost).

The otel-llm metrics (``otel_llm.client.*``) have one name under every choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Final, Literal

from otel_llm import _env as env
from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS


class Naming(Enum):
    """Which names the metrics are recorded under."""

    CURRENT = "current"
    RENAMED = "renamed"
    BOTH = "both"


RENAMED_TOKEN: Final = "gen_ai_client_inference"
"""The ``OTEL_SEMCONV_STABILITY_OPT_IN`` value that asks for the new names."""
BOTH_TOKEN: Final = f"{RENAMED_TOKEN}/dup"
"""The value that asks for both names."""


SECONDS_BOUNDARIES: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64,
    DEFAULTS.stall_threshold_ms / 1000,
    1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84, 327.68,
)  # fmt: skip
"""Bucket boundaries of the call-level histograms (seconds); 1.0 is the default stall threshold,
so "over the threshold" is one bucket query."""
GAP_BOUNDARIES: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64,
    DEFAULTS.stall_threshold_ms / 1000,
    2.0, 5.0, 10.0, 30.0,
)  # fmt: skip
"""Bucket boundaries of the gap between chunks (seconds): fast models stream a chunk every
5-30 ms, so the edges start at 1 ms; the default stall threshold (1 s) is an edge, so the gaps
that were stalls are one bucket query; a few edges above it say how long those stalls were."""
COUNT_BOUNDARIES: Final = (0.0, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0)
"""Bucket boundaries of a count per attempt (stalls): none, one, two, a few, many."""


@dataclass(frozen=True, slots=True)
class MetricName:
    """One metric: its key in otel-llm, its names, instrument, unit and description."""

    key: str
    current: str
    renamed: str
    """The new name (the current one when no rename is pending)."""
    unit: str
    description: str
    renamed_by_operation: Mapping[str, str] = field(default_factory=dict)
    """Operations whose new name differs from :attr:`renamed` (an embeddings call's duration)."""
    instrument: Literal["histogram", "counter"] = "histogram"
    boundaries: tuple[float, ...] = SECONDS_BOUNDARIES
    """Explicit bucket boundaries (histograms)."""

    def names(self, naming: Naming, operation: str | None = None) -> tuple[str, ...]:
        """The names a point of ``operation`` is recorded under with ``naming``."""
        renamed = self.renamed_by_operation.get(operation or "", self.renamed)
        if naming is Naming.CURRENT or renamed == self.current:
            return (self.current,)
        if naming is Naming.RENAMED:
            return (renamed,)
        return (self.current, renamed)

    def all_names(self, naming: Naming) -> tuple[str, ...]:
        """Every name this metric can be recorded under with ``naming`` (any operation)."""
        operations: tuple[str | None, ...] = (None, *self.renamed_by_operation)
        return tuple(dict.fromkeys(n for op in operations for n in self.names(naming, op)))


DURATION: Final = MetricName(
    "duration",
    "gen_ai.client.operation.duration",
    "gen_ai.client.inference.duration",
    "s",
    "Duration of the GenAI operation (the whole call).",
    renamed_by_operation={sc.OPERATION_EMBEDDINGS: "gen_ai.client.embeddings.duration"},
)
TIME_TO_FIRST_CHUNK: Final = MetricName(
    "time_to_first_chunk",
    "gen_ai.client.operation.time_to_first_chunk",
    "gen_ai.client.inference.time_to_first_chunk",
    "s",
    "Time from the request to the first incremental chunk.",
)
STALL: Final = MetricName(
    "stall",
    "otel_llm.client.stall.duration",
    "otel_llm.client.stall.duration",
    "s",
    "Mid-stream silence longer than the stall threshold, per call.",
)
GENERATION: Final = MetricName(
    "generation",
    "otel_llm.client.generation.duration",
    "otel_llm.client.generation.duration",
    "s",
    "Net generation time: wall time minus stalls.",
)
CHUNK_GAP: Final = MetricName(
    "time_per_output_chunk",
    "gen_ai.client.operation.time_per_output_chunk",
    "gen_ai.client.inference.time_per_output_chunk",
    "s",
    "Provider-side time between two incremental chunks, one point per gap (opt-in).",
    boundaries=GAP_BOUNDARIES,
)
STALL_COUNT: Final = MetricName(
    "stall_count",
    "otel_llm.client.attempt.stalls",
    "otel_llm.client.attempt.stalls",
    "{stall}",
    "Stalls of one attempt (gaps between chunks longer than the stall threshold).",
    boundaries=COUNT_BOUNDARIES,
)
ATTEMPTS: Final = MetricName(
    "attempts",
    "otel_llm.client.attempts",
    "otel_llm.client.attempts",
    "{attempt}",
    "Attempts ended, by outcome (ok, error, watchdog_killed, hedge_cancelled, cancelled, ...).",
    instrument="counter",
)
HEDGES: Final = MetricName(
    "hedges",
    "otel_llm.client.hedges",
    "otel_llm.client.hedges",
    "{hedge}",
    "Hedges started, by trigger and outcome (won, lost, failed).",
    instrument="counter",
)
HEDGE_WASTED_REQUESTS: Final = MetricName(
    "hedge_wasted_requests",
    "otel_llm.client.hedge.wasted_requests",
    "otel_llm.client.hedge.wasted_requests",
    "{request}",
    "Requests of hedged rounds whose answer was thrown away (the losing leg), by trigger.",
    instrument="counter",
)
HEDGE_WASTED_CHUNKS: Final = MetricName(
    "hedge_wasted_chunks",
    "otel_llm.client.hedge.wasted_chunks",
    "otel_llm.client.hedge.wasted_chunks",
    "{chunk}",
    "Incremental chunks the losing legs of hedged rounds had received, by trigger.",
    instrument="counter",
)
HEDGE_WASTED_TOKENS: Final = MetricName(
    "hedge_wasted_tokens",
    "otel_llm.client.hedge.wasted_tokens",
    "otel_llm.client.hedge.wasted_tokens",
    "{token}",
    "Tokens the losing legs of hedged rounds used, where the provider reported them, by trigger.",
    instrument="counter",
)
BREAKER_TRANSITIONS: Final = MetricName(
    "breaker_transitions",
    "otel_llm.client.breaker.transitions",
    "otel_llm.client.breaker.transitions",
    "{transition}",
    "State changes of a source's breaker, by source and the state it moved to.",
    instrument="counter",
)
CALL_METRICS: Final = (DURATION, TIME_TO_FIRST_CHUNK, STALL, GENERATION)
"""Recorded once per call."""
ATTEMPT_METRICS: Final = (ATTEMPTS, STALL_COUNT, CHUNK_GAP)
"""Recorded once per attempt (the gaps: once per gap, when asked for)."""
CLIENT_METRICS: Final = (
    HEDGES,
    HEDGE_WASTED_REQUESTS,
    HEDGE_WASTED_CHUNKS,
    HEDGE_WASTED_TOKENS,
    BREAKER_TRANSITIONS,
)
"""The client's own: its hedges (once per hedged round) and its breakers (once per change)."""
METRICS: Final = (*CALL_METRICS, *ATTEMPT_METRICS, *CLIENT_METRICS)
"""Every metric otel-llm records."""


def chunk_gaps_from_env() -> bool:
    """Whether ``OTEL_LLM_METRICS_CHUNK_GAPS`` asks for the per-gap histogram (one point per
    gap: on long streams it costs as much again as the SDK's reading of the stream)."""
    value = env.env_text(env.OTEL_LLM_METRICS_CHUNK_GAPS)
    return DEFAULTS.metrics_chunk_gaps if value is None else value.lower() == "true"


def naming_from_env() -> Naming:
    """The naming ``OTEL_SEMCONV_STABILITY_OPT_IN`` asks for (other values in it are other
    conventions' and are left alone; the both-names value wins over the new-names one)."""
    values = {v.strip() for v in (env.env_text(env.OTEL_SEMCONV_STABILITY_OPT_IN) or "").split(",")}
    if BOTH_TOKEN in values:
        return Naming.BOTH
    if RENAMED_TOKEN in values:
        return Naming.RENAMED
    return Naming.CURRENT
