"""The ClickHouse exporter versions otel-llm supports (otel_llm/_show/_sql/_exporter_versions.py):
our DDL, views, rollups and every dashboard panel on ``otel_traces`` as each version creates it
(its own templates, kept as fixtures) give the same rows; a schema of another shape — the
exporter's ``json: true`` table, a renamed column — is refused by the schema script and by
``check_columns``, naming the column, before anything is added to it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pytest
from chdb import session as chdb_session
from opentelemetry.sdk.trace import ReadableSpan

from otel_llm import NotAStore, UnsupportedSchema
from otel_llm._show._dashboards._panels import PANELS, TRACE_VIEW, Panel, worst_trace_ids
from otel_llm._show._sql import _exporter_sql
from otel_llm._show._sql._clickhouse import DATABASE, exporter_statements, otel_llm_statements
from otel_llm._show._sql._exporter_versions import (
    SUPPORTED,
    check_columns,
    columns_sql,
    exporter_types,
    required_columns,
)
from otel_llm._show._sql._grafana_macros import QueryContext, Variable, all_of, expand
from otel_llm._show._sql._panel_sql import AS_MEASURED, CALL, CLICKHOUSE_PANELS, FILTERS, THRESHOLD
from otel_llm._show._sql._rollup import (
    ATTEMPTS_ROLLUP,
    CALLS_ROLLUP,
    STALLED_WINNERS,
    STALLED_WINNERS_AT,
    WINNERS_AT_ROLLUP,
    WINNERS_ROLLUP,
    contents_sql,
)
from otel_llm._show._sql._table import BASE_COLUMNS, TABLE
from otel_llm._show._sql._views import ATTEMPTS_VIEW, CALLS_VIEW, CLICKHOUSE
from tests.conftest import require
from tests.support.clickhouse_session import chdb_from, chdb_with
from tests.support.panel_calls import EU, panel_spans

FIXTURES: Final = Path(__file__).parent / "fixtures" / "clickhouseexporter"
MODULE: Final = (
    "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/clickhouseexporter"
)
MAP_FILES: Final = (
    "traces_table.sql",
    "traces_id_ts_lookup_table.sql",
    "traces_id_ts_lookup_mv.sql",
    "traces_insert.sql",
)
JSON_FILES: Final = ("traces_json_table.sql", "traces_json_insert.sql")


def templates(version: str, *, json_schema: bool = False) -> dict[str, str]:
    """A version's template files by name (the ``json: true`` table as ``traces_table.sql``)."""
    folder = FIXTURES / version
    found = {name: (folder / name).read_text() for name in MAP_FILES}
    if json_schema:
        found["traces_table.sql"] = (folder / "traces_json_table.sql").read_text()
        found["traces_insert.sql"] = (folder / "traces_json_insert.sql").read_text()
    return found


