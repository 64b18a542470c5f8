"""DuckDB schema: the Collector ClickHouse exporter's ``otel_traces`` layout plus typed columns.

The base columns keep the ClickHouse exporter's names and meaning (``Events.Timestamp`` …), so
the dashboards' SQL ports to ClickHouse. The typed columns are all derived from span attributes
and chunk events — :data:`TYPED_COLUMNS` is the single table that drives the DDL, the row
builder and the backfill of older files. Migrations are idempotent: a file with an older schema
gains what is missing, and running them twice changes nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

import duckdb

from otel_llm import _semconv as sc
from otel_llm._figures import FIGURES

SCHEMA_VERSION: Final = 3
"""1: the ClickHouse exporter's columns only. 2: typed otel-llm columns, views and macros.
3: ``HedgeWasteChunks``."""

TABLE: Final = "otel_traces"

BASE_DDL: Final = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    "Timestamp" TIMESTAMP_NS NOT NULL,
    "TraceId" VARCHAR NOT NULL,
    "SpanId" VARCHAR NOT NULL,
    "ParentSpanId" VARCHAR,
    "TraceState" VARCHAR,
    "SpanName" VARCHAR,
    "SpanKind" VARCHAR,
    "ServiceName" VARCHAR,
    "ResourceAttributes" MAP(VARCHAR, VARCHAR),
    "ScopeName" VARCHAR,
    "ScopeVersion" VARCHAR,
    "SpanAttributes" MAP(VARCHAR, VARCHAR),
    "Duration" UBIGINT,
    "StatusCode" VARCHAR,
    "StatusMessage" VARCHAR,
    "Events.Timestamp" TIMESTAMP_NS[],
    "Events.Name" VARCHAR[],
    "Events.Attributes" MAP(VARCHAR, VARCHAR)[],
    "Links.TraceId" VARCHAR[],
    "Links.SpanId" VARCHAR[],
    "Links.TraceState" VARCHAR[],
    "Links.Attributes" MAP(VARCHAR, VARCHAR)[]
)
"""

BASE_COLUMNS: Final = (
    ("Timestamp", "TIMESTAMP_NS"),
    ("TraceId", "VARCHAR"),
    ("SpanId", "VARCHAR"),
    ("ParentSpanId", "VARCHAR"),
    ("TraceState", "VARCHAR"),
    ("SpanName", "VARCHAR"),
    ("SpanKind", "VARCHAR"),
    ("ServiceName", "VARCHAR"),
    ("ResourceAttributes", "MAP(VARCHAR, VARCHAR)"),
    ("ScopeName", "VARCHAR"),
    ("ScopeVersion", "VARCHAR"),
    ("SpanAttributes", "MAP(VARCHAR, VARCHAR)"),
    ("Duration", "UBIGINT"),
    ("StatusCode", "VARCHAR"),
    ("StatusMessage", "VARCHAR"),
    ("Events.Timestamp", "TIMESTAMP_NS[]"),
    ("Events.Name", "VARCHAR[]"),
    ("Events.Attributes", "MAP(VARCHAR, VARCHAR)[]"),
    ("Links.TraceId", "VARCHAR[]"),
    ("Links.SpanId", "VARCHAR[]"),
    ("Links.TraceState", "VARCHAR[]"),
    ("Links.Attributes", "MAP(VARCHAR, VARCHAR)[]"),
)


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
_FIGURE_ALIASES: Final = ",\n    ".join(f'"{figure.column}" AS {figure.name}' for figure in FIGURES)
"""The figures in a view: every typed figure column under its figure name."""


