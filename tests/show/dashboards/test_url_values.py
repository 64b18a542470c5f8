"""Single-valued variables set to anything by a dashboard's URL (``var-threshold=…``,
``var-trace_id=…``: Grafana keeps a value from the URL that is none of the options): the value
reaches the engine as a literal, never as SQL — a chosen call that is no trace id matches
nothing, a threshold that is no number is an error naming it — in DuckDB over a store and in
chDB with the ClickHouse schema, each panel expanded as its plugin expands it."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import duckdb
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_llm._show._dashboards._panels import PANELS, TRACE_VIEW, Panel, worst_trace_ids
from otel_llm._show._sql._grafana_macros import Engine, QueryContext, Variable, all_of, expand
from otel_llm._show._sql._panel_sql import (
    ALL_VALUE,
    AS_MEASURED,
    CALL,
    FILTERS,
    SOURCE,
    THRESHOLD,
    PanelDialect,
)
from otel_llm._show._sql._panel_sql import CLICKHOUSE_PANELS as CH
from otel_llm._show._sql._panel_sql import DUCKDB_PANELS as DUCK
from otel_llm._show._sql._table import TABLE
from otel_llm._show._store._access import open_store
from otel_llm._show._store._columns import SegmentColumns
from otel_llm._show._store._segments import SegmentStore, encode
from tests.support.clickhouse_session import chdb_with
from tests.support.panel_calls import panel_spans

HOSTILE: Final = (
    "a\\' OR 1=1 --",  # a backslash before the quote Grafana's singlequote escapes
    "' OR 1=1 --",
    "0 OR 1=1",
    "0 AS BIGINT) = 0 OR 1=1 OR CAST(0",
    "1--",
    "0) = 0 OR (1",
)
"""Values a URL can set: each would change the query if it reached it as SQL."""
ENGINES: Final[tuple[tuple[Engine, PanelDialect], ...]] = (("duckdb", DUCK), ("clickhouse", CH))
TIMELINES: Final = {"duckdb": (PANELS[-1],), "clickhouse": (PANELS[-1], TRACE_VIEW)}
"""The panels that show the chosen call, in each dashboard."""


@pytest.fixture(scope="module")
def finished() -> list[ReadableSpan]:
    return panel_spans()


@pytest.fixture(scope="module")
def duck(
    finished: list[ReadableSpan], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[duckdb.DuckDBPyConnection]:
    store = SegmentStore(tmp_path_factory.mktemp("url-values") / "store")
    store.create()
    columns = SegmentColumns()
    for span in finished:
        columns.append_span(span)
    store.write(encode(columns.table()))
    with open_store(store.path) as conn:
        yield conn


@pytest.fixture(scope="module")
def chdb(finished: list[ReadableSpan]) -> Iterator[Any]:
    with chdb_with(finished) as session:
        yield session


@pytest.fixture(scope="module")
def time_range(duck: duckdb.DuckDBPyConnection) -> tuple[datetime, datetime]:
    row = duck.execute(f'SELECT min("Timestamp"), max("Timestamp") FROM {TABLE}').fetchone()
    assert row is not None
    start = row[0].replace(tzinfo=UTC, microsecond=0) - timedelta(seconds=5)
    return start, row[1].replace(tzinfo=UTC, microsecond=0) + timedelta(seconds=60)


def _context(
    engine: Engine, time_range: tuple[datetime, datetime], *, threshold: str, trace_id: str
) -> QueryContext:
    all_value = ALL_VALUE if engine == "duckdb" else None
    found = {name: all_of((), all_value=all_value) for name in FILTERS}
    found[THRESHOLD] = Variable(threshold)
    found[CALL] = Variable(trace_id)
    return QueryContext(*time_range, timedelta(seconds=1), found)


def _run(engine: Engine, conn: Any, sql: str) -> list[tuple[Any, ...]]:
    if engine == "duckdb":
        return [tuple(row) for row in conn.cursor().sql(sql).fetchall()]
    out = json.loads(conn.query(sql, "JSONCompact").bytes())
    return [tuple(row) for row in out["data"]]


def _queries(dialect: PanelDialect) -> list[tuple[str, str, bool]]:
    """(name, SQL, is a variable query) of every panel of the dashboard and of the chosen-call
    variable."""
    panels: list[Panel] = [*PANELS, *([TRACE_VIEW] if dialect.is_clickhouse else [])]
    found = [(panel.key, panel.sql(dialect), False) for panel in panels]
    return [*found, ("trace_id options", worst_trace_ids(dialect), True)]


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("engine", [e for e, _ in ENGINES])
def test_a_chosen_call_that_is_no_trace_id_matches_nothing(
    duck: duckdb.DuckDBPyConnection,
    chdb: Any,
    time_range: tuple[datetime, datetime],
    engine: Engine,
    value: str,
) -> None:
    """The chosen call's panels show the call whose trace id the variable holds: every row of
    the worst one, and none for a value that is no trace id, however it is spelled."""
    conn = duck if engine == "duckdb" else chdb
    dialect = dict(ENGINES)[engine]
    measured = str(AS_MEASURED)
    ctx = _context(engine, time_range, threshold=measured, trace_id="")
    sql = expand(worst_trace_ids(dialect), ctx, engine, variable_query=True)
    worst = str(_run(engine, conn, sql)[0][0])
    for panel in TIMELINES[engine]:
        real = _context(engine, time_range, threshold=measured, trace_id=worst)
        assert _run(engine, conn, expand(panel.sql(dialect), real, engine)), panel.key
        hostile = _context(engine, time_range, threshold=measured, trace_id=value)
        assert _run(engine, conn, expand(panel.sql(dialect), hostile, engine)) == [], panel.key


def _named(engine: Engine, value: str) -> str:
    """The value as the engine's conversion error quotes it (ClickHouse's percent-encoded)."""
    return value if engine == "duckdb" else urllib.parse.quote(value, safe="-_.~")


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("engine", [e for e, _ in ENGINES])
def test_a_threshold_that_is_no_number_is_an_error_not_sql(
    duck: duckdb.DuckDBPyConnection,
    chdb: Any,
    time_range: tuple[datetime, datetime],
    engine: Engine,
    value: str,
) -> None:
    """Every query that reads the threshold variable fails on a value that is no number, with
    the engine's conversion error naming that value; the others run as with a number."""
    conn = duck if engine == "duckdb" else chdb
    dialect = dict(ENGINES)[engine]
    ctx = _context(engine, time_range, threshold=value, trace_id="")
    reading = 0
    for name, sql, variable_query in _queries(dialect):
        expanded = expand(sql, ctx, engine, variable_query=variable_query)
        if "${" + THRESHOLD not in sql:
            _run(engine, conn, expanded)
            continue
        reading += 1
        with pytest.raises(Exception, match=r"(?i)convert|parse") as caught:
            _run(engine, conn, expanded)
        assert _named(engine, value) in str(caught.value), (name, str(caught.value)[:300])
    assert reading >= 5


