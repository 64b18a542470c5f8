"""The ClickHouse schema (``otel_llm/_show/_sql/_clickhouse.py``) in chDB: the exporter's exact DDL
plus ours, fed the exporter's columns of real SDK spans, gives the same views, re-threshold and
canned queries as the DuckDB store fed the same spans — row for row."""

from __future__ import annotations

import asyncio
import os
import random
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

import duckdb
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_llm import AllSourcesExhausted, Client, Source, open_store
from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm._show._sql import _exporter_sql
from otel_llm._show._sql._clickhouse import (
    DATABASE,
    SCHEMA_FILE,
    exporter_statements,
    main,
    otel_llm_statements,
    schema_sql,
    statements_of,
)
from otel_llm._show._sql._rollup import THRESHOLD_OPTIONS_MS
from otel_llm._show._sql._table import BASE_COLUMNS, ROLE_COLUMN, TABLE, TYPED_COLUMNS
from otel_llm._show._sql._views import (
    ATTEMPT_COLUMNS,
    ATTEMPTS_AT,
    ATTEMPTS_VIEW,
    CALLS_VIEW,
    CLICKHOUSE,
    DUCKDB,
    WINNER_COLUMNS,
    WINNERS_AT,
    WINNERS_VIEW,
    Dialect,
    views_sql,
    winner_on,
)
from otel_llm._show._store._breakdown import (
    RUN_ATTRIBUTE,
    breakdown_sql,
    totals_sql,
    worst_stalls_sql,
)
from otel_llm._show._store._columns import SegmentColumns
from otel_llm._show._store._segments import SegmentStore, encode
from otel_llm.simulator import Script, Silence, SimulatedProvider
from otel_llm.testing import Spans
from tests.conftest import require
from tests.support import REPOSITORY
from tests.support.clickhouse_session import chdb_with, exporter_columns

ROOT = REPOSITORY
MESSAGES = [{"role": "user", "content": "hi"}]
FAST = {"first_chunk_delay_s": 0.0, "chunk_interval_s": 0.005, "chunk_count": 20}
SCRIPTS = {
    "smooth": Script(**FAST),
    "stalls": Script(
        **FAST,
        silences=(Silence(after_chunk=3, duration_s=0.15), Silence(after_chunk=9, duration_s=0.45)),
    ),
    "short-stall": Script(**FAST, silences=(Silence(after_chunk=5, duration_s=0.3),)),
    "stall": Script(
        **FAST, silences=(Silence(after_chunk=3, duration_s=3.0, keepalive_every_s=0.05),)
    ),
    "fail": Script(error_status=500),
}
RUN = "run-1"
"""The resource's service.instance.id: the run the canned queries can be restricted to."""
THRESHOLDS = (50, 100, 150, 250, 400, 1000)
"""Below the chunk-event floor, the measured threshold, and above it."""


def _source(provider: SimulatedProvider, name: str, model: str, **fields: Any) -> Source:
    return Source(
        name=name,
        provider=fields.pop("vendor", "sim"),
        base_url=provider.base_url,
        model=model,
        **fields,
    )