TYPED_COLUMNS: Final = (
    TypedColumn("LlmRole", "VARCHAR", sc.SPAN_ROLE),
    TypedColumn("Operation", "VARCHAR", sc.GEN_AI_OPERATION_NAME),
    TypedColumn("Provider", "VARCHAR", sc.GEN_AI_PROVIDER_NAME),
    TypedColumn("RequestModel", "VARCHAR", sc.GEN_AI_REQUEST_MODEL),
    TypedColumn("ResponseModel", "VARCHAR", sc.GEN_AI_RESPONSE_MODEL),
    TypedColumn("Source", "VARCHAR", sc.ATTEMPT_SOURCE),
    TypedColumn("Stream", "BOOLEAN", sc.GEN_AI_REQUEST_STREAM, default=False),
    TypedColumn("Leg", "VARCHAR", sc.ATTEMPT_LEG),
    TypedColumn("AttemptNumber", "INTEGER", sc.ATTEMPT_NUMBER),
    TypedColumn("Outcome", "VARCHAR", sc.ATTEMPT_OUTCOME),
    TypedColumn("ErrorType", "VARCHAR", sc.ERROR_TYPE),
    *_FIGURE_COLUMNS,
    TypedColumn("StallThresholdMs", "BIGINT", sc.STALL_THRESHOLD_MS),
    TypedColumn("MeteringStatus", "VARCHAR", sc.METERING_STATUS),
    TypedColumn("ChunkEventsFloorMs", "BIGINT", sc.CHUNK_EVENTS_FLOOR_MS),
    TypedColumn("InputTokens", "BIGINT", sc.GEN_AI_USAGE_INPUT_TOKENS),
    TypedColumn("OutputTokens", "BIGINT", sc.GEN_AI_USAGE_OUTPUT_TOKENS),
    TypedColumn("CallAttempts", "INTEGER", sc.CALL_ATTEMPTS),
    TypedColumn("CallHedges", "INTEGER", sc.CALL_HEDGES),
    TypedColumn("CallHedgeWon", "BOOLEAN", sc.CALL_HEDGE_WON),
    TypedColumn("CallWinnerAttempt", "INTEGER", sc.CALL_WINNER_ATTEMPT),
    TypedColumn("HedgeWasteTokens", "BIGINT", sc.CALL_HEDGE_WASTE_TOKENS),
    TypedColumn("HedgeWasteChunks", "BIGINT", sc.CALL_HEDGE_WASTE_CHUNKS),
)

CHUNK_COLUMNS: Final = (
    ("ChunkIndex", sc.CHUNK_INDEX),
    ("ChunkGapNs", sc.CHUNK_GAP_NS),
)
"""Typed arrays of the chunk events (one element per ``otel_llm.chunk`` event)."""
CHUNK_OFFSET_COLUMN: Final = "ChunkOffsetNs"
"""Arrival of each chunk event, in nanoseconds from the span start."""


def _chunk_positions() -> str:
    return (
        f"""list_filter(range(1, len("Events.Name") + 1), """
        f"""lambda i: "Events.Name"[i] = '{sc.CHUNK_EVENT}')"""
    )


def _chunk_backfill(attribute: str) -> str:
    return (
        f"""list_transform({_chunk_positions()}, """
        f"""lambda i: TRY_CAST("Events.Attributes"[i]['{attribute}'] AS BIGINT))"""
    )


_OFFSET_BACKFILL: Final = (
    f"""list_transform({_chunk_positions()}, lambda i: """
    """epoch_ns("Events.Timestamp"[i]) - epoch_ns("Timestamp"))"""
)

_IDENTITY: Final = """"ServiceName" AS service,
    "SpanName" AS span_name,
    "Operation" AS operation,
    "Provider" AS provider,
    "RequestModel" AS model,
    "ResponseModel" AS response_model,
    "Source" AS source,
    "Stream" AS stream"""
"""The columns that say what a span was, the same in ``llm_attempts`` and ``llm_calls``."""

