"""``otel-llm report``: the dashboards' panels, run on a store, in one self-contained HTML file.

Every panel of :data:`~otel_llm._show._dashboards._panels.PANELS` runs exactly as the Grafana
DuckDB data source runs it: its SQL for DuckDB with the macros and template variables expanded by
:func:`~otel_llm._show._sql._grafana_macros.expand` — "All" for service, model and source, the
threshold variable, the time range and its interval, and as the chosen call of the chunk
timeline the worst stalled call of the range. The rows (aggregated in SQL: a few hundred per
panel whatever the store holds) are drawn with Vega-Lite (:mod:`otel_llm._show._report._charts`)
or written as HTML tables (:mod:`otel_llm._show._report._html`), and the page carries the
Vega, Vega-Lite and vega-embed runtime inline (from ``vl-convert-python``): it opens from disk,
offline, with nothing fetched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

import duckdb

from otel_llm._errors import OtelLLMError
from otel_llm._figures import WALL_MS
from otel_llm._measure._stalls import validate_threshold_ms
from otel_llm._show._dashboards._panels import PANELS, Panel, variable_sql, worst_trace_ids
from otel_llm._show._sql._grafana_macros import QueryContext, Variable, all_of, expand, interval_for
from otel_llm._show._sql._panel_sql import (
    ALL_VALUE,
    AS_MEASURED,
    CALL,
    DUCKDB_PANELS,
    FILTERS,
    SERVICE,
    THRESHOLD,
)
from otel_llm._show._sql._table import as_utc
from otel_llm._show._sql._views import ATTEMPTS_VIEW, CALLS_VIEW
from otel_llm._show._store._breakdown import below_floor_note
from otel_llm._show._store._since import parse_since
from otel_llm._tune._tuning import Tuning, tune

REPORT_TUNE_CALLS: Final = 2_000
"""The newest calls of the range the "What hedging would buy" panel replays: twice what the
rule of ``otel-llm tune`` asks, about a second of model time (``otel-llm tune`` takes 10,000)."""
REPEAT_LIMIT: Final = 24
"""Copies of a panel repeated per source the page draws at most: those of the sources with
the most wall time in the range (1,000 copies took chromium 20-40 s to open); the page names
the others."""
THRESHOLD_KEY: Final = "--threshold-ms"
OUTPUT_KEY: Final = "--output"


@dataclass(frozen=True, slots=True)
class TimeRange:
    """The range the panels cover (UTC)."""

    start: datetime
    end: datetime

    @property
    def bounds(self) -> tuple[datetime, datetime]:
        """The range as the queries see it: whole seconds (the plugin's RFC 3339 literals),
        the end rounded up so the last call of the range is in it."""
        start = self.start.replace(microsecond=0)
        end = self.end.replace(microsecond=0) + timedelta(seconds=bool(self.end.microsecond))
        return start, end

    def context(self, variables: Mapping[str, Variable]) -> QueryContext:
        """Grafana's query context for this range (its :attr:`bounds`)."""
        start, end = self.bounds
        return QueryContext(start, end, interval_for(start, end), variables)


def store_range(conn: duckdb.DuckDBPyConnection, now: datetime) -> TimeRange:
    """Everything in the store: from the first call's start to the last start of a call or
    an attempt (a hedge leg starts after its call); ``now`` when the store has no call."""
    row = conn.execute(
        f"SELECT min(started_at), greatest(max(started_at), "
        f"(SELECT max(started_at) FROM {ATTEMPTS_VIEW})) FROM {CALLS_VIEW}"
    ).fetchone()
    if row is None or row[0] is None:
        return TimeRange(now, now)
    return TimeRange(as_utc(row[0]), as_utc(row[1]))


def variables(threshold_ms: int | None, trace_id: str = "") -> dict[str, Variable]:
    """The template variables as the report sets them: "All" filters, the threshold (or as
    measured), the chosen call."""
    chosen: dict[str, Variable] = {name: all_of([], all_value=ALL_VALUE) for name in FILTERS}
    chosen[THRESHOLD] = Variable(str(threshold_ms or AS_MEASURED))
    chosen[CALL] = Variable(trace_id)
    return chosen


def json_value(value: object) -> object:
    """A SQL value for the page's JSON: times as epoch milliseconds, decimals as floats, a
    non-finite float as null, anything else unknown as text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return json_value(float(value))
    if isinstance(value, datetime):
        return as_utc(value).timestamp() * 1000
    if isinstance(value, date):
        return json_value(datetime(value.year, value.month, value.day))
    if isinstance(value, timedelta):
        return value.total_seconds()
    return str(value)


@dataclass(frozen=True, slots=True)
class PanelResult:
    """One panel's rows, as the query returned them (of one copy, for a repeated panel)."""

    panel: Panel
    rows: list[tuple[Any, ...]]
    repeat_value: str | None = None
    """The value of the panel's repeat variable this copy shows (``None``: not repeated)."""
    copy: int = 0
    """The copy's number among the panel's copies."""
    others: tuple[str, ...] = ()
    """On a repeated panel's last copy: the values of its variable not drawn one by one
    (beyond :data:`REPEAT_LIMIT`, with the least wall time), in the variable's order."""

    @property
    def slot(self) -> str:
        """Names this copy on the page (the panel's key, numbered when repeated)."""
        return self.panel.key if self.panel.repeat is None else f"{self.panel.key}-{self.copy}"

    def records(self) -> list[dict[str, object]]:
        """The rows as JSON-ready mappings of column to value."""
        return [
            {c: json_value(v) for c, v in zip(self.panel.columns, row, strict=True)}
            for row in self.rows
        ]


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything the page shows."""

    store: Path
    time_range: TimeRange
    since: str | None
    threshold_ms: int | None
    interval: timedelta
    generated_at: datetime
    results: tuple[PanelResult, ...]
    chosen_call: str | None
    """The trace id of the chunk timeline's call: the worst stalled call of the range."""
    calls: int = 0
    """Calls that started in the range."""
    hedging: Tuning | None = None
    """``otel-llm tune`` on the range (``None``: no call to replay, or it failed)."""
    hedging_error: str | None = None
    """Why tune could not run on the range (the panel says so; the rest of the page stands)."""
    threshold_note: str | None = None
    """Why stall figures show as unknown at ``threshold_ms``: attempts whose chunk events were
    kept only for gaps above it (``otel-llm query``'s note; ``None``: none)."""


def _run(conn: duckdb.DuckDBPyConnection, sql: str, panel: str) -> list[tuple[Any, ...]]:
    try:
        return conn.execute(sql).fetchall()
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0]
        raise OtelLLMError(f"the {panel} panel's query failed on the store: {first}") from exc


