"""The views' generator (``otel_llm/_show/_sql/_views.py``): one table of columns and figures, no
figure named twice, and DuckDB's re-threshold with ``llm_attempts``' columns."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_llm._figures import FIGURES
from otel_llm._measure._stalls import stall_sum, to_ms
from otel_llm._show._dashboards import _grafana as _dashboards
from otel_llm._show._dashboards import _panels
from otel_llm._show._report import _charts as _report_charts
from otel_llm._show._report import _data as _report
from otel_llm._show._sql import _clickhouse, _panel_sql, _views
from otel_llm._show._sql._schema import VIEWS, migrate
from otel_llm._show._sql._views import ATTEMPT_COLUMNS, CALL_COLUMNS, CLICKHOUSE, DUCKDB, views_sql
from otel_llm._show._store import _breakdown


@pytest.mark.parametrize(
    "module",
    [_views, _breakdown, _clickhouse, _panels, _panel_sql, _dashboards, _report, _report_charts],
)
def test_no_sql_module_spells_a_figure(module: object) -> None:
    """The views, the re-threshold, the canned queries, the ClickHouse DDL, the panels and the
    report take every figure's name and column from otel_llm/_figures.py; none is written in
    their source."""
    source = Path(str(getattr(module, "__file__", ""))).read_text()
    spelled = {
        word
        for figure in FIGURES
        for word in (figure.name, figure.column)
        if re.search(rf"\b{word}\b", source)
    }
    assert spelled == set()


def test_every_figure_is_in_both_views() -> None:
    """llm_attempts and llm_calls carry every figure under its name, over its typed column."""
    for columns in (ATTEMPT_COLUMNS, CALL_COLUMNS):
        pairs = {(c.alias, c.column) for c in columns}
        assert {(f.name, f.column) for f in FIGURES} <= pairs


def test_the_duckdb_views_are_the_generated_ones() -> None:
    """_schema.VIEWS is the generator's DuckDB output, and the ClickHouse output differs."""
    assert views_sql(DUCKDB) == VIEWS
    assert views_sql(CLICKHOUSE) != VIEWS


def test_the_macro_has_the_attempt_views_columns() -> None:
    """DuckDB's llm_attempts_at(T) has llm_attempts' columns in the same order, with T as the
    stall threshold."""
    conn = duckdb.connect()
    migrate(conn)
    attempts = conn.execute("SELECT * FROM llm_attempts LIMIT 0").description or []
    at = conn.execute("SELECT * FROM llm_attempts_at(250) LIMIT 0").description or []
    assert [d[0] for d in at] == [d[0] for d in attempts] == [c.alias for c in ATTEMPT_COLUMNS]
    conn.close()


def test_the_macro_has_the_attempt_views_types() -> None:
    """llm_attempts_at(T)'s columns have llm_attempts' types: a re-derived figure is a BIGINT
    as the measured one is (a HUGEINT would reach Grafana's DuckDB plugin as text)."""
    conn = duckdb.connect()
    migrate(conn)
    attempts = conn.sql("SELECT * FROM llm_attempts")
    at = conn.sql("SELECT * FROM llm_attempts_at(250)")
    assert [str(t) for t in at.types] == [str(t) for t in attempts.types]
    assert "HUGEINT" not in {str(t) for t in at.types}
    conn.close()


@settings(max_examples=300, deadline=None)
@given(
    gaps=st.lists(st.integers(min_value=0, max_value=10**12), max_size=40),
    threshold_ms=st.integers(min_value=1, max_value=1_000_000),
)
def test_only_a_longest_gap_of_at_least_t_can_stall_at_t(
    gaps: list[int], threshold_ms: int
) -> None:
    """The condition the worst stalls and the winner panels filter on before reading any gaps
    (``could_stall_at``) keeps every attempt that has a stall at T, re-derived as the views
    re-derive it: a stall at T means a longest gap, in the whole ms a row stores, of at least T;
    an attempt without a longest gap has no stall."""
    stall_ns, count = stall_sum(gaps, threshold_ms)
    longest = to_ms(max(gaps)) if gaps else None
    with duckdb.connect() as conn:
        kept = conn.execute(
            f"SELECT {_views.could_stall_at('l', str(threshold_ms))} FROM (SELECT ?::BIGINT AS l)",
            [longest],
        ).fetchone()
    if count:
        assert stall_ns > 0
        assert kept == (True,)
