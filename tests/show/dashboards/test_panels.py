"""Every panel of the one panel specification (``otel_llm/_show/_dashboards/_panels.py``), its
macros and template variables expanded as each Grafana plugin expands them, run on real SDK spans in
the three engines the dashboards meet: DuckDB over a segment store (``open_store``), DuckDB 1.5.4 —
the DuckDB plugin's engine — with ``reader_sql`` as its ``initSql``, and chDB with the ClickHouse
DDL. The three return the same rows; the rows have the panel's columns and types and keep the
figures' invariants; the filters filter and the threshold re-derives as ``llm_attempts_at``."""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import duckdb
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_llm import _semconv as sc
from otel_llm._show._dashboards._panels import (
    PANELS,
    SERIES,
    STALL_COUNT_BUCKETS,
    TIME,
    TRACE_VIEW,
    WORST_CALLS,
    Panel,
    known_total,
    variable_sql,
    worst_trace_ids,
)
from otel_llm._show._sql._grafana_macros import (
    Engine,
    QueryContext,
    Variable,
    all_of,
    expand,
)
from otel_llm._show._sql._panel_sql import (
    ALL_VALUE,
    AS_MEASURED,
    CALL,
    FILTERS,
    MODEL,
    SERVICE,
    SOURCE,
    THRESHOLD,
    PanelDialect,
)
from otel_llm._show._sql._panel_sql import (
    CLICKHOUSE_PANELS as CH,
)
from otel_llm._show._sql._panel_sql import (
    DUCKDB_PANELS as DUCK,
)
from otel_llm._show._sql._table import TABLE
from otel_llm._show._sql._views import DUCKDB
from otel_llm._show._store._access import open_store, reader_sql
from otel_llm._show._store._breakdown import worst_stalls_sql
from otel_llm._show._store._columns import SegmentColumns
from otel_llm._show._store._segments import SegmentStore, encode
from tests.conftest import require
from tests.support import REPOSITORY
from tests.support.clickhouse_session import chdb_with
from tests.support.panel_calls import BATCH, EU, FRONT, THRESHOLD_MS, panel_spans
from tests.support.processes import run_python

ROOT = REPOSITORY
PLUGIN_DUCKDB = "1.5.4"
"""The DuckDB the DuckDB Grafana plugin embeds (duckdb-go v2.10504.0)."""
INTERVAL = timedelta(seconds=1)
"""The panels' ``$__interval``: a few buckets over the seconds the calls take."""
PANEL = {panel.key: panel for panel in PANELS}
ENGINES: Final[tuple[Engine, ...]] = ("duckdb", "clickhouse")
TIMES: Final = {TIME, "started_at"}
LABELS: Final = {SERIES, "trace_id", "outcome", "error_type", "attempt"}
"""Columns of text, with a bar chart's category; every other column but :data:`TIMES` is a
number."""
REL, ABS = 1e-9, 1e-9
"""Float tolerance between engines (sums in another order); quantile_cont and
quantileExactInclusive are both R-7 (linear between the closest ranks), so equal to it too."""

Value = Any
"""A cell: int, float, str or None (instants as µs since the epoch)."""
Row = tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class Result:
    """A query's columns, the engine's type of each and its rows (instants in µs UTC)."""

    columns: list[str]
    types: list[str]
    rows: list[Row]


@dataclass(frozen=True, slots=True)
class Case:
    """A choice of the template variables: the filters chosen (else All) and the threshold."""

    name: str
    chosen: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    threshold: int = AS_MEASURED


CASES: Final = (
    Case("all"),
    Case("at-200", threshold=200),
    Case("at-400", threshold=400),
    Case("at-measured", threshold=THRESHOLD_MS),
    Case("service", {SERVICE: (FRONT,)}),
    Case("model", {MODEL: ("stalls",)}),
    Case("source", {SOURCE: (EU,)}),
    Case("sources", {SOURCE: ("a", EU)}),
)
CASE = {case.name: case for case in CASES}
FILTERED: Final = tuple(case for case in CASES if case.chosen)

