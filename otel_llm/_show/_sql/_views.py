"""The views ``llm_attempts`` and ``llm_calls`` and the re-threshold ``llm_attempts_at(T)``,
generated for DuckDB and for ClickHouse from the one table of columns and figures.

A view column is an alias over one ``otel_traces`` column (:data:`ATTEMPT_COLUMNS`,
:data:`CALL_COLUMNS`); every figure of :data:`otel_llm._figures.FIGURES` appears under its own
name. ``llm_attempts_at(T)`` has the columns of ``llm_attempts`` in the same order, with the
figures that depend on the threshold (``Figure.at_threshold``) re-derived from the stored chunk
gaps at T and ``stall_threshold_ms`` = T. A :class:`Dialect` spells the few constructs the two
engines write differently (lambdas, integer division, a parameterized view, rounding).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from otel_llm import _semconv as sc
from otel_llm._figures import (
    CHUNK_COUNT,
    FIGURES,
    GENERATION_MS,
    STALL_COUNT,
    STALL_MS,
    WALL_MS,
    Figure,
)
from otel_llm._measure._stalls import NS_PER_MS
from otel_llm._show._sql._table import (
    ALL_COLUMNS,
    CHUNK_GAP_COLUMN,
    EVENTS_FLOOR_COLUMN,
    METERING_COLUMN,
    OUTCOME_COLUMN,
    ROLE_COLUMN,
    STREAM_COLUMN,
    TABLE,
    THRESHOLD_COLUMN,
    naive_utc,
)

ATTEMPTS_VIEW: Final = "llm_attempts"
CALLS_VIEW: Final = "llm_calls"
ATTEMPTS_AT: Final = "llm_attempts_at"
WINNERS_VIEW: Final = "llm_winners"
WINNERS_AT: Final = "llm_winners_at"
THRESHOLD_PARAMETER: Final = "threshold_ms"
"""The parameter of :data:`ATTEMPTS_AT`, in milliseconds."""


def _utc_text(at: datetime) -> str:
    """``at`` in UTC as ``YYYY-MM-DD HH:MM:SS.ffffff`` (a naive time is read as UTC)."""
    return naive_utc(at).isoformat(sep=" ", timespec="microseconds")


class Dialect:
    """How an engine spells what the views need; this base spells it for DuckDB."""

    def relation(self, name: str) -> str:
        """A table or view as the views and queries name it."""
        return name

    def parameter(self) -> str:
        """The threshold inside :data:`ATTEMPTS_AT`'s body."""
        return THRESHOLD_PARAMETER

    def filter(self, array: str, var: str, condition: str) -> str:
        """The elements ``var`` of ``array`` for which ``condition`` is true (NULL: dropped)."""
        return f"list_filter({array}, lambda {var}: {condition})"

    def array_sum(self, array: str) -> str:
        """The sum of the non-NULL elements (NULL for an empty list), as BIGINT: DuckDB's
        HUGEINT would reach Grafana as text (the DuckDB plugin has no number type that wide)."""
        return f"CAST(list_sum({array}) AS BIGINT)"

    def length(self, array: str) -> str:
        """The number of elements."""
        return f"len({array})"

    def int_div(self, left: str, right: str) -> str:
        """Integer division, rounding towards zero (the operands here are never negative)."""
        return f"{left} // {right}"

    def round(self, expr: str, digits: int) -> str:
        """DuckDB's ``round`` of a DOUBLE at ``digits`` decimals (see :func:`_duckdb_round`)."""
        return f"round({expr}, {digits})"

    def instant(self, at: datetime) -> str:
        """``at`` as a literal of ``Timestamp``'s type (UTC; a naive time is read as UTC)."""
        return f"TIMESTAMP '{_utc_text(at)}'"

    def quantile(self, expr: str, q: float) -> str:
        """The continuous quantile (linear interpolation between the closest ranks, R-7: the
        one definition, :func:`otel_llm._quantile.quantile`)."""
        return f"quantile_cont({expr}, {q})"

    def count_if(self, condition: str) -> str:
        """Rows of the group for which ``condition`` is true."""
        return f"count(*) FILTER (WHERE {condition})"

    def prelude(self) -> tuple[str, ...]:
        """Statements the views and canned queries need before them."""
        return ()

    def create_view(self, name: str, select: str) -> str:
        """The statement that (re)defines view ``name``."""
        return f"CREATE OR REPLACE VIEW {self.relation(name)} AS\n{select}"

    def create_at_threshold(self, name: str, select: str) -> str:
        """The statement that (re)defines ``name`` taking :data:`THRESHOLD_PARAMETER`."""
        return f"CREATE OR REPLACE MACRO {name}({THRESHOLD_PARAMETER}) AS TABLE\n{select}"

    def at_threshold(self, threshold_ms: int, name: str = ATTEMPTS_AT) -> str:
        """:data:`ATTEMPTS_AT` (or :data:`WINNERS_AT`) at ``threshold_ms``, as a query's FROM
        names it."""
        return f"{name}({int(threshold_ms)})"


