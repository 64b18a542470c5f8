"""Canned queries: the wall / stall / net-generation breakdown and the worst stalls, in DuckDB's
SQL or (``dialect=CLICKHOUSE``) their ClickHouse twins.

Both read the winning attempt of every call through ``llm_winners`` or
``llm_winners_at(threshold)``, so the same query answers "as measured" (the configured
threshold) and "what if the threshold were N ms".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import duckdb

from otel_llm._errors import ConfigurationError
from otel_llm._figures import (
    CHUNK_COUNT,
    GENERATION_MS,
    MAX_INTER_CHUNK_MS,
    STALL_COUNT,
    STALL_MS,
    TTFT_MS,
    WALL_MS,
    Figure,
)
from otel_llm._measure._stalls import validate_threshold_ms
from otel_llm._show._sql._table import EVENTS_FLOOR_COLUMN, TABLE
from otel_llm._show._sql._views import (
    DUCKDB,
    WINNERS_AT,
    WINNERS_VIEW,
    Dialect,
    could_stall_at,
)
from otel_llm._show._store._access import open_store

if TYPE_CHECKING:
    from duckdb.sqltypes import DuckDBPyType


@dataclass(frozen=True, slots=True)
class Table:
    """A query result: column names and rows."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Spelled:
    """A date, time, timestamp or interval of a query's result, as DuckDB spells it.

    Python's values cannot hold these exactly: a ``datetime`` stops at microseconds (the store
    keeps nanoseconds), reads DuckDB's ``infinity`` as year 9999, and a ``timedelta`` has no
    months and overflows where an ``INTERVAL`` does not. DuckDB's text of the value is exact."""

    text: str
    """DuckDB's text of the value (``2026-01-31 12:00:00.123456789``, ``infinity``,
    ``1 month 2 days 00:00:03``)."""
    type: str
    """The DuckDB type's id (``timestamp_ns``, ``timestamp with time zone``, ``interval``)."""

    def __str__(self) -> str:
        return self.text


SPELLED_TYPES: Final = frozenset(
    {
        "date",
        "time",
        "time_ns",
        "time with time zone",
        "timestamp",
        "timestamp_s",
        "timestamp_ms",
        "timestamp_ns",
        "timestamp with time zone",
        "interval",
    }
)
"""The DuckDB types (by id) whose values a query of one's own gets as :class:`Spelled`."""
_NESTED: Final = frozenset({"list", "array", "struct", "tuple", "map", "union"})
"""The DuckDB types (by id) that hold other values."""


MODEL_LABEL = "coalesce(provider, '?') || '/' || coalesce(model, '?')"
"""A row's provider and model as the tables name them (``?`` for one a span does not name, as
the report's series are named; never NULL, which would read the same for every such row)."""

RUN_ATTRIBUTE = "service.instance.id"
"""The resource attribute that tells one run (one process) from the others in a shared file."""


def _run_filter(run: str, dialect: Dialect) -> str:
    """SQL restricting winners to the calls of one run."""
    if not run.isascii() or not run.replace("-", "").isalnum():
        raise ConfigurationError(RUN_ATTRIBUTE, f"a run id is letters, digits and '-', not {run!r}")
    return f"""call_span_id IN (
            SELECT "SpanId" FROM {dialect.relation(TABLE)}
            WHERE "ResourceAttributes"['{RUN_ATTRIBUTE}'] = '{run}'
        )"""


def _winners(
    threshold_ms: int | None,
    run: str | None,
    dialect: Dialect,
    since: datetime | None = None,
    *,
    stalled: bool = False,
) -> str:
    """Winning attempts at ``threshold_ms`` (``None``: each as measured), of one run or all,
    of the calls that started at or after ``since`` (``None``: all): ``llm_winners``, which
    reads most calls' winners from the call rows alone. ``stalled``: only those that can have
    stalled at a re-derived threshold (:func:`could_stall_at`)."""
    conditions = [] if run is None else [_run_filter(run, dialect)]
    if threshold_ms is None:
        source = dialect.relation(WINNERS_VIEW)
    else:
        threshold = validate_threshold_ms(threshold_ms, "--threshold-ms")
        source = dialect.at_threshold(threshold, WINNERS_AT)
        if stalled:
            conditions.append(could_stall_at(MAX_INTER_CHUNK_MS.name, str(threshold)))
    if since is not None:
        conditions.append(f"started_at >= {dialect.instant(since)}")
    where = f"\n        WHERE {' AND '.join(conditions)}" if conditions else ""
    return f"""
        SELECT * FROM {source}{where}
    """


def _seconds(figure: Figure, dialect: Dialect, digits: int, *, total: bool = False) -> str:
    """A millisecond figure in seconds, rounded (``total``: summed over the group)."""
    ms = f"sum({figure.name})" if total else figure.name
    return dialect.round(f"{ms} / 1000.0", digits)


