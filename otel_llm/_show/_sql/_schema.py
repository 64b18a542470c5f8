"""DuckDB schema: the Collector ClickHouse exporter's ``otel_traces`` layout plus typed columns.

The base columns keep the ClickHouse exporter's names and meaning (``Events.Timestamp`` …), so
the dashboards' SQL ports to ClickHouse. The typed columns are all derived from span attributes
and chunk events — :data:`TYPED_COLUMNS` (:mod:`otel_llm._show._sql._table`) is the single table
that drives the DDL, the row builder, the backfill of older files and the views of both engines
(:mod:`otel_llm._show._sql._views`). Migrations are idempotent: a file with an older schema
gains what is missing, and running them twice changes nothing.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Final

from otel_llm import _semconv as sc
from otel_llm._show._sql._table import (
    ALL_COLUMNS,
    BASE_COLUMNS,
    CHUNK_COLUMNS,
    CHUNK_OFFSET_COLUMN,
    TABLE,
    TYPED_COLUMNS,
    TypedColumn,
)
from otel_llm._show._sql._views import DUCKDB, views_sql

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "ALL_COLUMNS",
    "BASE_COLUMNS",
    "BASE_DDL",
    "CHUNK_COLUMNS",
    "CHUNK_OFFSET_COLUMN",
    "SCHEMA_VERSION",
    "TABLE",
    "TYPED_COLUMNS",
    "VIEWS",
    "VIEWS_SHA",
    "TypedColumn",
    "backfilled",
    "migrate",
    "stored_version",
]

SCHEMA_VERSION: Final = 3
"""1: the ClickHouse exporter's columns only. 2: typed otel-llm columns, views and macros.
3: ``HedgeWasteChunks``."""

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

VIEWS: Final = views_sql(DUCKDB)
"""The DuckDB views and the re-threshold macro (:mod:`otel_llm._show._sql._views`)."""


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


def backfilled(column: str) -> str | None:
    """The value of typed column ``column`` of a row written before it existed, from the row's
    attributes and events (``None``: a column that has no such source; it stays NULL)."""
    for typed in TYPED_COLUMNS:
        if typed.name == column:
            return f"TRY_CAST(\"SpanAttributes\"['{typed.attribute}'] AS {typed.sql_type})"
    for name, attribute in CHUNK_COLUMNS:
        if name == column:
            return _chunk_backfill(attribute)
    if column == CHUNK_OFFSET_COLUMN:
        return _OFFSET_BACKFILL
    return None


def _backfill(conn: duckdb.DuckDBPyConnection, added: list[str]) -> None:
    """Fill newly added typed columns of existing rows from their attributes and events."""
    assignments = [
        f'"{name}" = {value}' for name in added if (value := backfilled(name)) is not None
    ]
    if assignments:
        conn.execute(f"UPDATE {TABLE} SET {', '.join(assignments)}")