ROUND_FUNCTION: Final = "otel_llm_round"
"""ClickHouse function ``(x, 10^digits)``: DuckDB's ``round`` of a DOUBLE."""


def _duckdb_round() -> str:
    """``round(x, digits)`` as DuckDB 2 computes it for a DOUBLE — the exact binary value
    rounded at ``s = 10^digits``, exact ties away from zero (0.305 → 0.3: the double is below
    the tie; 0.125 → 0.13) — for ``s`` ≤ 2^7. ``abs(x) * s`` may round onto a tie; the error
    of that product (Dekker's split of x, exact for such ``s``) then says on which side the
    exact value lies."""
    ax = "abs(x)"
    y = f"({ax} * s)"
    down = f"floor({y})"
    high = f"(134217729 * {ax} - (134217729 * {ax} - {ax}))"
    error = f"(({high} * s - {y}) + ({ax} - {high}) * s)"
    return (
        f"sign(x) * multiIf({y} - {down} > 0.5, {down} + 1, {y} - {down} < 0.5, {down}, "
        f"{error} < 0, {down}, {down} + 1) / s"
    )


@dataclass(frozen=True, slots=True)
class ClickHouse(Dialect):
    """ClickHouse (tested with chDB's engine 26.9): views in ``database`` (``ON CLUSTER`` when
    ``cluster`` is set), the re-threshold a parameterized view, ``round`` as DuckDB rounds
    (ClickHouse's own ``round`` sends a float's ties to even: 12.25 → 12.2, DuckDB's 12.3)."""

    database: str = "otel"
    cluster: str | None = None

    def relation(self, name: str) -> str:
        return f"{self.database}.{name}"

    def on_cluster(self) -> str:
        """`` ON CLUSTER `name``` for a cluster's DDL, else nothing."""
        if self.cluster is None:
            return ""
        return " ON CLUSTER `" + self.cluster.replace("`", "``") + "`"

    def create_view(self, name: str, select: str) -> str:
        return f"CREATE OR REPLACE VIEW {self.relation(name)}{self.on_cluster()} AS\n{select}"

    def parameter(self) -> str:
        return "{" + THRESHOLD_PARAMETER + ":Int64}"

    def filter(self, array: str, var: str, condition: str) -> str:
        return f"arrayFilter({var} -> {condition}, {array})"

    def array_sum(self, array: str) -> str:
        return f"arraySum(x -> ifNull(x, 0), {array})"  # 0 for an empty array: coalesced alike

    def length(self, array: str) -> str:
        return f"toInt64(length({array}))"  # BIGINT, as DuckDB's len: no UInt64/Int64 Variant

    def int_div(self, left: str, right: str) -> str:
        return f"intDiv({left}, {right})"

    def round(self, expr: str, digits: int) -> str:
        return f"{ROUND_FUNCTION}({expr}, {10**digits})"

    def prelude(self) -> tuple[str, ...]:
        return (
            f"CREATE OR REPLACE FUNCTION {ROUND_FUNCTION}{self.on_cluster()} AS (x, s) -> "
            f"{_duckdb_round()}",
        )

    def quantile(self, expr: str, q: float) -> str:
        return f"quantileExactInclusive({q})({expr})"

    def instant(self, at: datetime) -> str:
        return f"toDateTime64('{_utc_text(at)}', 9, 'UTC')"

    def count_if(self, condition: str) -> str:
        return f"countIf({condition})"

    def create_at_threshold(self, name: str, select: str) -> str:
        return self.create_view(name, select)

    def at_threshold(self, threshold_ms: int, name: str = ATTEMPTS_AT) -> str:
        return f"{self.relation(name)}({THRESHOLD_PARAMETER}={int(threshold_ms)})"