VIEWS: Final = f"""
CREATE OR REPLACE VIEW llm_attempts AS
SELECT
    "Timestamp" AS started_at,
    "TraceId" AS trace_id,
    "SpanId" AS span_id,
    "ParentSpanId" AS call_span_id,
    {_IDENTITY},
    "Leg" AS leg,
    "AttemptNumber" AS attempt,
    "Outcome" AS outcome,
    "ErrorType" AS error_type,
    "StatusCode" AS status_code,
    {_FIGURE_ALIASES},
    "StallThresholdMs" AS stall_threshold_ms,
    "MeteringStatus" AS metering_status,
    "InputTokens" AS input_tokens,
    "OutputTokens" AS output_tokens,
    "Duration" AS duration_ns
FROM {TABLE}
WHERE "LlmRole" = '{sc.SPAN_ROLE_ATTEMPT}';

CREATE OR REPLACE VIEW llm_calls AS
SELECT
    "Timestamp" AS started_at,
    "TraceId" AS trace_id,
    "SpanId" AS span_id,
    {_IDENTITY},
    "StatusCode" AS status_code,
    "ErrorType" AS error_type,
    "CallAttempts" AS attempts,
    "CallHedges" AS hedges,
    "CallHedgeWon" AS hedge_won,
    "CallWinnerAttempt" AS winner_attempt,
    "HedgeWasteTokens" AS hedge_waste_tokens,
    "HedgeWasteChunks" AS hedge_waste_chunks,
    {_FIGURE_ALIASES},
    "StallThresholdMs" AS stall_threshold_ms,
    "InputTokens" AS input_tokens,
    "OutputTokens" AS output_tokens,
    "Duration" AS duration_ns
FROM {TABLE}
WHERE "LlmRole" = '{sc.SPAN_ROLE_CALL}';

CREATE OR REPLACE MACRO llm_attempts_at(threshold_ms) AS TABLE
WITH flagged AS (
    SELECT
        "Timestamp" AS started_at,
        "TraceId" AS trace_id,
        "SpanId" AS span_id,
        "ParentSpanId" AS call_span_id,
        "Provider" AS provider,
        "RequestModel" AS model,
        "Source" AS source,
        "AttemptNumber" AS attempt,
        "Leg" AS leg,
        "Outcome" AS outcome,
        "Stream" AS stream,
        "WallMs" AS wall_ms,
        "TtftMs" AS ttft_ms,
        "ChunkCount" AS chunk_count,
        "MaxInterChunkMs" AS max_inter_chunk_ms,
        "StallMs" AS measured_stall_ms,
        "StallCount" AS measured_stall_count,
        threshold_ms = "StallThresholdMs" AND "StallMs" IS NOT NULL AS measured_here,
        coalesce("Outcome", '') IN ('{sc.OUTCOME_HEDGE_CANCELLED}', '{sc.OUTCOME_CANCELLED}')
            AS cancelled,
        coalesce("MeteringStatus", '') IN ('{sc.METERING_EXACT}', '{sc.METERING_NOT_STREAMED}')
            AS complete,
        coalesce("Stream", false) AND coalesce("ChunkCount", 0) >= 2 AS observable,
        threshold_ms >= coalesce("ChunkEventsFloorMs", 0) AS above_floor,
        list_filter("ChunkGapNs", lambda g: g > threshold_ms::BIGINT * 1000000) AS stall_gaps
    FROM {TABLE}
    WHERE "LlmRole" = '{sc.SPAN_ROLE_ATTEMPT}'
),
measured AS (
    SELECT
        *,
        NOT cancelled AND complete AND observable AND above_floor AS usable,
        coalesce(list_sum(stall_gaps), 0) // 1000000 AS stall_total_ms
    FROM flagged
)
SELECT
    started_at, trace_id, span_id, call_span_id, provider, model, source, attempt, leg,
    outcome, stream, wall_ms, ttft_ms, chunk_count, max_inter_chunk_ms,
    threshold_ms AS stall_threshold_ms,
    CASE
        WHEN usable THEN stall_total_ms
        WHEN measured_here THEN measured_stall_ms
    END AS stall_ms,
    CASE WHEN usable THEN len(stall_gaps) WHEN measured_here THEN measured_stall_count END
        AS stall_count,
    CASE
        WHEN usable THEN greatest(0, wall_ms - stall_total_ms)
        WHEN measured_here THEN greatest(0, wall_ms - measured_stall_ms)
        WHEN NOT cancelled AND complete AND NOT observable THEN wall_ms
    END AS generation_ms
FROM measured;
"""