def _results(
    conn: duckdb.DuckDBPyConnection, panel: Panel, context: QueryContext
) -> list[PanelResult]:
    """The panel's rows; a repeated panel's once per value of its variable in the range (as
    Grafana repeats it: that variable holds the one value in each copy)."""
    if panel.repeat is None:
        sql = expand(panel.sql(DUCKDB_PANELS), context, "duckdb")
        return [PanelResult(panel, _run(conn, sql, panel.key))]
    options = _run(
        conn,
        expand(variable_sql(DUCKDB_PANELS, panel.repeat), context, "duckdb", variable_query=True),
        "",
    )
    values = [str(value) for (value,) in options]
    drawn = _busiest(conn, panel.repeat, values, context)
    results = []
    for copy, value in enumerate(drawn):
        one = Variable(value, multi=True, include_all=True)
        scoped = replace(context, variables={**context.variables, panel.repeat: one})
        sql = expand(panel.sql(DUCKDB_PANELS), scoped, "duckdb")
        results.append(PanelResult(panel, _run(conn, sql, panel.key), value, copy))
    if results and len(drawn) < len(values):
        kept = set(drawn)
        others = tuple(value for value in values if value not in kept)
        results[-1] = replace(results[-1], others=others)
    return results or [PanelResult(panel, [])]


def _busiest(
    conn: duckdb.DuckDBPyConnection, name: str, values: list[str], context: QueryContext
) -> list[str]:
    """``values`` of variable ``name``, at most :data:`REPEAT_LIMIT` of them: those with the
    most wall time in the range (its calls' for a service, its attempts' for a source or
    model), in their order."""
    if len(values) <= REPEAT_LIMIT:
        return values
    view = CALLS_VIEW if name == SERVICE else ATTEMPTS_VIEW
    sql = expand(
        f"SELECT {name}, coalesce(sum({WALL_MS.name}), 0) FROM {view} "
        f"WHERE {DUCKDB_PANELS.time_filter('started_at')} AND {name} IS NOT NULL GROUP BY 1",
        context,
        "duckdb",
    )
    wall = {str(value): float(total) for value, total in _run(conn, sql, "")}
    ranked = sorted(values, key=lambda value: (-wall.get(value, 0.0), value))
    kept = set(ranked[:REPEAT_LIMIT])
    return [value for value in values if value in kept]


def collect(
    conn: duckdb.DuckDBPyConnection,
    store: Path,
    *,
    since: str | None = None,
    threshold_ms: int | None = None,
    now: datetime | None = None,
) -> ReportData:
    """Run every panel on the open store ``conn`` (of ``store``) for the range ``since``
    names (everything in the store when ``None``) at ``threshold_ms`` (as measured when
    ``None``)."""
    now = as_utc(now or datetime.now(UTC))
    if threshold_ms is not None:
        threshold_ms = validate_threshold_ms(threshold_ms, THRESHOLD_KEY)
    time_range = (
        TimeRange(parse_since(since, now), now) if since is not None else store_range(conn, now)
    )
    context = time_range.context(variables(threshold_ms))
    worst = _run(
        conn,
        expand(worst_trace_ids(DUCKDB_PANELS), context, "duckdb", variable_query=True),
        "worst call",
    )
    chosen = str(worst[0][0]) if worst else None
    context = time_range.context(variables(threshold_ms, chosen or ""))
    results = tuple(result for panel in PANELS for result in _results(conn, panel, context))
    calls = _run(
        conn,
        f"SELECT count(*) FROM {CALLS_VIEW} WHERE "
        + expand(DUCKDB_PANELS.time_filter("started_at"), context, "duckdb"),
        "calls",
    )[0][0]
    hedging: Tuning | None = None
    hedging_error: str | None = None
    try:  # the panel must never take the report down: it says why instead
        start = time_range.start if since is not None else None  # else all it holds
        hedging = tune(conn, start=start, max_calls=REPORT_TUNE_CALLS)
    except (OtelLLMError, duckdb.Error) as exc:
        hedging_error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    note = below_floor_note(store, threshold_ms) if threshold_ms is not None else None
    return ReportData(
        store=store,
        time_range=time_range,
        since=since,
        threshold_ms=threshold_ms,
        interval=context.interval,
        generated_at=now,
        results=results,
        chosen_call=chosen,
        calls=int(calls),
        hedging=hedging if hedging is not None and hedging.sample.calls else None,
        hedging_error=hedging_error,
        threshold_note=note,
    )


def panel_rows(data: ReportData) -> Mapping[str, Sequence[tuple[Any, ...]]]:
    """Each panel's rows by key, a repeated panel's copies one after the other."""
    rows: dict[str, list[tuple[Any, ...]]] = {}
    for result in data.results:
        rows.setdefault(result.panel.key, []).extend(result.rows)
    return rows