def _stalled(dialect: Dialect) -> str:
    """The calls that stalled; unknown (NULL, never 0) where no call's stall count is known."""
    stalls = STALL_COUNT.name
    return f"CASE WHEN count({stalls}) = 0 THEN NULL ELSE {dialect.count_if(f'{stalls} > 0')} END"


def breakdown_sql(
    threshold_ms: int | None = None,
    *,
    run: str | None = None,
    since: datetime | None = None,
    dialect: Dialect = DUCKDB,
) -> str:
    """Per provider and model: calls, wall vs stall vs net generation, stall share, TTFT
    (``run``: only the calls whose spans carry that :data:`RUN_ATTRIBUTE`; ``since``: only
    the calls that started then or later)."""
    wall, stall = WALL_MS.name, STALL_MS.name
    share = dialect.round(f"100.0 * sum({stall}) / nullif(sum({wall}), 0)", 1)
    return f"""
    WITH w AS ({_winners(threshold_ms, run, dialect, since)})
    SELECT
        {MODEL_LABEL} AS model,
        count(*) AS calls,
        {_seconds(WALL_MS, dialect, 1, total=True)} AS wall_s,
        {_seconds(STALL_MS, dialect, 1, total=True)} AS stall_s,
        {_seconds(GENERATION_MS, dialect, 1, total=True)} AS net_s,
        {share} AS "stall_%",
        {_stalled(dialect)} AS stalled,
        {dialect.count_if("call_hedges > 0")} AS hedged,
        {dialect.count_if("call_hedge_won")} AS hedge_wins,
        {dialect.round(f"{dialect.quantile(TTFT_MS.name, 0.5)} / 1000.0", 2)} AS ttft_p50,
        {dialect.round(f"{dialect.quantile(wall, 0.5)} / 1000.0", 2)} AS wall_p50,
        {dialect.round(f"{dialect.quantile(wall, 0.99)} / 1000.0", 2)} AS wall_p99
    FROM w
    GROUP BY provider, w.model
    ORDER BY 1
    """


def below_floor_sql(threshold_ms: int) -> str:
    """Attempts whose chunk events start above ``threshold_ms`` (their stall figures cannot be
    re-derived there), and the highest such floor."""
    floor = f'"{EVENTS_FLOOR_COLUMN}"'
    return f"SELECT count(*), max({floor}) FROM {TABLE} WHERE {floor} > {int(threshold_ms)}"


def below_floor_note(path: Path, threshold_ms: int) -> str | None:
    """Why the breakdown at ``threshold_ms`` shows unknown stall figures, or ``None``."""
    ((count, floor),) = run_query(path, below_floor_sql(threshold_ms), canned=True).rows
    if not count:
        return None
    return (
        f"note: {count:,} attempts recorded chunk events only for gaps above {floor} ms: at "
        f"{threshold_ms} ms their stall figures cannot be re-derived and show as empty (unknown, "
        f"not 0); use --threshold-ms {floor} or above for those calls' figures"
    )


def totals_sql(*, run: str | None = None, dialect: Dialect = DUCKDB) -> str:
    """Per provider and model, as measured: calls, stalls, stalled calls, stall and wall ms."""
    return f"""
    WITH w AS ({_winners(None, run, dialect)})
    SELECT
        {MODEL_LABEL} AS model,
        count(*) AS calls,
        coalesce(sum({STALL_COUNT.name}), 0) AS stalls,
        {dialect.count_if(f"{STALL_COUNT.name} > 0")} AS stalled,
        coalesce(sum({STALL_MS.name}), 0) AS {STALL_MS.name},
        coalesce(sum({WALL_MS.name}), 0) AS {WALL_MS.name}
    FROM w
    GROUP BY provider, w.model
    ORDER BY 1
    """


MAX_LIMIT: Final = 2**63 - 1
"""The largest ``LIMIT`` DuckDB takes; a larger one (``--limit`` is any integer) is every row."""


def worst_stalls_sql(
    limit: int = 5,
    threshold_ms: int | None = None,
    *,
    run: str | None = None,
    since: datetime | None = None,
    dialect: Dialect = DUCKDB,
) -> str:
    """The ``limit`` calls whose winning attempt lost the most time to stalls (of those that
    started at or after ``since``)."""
    return f"""
    WITH w AS ({_winners(threshold_ms, run, dialect, since, stalled=True)})
    SELECT
        left(trace_id, 16) AS trace,
        {MODEL_LABEL} AS model,
        {_seconds(WALL_MS, dialect, 2)} AS wall_s,
        {_seconds(STALL_MS, dialect, 2)} AS stall_s,
        {STALL_COUNT.name} AS stalls,
        {_seconds(MAX_INTER_CHUNK_MS, dialect, 2)} AS longest_gap,
        {_seconds(TTFT_MS, dialect, 2)} AS ttft,
        {CHUNK_COUNT.name} AS chunks
    FROM w
    WHERE {STALL_MS.name} > 0
    ORDER BY {STALL_MS.name} DESC
    LIMIT {min(int(limit), MAX_LIMIT)}
    """