def _columns(conn: duckdb.DuckDBPyConnection) -> set[str]:
    rows = conn.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main'",
        [TABLE],
    ).fetchall()
    return {row[0] for row in rows}


def stored_version(conn: duckdb.DuckDBPyConnection) -> int:
    """The schema version recorded in the file (0 when the file has no otel-llm schema)."""
    return _stored(conn)[0]


def _stored(conn: duckdb.DuckDBPyConnection) -> tuple[int, str | None]:
    tables = {row[0] for row in conn.execute("SHOW TABLES").fetchall()}
    if "otel_llm_schema" not in tables:
        return (1 if TABLE in tables else 0), None
    row = conn.execute(
        "SELECT version, views_sha FROM otel_llm_schema ORDER BY applied_at DESC, version DESC "
        "LIMIT 1"
    ).fetchone()
    return (int(row[0]), row[1]) if row else (0, None)


VIEWS_SHA: Final = hashlib.sha256(VIEWS.encode()).hexdigest()[:16]


def migrate(conn: duckdb.DuckDBPyConnection) -> bool:
    """Bring the file to :data:`SCHEMA_VERSION` and the current views; True when anything
    changed. Every step is idempotent, so running it twice (or in two processes) is harmless."""
    version, views_sha = _stored(conn)
    if version > SCHEMA_VERSION:
        return False  # written by a newer otel-llm: leave its schema and views alone
    if version == SCHEMA_VERSION and views_sha == VIEWS_SHA:
        return False
    conn.execute("BEGIN TRANSACTION")
    try:
        conn.execute(BASE_DDL)
        present = _columns(conn)
        added: list[str] = []
        for column in TYPED_COLUMNS:
            if column.name not in present:
                conn.execute(
                    f'ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS "{column.name}" '
                    f"{column.sql_type}"
                )
                added.append(column.name)
        for name in (*(name for name, _ in CHUNK_COLUMNS), CHUNK_OFFSET_COLUMN):
            if name not in present:
                conn.execute(f'ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS "{name}" BIGINT[]')
                added.append(name)
        _backfill(conn, added)
        conn.execute(VIEWS)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS otel_llm_schema "
            "(version INTEGER, views_sha VARCHAR, applied_at TIMESTAMP)"
        )
        conn.execute(
            "INSERT INTO otel_llm_schema VALUES (?, ?, current_timestamp)",
            [SCHEMA_VERSION, VIEWS_SHA],
        )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True


def _backfill(conn: duckdb.DuckDBPyConnection, added: list[str]) -> None:
    """Fill newly added typed columns of existing rows from their attributes and events."""
    if not added:
        return
    assignments = [
        f'"{c.name}" = TRY_CAST("SpanAttributes"[\'{c.attribute}\'] AS {c.sql_type})'
        for c in TYPED_COLUMNS
        if c.name in added
    ]
    assignments += [
        f'"{name}" = {_chunk_backfill(attribute)}'
        for name, attribute in CHUNK_COLUMNS
        if name in added
    ]
    if CHUNK_OFFSET_COLUMN in added:
        assignments.append(f'"{CHUNK_OFFSET_COLUMN}" = {_OFFSET_BACKFILL}')
    conn.execute(f"UPDATE {TABLE} SET {', '.join(assignments)}")


ALL_COLUMNS: Final = (
    *(name for name, _ in BASE_COLUMNS),
    *(c.name for c in TYPED_COLUMNS),
    *(name for name, _ in CHUNK_COLUMNS),
    CHUNK_OFFSET_COLUMN,
)
"""Every column the exporter writes, in insert order."""
