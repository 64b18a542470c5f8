"""The one table of figures: where the time of an attempt went.

Every figure is named once here. Its span attribute (``otel_llm.<name>``), its typed column in
``otel_traces`` (``TtftMs`` …), its alias in the views (``ttft_ms``) and the fields of
``StallFigures`` and ``CallStats`` are all that name; the processor, the DuckDB schema, the
views and ``CallStats`` derive from this table, and a test holds the two dataclasses to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Figure:
    """One derived figure of an attempt (whole milliseconds, or a count)."""

    name: str
    """Field, view alias and SQL name, e.g. ``stall_ms``."""
    meaning: str
    at_threshold: bool = False
    """Depends on the stall threshold: ``llm_attempts_at(T)`` re-derives it from the stored
    chunk gaps at T; every other figure reads the same at any threshold."""

    @property
    def attribute(self) -> str:
        """The span attribute the processor writes."""
        return f"otel_llm.{self.name}"

    @property
    def column(self) -> str:
        """The typed ``otel_traces`` column (``stall_ms`` → ``StallMs``)."""
        return "".join(part.title() for part in self.name.split("_"))


FIGURES: Final = (
    Figure("ttft_ms", "request issued → first incremental chunk"),
    Figure("wall_ms", "int((end − start) × 1000) of the attempt's transport call"),
    Figure("generation_ms", "net generation: max(0, wall_ms − stall_ms)", at_threshold=True),
    Figure(
        "stall_ms", "sum of the gaps strictly longer than the stall threshold", at_threshold=True
    ),
    Figure("stall_count", "number of those gaps", at_threshold=True),
    Figure("max_inter_chunk_ms", "the longest gap between two incremental chunks"),
    Figure("chunk_count", "incremental chunks received"),
)
"""In ``otel_traces`` column order."""

FIGURE_NAMES: Final = tuple(figure.name for figure in FIGURES)

(TTFT_MS, WALL_MS, GENERATION_MS, STALL_MS, STALL_COUNT, MAX_INTER_CHUNK_MS, CHUNK_COUNT) = FIGURES
"""Each figure by itself, for the SQL that reads one (the re-threshold, the canned queries)."""