DUCKDB: Final = Dialect()
CLICKHOUSE: Final = ClickHouse()


@dataclass(frozen=True, slots=True)
class ViewColumn:
    """One column of a view: ``alias`` over the ``otel_traces`` column ``column``."""

    alias: str
    column: str


def _figure_columns() -> tuple[ViewColumn, ...]:
    return tuple(ViewColumn(figure.name, figure.column) for figure in FIGURES)


STARTED_AT: Final = ViewColumn("started_at", "Timestamp")
TRACE_ID: Final = ViewColumn("trace_id", "TraceId")
SPAN_ID: Final = ViewColumn("span_id", "SpanId")
WINNER_GAPS_FLOOR: Final = ViewColumn("winner_gaps_floor_ms", "WinnerGapsFloorMs")
"""On a call row: the floor of its winner's gaps there (NULL: the row does not say what its
winner was; a call without a winner says so with a floor and no winner attempt)."""
WINNER_ATTEMPT: Final = ViewColumn("winner_attempt", "CallWinnerAttempt")
"""On a call row: the number of the attempt that won (NULL: none did)."""
WINNER_GAP_COLUMN: Final = "WinnerGapNs"
"""On a call row: its winner's gaps longer than :data:`WINNER_GAPS_FLOOR`, in ns."""
THRESHOLD: Final = ViewColumn("stall_threshold_ms", THRESHOLD_COLUMN)
"""The stall threshold in force when the figures were measured (T in ``llm_attempts_at``)."""

IDENTITY: Final = (
    ViewColumn("service", "ServiceName"),
    ViewColumn("span_name", "SpanName"),
    ViewColumn("operation", "Operation"),
    ViewColumn("provider", "Provider"),
    ViewColumn("model", "RequestModel"),
    ViewColumn("response_model", "ResponseModel"),
    ViewColumn("source", "Source"),
    ViewColumn("stream", STREAM_COLUMN),
)
"""The columns that say what a span was, the same in ``llm_attempts`` and ``llm_calls``."""

ATTEMPT_COLUMNS: Final = (
    STARTED_AT,
    TRACE_ID,
    SPAN_ID,
    ViewColumn("call_span_id", "ParentSpanId"),
    *IDENTITY,
    ViewColumn("leg", "Leg"),
    ViewColumn("attempt", "AttemptNumber"),
    ViewColumn("outcome", OUTCOME_COLUMN),
    ViewColumn("error_type", "ErrorType"),
    ViewColumn("status_code", "StatusCode"),
    *_figure_columns(),
    THRESHOLD,
    ViewColumn("metering_status", METERING_COLUMN),
    ViewColumn("input_tokens", "InputTokens"),
    ViewColumn("output_tokens", "OutputTokens"),
    ViewColumn("duration_ns", "Duration"),
)