EMPTY: Final[frozenset[tuple[str, str]]] = frozenset({("model", "errors"), ("source", "errors")})
"""(case, panel) pairs that may return no row: the attempts of the ``stalls`` model and of the
EU source end ok or as hedge losers, and a loser is no error; every other panel has rows
in every case."""


# --- the store and the three engines ------------------------------------------------------------


@pytest.fixture(scope="module")
def finished() -> list[ReadableSpan]:
    """The spans of :func:`tests.support.panel_calls.panel_spans`."""
    return panel_spans()


def _write_store(path: Path, spans: list[ReadableSpan]) -> Path:
    """A segment store holding ``spans``, one segment per service (as two processes write)."""
    store = SegmentStore(path)
    store.create()
    for service in (FRONT, BATCH):
        columns = SegmentColumns()
        for span in spans:
            if span.resource.attributes.get("service.name") == service:
                columns.append_span(span)
        store.write(encode(columns.table()))
    return path


@pytest.fixture(scope="module")
def store(finished: list[ReadableSpan], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_store(tmp_path_factory.mktemp("panels") / "store", finished)


@pytest.fixture(scope="module")
def duck(store: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """The store as every reader opens it."""
    with open_store(store) as conn:
        yield conn


@pytest.fixture(scope="module")
def chdb(finished: list[ReadableSpan]) -> Iterator[Any]:
    """chDB with collector/clickhouse/schema.sql, fed the spans by the exporter's INSERT."""
    with chdb_with(finished) as session:
        yield session


_EPOCH = datetime(1970, 1, 1)


def _micros(moment: datetime) -> int:
    naive = moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment
    return (naive - _EPOCH) // timedelta(microseconds=1)


def _duck_value(value: Any) -> Value:
    if isinstance(value, datetime):
        return _micros(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float | str) or value is None:
        return value
    return float(value)  # a DECIMAL


def in_duckdb(conn: duckdb.DuckDBPyConnection, sql: str) -> Result:
    """``sql`` in this process's DuckDB."""
    relation = conn.cursor().sql(sql)
    rows = [tuple(_duck_value(v) for v in row) for row in relation.fetchall()]
    return Result(list(relation.columns), [str(t) for t in relation.types], rows)


def _ch_value(value: Any, sql_type: str) -> Value:
    if value is None:
        return None
    bare = _bare(sql_type)
    if bare.startswith("DateTime"):
        whole, _, fraction = str(value).partition(".")
        moment = datetime.strptime(whole, "%Y-%m-%d %H:%M:%S")
        return _micros(moment) + int((fraction + "000000")[:6])
    if bare.startswith(("Int", "UInt")):
        return int(value)
    if bare.startswith("Float"):
        return float(value)
    return str(value)


def in_chdb(session: Any, sql: str) -> Result:
    """``sql`` in chDB, with ClickHouse's type of each column."""
    out = json.loads(session.query(sql, "JSONCompact").bytes())
    names = [column["name"] for column in out["meta"]]
    types = [column["type"] for column in out["meta"]]
    rows = [tuple(_ch_value(v, t) for v, t in zip(row, types, strict=True)) for row in out["data"]]
    return Result(names, types, rows)


_PLUGIN_SCRIPT = textwrap.dedent(
    """
    import datetime, decimal, json, sys
    import duckdb
    assert duckdb.__version__ == sys.argv[1], duckdb.__version__
    job = json.load(sys.stdin)
    epoch = datetime.datetime(1970, 1, 1)
    def plain(v):
        if isinstance(v, datetime.datetime):
            if v.tzinfo is not None:
                v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
            return (v - epoch) // datetime.timedelta(microseconds=1)
        if isinstance(v, decimal.Decimal):
            return float(v)
        if isinstance(v, bool):
            return int(v)
        return v
    conn = duckdb.connect()
    conn.execute(job["init"])  # the plugin's boot: the whole initSql in one exec
    out = []
    for sql in job["queries"]:
        try:
            rel = conn.sql(sql)
            rows = [[plain(v) for v in row] for row in rel.fetchall()]
            out.append(dict(columns=rel.columns, types=[str(t) for t in rel.types], rows=rows))
        except duckdb.Error as exc:
            out.append(dict(error=str(exc)))
    json.dump(out, sys.stdout)
    """
)


def in_plugin_duckdb(store: Path, queries: list[str]) -> list[Result | str]:
    """Each query in DuckDB 1.5.4 on an in-memory database booted with ``reader_sql(store)``
    as the plugin boots it (its error text when it fails)."""
    target = ROOT / ".cache" / f"duckdb-{PLUGIN_DUCKDB}"
    require(target.is_dir(), f"DuckDB {PLUGIN_DUCKDB} in {target} (./dev installs it)")
    job = store.parent / "plugin-queries.json"  # a file: an argument is at most 128 KiB
    job.write_text(json.dumps({"init": reader_sql(store), "queries": queries}), encoding="utf-8")
    script = (
        "import sys; sys.stdin = open(sys.argv[2], encoding='utf-8'); "
        + "exec(compile(sys.argv[3], 'plugin', 'exec'))"
    )
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    out = run_python(script, PLUGIN_DUCKDB, str(job), _PLUGIN_SCRIPT, cwd=store, env=env)
    assert out.returncode == 0, out.stderr
    results: list[Result | str] = []
    for item in json.loads(out.stdout):
        if "error" in item:
            results.append(item["error"])
        else:
            rows = [tuple(row) for row in item["rows"]]
            results.append(Result(item["columns"], item["types"], rows))
    return results


# --- the variables, as a dashboard sets them ----------------------------------------------------


@pytest.fixture(scope="module")
def time_range(duck: duckdb.DuckDBPyConnection) -> tuple[datetime, datetime]:
    """The dashboard's range: whole seconds around every span (Grafana sends milliseconds;
    the DuckDB plugin renders whole seconds)."""
    row = duck.execute(f'SELECT min("Timestamp"), max("Timestamp") FROM {TABLE}').fetchone()
    assert row is not None
    first, last = row
    start = first.replace(tzinfo=UTC, microsecond=0) - timedelta(seconds=5)
    end = last.replace(tzinfo=UTC, microsecond=0) + timedelta(seconds=60)
    return start, end


Copy = tuple[str, str] | None
"""A repeated panel's copy: its variable and the one value it holds there (None: not
repeated)."""


def variables(
    case: Case, engine: Engine, trace_id: str = "", copy: Copy = None
) -> dict[str, Variable]:
    """The variables as the engine's dashboard defines them: multi-value filters with "All"
    (the DuckDB one with its custom all value), the threshold, the chosen call; in a repeated
    panel's copy its variable holds that copy's value."""
    all_value = ALL_VALUE if engine == "duckdb" else None
    found: dict[str, Variable] = {}
    for name in FILTERS:
        base = all_of((), all_value=all_value)
        chosen = case.chosen.get(name)
        found[name] = base if chosen is None else Variable(chosen, True, True, all_value)
    if copy is not None:
        found[copy[0]] = Variable((copy[1],), True, True, all_value)
    found[THRESHOLD] = Variable(str(case.threshold))
    found[CALL] = Variable(trace_id)
    return found


def _dialect(engine: Engine) -> PanelDialect:
    return DUCK if engine == "duckdb" else CH


def context(
    case: Case,
    engine: Engine,
    time_range: tuple[datetime, datetime],
    trace_id: str = "",
    copy: Copy = None,
) -> QueryContext:
    return QueryContext(*time_range, INTERVAL, variables(case, engine, trace_id, copy))


@dataclass
class Runs:
    """Every panel of every case, expanded and run once in each engine."""

    trace_ids: dict[str, str]
    copies: dict[str, tuple[str, ...]]
    """The values a repeated panel is drawn for, by case: those chosen, else every option."""
    sql: dict[tuple[str, str, str], str]
    """(case, run, engine) → the expanded query; a run is a panel, or a repeated panel's copy
    (:func:`run_keys`)."""
    duckdb: dict[tuple[str, str], Result]
    chdb: dict[tuple[str, str], Result]
    plugin: dict[tuple[str, str], Result | str]


@pytest.fixture(scope="module")
def runs(
    duck: duckdb.DuckDBPyConnection,
    chdb: Any,
    store: Path,
    time_range: tuple[datetime, datetime],
) -> Runs:
    """The chosen call of each case is the first row of ``worst_trace_ids`` (in DuckDB); its
    ClickHouse twin must offer the same ones, and the same options of the variable a panel
    repeats over (``variable_sql``)."""
    trace_ids: dict[str, str] = {}
    copies: dict[str, tuple[str, ...]] = {}
    sql: dict[tuple[str, str, str], str] = {}
    keys: list[tuple[str, str]] = []
    for case in CASES:
        options: dict[str, list[Any]] = {}
        offered: dict[str, list[Any]] = {}
        for engine in ENGINES:
            ctx = context(case, engine, time_range)
            run = in_duckdb if engine == "duckdb" else in_chdb
            session = duck if engine == "duckdb" else chdb
            query = expand(worst_trace_ids(_dialect(engine)), ctx, engine, variable_query=True)
            options[engine] = [row[0] for row in run(session, query).rows]
            query = expand(
                variable_sql(_dialect(engine), REPEATED), ctx, engine, variable_query=True
            )
            offered[engine] = [row[0] for row in run(session, query).rows]
        assert options["duckdb"] == options["clickhouse"], case
        assert options["duckdb"], f"{case.name}: no stalled call to choose"
        assert offered["duckdb"] == offered["clickhouse"], case
        assert len(offered["duckdb"]) >= 3, offered
        trace_ids[case.name] = str(options["duckdb"][0])
        copies[case.name] = case.chosen.get(REPEATED, tuple(offered["duckdb"]))
        for panel in PANELS:
            for key, copy in run_keys(panel, copies[case.name]):
                keys.append((case.name, key))
                for engine in ENGINES:
                    ctx = context(case, engine, time_range, trace_ids[case.name], copy)
                    sql[case.name, key, engine] = expand(panel.sql(_dialect(engine)), ctx, engine)
    plugin_results = in_plugin_duckdb(store, [sql[*key, "duckdb"] for key in keys])
    return Runs(
        trace_ids,
        copies,
        sql,
        {key: in_duckdb(duck, sql[*key, "duckdb"]) for key in keys},
        {key: in_chdb(chdb, sql[*key, "clickhouse"]) for key in keys},
        dict(zip(keys, plugin_results, strict=True)),
    )


REPEATED: Final = SOURCE
"""The variable the repeated panels repeat over."""
assert {panel.repeat for panel in PANELS} <= {None, REPEATED}


def run_keys(panel: Panel, copies: tuple[str, ...]) -> list[tuple[str, Copy]]:
    """The runs of a panel: itself, or one copy per value of the variable it repeats over."""
    if panel.repeat is None:
        return [(panel.key, None)]
    return [(f"{panel.key}[{value}]", (panel.repeat, value)) for value in copies]


# --- comparing and checking ---------------------------------------------------------------------


def _same(left: Value, right: Value, *, column: str) -> bool:
    if isinstance(left, float) or isinstance(right, float):
        if left is None or right is None or isinstance(left, str) or isinstance(right, str):
            return False
        return math.isclose(left, right, rel_tol=REL, abs_tol=ABS)
    if column in TIMES and isinstance(left, int) and isinstance(right, int):
        return abs(left - right) <= 1  # DuckDB's nanoseconds reach Python truncated to µs
    return bool(left == right)


def assert_same_rows(expected: Result, got: Result, what: str) -> None:
    assert got.columns == expected.columns, what
    assert len(got.rows) == len(expected.rows), f"{what}: {got.rows} != {expected.rows}"
    for want, row in zip(expected.rows, got.rows, strict=True):
        assert all(
            _same(a, b, column=c) for a, b, c in zip(want, row, expected.columns, strict=True)
        ), f"{what}: {row} != {want}"


_DUCK_NUMBERS: Final = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "FLOAT", "DOUBLE"}
"""DuckDB types the DuckDB plugin hands Grafana as numbers (HUGEINT becomes text there, the
unsigned ones are not converted)."""


def _bare(sql_type: str) -> str:
    for wrapper in ("Nullable(", "LowCardinality("):
        while sql_type.startswith(wrapper):
            sql_type = sql_type[len(wrapper) : -1]
    return sql_type


def kind_of(sql_type: str) -> str:
    """``time``, ``text``, ``number`` or ``other`` for a DuckDB or ClickHouse type."""
    bare = _bare(sql_type)
    if bare.startswith(("TIMESTAMP", "DateTime")):
        return "time"
    if bare in ("VARCHAR", "String"):
        return "text"
    if bare in _DUCK_NUMBERS or bare.startswith(("Int", "UInt", "Float")):
        return "number"
    return "other"


def expected_kind(panel: Panel, column: str) -> str:
    if column in TIMES:
        return "time"
    text = column in LABELS or (panel.kind == "barchart" and column == panel.x)
    return "text" if text else "number"


def column(result: Result, name: str) -> list[Any]:
    index = result.columns.index(name)
    return [row[index] for row in result.rows]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def check_invariants(panel: Panel, result: Result) -> None:
    """What every row of the panel keeps, whatever the data."""
    rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
    for name in result.columns:
        if expected_kind(panel, name) == "number":
            assert all(v is None or v >= 0 for v in column(result, name)), name
    if panel.format == "time_series":
        times = column(result, TIME)
        assert result.columns[0] == TIME
        assert times == sorted(times)
        assert None not in times
    for row in rows:
        if {"wall_s", "stall_s", "net_s"} <= row.keys() and row["wall_s"] is not None:
            # a call that cannot stall (not streamed: not observable, not zero) has no stall
            # and net = wall
            stall = row["stall_s"] or 0.0
            assert stall <= row["wall_s"] + 1e-9, row
            assert _close(row["net_s"], row["wall_s"] - stall), row
        for share in ("stall_pct", "hedged_pct", "hedge_won_pct"):
            if row.get(share) is not None:
                assert 0 <= row[share] <= 100, row
    if panel.key == "errors":
        outcomes = set(column(result, "outcome"))
        assert not outcomes & sc.OUTCOMES_WITHOUT_FIGURES, "a cancelled leg is no error"
    if panel.key == "hedge_rate":
        assert all(r["hedge_won_pct"] is None or r["hedged_pct"] > 0 for r in rows)
    if panel.key == "hedging":
        (row,) = rows
        assert row["wasted_requests"] <= row["calls"] * 10
        assert row["calls"] > 0
    if panel.key == "stall_counts":
        labels = [str(n) for n in range(STALL_COUNT_BUCKETS)] + [f"{STALL_COUNT_BUCKETS}+"]
        assert set(column(result, "stalls")) <= set(labels)
    if panel.key == "worst":
        assert len(rows) <= WORST_CALLS
        stalls = column(result, "stall_s")
        assert stalls == sorted(stalls, reverse=True)
        assert all(s > 0 for s in stalls)


@pytest.mark.parametrize("case", [c.name for c in CASES])
@pytest.mark.parametrize("key", list(PANEL))
def test_panel_in_every_engine(runs: Runs, key: str, case: str) -> None:
    """The panel's query, expanded for each plugin, returns rows with its columns and their
    types, keeps the invariants, and gives the same rows in DuckDB, DuckDB 1.5.4 and chDB."""
    panel = PANEL[key]
    runs_of = [run for run, _ in run_keys(panel, runs.copies[case])]
    assert any(runs.duckdb[case, run].rows for run in runs_of) or (case, key) in EMPTY, case
    for run in runs_of:
        ours = runs.duckdb[case, run]
        assert ours.columns == list(panel.columns)
        for engine, result in (("duckdb", ours), ("clickhouse", runs.chdb[case, run])):
            kinds = {c: kind_of(t) for c, t in zip(result.columns, result.types, strict=True)}
            expected = {c: expected_kind(panel, c) for c in panel.columns}
            assert kinds == expected, (engine, result.types)
        check_invariants(panel, ours)
        plugin = runs.plugin[case, run]
        assert isinstance(plugin, Result), f"DuckDB {PLUGIN_DUCKDB}: {plugin}"
        assert plugin.types == ours.types
        assert_same_rows(ours, plugin, f"{case}/{run} in DuckDB {PLUGIN_DUCKDB}")
        assert_same_rows(ours, runs.chdb[case, run], f"{case}/{run} in chDB")


def test_the_spans_reach_every_panel_path(duck: duckdb.DuckDBPyConnection) -> None:
    """The spans hold what the panels show: two services, stalls, a won hedge, hedge-cancelled
    and caller-cancelled attempts, a watchdog kill, server errors, a non-streamed call."""
    outcomes = dict(
        duck.execute("SELECT outcome, count(*) FROM llm_attempts GROUP BY 1").fetchall()
    )
    assert {"ok", "hedge_cancelled", "cancelled", "watchdog_killed", "error"} <= set(outcomes)
    ((services, stalled, won, non_streamed),) = duck.execute(
        "SELECT (SELECT count(DISTINCT service) FROM llm_calls), "
        "(SELECT count(*) FROM llm_attempts WHERE stall_count > 0), "
        "(SELECT count(*) FROM llm_calls WHERE hedge_won), "
        "(SELECT count(*) FROM llm_attempts WHERE NOT stream)"
    ).fetchall()
    assert (services, stalled >= 4, won, non_streamed) == (2, True, 1, 1)


def test_the_chosen_call_has_a_timeline(runs: Runs) -> None:
    """The timeline of the chosen call (the worst stalled call) shows its attempts' chunks, and
    the first row of the worst-calls table is that call."""
    for case in CASES:
        worst = runs.duckdb[case.name, "worst"]
        assert column(worst, "trace_id")[0] == runs.trace_ids[case.name]
        timeline = runs.duckdb[case.name, "timeline"]
        assert len(timeline.rows) >= 2
        chunks = column(timeline, "chunk")
        assert chunks[0] == 0
        assert all(c >= 0 for c in chunks)


def test_the_trace_view_opens_the_chosen_call(
    runs: Runs, chdb: Any, duck: duckdb.DuckDBPyConnection, time_range: tuple[datetime, datetime]
) -> None:
    """The ClickHouse dashboard's trace view of the chosen call: the columns Grafana's trace
    view reads, one row per span of the call (the call span and each attempt, parented to it),
    every chunk event as a log of its attempt."""
    case = CASES[0]
    trace_id = runs.trace_ids[case.name]
    ctx = context(case, "clickhouse", time_range, trace_id)
    sql = expand(TRACE_VIEW.sql(CH), ctx, "clickhouse")
    assert tuple(in_chdb(chdb, sql).columns) == TRACE_VIEW.columns
    got = in_chdb(
        chdb,
        f"SELECT spanID, parentSpanID, traceID, length(logs), duration FROM ({sql}) ORDER BY 1",
    ).rows
    spans = in_duckdb(
        duck,
        f'SELECT "SpanId", "ParentSpanId", len("Events.Name") FROM {TABLE} '
        f"WHERE \"TraceId\" = '{trace_id}' ORDER BY 1",
    ).rows
    assert [(span, parent) for span, parent, *_ in got] == [(s, p) for s, p, _ in spans]
    (call,) = (span for span, parent, _ in spans if parent not in {s for s, _, _ in spans})
    assert len(spans) >= 2  # the call and its attempts
    for (span, parent, trace, logs, duration), (_, _, events) in zip(got, spans, strict=True):
        assert trace == trace_id
        assert span == call or parent == call
        assert logs == events
        assert duration > 0


# --- filters ------------------------------------------------------------------------------------


_RESTRICT: Final = {SERVICE: '"ServiceName"', MODEL: '"RequestModel"', SOURCE: '"Source"'}


def _restricted(store: Path, case: Case) -> duckdb.DuckDBPyConnection:
    """A DuckDB reading only the spans of the chosen values (``otel_traces`` restricted, the
    views over it) — what the filter should leave."""
    conn = duckdb.connect()
    conn.execute(reader_sql(store))
    where = " AND ".join(
        f"{_RESTRICT[name]} IN ({', '.join(repr(v) for v in values)})"
        for name, values in case.chosen.items()
    )
    glob = SegmentStore(store).glob
    conn.execute(
        f"CREATE OR REPLACE VIEW {TABLE} AS SELECT * FROM read_parquet('{glob}', "
        f"union_by_name = true) WHERE {where}"
    )
    return conn


UNFILTERED: Final = {"timeline"}
"""Panels the filters do not restrict (the chosen call is chosen by its trace id)."""


@pytest.mark.parametrize("case", [c.name for c in FILTERED])
def test_a_filter_keeps_only_its_values(
    runs: Runs, store: Path, time_range: tuple[datetime, datetime], case: str
) -> None:
    """Choosing a service, model or source (or two sources) gives every panel exactly what it
    shows on the spans of those values alone — and less than with "All"."""
    chosen = CASE[case]
    conn = _restricted(store, chosen)
    fewer = 0
    for panel in PANELS:
        if panel.key in UNFILTERED:
            continue
        changed = False
        for run, copy in run_keys(panel, runs.copies[case]):
            ctx = context(CASE["all"], "duckdb", time_range, runs.trace_ids[case], copy)
            expected = in_duckdb(conn, expand(panel.sql(DUCK), ctx, "duckdb"))
            got = runs.duckdb[case, run]
            assert_same_rows(expected, got, f"{case}/{run}")
            changed |= run not in [k for k, _ in run_keys(panel, runs.copies["all"])]
            changed |= got.rows != runs.duckdb.get(("all", run), got).rows
            if SERIES in panel.columns:
                for label in column(got, SERIES):
                    source, model = str(label).split("/")
                    assert source in chosen.chosen.get(SOURCE, (source,))
                    assert model in chosen.chosen.get(MODEL, (model,))
        fewer += changed
    assert fewer >= len(PANELS) - len(UNFILTERED) - 2  # hedging may be unchanged
    conn.close()


# --- the threshold ------------------------------------------------------------------------------


def _sums(result: Result, *names: str) -> tuple[float, ...]:
    return tuple(sum(float(v or 0) for v in column(result, name)) for name in names)


def _by_source(runs: Runs, case: str, key: str, *names: str) -> dict[str, tuple[float, ...]]:
    """A panel repeated per source: each copy's figures summed over time, by source."""
    found = {
        str(copy[1]): _sums(runs.duckdb[case, run], *names)
        for run, copy in run_keys(PANEL[key], runs.copies[case])
        if copy is not None and runs.duckdb[case, run].rows
    }
    return found


def _at_threshold(duck: duckdb.DuckDBPyConnection, threshold: int | None) -> Result:
    """Per source, seconds of net, stall and wall of the winning attempts, read through
    ``llm_attempts_at(T)`` (or ``llm_attempts``) directly — the breakdown's path."""
    source = "llm_attempts" if threshold is None else DUCKDB.at_threshold(threshold)
    return in_duckdb(
        duck,
        f"""SELECT a.source,
            sum(a.generation_ms) / 1000 AS net_s, sum(a.stall_ms) / 1000 AS stall_s,
            sum(a.wall_ms) / 1000 AS wall_s
        FROM llm_calls c JOIN {source} a
          ON a.call_span_id = c.span_id AND a.attempt = c.winner_attempt
        WHERE a.source IS NOT NULL
        GROUP BY 1 ORDER BY 1""",
    )


@pytest.mark.parametrize("case", ["all", "at-200", "at-400", "at-measured"])
def test_the_threshold_rederives_as_llm_attempts_at(
    runs: Runs, duck: duckdb.DuckDBPyConnection, case: str
) -> None:
    """At each threshold the stall figures of the time split, summed over time, are those of
    ``llm_attempts_at(T)`` (as measured: ``llm_attempts``); the thresholds disagree with each
    other; re-deriving at the measured threshold gives the measured figures."""
    threshold = CASE[case].threshold
    names = ("net_s", "stall_s", "wall_s")
    got = _by_source(runs, case, "time_split", *names)
    at = _at_threshold(duck, None if threshold == AS_MEASURED else threshold)
    expected = {str(row[0]): tuple(float(v or 0) for v in row[1:]) for row in at.rows}
    assert got.keys() == expected.keys()
    for source, sums in got.items():
        assert all(_close(a, b) for a, b in zip(sums, expected[source], strict=True)), source
    stalls = {c: runs.duckdb[c, "stall_counts"].rows for c in ("all", "at-200", "at-400")}
    assert len({json.dumps(rows) for rows in stalls.values()}) == 3
    for panel in ("time_split", "stall_share", "stall_counts", "worst"):
        for key, _ in run_keys(PANEL[panel], runs.copies["all"]):
            assert runs.duckdb["at-measured", key].rows == runs.duckdb["all", key].rows, key


@pytest.mark.parametrize("case", ["all", "at-200", "at-400", "at-measured"])
def test_the_worst_calls_are_the_canned_querys(
    runs: Runs, duck: duckdb.DuckDBPyConnection, case: str
) -> None:
    """The worst-calls table at each threshold lists the calls `otel-llm query`'s worst-stalls
    query lists at that threshold, with the same stalls: skipping the attempts whose longest
    gap is shorter than the threshold loses none that stalled."""
    threshold = CASE[case].threshold
    canned = worst_stalls_sql(
        limit=WORST_CALLS, threshold_ms=None if threshold == AS_MEASURED else threshold
    )
    expected = {(str(row[0]), round(float(row[3]), 2)) for row in in_duckdb(duck, canned).rows}
    worst = runs.duckdb[case, "worst"]
    got = {
        (str(trace)[:16], round(float(stall), 2))
        for trace, stall in zip(column(worst, "trace_id"), column(worst, "stall_s"), strict=True)
    }
    assert expected
    assert got == expected


# --- the chunk gaps -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", [c.name for c in CASES])
def test_the_gap_bars_count_every_gap(
    runs: Runs, duck: duckdb.DuckDBPyConnection, time_range: tuple[datetime, datetime], case: str
) -> None:
    """The chunk-gap bars add up to Σ(chunks − 1) over the streamed attempts with complete
    chunk events (metering exact) in range and filtered; the recorded bars count exactly the
    stored gaps above each attempt's floor."""
    chosen = CASE[case].chosen
    where = " AND ".join(
        f"a.{name} IN ({', '.join(repr(v) for v in values)})" for name, values in chosen.items()
    )
    start, end = (t.replace(tzinfo=None) for t in time_range)
    counted = duck.execute(
        f"""SELECT sum(greatest(coalesce(a.chunk_count, 0) - 1, 0)),
            sum(len(list_filter(t."ChunkGapNs",
                lambda g: g > coalesce(t."ChunkEventsFloorMs", 0) * 1000000)))
        FROM llm_attempts a JOIN {TABLE} t ON t."SpanId" = a.span_id
        WHERE coalesce(a.stream, false) AND a.metering_status = 'exact'
          AND a.started_at BETWEEN ? AND ?
          {"AND " + where if where else ""}""",
        [start, end],
    ).fetchone()
    assert counted is not None
    gaps, above = counted
    bars: dict[str, int] = {str(label): int(n) for label, n in runs.duckdb[case, "chunk_gaps"].rows}
    assert sum(bars.values()) == gaps > 0
    assert sum(n for label, n in bars.items() if label != "≤ event floor") == above > 0


@pytest.mark.parametrize(
    ("rows", "total"),
    [
        ("(1, 5), (2, 7), (0, NULL)", 12),  # every hedged call knows its waste
        ("(1, 5), (1, NULL)", 5),  # what is known
        ("(1, NULL), (2, NULL)", None),  # hedges ran, none knows its waste: unknown, not 0
        ("(0, NULL), (0, NULL)", 0),  # no hedge: nothing wasted
    ],
)
def test_waste_is_unknown_when_no_hedged_call_knows_its_own(rows: str, total: int | None) -> None:
    sql = known_total(DUCK, "w")
    with duckdb.connect() as conn:
        got = conn.execute(f"SELECT {sql} FROM (VALUES {rows}) t(hedges, w)").fetchone()
    assert got == (total,)
