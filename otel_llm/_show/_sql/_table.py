"""The one table of ``otel_traces`` columns: the Collector ClickHouse exporter's base columns and
otel-llm's typed columns, each typed column filled from one span attribute or the chunk events.

The DuckDB DDL, the row builder, the backfill of older files, the ClickHouse DDL and the views of
both engines are derived from it (:mod:`otel_llm._show._sql._schema`,
:mod:`otel_llm._show._store._rows`, :mod:`otel_llm._show._sql._clickhouse`,
:mod:`otel_llm._show._sql._views`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from otel_llm import _semconv as sc
from otel_llm._figures import FIGURES

TABLE: Final = "otel_traces"


def as_utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC time; a naive one is read as UTC, as the table's times are."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def naive_utc(moment: datetime) -> datetime:
    """``moment`` as the table holds times: naive, in UTC (a naive ``moment`` is UTC already)."""
    return as_utc(moment).replace(tzinfo=None)


TIMESTAMP: Final = "Timestamp"
TRACE_ID: Final = "TraceId"
SPAN_ID: Final = "SpanId"
PARENT_SPAN_ID: Final = "ParentSpanId"
DURATION: Final = "Duration"
STATUS_CODE: Final = "StatusCode"
ERROR_STATUSES: Final = ("Error", "STATUS_CODE_ERROR")
"""The :data:`STATUS_CODE` of a failed span: as this store writes it, and as the Collector's
ClickHouse exporter does."""


def is_error_sql(column: str = f'"{STATUS_CODE}"') -> str:
    """SQL that is true when ``column`` holds the status of a failed span."""
    values = ", ".join(f"'{value}'" for value in ERROR_STATUSES)
    return f"coalesce({column}, '') IN ({values})"


BASE_COLUMNS: Final = (
    (TIMESTAMP, "TIMESTAMP_NS"),
    (TRACE_ID, "VARCHAR"),
    (SPAN_ID, "VARCHAR"),
    (PARENT_SPAN_ID, "VARCHAR"),
    ("TraceState", "VARCHAR"),
    ("SpanName", "VARCHAR"),
    ("SpanKind", "VARCHAR"),
    ("ServiceName", "VARCHAR"),
    ("ResourceAttributes", "MAP(VARCHAR, VARCHAR)"),
    ("ScopeName", "VARCHAR"),
    ("ScopeVersion", "VARCHAR"),
    ("SpanAttributes", "MAP(VARCHAR, VARCHAR)"),
    (DURATION, "UBIGINT"),
    (STATUS_CODE, "VARCHAR"),
    ("StatusMessage", "VARCHAR"),
    ("Events.Timestamp", "TIMESTAMP_NS[]"),
    ("Events.Name", "VARCHAR[]"),
    ("Events.Attributes", "MAP(VARCHAR, VARCHAR)[]"),
    ("Links.TraceId", "VARCHAR[]"),
    ("Links.SpanId", "VARCHAR[]"),
    ("Links.TraceState", "VARCHAR[]"),
    ("Links.Attributes", "MAP(VARCHAR, VARCHAR)[]"),
)
"""The exporter's columns with their DuckDB types, in the exporter's INSERT order."""


@dataclass(frozen=True, slots=True)
class TypedColumn:
    """A typed column filled from one span attribute (``default`` where an otel-llm span lacks
    it: the GenAI convention sets ``gen_ai.request.stream`` only on streaming requests, so an
    otel-llm span without it did not stream; another library's span says nothing either way)."""

    name: str
    sql_type: str
    attribute: str
    default: bool | None = None


_FIGURE_COLUMNS: Final = tuple(
    TypedColumn(figure.column, "BIGINT", figure.attribute) for figure in FIGURES
)

ROLE_COLUMN: Final = "LlmRole"
"""The typed column that says whether a row is a call or an attempt."""

STREAM_COLUMN: Final = "Stream"
OUTCOME_COLUMN: Final = "Outcome"
METERING_COLUMN: Final = "MeteringStatus"
THRESHOLD_COLUMN: Final = "StallThresholdMs"
EVENTS_FLOOR_COLUMN: Final = "ChunkEventsFloorMs"
"""The attempt's chunk-event floor: its chunk events hold every gap longer than this many ms."""

TYPED_COLUMNS: Final = (
    TypedColumn(ROLE_COLUMN, "VARCHAR", sc.SPAN_ROLE),
    TypedColumn("Operation", "VARCHAR", sc.GEN_AI_OPERATION_NAME),
    TypedColumn("Provider", "VARCHAR", sc.GEN_AI_PROVIDER_NAME),
    TypedColumn("RequestModel", "VARCHAR", sc.GEN_AI_REQUEST_MODEL),
    TypedColumn("ResponseModel", "VARCHAR", sc.GEN_AI_RESPONSE_MODEL),
    TypedColumn("Source", "VARCHAR", sc.ATTEMPT_SOURCE),
    TypedColumn(STREAM_COLUMN, "BOOLEAN", sc.GEN_AI_REQUEST_STREAM, default=False),
    TypedColumn("Leg", "VARCHAR", sc.ATTEMPT_LEG),
    TypedColumn("AttemptNumber", "INTEGER", sc.ATTEMPT_NUMBER),
    TypedColumn(OUTCOME_COLUMN, "VARCHAR", sc.ATTEMPT_OUTCOME),
    TypedColumn("ErrorType", "VARCHAR", sc.ERROR_TYPE),
    *_FIGURE_COLUMNS,
    TypedColumn(THRESHOLD_COLUMN, "BIGINT", sc.STALL_THRESHOLD_MS),
    TypedColumn(METERING_COLUMN, "VARCHAR", sc.METERING_STATUS),
    TypedColumn(EVENTS_FLOOR_COLUMN, "BIGINT", sc.CHUNK_EVENTS_FLOOR_MS),
    TypedColumn("InputTokens", "BIGINT", sc.GEN_AI_USAGE_INPUT_TOKENS),
    TypedColumn("OutputTokens", "BIGINT", sc.GEN_AI_USAGE_OUTPUT_TOKENS),
    TypedColumn("CallAttempts", "INTEGER", sc.CALL_ATTEMPTS),
    TypedColumn("CallHedges", "INTEGER", sc.CALL_HEDGES),
    TypedColumn("CallHedgeWon", "BOOLEAN", sc.CALL_HEDGE_WON),
    TypedColumn("CallWinnerAttempt", "INTEGER", sc.CALL_WINNER_ATTEMPT),
    TypedColumn("HedgeWasteTokens", "BIGINT", sc.CALL_HEDGE_WASTE_TOKENS),
    TypedColumn("HedgeWasteChunks", "BIGINT", sc.CALL_HEDGE_WASTE_CHUNKS),
    TypedColumn("WinnerModel", "VARCHAR", sc.CALL_WINNER_MODEL),
    TypedColumn("WinnerSource", "VARCHAR", sc.CALL_WINNER_SOURCE),
    TypedColumn("WinnerProvider", "VARCHAR", sc.CALL_WINNER_PROVIDER),
    TypedColumn("WinnerStartedAt", "TIMESTAMP_NS", sc.CALL_WINNER_STARTED_AT_NS),
    TypedColumn("WinnerGapsFloorMs", "BIGINT", sc.CALL_WINNER_GAPS_FLOOR_MS),
    TypedColumn("WinnerGapNs", "BIGINT[]", sc.CALL_WINNER_GAPS_NS),
)

CHUNK_INDEX_COLUMN: Final = "ChunkIndex"
CHUNK_GAP_COLUMN: Final = "ChunkGapNs"
CHUNK_COLUMNS: Final = (
    (CHUNK_INDEX_COLUMN, sc.CHUNK_INDEX),
    (CHUNK_GAP_COLUMN, sc.CHUNK_GAP_NS),
)
"""Typed arrays of the chunk events (one element per ``otel_llm.chunk`` event)."""
CHUNK_OFFSET_COLUMN: Final = "ChunkOffsetNs"
"""Arrival of each chunk event, in nanoseconds from the span start."""

ALL_COLUMNS: Final = (
    *(name for name, _ in BASE_COLUMNS),
    *(c.name for c in TYPED_COLUMNS),
    *(name for name, _ in CHUNK_COLUMNS),
    CHUNK_OFFSET_COLUMN,
)
"""Every column the DuckDB exporter writes, in insert order."""

TYPED: Final = {c.name: c for c in TYPED_COLUMNS}
"""The typed columns by name."""
FIGURE_COLUMNS: Final = {figure: TYPED[figure.column] for figure in FIGURES}
"""The typed column of each figure."""
_BY_ATTRIBUTE: Final = {c.attribute: c.name for c in TYPED_COLUMNS}


def column_for(attribute: str) -> str:
    """The typed column filled from span ``attribute`` (``KeyError`` for an attribute that has
    none: a query that names a column must name one that exists)."""
    return _BY_ATTRIBUTE[attribute]