CALL_COLUMNS: Final = (
    STARTED_AT,
    TRACE_ID,
    SPAN_ID,
    *IDENTITY,
    ViewColumn("status_code", "StatusCode"),
    ViewColumn("error_type", "ErrorType"),
    ViewColumn("attempts", "CallAttempts"),
    ViewColumn("hedges", "CallHedges"),
    ViewColumn("hedge_won", "CallHedgeWon"),
    WINNER_ATTEMPT,
    ViewColumn("hedge_waste_tokens", "HedgeWasteTokens"),
    ViewColumn("hedge_waste_chunks", "HedgeWasteChunks"),
    *_figure_columns(),
    THRESHOLD,
    ViewColumn("winner_model", "WinnerModel"),
    WINNER_GAPS_FLOOR,
    ViewColumn("input_tokens", "InputTokens"),
    ViewColumn("output_tokens", "OutputTokens"),
    ViewColumn("duration_ns", "Duration"),
)

CALL_OF_ATTEMPT: Final = ("call_span_id", "attempt")
"""The columns of ``llm_attempts`` that name an attempt's call and its number in that call."""
WINNER_OF_CALL: Final = (SPAN_ID.alias, WINNER_ATTEMPT.alias)
"""The columns of ``llm_calls`` that match :data:`CALL_OF_ATTEMPT` for the call's winner."""


def winner_on(calls: str, attempts: str) -> str:
    """The join condition that pairs each call (alias ``calls``) with its winning attempt
    (alias ``attempts``): the attempt of that call whose number is the call's winner. The one
    definition of "the winning attempt" that every summary and panel uses."""
    pairs = zip(CALL_OF_ATTEMPT, WINNER_OF_CALL, strict=True)
    return " AND ".join(f"{attempts}.{a} = {calls}.{c}" for a, c in pairs)


@dataclass(frozen=True, slots=True)
class WinnerColumn:
    """One column of ``llm_winners``: ``alias`` over the call row's ``column`` (the figures
    its winner left there), or ``joined`` (``c.`` a call's, ``a.`` its winner's) for a call
    whose row does not carry them."""

    alias: str
    column: str
    joined: str


WINNER_STARTED_AT: Final = WinnerColumn("winner_started_at", "WinnerStartedAt", "a.started_at")
"""When the winning attempt started (the call's ``started_at`` is when the call did)."""

WINNER_COLUMNS: Final = (
    WinnerColumn("started_at", "Timestamp", "c.started_at"),
    WINNER_STARTED_AT,
    WinnerColumn("trace_id", "TraceId", "c.trace_id"),
    WinnerColumn("call_span_id", "SpanId", "c.span_id"),
    WinnerColumn("service", "ServiceName", "a.service"),
    WinnerColumn("operation", "Operation", "a.operation"),
    WinnerColumn("provider", "WinnerProvider", "a.provider"),
    WinnerColumn("model", "WinnerModel", "a.model"),
    WinnerColumn("source", "WinnerSource", "a.source"),
    WinnerColumn("stream", STREAM_COLUMN, "a.stream"),
    WinnerColumn("attempt", WINNER_ATTEMPT.column, "a.attempt"),
    *(WinnerColumn(f.name, f.column, f"a.{f.name}") for f in FIGURES),
    WinnerColumn(THRESHOLD.alias, THRESHOLD.column, f"a.{THRESHOLD.alias}"),
    WinnerColumn("metering_status", METERING_COLUMN, "a.metering_status"),
    WinnerColumn("call_hedges", "CallHedges", "c.hedges"),
    WinnerColumn("call_hedge_won", "CallHedgeWon", "c.hedge_won"),
)
"""The columns of ``llm_winners`` and ``llm_winners_at(T)``: one row per call that has a
winner — when it and its winner started, what answered, the winner's figures and the call's
hedges. Service, operation and stream are read from the call row: otel-llm gives a call and its
attempts the same (one resource, one request), so the joined rows read them from the attempt."""

_unknown = {
    *(c.column for c in (*ATTEMPT_COLUMNS, *CALL_COLUMNS)),
    *(c.column for c in WINNER_COLUMNS),
} - set(ALL_COLUMNS)
assert not _unknown, f"view columns over no otel_traces column: {_unknown}"


def _q(column: str) -> str:
    return f'"{column}"'


