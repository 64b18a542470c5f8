"""chDB holding SDK spans as the Collector's ClickHouse exporter would have inserted them: the
schema of collector/clickhouse/schema.sql applied, then the exporter's INSERT with its own 22
columns (ClickHouse computes otel-llm's typed ones) — the ClickHouse tests' fixture."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chdb import session as chdb_session
from opentelemetry.sdk.trace import ReadableSpan

from otel_llm._show._sql import _exporter_sql
from otel_llm._show._sql._clickhouse import DATABASE, SCHEMA_FILE, statements_of
from otel_llm._show._sql._table import TABLE
from otel_llm._show._store._rows import span_row

ROOT = Path(__file__).resolve().parents[2]


def exporter_columns() -> list[str]:
    """The columns the exporter's INSERT names, in its order."""
    head = _exporter_sql.TRACES_INSERT.split(") VALUES")[0]
    return [c.strip() for c in head.split("(", 1)[1].split(",")]


def _timestamp(ns: int) -> str:
    """DateTime64(9) as text: seconds since the epoch with nine decimals (UTC)."""
    return f"{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def exporter_row(row: dict[str, Any]) -> dict[str, Any]:
    """The exporter's columns of one row, as it sends them (timestamps at nanoseconds)."""
    out = {name: row[name] for name in exporter_columns()}
    out["Timestamp"] = _timestamp(row["Timestamp"])
    out["Events.Timestamp"] = [_timestamp(t) for t in row["Events.Timestamp"]]
    return out


@contextmanager
def chdb_with(spans: Sequence[ReadableSpan]) -> Iterator[Any]:
    """A chDB session with the schema applied and ``spans`` inserted as the exporter inserts
    them."""
    with chdb_from(statements_of((ROOT / SCHEMA_FILE).read_text()), spans) as session:
        yield session


def insert_spans(
    session: Any, spans: Sequence[ReadableSpan], insert: str = _exporter_sql.TRACES_INSERT
) -> None:
    """``spans`` inserted in one block with the exporter's INSERT template ``insert``."""
    head = insert.split(" VALUES")[0]
    sql = _exporter_sql.render(head, DATABASE, TABLE, quoted=(0, 1))
    lines = "\n".join(json.dumps(exporter_row(span_row(span))) for span in spans)
    session.query(f"{sql} FORMAT JSONEachRow\n{lines}")


@contextmanager
def chdb_from(
    statements: Sequence[str],
    spans: Sequence[ReadableSpan],
    insert: str = _exporter_sql.TRACES_INSERT,
) -> Iterator[Any]:
    """A chDB session with ``statements`` run and ``spans`` inserted with ``insert``."""
    session: Any = chdb_session.Session()  # type: ignore[no-untyped-call]
    try:
        for statement in statements:
            session.query(statement)
        insert_spans(session, spans, insert)
        yield session
    finally:
        session.close()