async def _calls(spans: Spans) -> None:
    """Smooth, stalled, stall-hedged, failed-over, cancelled, non-streamed and failed calls."""
    options: dict[str, Any] = {
        "stall_threshold_ms": 100,
        "backoff_base_s": 0.01,
        "tracer_provider": spans.provider,
    }
    async with SimulatedProvider(scripts=SCRIPTS) as provider:
        src = _source
        async with Client([src(provider, "a", "smooth")], **options) as client:
            await client.chat(MESSAGES)
            await client.chat(MESSAGES, stream=False)
        async with Client([src(provider, "eu", "stalls", vendor="sim-eu")], **options) as client:
            await client.chat(MESSAGES)
            await client.chat(MESSAGES)
        hedged = [src(provider, "a", "stall"), src(provider, "b", "smooth", priority=1)]
        async with Client(hedged, hedge_stall_after_s=0.2, **options) as client:
            await client.chat(MESSAGES)
        failover = [src(provider, "a", "fail"), src(provider, "b", "short-stall", priority=1)]
        async with Client(failover, same_source_retries=0, **options) as client:
            await client.chat(MESSAGES)
        async with Client([src(provider, "a", "fail")], max_attempts=2, **options) as client:
            with pytest.raises(AllSourcesExhausted):
                await client.chat(MESSAGES)
        both = [src(provider, "a", "stall"), src(provider, "b", "stall", priority=1)]
        async with Client(both, hedge_stall_after_s=0.1, **options) as client:
            task = asyncio.create_task(client.chat(MESSAGES))
            await provider.stats.wait_for_requests(provider.stats.requests + 2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task


@pytest.fixture(scope="module")
def finished() -> Iterator[list[ReadableSpan]]:
    """The spans of :func:`_calls`, through the deriving processor, from run :data:`RUN`."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OTEL_RESOURCE_ATTRIBUTES", f"{RUN_ATTRIBUTE}={RUN}")
        spans = Spans()
    asyncio.run(_calls(spans))
    spans.check()
    yield spans.finished()
    spans.provider.shutdown()


@pytest.fixture(scope="module")
def duck(
    finished: list[ReadableSpan], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[duckdb.DuckDBPyConnection]:
    """The spans in a segment store, sealed as the embedded exporter seals them (Arrow columns
    of the finished spans, one Parquet segment), read through ``open_store`` and the views."""
    path = tmp_path_factory.mktemp("store") / "store"
    store = SegmentStore(path)
    store.create()
    columns = SegmentColumns()
    for span in finished:
        columns.append_span(span)
    store.write(encode(columns.table()))
    with open_store(path) as conn:
        yield conn


@pytest.fixture(scope="module")
def chdb(finished: list[ReadableSpan]) -> Iterator[Any]:
    """A chDB server with collector/clickhouse/schema.sql applied and the spans inserted with
    the exporter's INSERT (its columns only: ClickHouse computes the typed ones)."""
    with chdb_with(finished) as session:
        yield session


def _plain(value: Any) -> Any:
    """One value as both engines' rows can be compared: instants as UTC nanoseconds."""
    if hasattr(value, "value") and hasattr(value, "tz_localize"):  # a pandas Timestamp
        return int(value.value)
    if isinstance(value, datetime):  # pragma: no cover - arrow gives pandas Timestamps
        raise AssertionError("a timestamp lost its nanoseconds")
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _table(table: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
    rows = [tuple(_plain(v) for v in row.values()) for row in table.to_pylist()]
    return list(table.column_names), rows


def in_duckdb(conn: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Columns and rows of ``sql`` in DuckDB."""
    return _table(conn.cursor().sql(sql).to_arrow_table())


def in_chdb(session: Any, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Columns and rows of ``sql`` in chDB."""
    return _table(session.query(sql, "ArrowTable"))


def _ordered(relation: str, key: str = "span_id") -> str:
    return f"SELECT * FROM {relation} ORDER BY {key}"


def test_the_spans_cover_every_path(duck: duckdb.DuckDBPyConnection) -> None:
    """The spans hold stalls, a won hedge, a cancelled hedge leg, failures, a caller
    cancellation and a non-streamed call, so the comparisons below exercise each."""
    outcomes = dict(in_duckdb(duck, "SELECT outcome, count(*) FROM llm_attempts GROUP BY 1")[1])
    assert {
        sc.OUTCOME_OK,
        sc.OUTCOME_HEDGE_CANCELLED,
        sc.OUTCOME_CANCELLED,
    } <= set(outcomes)
    assert len(set(outcomes)) >= 4, outcomes  # an error outcome for the 500s
    ((stalled, hedges, non_streamed),) = in_duckdb(
        duck,
        "SELECT (SELECT count(*) FROM llm_attempts WHERE stall_count > 0), "
        "(SELECT count(*) FROM llm_calls WHERE hedge_won), "
        "(SELECT count(*) FROM llm_attempts WHERE NOT stream)",
    )[1]
    assert (stalled >= 3, hedges, non_streamed) == (True, 1, 1)


@pytest.mark.parametrize("view", [ATTEMPTS_VIEW, CALLS_VIEW])
def test_views_equal_row_for_row(duck: duckdb.DuckDBPyConnection, chdb: Any, view: str) -> None:
    """llm_attempts and llm_calls: the same columns and the same rows in both engines."""
    expected = in_duckdb(duck, _ordered(DUCKDB.relation(view)))
    assert len(expected[1]) >= 8
    assert in_chdb(chdb, _ordered(CLICKHOUSE.relation(view))) == expected


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_rethreshold_equals_row_for_row(
    duck: duckdb.DuckDBPyConnection, chdb: Any, threshold: int
) -> None:
    """llm_attempts_at(T) — ClickHouse's parameterized view, DuckDB's macro — agree at T below
    the floor, at the measured threshold and above it, and have llm_attempts' columns."""
    expected = in_duckdb(duck, _ordered(DUCKDB.at_threshold(threshold)))
    assert expected[0] == [c.alias for c in ATTEMPT_COLUMNS]
    assert in_chdb(chdb, _ordered(CLICKHOUSE.at_threshold(threshold))) == expected


def _joined_winners(threshold: int | None) -> str:
    """Each call's winner as the definition says: the attempt of that call whose number is the
    call's winner, read from the attempt (at T: from llm_attempts_at(T))."""
    attempts = ATTEMPTS_VIEW if threshold is None else f"{ATTEMPTS_AT}({threshold})"
    columns = ", ".join(f"{c.joined} AS {c.alias}" for c in WINNER_COLUMNS)
    return f"""SELECT {columns} FROM {CALLS_VIEW} c JOIN {attempts} a
        ON {winner_on("c", "a")} AND a.trace_id = c.trace_id ORDER BY call_span_id"""


def _winners(threshold: int | None) -> str:
    relation = WINNERS_VIEW if threshold is None else DUCKDB.at_threshold(threshold, WINNERS_AT)
    return _ordered(relation, "call_span_id")


@pytest.mark.parametrize("threshold", [None, *THRESHOLDS])
def test_the_call_rows_give_the_joined_winners(
    duck: duckdb.DuckDBPyConnection, threshold: int | None
) -> None:
    """llm_winners (and llm_winners_at(T)) read each winner from its call's row: the same rows
    as joining each call to its winning attempt, as measured, below the call rows' 100 ms floor
    of gaps (50: those calls are joined) and above it; and every call row carries its winner,
    or that it has none."""
    expected = in_duckdb(duck, _joined_winners(threshold))
    assert len(expected[1]) >= 6
    assert in_duckdb(duck, _winners(threshold)) == expected
    carried = f"""SELECT count(*) FILTER (winner_attempt IS NOT NULL), count(*)
        FROM {CALLS_VIEW} WHERE winner_gaps_floor_ms IS NOT NULL"""
    calls = in_duckdb(duck, f"SELECT count(*) FROM {CALLS_VIEW}")[1][0][0]
    assert in_duckdb(duck, carried)[1] == [(len(expected[1]), calls)]
    assert calls > len(expected[1])  # some calls have no winner


def test_a_call_span_that_names_no_source_gives_its_winners(tmp_path: Path) -> None:
    """Call spans that name no source or provider of their own (a wrapped SDK's, a scripted
    one's): each call's winner still says which source answered, the hedge leg when it won."""
    from tests.support.tune_store import Scripted, TuneStore, stream

    store = TuneStore(tmp_path / "store")
    lost = Scripted(stream(200.0, chunks=3, every_ms=50.0), 2000.0, outcome=sc.OUTCOME_ERROR)
    hedge = Scripted(
        stream(100.0, chunks=3, every_ms=50.0),
        300.0,
        source="sim-2",
        leg=sc.LEG_HEDGE,
        start_ms=500.0,
    )
    store.call([lost, hedge])
    store.call([Scripted(stream(200.0, chunks=3, every_ms=50.0), 400.0)])
    store.close()
    with open_store(tmp_path / "store") as conn:
        joined = in_duckdb(conn, _joined_winners(None))
        assert in_duckdb(conn, _winners(None)) == joined
        sources = in_duckdb(conn, f"SELECT source, attempt FROM {WINNERS_VIEW} ORDER BY 1")[1]
    assert sources == [("sim-1", 1), ("sim-2", 2)]


def test_every_offered_threshold_reads_the_call_rows() -> None:
    """The call rows carry every gap of their winner above the floor, and every threshold the
    dashboards offer is at or above it: a winner panel or rollup never needs the join."""
    assert min(THRESHOLD_OPTIONS_MS) >= DEFAULTS.winner_gap_floor_ms


def test_the_call_rows_alone_give_every_winner(duck: duckdb.DuckDBPyConnection) -> None:
    """With every attempt row gone, llm_winners and llm_winners_at(T) at and above the call
    rows' 100 ms gap floor return every winner as before: they read the call rows, not the
    attempts. Below the floor (50 ms) the calls are joined to attempts that are not there."""
    table = duck.sql("SELECT * FROM otel_traces").to_arrow_table()
    conn = duckdb.connect()
    conn.register("written", table)
    calls = f"\"{ROLE_COLUMN}\" = '{sc.SPAN_ROLE_CALL}'"
    conn.execute(f"CREATE TABLE otel_traces AS SELECT * FROM written WHERE {calls}")
    conn.execute(views_sql(DUCKDB))
    for threshold in (None, 100, 250, 1000):
        expected = in_duckdb(duck, _winners(threshold))
        assert len(expected[1]) >= 6
        assert in_duckdb(conn, _winners(threshold)) == expected, threshold
    assert in_duckdb(conn, _winners(50))[1] == []
    conn.close()


@pytest.mark.parametrize("threshold", [None, 50, 250])
def test_calls_whose_rows_carry_no_winner_are_joined(
    duck: duckdb.DuckDBPyConnection, threshold: int | None
) -> None:
    """A store whose call rows carry no winner (written before they did, or by an
    instrumentation that does not), or only some: the same winners, through the join."""
    table = duck.sql("SELECT * FROM otel_traces").to_arrow_table()
    for keep in ("none", "every other"):
        conn = duckdb.connect()
        conn.register("written", table)
        kept = "false" if keep == "none" else 'hash("SpanId") % 2 = 0'
        conn.execute(
            f"""CREATE TABLE otel_traces AS SELECT * REPLACE (
                CASE WHEN {kept} THEN "WinnerGapsFloorMs" END AS "WinnerGapsFloorMs",
                CASE WHEN {kept} THEN "WinnerGapNs" END AS "WinnerGapNs",
                CASE WHEN {kept} THEN "WinnerModel" END AS "WinnerModel") FROM written"""
        )
        conn.execute(views_sql(DUCKDB))
        assert in_duckdb(conn, _winners(threshold)) == in_duckdb(duck, _joined_winners(threshold))
        conn.close()


@pytest.mark.parametrize("threshold", [None, 50, 250, 1000])
def test_winners_equal_row_for_row(
    duck: duckdb.DuckDBPyConnection, chdb: Any, threshold: int | None
) -> None:
    """llm_winners and llm_winners_at(T): the same rows in both engines."""
    expected = in_duckdb(duck, _winners(threshold))
    assert expected[0] == [c.alias for c in WINNER_COLUMNS]
    relation = (
        CLICKHOUSE.relation(WINNERS_VIEW)
        if threshold is None
        else CLICKHOUSE.at_threshold(threshold, WINNERS_AT)
    )
    assert in_chdb(chdb, _ordered(relation, "call_span_id")) == expected


def test_rethreshold_changes_the_stall_figures(duck: duckdb.DuckDBPyConnection) -> None:
    """The thresholds compared above give different stall counts, so agreeing is not
    trivially agreeing on one answer."""
    counts = {
        t: in_duckdb(duck, f"SELECT sum(stall_count) FROM {DUCKDB.at_threshold(t)}")[1][0]
        for t in THRESHOLDS[1:]
    }
    assert len(set(counts.values())) >= 3, counts


def _canned(dialect: Dialect) -> dict[str, str]:
    queries = {
        "totals": totals_sql(dialect=dialect),
        "breakdown": breakdown_sql(dialect=dialect),
        "worst": worst_stalls_sql(10, dialect=dialect),
        "run": breakdown_sql(250, run=RUN, dialect=dialect),
        "other-run": breakdown_sql(250, run="no-such-run", dialect=dialect),
    }
    for t in THRESHOLDS:
        queries[f"breakdown-{t}"] = breakdown_sql(t, dialect=dialect)
        queries[f"worst-{t}"] = worst_stalls_sql(10, t, dialect=dialect)
    return queries


EMPTY: Final = {f"worst-{THRESHOLDS[0]}", f"worst-{THRESHOLDS[-1]}", "other-run"}
"""Below the floor no stall is re-derived; at 1000 ms none of the scripted silences stalls; no
span here carries that run's id."""


@pytest.mark.parametrize("query", list(_canned(DUCKDB)))
def test_canned_queries_equal_row_for_row(
    duck: duckdb.DuckDBPyConnection, chdb: Any, query: str
) -> None:
    """The breakdown, totals and worst-stalls queries and their ClickHouse twins agree, as
    measured and at every threshold (and restricted to one run)."""
    expected = in_duckdb(duck, _canned(DUCKDB)[query])
    assert bool(expected[1]) == (query not in EMPTY)
    assert in_chdb(chdb, _canned(CLICKHOUSE)[query]) == expected


def test_since_keeps_the_calls_that_started_then_or_later(
    duck: duckdb.DuckDBPyConnection, chdb: Any
) -> None:
    """``since`` at the middle call's start: the breakdown and worst stalls of the later half
    (that call included), the same rows in both engines."""
    starts = [row[0] for row in in_duckdb(duck, f"SELECT started_at FROM {WINNERS_VIEW}")[1]]
    middle_us = sorted(starts)[len(starts) // 2] // 1000  # ns read back; a literal holds µs
    middle = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=middle_us)
    later = sum(start >= middle_us * 1000 for start in starts)
    assert 0 < later < len(starts)
    for threshold in (None, 250):
        for make in (breakdown_sql, lambda t, **kw: worst_stalls_sql(50, t, **kw)):
            expected = in_duckdb(duck, make(threshold, since=middle, dialect=DUCKDB))
            assert in_chdb(chdb, make(threshold, since=middle, dialect=CLICKHOUSE)) == expected
    (_, rows) = in_duckdb(duck, breakdown_sql(since=middle))
    assert sum(row[1] for row in rows) == later


def test_rounding_is_duckdbs(duck: duckdb.DuckDBPyConnection, chdb: Any) -> None:
    """ClickHouse's twin of DuckDB's round(DOUBLE, n) agrees with it on ties, on doubles just
    below a tie (0.305, 2.675) and on thousands of figure-like values; ClickHouse's own round
    does not."""
    rng = random.Random(11)
    values = [0.305, 0.125, 2.675, 1.005, 0.045, 12.25, 0.615, -0.125, -2.675, 0.0]
    values += [rng.randint(0, 200_000) / 1000.0 for _ in range(2000)]
    values += [rng.randint(0, 2000) * 100.0 / rng.randint(1, 5000) for _ in range(2000)]
    listed = ", ".join(repr(v) for v in values)
    for digits in (1, 2):
        (expected,) = in_duckdb(
            duck, f"SELECT list_transform([{listed}]::DOUBLE[], lambda x: round(x, {digits}))"
        )[1][0]
        twin = CLICKHOUSE.round("x", digits)
        (got,) = in_chdb(chdb, f"SELECT arrayMap(x -> {twin}, [{listed}]::Array(Float64))")[1][0]
        assert got == expected
        (native,) = in_chdb(chdb, f"SELECT arrayMap(x -> round(x, {digits}), [{listed}])")[1][0]
        assert native != expected


def test_the_committed_schema_file_is_current() -> None:
    """collector/clickhouse/schema.sql is what the generator writes (regenerate it with
    ``python -m otel_llm._show._sql._clickhouse collector/clickhouse/schema.sql``)."""
    assert (ROOT / SCHEMA_FILE).read_text() == schema_sql(), "stale: regenerate it"


def test_the_generator_writes_the_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m otel_llm._show._sql._clickhouse PATH`` writes the script; without PATH it prints
    it; --database and --cluster reach every statement."""
    assert main([str(tmp_path / "clickhouse" / "schema.sql")]) == 0
    assert (tmp_path / "clickhouse" / "schema.sql").read_text() == schema_sql()
    assert main(["--database", "llm", "--cluster", "c1"]) == 0
    printed = capsys.readouterr().out
    assert printed == schema_sql("llm", cluster="c1")
    assert "otel." not in printed.replace("otel.otel_traces", "").replace("otel_llm", "")


def test_the_schema_is_the_exporters_ddl_then_ours() -> None:
    """The script's statements are the exporter's rendered DDL, then one ALTER and the views —
    and the exporter's INSERT names exactly the base columns of the DuckDB store."""
    assert statements_of(schema_sql()) == [
        s.strip() for s in (*exporter_statements(), *otel_llm_statements())
    ]
    assert exporter_columns() == [name for name, _ in BASE_COLUMNS]


def test_applying_the_schema_twice_changes_nothing(chdb: Any) -> None:
    """Every statement is idempotent: running the script again keeps the rows and views."""
    before = in_chdb(chdb, _ordered(CLICKHOUSE.relation(ATTEMPTS_VIEW)))
    for statement in statements_of(schema_sql()):
        chdb.query(statement)
    assert in_chdb(chdb, _ordered(CLICKHOUSE.relation(ATTEMPTS_VIEW))) == before


def test_a_cluster_schema_is_on_cluster_and_replicated() -> None:
    """With a cluster name every statement runs ON CLUSTER and the tables replicate (but the
    column check, a SELECT run where the script runs)."""
    statements = statements_of(schema_sql(cluster="llm"))
    assert sum(s.startswith("WITH") for s in statements) == 1
    assert all("ON CLUSTER `llm`" in s for s in statements if not s.startswith("WITH"))
    assert sum("ENGINE = ReplicatedMergeTree()" in s for s in statements) == 4
    assert sum("ENGINE = ReplicatedAggregatingMergeTree()" in s for s in statements) == 4
    unreplicated = re.sub(r"Replicated(Aggregating)?MergeTree\(\)", "", "".join(statements))
    assert "MergeTree()" not in unreplicated


def _module_cache() -> Path:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    try:
        found = subprocess.run(
            [go, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        found = ""
    gopath = Path(found or os.environ.get("GOMODCACHE") or Path.home() / "go" / "pkg" / "mod")
    module = "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/clickhouseexporter"
    return gopath / f"{module}@{_exporter_sql.VERSION}" / "internal" / "sqltemplates"


def test_the_templates_are_the_exporters_own() -> None:
    """The templates otel-llm renders are byte for byte those of the exporter's module (when
    ``go mod download`` has put it in the module cache)."""
    folder = _module_cache()
    require(folder.is_dir(), f"the exporter's module in the Go module cache at {folder}")
    for name, text in _exporter_sql.TEMPLATE_FILES.items():
        assert (folder / name).read_text() == text, name


def test_render_fills_go_verbs() -> None:
    """render() fills %q with a quoted identifier and %s verbatim, and refuses a mismatch."""
    assert _exporter_sql.render("%q.%q %s;", "otel", "t", "x", quoted=(0, 1)) == '"otel"."t" x;'
    with pytest.raises(ValueError, match="2 verbs, 1 arguments"):
        _exporter_sql.render("%s %s", "a")
    with pytest.raises(ValueError, match="plain identifier"):
        _exporter_sql.render("%q", 'a"b', quoted=(0,))


KINDS: Final = (
    "text",
    "",
    7,
    -5,
    0,
    3_000_000_000,
    2**62,
    True,
    False,
    1.5,
    2.0,
    float("nan"),
    (1, 2, 3),
    (2**62, -1),
    (),
    (1.5, 2.0),
    (True, False),
    ("a", "b"),
)
"""A value of every kind an OpenTelemetry attribute holds, ints past 32 bits among them.
Strings that spell another kind ("42", "true", "[1]") are left out: the exporter's
Map(String, String) holds 42 and "42" alike, and ClickHouse reads both as what they spell."""


def test_every_typed_column_reads_every_kind_of_value_alike(tmp_path: Path) -> None:
    """Each typed column, given a value of each kind (on otel-llm's spans, where the defaults
    apply, and on others), holds in ClickHouse what the embedded writer stores: the value when
    it is of the column's type, else NULL — an array column, which ClickHouse cannot make
    NULL, empty — never a float or a bool turned into an int."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracer = provider.get_tracer("kinds")
    typed = [c for c in TYPED_COLUMNS if c.attribute != sc.SPAN_ROLE]
    for i, value in enumerate(KINDS):
        for ours in (False, True):
            with tracer.start_as_current_span(f"kind {i:02d} {ours}") as span:
                if ours:
                    span.set_attribute(sc.SPAN_ROLE, sc.SPAN_ROLE_ATTEMPT)
                for column in typed:
                    span.set_attribute(column.attribute, value)
    spans = exported.get_finished_spans()
    provider.shutdown()
    assert len(spans) == 2 * len(KINDS)
    store = SegmentStore(tmp_path / "store")
    store.create()
    columns = SegmentColumns()
    for finished_span in spans:
        columns.append_span(finished_span)
    store.write(encode(columns.table()))
    names = ", ".join(f'"{c.name}"' for c in TYPED_COLUMNS)
    # (the module's chDB holds other spans too: one embedded server a process)
    sql = f"SELECT SpanName, {names} FROM {{}} WHERE SpanName LIKE 'kind %' ORDER BY SpanName"
    arrays = [i + 1 for i, c in enumerate(TYPED_COLUMNS) if c.sql_type == "BIGINT[]"]
    assert arrays
    with open_store(tmp_path / "store") as conn:
        expected = in_duckdb(conn, sql.format(TABLE))
    with chdb_with(spans) as session:
        got = in_chdb(session, sql.format(f"{DATABASE}.{TABLE}"))
    assert got[0] == expected[0]
    nulls_as_empty = [
        tuple([] if i in arrays and v is None else v for i, v in enumerate(row))
        for row in expected[1]
    ]
    assert {row[0] for row in nulls_as_empty} == {span.name for span in spans}
    for want, have in zip(nulls_as_empty, got[1], strict=True):
        assert have == want, want[0]
    gaps = {row[0]: row[arrays[0]] for row in got[1]}
    assert gaps["kind 12 True"] == [1, 2, 3]
    assert gaps["kind 15 True"] == []  # floats: no ints