def _select(columns: tuple[ViewColumn, ...]) -> str:
    return ",\n    ".join(f"{_q(c.column)} AS {c.alias}" for c in columns)


def _role(role: str) -> str:
    return f"""{_q(ROLE_COLUMN)} = '{role}'"""


def _measured(figure: Figure) -> str:
    """The figure as the processor measured it, inside ``llm_attempts_at``."""
    return f"measured_{figure.name}"


_STALL_GAPS: Final = "stall_gaps"
_STALL_TOTAL: Final = "stall_total_ms"


def _rederived(dialect: Dialect) -> Mapping[Figure, tuple[str, str, str | None]]:
    """For each threshold-dependent figure: its value from the chunk gaps at T when they can
    decide it, its measured value when T is the measured threshold, and its value for an
    attempt that cannot stall (not streamed, fewer than two chunks), if any."""
    wall = WALL_MS.name
    return {
        GENERATION_MS: (
            f"greatest(0, {wall} - {_STALL_TOTAL})",
            f"greatest(0, {wall} - {_measured(STALL_MS)})",
            wall,
        ),
        STALL_MS: (_STALL_TOTAL, _measured(STALL_MS), None),
        STALL_COUNT: (dialect.length(_STALL_GAPS), _measured(STALL_COUNT), None),
    }


assert set(_rederived(DUCKDB)) == {f for f in FIGURES if f.at_threshold}, (
    "every threshold-dependent figure needs its re-derivation in llm_attempts_at"
)


EVENTS_FLOOR_NS: Final = f"coalesce({_q(EVENTS_FLOOR_COLUMN)}, 0) * {NS_PER_MS}"
"""An attempt's chunk-event floor in ns (0 without one): its chunk events hold every longer gap."""
GAPS_COUNTED: Final = (
    f"coalesce({_q(STREAM_COLUMN)}, false) AND {_q(METERING_COLUMN)} = '{sc.METERING_EXACT}'"
)
"""The attempts whose gaps the chunk-gap bars count: streamed and metered exactly, so each gap
above :data:`EVENTS_FLOOR_NS` is one chunk event and the others are chunks - 1 - those."""

_REDERIVE_READS: Final = (
    OUTCOME_COLUMN,
    METERING_COLUMN,
    STREAM_COLUMN,
    CHUNK_COUNT.column,
    EVENTS_FLOOR_COLUMN,
    CHUNK_GAP_COLUMN,
)
"""What :func:`_rederived_at` reads of a row besides its kept columns and measured figures."""


def could_stall_at(longest_gap_ms: str, threshold_ms: str) -> str:
    """A condition every row with a stall at the re-derived threshold ``threshold_ms`` meets:
    a gap longer than T makes the longest gap (``longest_gap_ms``, in whole ms, rounded down)
    at least T, and a row without a longest gap has no two chunks, so no stall. A plain
    comparison on a stored column, so DuckDB tests it in the scan, before any row's gaps are
    read or filtered (the same rows, and on a store where few calls stalled at T, a fraction of
    the work)."""
    return f"{longest_gap_ms} >= {threshold_ms}"


