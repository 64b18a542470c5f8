"""The one table of figures (``otel_llm/_figures.py``) is what every place that names a figure
is made of: span attributes, ``StallFigures``, ``CallStats``, the typed columns and the views."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb

from otel_llm import CallStats, StallFigures
from otel_llm import _semconv as sc
from otel_llm._figures import FIGURE_NAMES, FIGURES
from otel_llm._show._sql._schema import TYPED_COLUMNS, migrate


def test_the_dataclasses_hold_every_figure() -> None:
    """StallFigures has exactly the figures (and the threshold they were measured at);
    CallStats has every figure."""
    stall_fields = [field.name for field in dataclasses.fields(StallFigures)]
    assert set(stall_fields) == {*FIGURE_NAMES, "threshold_ms"}
    assert set(FIGURE_NAMES) <= {field.name for field in dataclasses.fields(CallStats)}


def test_attributes_and_columns_come_from_the_table() -> None:
    """Each figure's span attribute is ``otel_llm.<name>`` and its typed column carries it."""
    assert tuple(f"otel_llm.{name}" for name in FIGURE_NAMES) == sc.DERIVED_FIGURES
    columns = {column.name: column.attribute for column in TYPED_COLUMNS}
    for figure in FIGURES:
        assert columns[figure.column] == figure.attribute
    assert [f.column for f in FIGURES][:3] == ["TtftMs", "WallMs", "GenerationMs"]


def test_the_views_show_every_figure_under_its_name(tmp_path: Path) -> None:
    """llm_attempts and llm_calls expose each figure by its name."""
    with duckdb.connect(str(tmp_path / "x.duckdb")) as conn:
        migrate(conn)
        for view in ("llm_attempts", "llm_calls"):
            names = {row[0] for row in conn.execute(f"DESCRIBE {view}").fetchall()}
            assert set(FIGURE_NAMES) <= names, view


def test_each_figure_constant_is_its_own_figure() -> None:
    """The named constants of the figure attributes follow the table's order correctly."""
    constants = {
        "ttft_ms": sc.TTFT_MS, "wall_ms": sc.WALL_MS, "generation_ms": sc.GENERATION_MS,
        "stall_ms": sc.STALL_MS, "stall_count": sc.STALL_COUNT,
        "max_inter_chunk_ms": sc.MAX_INTER_CHUNK_MS, "chunk_count": sc.CHUNK_COUNT,
    }  # fmt: skip
    assert constants == {name: f"otel_llm.{name}" for name in FIGURE_NAMES}
