"""One percentile definition: the Python one (the demo's accuracy check, tune's replay) gives
exactly what DuckDB's ``quantile_cont`` gives the dashboards, the report and ``otel-llm query``
on the same values, and what ``statistics.quantiles(method="inclusive")`` gives."""

from __future__ import annotations

import math
import statistics

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_llm._quantile import quantile
from otel_llm._show._sql._views import DUCKDB

VALUES = st.lists(
    st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), min_size=1, max_size=300
)


@settings(max_examples=150, deadline=None)
@given(values=VALUES, q=st.sampled_from([0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0]))
def test_python_and_the_dashboards_sql_agree(values: list[float], q: float) -> None:
    with duckdb.connect() as conn:
        conn.execute("CREATE TABLE t (v DOUBLE)")
        conn.executemany("INSERT INTO t VALUES (?)", [(v,) for v in values])
        row = conn.execute(f"SELECT {DUCKDB.quantile('v', q)} FROM t").fetchone()
    assert row is not None
    assert math.isclose(quantile(values, q), row[0], rel_tol=1e-9, abs_tol=1e-6)


@settings(max_examples=100, deadline=None)
@given(values=VALUES.filter(lambda v: len(v) >= 2))
def test_it_is_the_inclusive_method_of_the_standard_library(values: list[float]) -> None:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    for index in (49, 94, 98):
        expected = cuts[index]
        assert math.isclose(quantile(values, (index + 1) / 100), expected, abs_tol=1e-6)


def test_small_samples_by_hand() -> None:
    assert quantile([], 0.99) == 0.0
    assert quantile([3.0], 0.99) == 3.0
    assert quantile([1.0, 2.0], 0.5) == 1.5
    assert quantile([10.0, 0.0, 5.0, 20.0], 0.99) == pytest.approx(20.0 - 0.03 * 10.0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        quantile([1.0], 99)