def _rederived_at(
    dialect: Dialect,
    columns: tuple[ViewColumn, ...],
    where: str,
    *,
    gaps: str = CHUNK_GAP_COLUMN,
    floor: str = EVENTS_FLOOR_COLUMN,
    rows: str | None = None,
) -> str:
    """``columns`` of the rows of ``otel_traces`` (or of the relation ``rows``, which has its
    columns) that satisfy ``where``, with the figures that depend on the threshold re-derived
    at T from the gaps in column ``gaps`` (every gap longer than the row's ``floor`` in ms is
    there) and ``stall_threshold_ms`` = T: the one rule of ``llm_attempts_at`` and
    ``llm_winners_at``."""
    t = dialect.parameter()
    rederived = _rederived(dialect)
    kept = tuple(
        c
        for c in columns
        if c != THRESHOLD and not any(f.at_threshold and f.name == c.alias for f in FIGURES)
    )
    measured = ",\n        ".join(
        f"{_q(figure.column)} AS {_measured(figure)}" for figure in rederived
    )
    kept_sql = ",\n        ".join(f"{_q(c.column)} AS {c.alias}" for c in kept)
    outcomes = ", ".join(f"'{outcome}'" for outcome in sorted(sc.OUTCOMES_WITHOUT_FIGURES))
    complete = f"'{sc.METERING_EXACT}', '{sc.METERING_NOT_STREAMED}'"
    gap_over = dialect.filter(_q(gaps), "g", f"g > CAST({t} AS BIGINT) * {NS_PER_MS}")
    by_figure = {figure.name: figure for figure in rederived}
    outputs: list[str] = []
    for column in columns:
        if column == THRESHOLD:
            outputs.append(f"CAST({t} AS BIGINT) AS {column.alias}")
        elif column.alias in by_figure:
            usable, here, unobservable = rederived[by_figure[column.alias]]
            tail = (
                f"\n        WHEN NOT cancelled AND complete AND NOT observable THEN {unobservable}"
                if unobservable is not None
                else ""
            )
            outputs.append(
                f"CASE\n        WHEN usable THEN {usable}\n        WHEN measured_here THEN {here}"
                f"{tail}\n    END AS {column.alias}"
            )
        else:
            outputs.append(column.alias)
    output_sql = ",\n    ".join(outputs)
    return f"""WITH flagged AS (
    SELECT
        {kept_sql},
        {measured},
        {t} = {_q(THRESHOLD.column)} AND {_q(STALL_MS.column)} IS NOT NULL AS measured_here,
        coalesce({_q(OUTCOME_COLUMN)}, '') IN ({outcomes}) AS cancelled,
        coalesce({_q(METERING_COLUMN)}, '') IN ({complete}) AS complete,
        coalesce({_q(STREAM_COLUMN)}, false) AND coalesce({_q(CHUNK_COUNT.column)}, 0) >= 2
            AS observable,
        {t} >= coalesce({_q(floor)}, 0) AS above_floor,
        {gap_over} AS {_STALL_GAPS}
    FROM {rows or dialect.relation(TABLE)}
    WHERE {where}
),
measured AS (
    SELECT
        *,
        NOT cancelled AND complete AND observable AND above_floor AS usable,
        {dialect.int_div(f"coalesce({dialect.array_sum(_STALL_GAPS)}, 0)", str(NS_PER_MS))}
            AS {_STALL_TOTAL}
    FROM flagged
)
SELECT
    {output_sql}
FROM measured"""


def _attempts_at(dialect: Dialect) -> str:
    return _rederived_at(dialect, ATTEMPT_COLUMNS, _role(sc.SPAN_ROLE_ATTEMPT))


_CARRIED: Final = tuple(ViewColumn(c.alias, c.column) for c in WINNER_COLUMNS)


def _carries_winner(dialect: Dialect, threshold: bool) -> str:
    """Call rows that carry their winner's figures (``threshold``: and gaps enough for T)."""
    gaps_floor = _q(WINNER_GAPS_FLOOR.column)
    if threshold:
        condition = f"{gaps_floor} <= {dialect.parameter()}"
    else:
        condition = f"{gaps_floor} IS NOT NULL"
    has_winner = f"{_q(WINNER_ATTEMPT.column)} IS NOT NULL"  # a call without one carries a floor
    return f"{_role(sc.SPAN_ROLE_CALL)} AND {has_winner} AND {condition}"


_OF_CALL: Final = "call_"
"""In the joined rows of :func:`_winners_joined`, the prefix of the call's columns."""