def _module_cache(version: str) -> Path:
    """The templates of ``version``'s module in the Go module cache, downloaded through the Go
    module proxy when missing (``go mod download`` needs no module of its own for this)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    try:
        found = subprocess.run(
            [go, "mod", "download", "-json", f"{MODULE}@{version}"],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout
        folder = Path(json.loads(found)["Dir"])
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        gopath = Path(os.environ.get("GOMODCACHE") or Path.home() / "go" / "pkg" / "mod")
        folder = gopath / f"{MODULE}@{version}"
    return folder / "internal" / "sqltemplates"


def in_chdb(session: Any, sql: str) -> tuple[list[str], list[list[Any]]]:
    out = json.loads(session.query(sql, "JSONCompact").bytes())
    return [c["name"] for c in out["meta"]], out["data"]


# --- the fixtures -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", SUPPORTED)
def test_the_fixtures_are_the_exporters_own(version: str) -> None:
    """Each version's fixtures are byte for byte its module's templates, as ``go mod download``
    fetches them."""
    folder = _module_cache(version)
    require(folder.is_dir(), f"the exporter's module {version} in the Go module cache at {folder}")
    for name in (*MAP_FILES, *JSON_FILES):
        assert (FIXTURES / version / name).read_text() == (folder / name).read_text(), name


def test_the_shipped_templates_are_the_first_supported_versions() -> None:
    """schema.sql renders the templates of the first supported version (the Collector's pinned
    exporter), as its fixtures hold them."""
    assert SUPPORTED[0] == _exporter_sql.VERSION
    assert templates(SUPPORTED[0]) == _exporter_sql.TEMPLATE_FILES


def test_the_supported_versions_type_every_column_alike() -> None:
    """The map schemas of the supported versions have the same columns of the same types (they
    differ in codecs, which no query sees); the json schema types the attributes otherwise."""
    first, *others = (exporter_types(templates(v)["traces_table.sql"]) for v in SUPPORTED)
    assert [name for name, _ in BASE_COLUMNS] == list(first)
    assert all(other == first for other in others)
    json_types = exporter_types(templates(SUPPORTED[-1], json_schema=True)["traces_table.sql"])
    assert json_types["SpanAttributes"] == "JSON"
    assert set(required_columns()) - {n for n, t in json_types.items() if first.get(n) == t}


def test_the_required_columns_are_those_our_sql_reads() -> None:
    """The columns the check requires are exactly the exporter's columns that the ClickHouse
    views, typed columns, rollups and dashboard panels name — neither more (a schema that works
    is not refused) nor fewer."""
    dialect = CLICKHOUSE_PANELS
    sql = "\n".join(
        [
            *otel_llm_statements()[1:],  # all but the check itself
            *(panel.sql(dialect) for panel in (*PANELS, TRACE_VIEW)),
            worst_trace_ids(dialect),
        ]
    )
    named = {
        name
        for name, _ in BASE_COLUMNS
        if f'"{name}"' in sql or re.search(rf"(?<![\w.\"]){re.escape(name)}\b(?!\.)", sql)
    }
    assert set(required_columns()) == named
    assert len(named) < len(BASE_COLUMNS)  # TraceState, ScopeName … are not read


# --- every view and panel on each version's tables ----------------------------------------------


@pytest.fixture(scope="module")
def finished() -> list[ReadableSpan]:
    return panel_spans()


def _reads(session: Any) -> dict[str, Any]:
    """The views, the re-threshold, the rollups and every panel, as ``session`` answers them."""
    relations = [
        f"SELECT * FROM {CLICKHOUSE.relation(ATTEMPTS_VIEW)} ORDER BY span_id",
        f"SELECT * FROM {CLICKHOUSE.relation(CALLS_VIEW)} ORDER BY span_id",
        f"SELECT * FROM {CLICKHOUSE.at_threshold(200)} ORDER BY span_id",
        contents_sql(CLICKHOUSE, WINNERS_ROLLUP),
        contents_sql(CLICKHOUSE, CALLS_ROLLUP),
        contents_sql(CLICKHOUSE, ATTEMPTS_ROLLUP),
        contents_sql(CLICKHOUSE, STALLED_WINNERS),
        contents_sql(CLICKHOUSE, WINNERS_AT_ROLLUP),
        contents_sql(CLICKHOUSE, STALLED_WINNERS_AT),
    ]
    found: dict[str, Any] = {sql: in_chdb(session, sql) for sql in relations}
    for key, sql in _panel_queries(session).items():
        found[key] = (sql, in_chdb(session, sql))
    return found


@pytest.fixture(scope="module")
def reads(finished: list[ReadableSpan]) -> dict[str, dict[str, Any]]:
    """What the shipped schema (collector/clickhouse/schema.sql) reads, and what each supported
    version's own DDL with otel-llm's part of the schema and the spans inserted with that
    version's INSERT reads — one chDB at a time (chDB's sessions share one server)."""
    found: dict[str, dict[str, Any]] = {}
    with chdb_with(finished) as session:
        found["shipped"] = _reads(session)
    for version in SUPPORTED:
        own = templates(version)
        statements = (*exporter_statements(templates=own), *otel_llm_statements())
        with chdb_from(statements, finished, own["traces_insert.sql"]) as session:
            found[version] = _reads(session)
    return found


def _range(session: Any) -> tuple[datetime, datetime]:
    _, ((first, last),) = in_chdb(
        session,
        f"SELECT toUnixTimestamp(min(Timestamp)), toUnixTimestamp(max(Timestamp)) "
        f"FROM {DATABASE}.{TABLE}",
    )
    start = datetime.fromtimestamp(int(first), UTC).replace(second=0) - timedelta(minutes=1)
    return start, datetime.fromtimestamp(int(last), UTC).replace(second=0) + timedelta(minutes=2)


def _context(
    start: datetime, end: datetime, interval: timedelta, threshold: int, trace_id: str
) -> QueryContext:
    variables = {name: all_of(()) for name in FILTERS}
    variables[THRESHOLD] = Variable(str(threshold))
    variables[CALL] = Variable(trace_id)
    return QueryContext(start, end, interval, variables)


def _panel_queries(session: Any) -> dict[str, str]:
    """Every panel (the trace view too) expanded as the ClickHouse plugin expands it: as
    measured and at 250 ms, at a 1 s interval (the spans) and a 1 min one (the rollups)."""
    start, end = _range(session)
    queries: dict[str, str] = {}
    for threshold in (AS_MEASURED, 250):
        for interval in (timedelta(seconds=1), timedelta(minutes=1)):
            first = _context(start, end, interval, threshold, "")
            ids = in_chdb(
                session,
                expand(
                    worst_trace_ids(CLICKHOUSE_PANELS), first, "clickhouse", variable_query=True
                ),
            )[1]
            context = _context(start, end, interval, threshold, str(ids[0][0]))
            panel: Panel
            for panel in (*PANELS, TRACE_VIEW):
                key = f"{panel.key}/{threshold}/{interval.total_seconds():.0f}s"
                here = context
                if panel.repeat is not None:  # the copy for source EU
                    chosen = {panel.repeat: Variable((EU,), multi=True, include_all=True)}
                    here = replace(context, variables={**context.variables, **chosen})
                queries[key] = expand(panel.sql(CLICKHOUSE_PANELS), here, "clickhouse")
    return queries


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_view_rollup_and_panel_reads_each_version_alike(
    reads: dict[str, dict[str, Any]], version: str
) -> None:
    """On the tables a supported version creates, the views, the re-threshold, the rollups and
    every panel (the same SQL) return what they return on the shipped schema — and return
    rows."""
    want = reads["shipped"]
    assert list(reads[version]) == list(want)
    assert len(want) > 4 * len(PANELS)
    for key, answer in want.items():
        rows = answer[1][1] if isinstance(answer, tuple) else answer[1]
        assert rows, key
        assert reads[version][key] == answer, key


# --- other schemas are refused by name ----------------------------------------------------------


def _session_with(statements: tuple[str, ...]) -> Any:
    session: Any = chdb_session.Session()  # type: ignore[no-untyped-call]
    for statement in statements:
        session.query(statement)
    return session


def _columns(session: Any) -> dict[str, str]:
    return dict(in_chdb(session, columns_sql(DATABASE))[1])


def _refused(session: Any) -> str:
    """Run otel-llm's part of the schema as ``clickhouse client --multiquery`` does (stopping at
    the first error); the error, after checking that nothing was added."""
    before = _columns(session)
    guard, *rest = otel_llm_statements()
    with pytest.raises(Exception) as refused:  # noqa: PT011 - chDB's own error class
        session.query(guard)
    assert rest  # the ALTER and the views, never reached
    assert _columns(session) == before
    return str(refused.value)


@pytest.mark.parametrize("version_name", SUPPORTED)
def test_the_check_passes_each_supported_version(version_name: str) -> None:
    """The columns a supported version creates are the required ones with the required types,
    as ClickHouse itself reports them: check_columns and the script's check pass."""
    session = _session_with(exporter_statements(templates=templates(version_name)))
    try:
        columns = _columns(session)
        assert {n: columns[n] for n in required_columns()} == dict(required_columns())
        check_columns(columns)
        session.query(otel_llm_statements()[0])
    finally:
        session.close()


