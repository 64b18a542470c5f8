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
from typing import Final

from otel_llm import _env as env
from otel_llm import _semconv as sc


class Naming(Enum):
    """Which names the metrics are recorded under."""

    CURRENT = "current"
    RENAMED = "renamed"
    BOTH = "both"


RENAMED_TOKEN: Final = "gen_ai_client_inference"
"""The ``OTEL_SEMCONV_STABILITY_OPT_IN`` value that asks for the new names."""
BOTH_TOKEN: Final = f"{RENAMED_TOKEN}/dup"
"""The value that asks for both names."""


@dataclass(frozen=True, slots=True)
class MetricName:
    """One metric: its key in otel-llm, its names, unit and description."""

    key: str
    current: str
    renamed: str
    """The new name (the current one when no rename is pending)."""
    unit: str
    description: str
    renamed_by_operation: Mapping[str, str] = field(default_factory=dict)
    """Operations whose new name differs from :attr:`renamed` (an embeddings call's duration)."""

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
METRICS: Final = (DURATION, TIME_TO_FIRST_CHUNK, STALL, GENERATION)
"""Every metric otel-llm records."""


def naming_from_env() -> Naming:
    """The naming ``OTEL_SEMCONV_STABILITY_OPT_IN`` asks for (other values in it are other
    conventions' and are left alone; the both-names value wins over the new-names one)."""
    values = {v.strip() for v in (env.env_text(env.OTEL_SEMCONV_STABILITY_OPT_IN) or "").split(",")}
    if BOTH_TOKEN in values:
        return Naming.BOTH
    if RENAMED_TOKEN in values:
        return Naming.RENAMED
    return Naming.CURRENT