def _winners_joined(dialect: Dialect, threshold: bool) -> str:
    """The winners of the calls whose rows do not carry what is asked: each call joined to its
    winning attempt's row, re-derived at T after the join (so that when no call needs it, the
    join reads no attempt: its calls' side is empty)."""
    calls = dialect.relation(CALLS_VIEW)
    floor = f"c.{WINNER_GAPS_FLOOR.alias}"
    has_winner = f"c.{WINNER_OF_CALL[1]} IS NOT NULL"  # as the join needs: no row scanned else
    if threshold:
        not_carried = f"({floor} IS NULL OR {floor} > {dialect.parameter()})"
    else:
        not_carried = f"{floor} IS NULL"
    of_attempt = {c.alias: c.column for c in ATTEMPT_COLUMNS}
    columns = tuple(
        ViewColumn(
            c.alias,
            _OF_CALL + c.joined[2:] if c.joined.startswith("c.") else of_attempt[c.joined[2:]],
        )
        for c in WINNER_COLUMNS
    )
    of_call = ", ".join(
        f"c.{c.joined[2:]} AS {_OF_CALL}{c.joined[2:]}"
        for c in WINNER_COLUMNS
        if c.joined.startswith("c.")
    )
    read = {c.column for c in columns if not c.column.startswith(_OF_CALL)}
    read |= set(_REDERIVE_READS)
    read |= {f.column for f in FIGURES}  # ClickHouse's t.* would leave MATERIALIZED ones out
    of_attempt_sql = ", ".join(f"t.{_q(column)} AS {_q(column)}" for column in sorted(read))
    (call, number), (span, winner) = CALL_OF_ATTEMPT, WINNER_OF_CALL
    rows = f"""(
    SELECT {of_attempt_sql}, {of_call}
    FROM {calls} c
    JOIN {dialect.relation(TABLE)} t
        ON t.{_q(of_attempt[call])} = c.{span} AND t.{_q(of_attempt[number])} = c.{winner}
        AND t.{_q(TRACE_ID.column)} = c.{TRACE_ID.alias} AND t.{_role(sc.SPAN_ROLE_ATTEMPT)}
    WHERE {has_winner} AND {not_carried}
)"""
    if threshold:
        return _rederived_at(dialect, columns, "true", rows=rows)
    return f"SELECT\n    {_select(columns)}\nFROM {rows}"


def _winners(dialect: Dialect) -> str:
    carried = _select(_CARRIED)
    return f"""SELECT
    {carried}
FROM {dialect.relation(TABLE)}
WHERE {_carries_winner(dialect, False)}
UNION ALL
{_winners_joined(dialect, False)}"""


def _winners_at(dialect: Dialect) -> str:
    carried = _rederived_at(
        dialect,
        _CARRIED,
        _carries_winner(dialect, True),
        gaps=WINNER_GAP_COLUMN,
        floor=WINNER_GAPS_FLOOR.column,
    )
    return f"""SELECT * FROM (
{carried}
)
UNION ALL
SELECT * FROM (
{_winners_joined(dialect, True)}
)"""


def view_statements(dialect: Dialect) -> tuple[str, ...]:
    """The statements that (re)define ``llm_attempts``, ``llm_calls``, ``llm_attempts_at``,
    ``llm_winners`` and ``llm_winners_at``."""
    table = dialect.relation(TABLE)
    attempts = (
        f"SELECT\n    {_select(ATTEMPT_COLUMNS)}\nFROM {table}\nWHERE {_role(sc.SPAN_ROLE_ATTEMPT)}"
    )
    calls = f"SELECT\n    {_select(CALL_COLUMNS)}\nFROM {table}\nWHERE {_role(sc.SPAN_ROLE_CALL)}"
    return (
        *dialect.prelude(),
        dialect.create_view(ATTEMPTS_VIEW, attempts),
        dialect.create_view(CALLS_VIEW, calls),
        dialect.create_at_threshold(ATTEMPTS_AT, _attempts_at(dialect)),
        dialect.create_view(WINNERS_VIEW, _winners(dialect)),
        dialect.create_at_threshold(WINNERS_AT, _winners_at(dialect)),
    )


def views_sql(dialect: Dialect) -> str:
    """:func:`view_statements` as one script."""
    return "".join(f"{statement};\n\n" for statement in view_statements(dialect))