def run_query(path: Path, sql: str, *, canned: bool = False) -> Table:
    """Run ``sql`` read-only on the store at ``path`` (a segment directory, or a single-file
    store of an earlier version). ``canned``: ``sql`` is one of this module's queries, which
    need the views; otherwise the times of the result (of the last statement) are
    :class:`Spelled`, exact. Raises :class:`ConfigurationError` for SQL with
    no statement in it."""
    with open_store(path, views=canned) as conn:
        if canned:
            cursor = conn.execute(sql)
            return Table(tuple(d[0] for d in cursor.description or ()), cursor.fetchall())
        statements = duckdb.extract_statements(sql)
        if not statements:
            raise ConfigurationError("SQL", "no statement to run (only blanks or comments)")
        *before, last = statements
        for statement in before:
            conn.execute(statement).complete()  # its rows unread: the next may run
        return _spelled_result(conn.sql(last))  # EXECUTE, PIVOT, CALL, PRAGMA run here


def _spelled_result(relation: duckdb.DuckDBPyRelation) -> Table:
    """The rows of ``relation``, every time in them (nested ones too) :class:`Spelled`: the
    query runs once, and those columns of its rows are cast to DuckDB's text of them (the
    rows, not the query's text: a comment after its ``;`` would end a query wrapped in casts)."""
    columns, types = tuple(relation.columns), relation.types
    casts = [_spelled_type(type_) for type_ in types]
    if not any(casts):
        return Table(columns, relation.fetchall())
    projected = relation.materialize().project(
        ", ".join(
            f"#{i}" if cast is None else f"CAST(#{i} AS {cast})"
            for i, cast in enumerate(casts, start=1)
        )
    )
    rows = [
        tuple(_spelled(value, type_) for value, type_ in zip(row, types, strict=True))
        for row in projected.fetchall()
    ]
    return Table(columns, rows)


def _children(type_: DuckDBPyType) -> list[tuple[str, DuckDBPyType]]:
    """The fields of a struct (a tuple's have no names), the key and value of a map, the
    element of a list or array."""
    return [
        (name, child)
        for name, child in type_.children
        if isinstance(child, type(type_))  # not an array's size, an enum's values
    ]


def _spelled_type(type_: DuckDBPyType) -> str | None:
    """``type_`` with each time in it as ``VARCHAR``, or ``None`` when it holds none."""
    kind = type_.id
    if kind in SPELLED_TYPES:
        return "VARCHAR"
    if kind == "variant":  # any value: its JSON, times as DuckDB's text in it
        return "JSON"
    if kind not in _NESTED or kind == "union":
        # a union's value comes without its member's name: spelled, a time in it could not be
        # told from a text member, and every member would become text (3 read as "3"); it is
        # the member's value as Python has it (a time to the microsecond)
        return None
    parts = [(name, child, _spelled_type(child)) for name, child in _children(type_)]
    if all(cast is None for _, _, cast in parts):
        return None
    spelled = [cast or str(child) for _, child, cast in parts]
    if kind == "list":
        return f"{spelled[0]}[]"
    if kind == "array":
        (size,) = (n for name, n in type_.children if name == "size")
        return f"{spelled[0]}[{size}]"
    if kind == "map":
        return f"MAP({spelled[0]}, {spelled[1]})"
    if kind == "tuple":  # a struct with no field names: row(...), (a, b)
        return f"TUPLE({', '.join(spelled)})"
    fields = ", ".join(
        f'"{name.replace(chr(34), chr(34) * 2)}" {cast}'
        for (name, _, _), cast in zip(parts, spelled, strict=True)
    )
    return f"STRUCT({fields})"


def _spelled(value: Any, type_: DuckDBPyType) -> Any:
    """``value``, of the query's ``type_``, fetched with its times as text: those texts as
    :class:`Spelled`."""
    kind = type_.id
    if value is None:
        return None
    if kind in SPELLED_TYPES:
        return Spelled(value, kind)
    if kind == "variant":
        return json.loads(value, parse_float=Decimal)  # a number as exact as its text
    if kind in ("list", "array"):
        ((_, item),) = _children(type_)
        return [_spelled(element, item) for element in value]
    if kind == "map":
        (_, key), (_, item) = _children(type_)
        if key.id in _NESTED:  # keys Python cannot hash: DuckDB gives the keys and values apart
            return {
                "key": [_spelled(k, key) for k in value["key"]],
                "value": [_spelled(v, item) for v in value["value"]],
            }
        return {_spelled(k, key): _spelled(v, item) for k, v in value.items()}
    if kind == "struct":
        return {name: _spelled(value[name], child) for name, child in _children(type_)}
    if kind == "tuple":
        return tuple(
            _spelled(item, child) for item, (_, child) in zip(value, _children(type_), strict=True)
        )
    return value