def test_the_json_schema_is_refused_by_name() -> None:
    """A table the exporter created with ``json: true``: the schema script stops at its check,
    naming the first column it cannot read, before adding a column or a view; check_columns
    raises UnsupportedSchema (a NotAStore) naming every such column and its type."""
    statements = exporter_statements(templates=templates(SUPPORTED[-1], json_schema=True))
    session = _session_with(statements)
    try:
        message = _refused(session)
        assert (
            f"otel-llm: {DATABASE}.{TABLE} has no column ResourceAttributes of type "
            "Map(LowCardinality(String), String)" in message
        )
        assert "json: false" in message
        with pytest.raises(UnsupportedSchema) as raised:
            check_columns(_columns(session))
    finally:
        session.close()
    assert isinstance(raised.value, NotAStore)
    assert raised.value.problems == (
        "ResourceAttributes is JSON, not Map(LowCardinality(String), String)",
        "SpanAttributes is JSON, not Map(LowCardinality(String), String)",
        "Events.Attributes is Array(JSON), not Array(Map(LowCardinality(String), String))",
    )
    assert str(raised.value).startswith(f"{DATABASE}.{TABLE} is not the schema otel-llm reads")


def test_a_renamed_column_is_refused_by_name() -> None:
    """A future schema that renames a column the views read (StatusCode here) is refused by
    the script and by check_columns, naming it; one the views do not read (TraceState) is not."""
    session = _session_with(exporter_statements(templates=templates(SUPPORTED[-1])))
    try:
        session.query(f"ALTER TABLE {DATABASE}.{TABLE} RENAME COLUMN TraceState TO State")
        check_columns(_columns(session))
        session.query(f"ALTER TABLE {DATABASE}.{TABLE} RENAME COLUMN StatusCode TO Status")
        message = _refused(session)
        assert "has no column StatusCode of type LowCardinality(String)" in message
        with pytest.raises(UnsupportedSchema, match=r"no column StatusCode \(LowCardinality"):
            check_columns(_columns(session))
    finally:
        session.close()


def test_views_alone_cannot_be_created_on_a_json_table() -> None:
    """Why the check matters: on the json schema the typed columns cannot even be added (the
    dashboards would have nothing to read), but the error ClickHouse gives names no column of
    ours — the check's does."""
    session = _session_with(
        exporter_statements(templates=templates(SUPPORTED[-1], json_schema=True))
    )
    try:
        _, alter, *_ = otel_llm_statements()
        with pytest.raises(Exception) as failed:  # noqa: PT011 - chDB's own error class
            session.query(alter)
        assert "otel-llm" not in str(failed.value)
    finally:
        session.close()