UNKNOWN: Final = "no-such-name"
"""A name no span has: what a filter holding a value that is no name must show."""


def _filtered(
    engine: Engine, time_range: tuple[datetime, datetime], name: str, values: tuple[str, ...]
) -> QueryContext:
    ctx = _context(engine, time_range, threshold=str(AS_MEASURED), trace_id="")
    all_value = ALL_VALUE if engine == "duckdb" else None
    chosen = Variable(values, True, True, all_value)
    return QueryContext(ctx.time_from, ctx.time_to, ctx.interval, {**ctx.variables, name: chosen})


@pytest.mark.parametrize("value", HOSTILE[:3])
@pytest.mark.parametrize("name", [SOURCE])  # every filter is spelled by the same method
@pytest.mark.parametrize("engine", [e for e, _ in ENGINES])
def test_a_filter_value_that_is_no_name_matches_nothing(
    duck: duckdb.DuckDBPyConnection,
    chdb: Any,
    time_range: tuple[datetime, datetime],
    engine: Engine,
    name: str,
    value: str,
) -> None:
    """A service, model or source filter holding a value no span has, alone or beside a real
    one, shows on every panel and in the chosen-call options what an unknown plain name shows
    there, however the value is spelled."""
    conn = duck if engine == "duckdb" else chdb
    dialect = dict(ENGINES)[engine]
    for values in ((value,), (value, "a")):
        plain = tuple(UNKNOWN if v == value else v for v in values)
        for key, sql, variable_query in _queries(dialect):
            got, expected = (
                _run(
                    engine,
                    conn,
                    expand(
                        sql,
                        _filtered(engine, time_range, name, chosen),
                        engine,
                        variable_query=variable_query,
                    ),
                )
                for chosen in (values, plain)
            )
            assert got == expected, (key, values)
