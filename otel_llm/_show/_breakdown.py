"""Canned queries: the wall / stall / net-generation breakdown and the worst stalls.

Both read the winning attempt of every call through ``llm_attempts_at(threshold)``, so the same
query answers "as measured" (the configured threshold) and "what if the threshold were N ms".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from otel_llm._errors import ConfigurationError, NotAStore
from otel_llm._measure._stalls import validate_threshold_ms
from otel_llm._show._duckdb_exporter import connect


@dataclass(frozen=True, slots=True)
class Table:
    """A query result: column names and rows."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


RUN_ATTRIBUTE = "service.instance.id"
"""The resource attribute that tells one run (one process) from the others in a shared file."""


def _run_filter(run: str | None) -> str:
    """SQL restricting calls ``c`` to the spans of one run (``None``: every run)."""
    if run is None:
        return ""
    if not run.isascii() or not run.replace("-", "").isalnum():
        raise ConfigurationError(RUN_ATTRIBUTE, f"a run id is letters, digits and '-', not {run!r}")
    return f"""
        AND c.span_id IN (
            SELECT "SpanId" FROM otel_traces
            WHERE "ResourceAttributes"['{RUN_ATTRIBUTE}'] = '{run}'
        )"""


def _winners(threshold_ms: int | None, run: str | None = None) -> str:
    """Winning attempts at ``threshold_ms`` (``None``: each as measured), of one run or all."""
    if threshold_ms is None:
        source = "llm_attempts"
    else:
        source = f"llm_attempts_at({validate_threshold_ms(threshold_ms, '--threshold-ms')})"
    return f"""
        SELECT a.*, c.hedges AS call_hedges, c.hedge_won AS call_hedge_won
        FROM llm_calls c
        JOIN {source} a ON a.call_span_id = c.span_id AND a.attempt = c.winner_attempt
        WHERE a.trace_id = c.trace_id{_run_filter(run)}
    """


def breakdown_sql(threshold_ms: int | None = None, *, run: str | None = None) -> str:
    """Per provider and model: calls, wall vs stall vs net generation, stall share, TTFT
    (``run``: only the calls whose spans carry that :data:`RUN_ATTRIBUTE`)."""
    return f"""
    WITH w AS ({_winners(threshold_ms, run)})
    SELECT
        provider || '/' || model AS model,
        count(*) AS calls,
        round(sum(wall_ms) / 1000.0, 1) AS wall_s,
        round(sum(stall_ms) / 1000.0, 1) AS stall_s,
        round(sum(generation_ms) / 1000.0, 1) AS net_s,
        round(100.0 * sum(stall_ms) / nullif(sum(wall_ms), 0), 1) AS "stall_%",
        count(*) FILTER (WHERE stall_count > 0) AS stalled,
        count(*) FILTER (WHERE call_hedges > 0) AS hedged,
        count(*) FILTER (WHERE call_hedge_won) AS hedge_wins,
        round(quantile_cont(ttft_ms, 0.5) / 1000.0, 2) AS ttft_p50,
        round(quantile_cont(wall_ms, 0.5) / 1000.0, 2) AS wall_p50,
        round(quantile_cont(wall_ms, 0.99) / 1000.0, 2) AS wall_p99
    FROM w
    GROUP BY provider, w.model
    ORDER BY 1
    """


def totals_sql(*, run: str | None = None) -> str:
    """Per provider and model, as measured: calls, stalls, stalled calls, stall and wall ms."""
    return f"""
    WITH w AS ({_winners(None, run)})
    SELECT
        provider || '/' || model AS model,
        count(*) AS calls,
        coalesce(sum(stall_count), 0) AS stalls,
        count(*) FILTER (WHERE stall_count > 0) AS stalled,
        coalesce(sum(stall_ms), 0) AS stall_ms,
        coalesce(sum(wall_ms), 0) AS wall_ms
    FROM w
    GROUP BY provider, w.model
    ORDER BY 1
    """


def worst_stalls_sql(
    limit: int = 5, threshold_ms: int | None = None, *, run: str | None = None
) -> str:
    """The calls whose winning attempt lost the most time to stalls."""
    return f"""
    WITH w AS ({_winners(threshold_ms, run)})
    SELECT
        left(trace_id, 16) AS trace,
        provider || '/' || model AS model,
        round(wall_ms / 1000.0, 2) AS wall_s,
        round(stall_ms / 1000.0, 2) AS stall_s,
        stall_count AS stalls,
        round(max_inter_chunk_ms / 1000.0, 2) AS longest_gap,
        round(ttft_ms / 1000.0, 2) AS ttft,
        chunk_count AS chunks
    FROM w
    WHERE stall_ms > 0
    ORDER BY stall_ms DESC
    LIMIT {int(limit)}
    """


STORE_HINT = "write spans with otel_llm.init(db_path=...) or run `otel-llm demo --db PATH`"
"""How to get a store, for every message that says a file is not one."""
_DUCKDB_MAGIC = b"DUCK"
"""Bytes 8–11 of every DuckDB database file."""
_SQLITE_MAGIC = b"SQLite format 3\x00"
_STORE_TABLE = "otel_traces"
_VIEWS = ("llm_attempts", "llm_calls")


def check_store_file(path: Path) -> None:
    """Raise :class:`NotAStore` unless ``path`` is a readable DuckDB database file."""
    if not path.exists():
        raise NotAStore(path, f"does not exist ({STORE_HINT})")
    if path.is_dir():
        raise NotAStore(path, "is a directory, not a DuckDB file")
    try:
        with path.open("rb") as file:
            head = file.read(16)
    except OSError as exc:
        raise NotAStore(path, f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    if head.startswith(_SQLITE_MAGIC):
        raise NotAStore(path, f"is a SQLite database, not an otel-llm store ({STORE_HINT})")
    if head[8:12] != _DUCKDB_MAGIC:
        raise NotAStore(path, f"is not a DuckDB database, so not an otel-llm store ({STORE_HINT})")


def _check_store(conn: duckdb.DuckDBPyConnection, path: Path, *, views: bool) -> None:
    names = {
        name
        for (name,) in conn.execute(
            "SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views()"
        ).fetchall()
    }
    if _STORE_TABLE not in names:
        raise NotAStore(
            path,
            f"is a DuckDB database but not an otel-llm store: it has no {_STORE_TABLE} table "
            f"({STORE_HINT})",
        )
    missing = [view for view in _VIEWS if view not in names] if views else []
    if missing:
        raise NotAStore(
            path,
            f"has no {', '.join(missing)} view: open it once with otel_llm.init(db_path=...) "
            "to add the views",
        )


def run_query(
    path: Path, sql: str, *, canned: bool = False, attempts: int = 20, wait_s: float = 0.25
) -> Table:
    """Run ``sql`` read-only on the store at ``path``, waiting briefly while a writer holds the
    file. ``canned``: ``sql`` is one of this module's queries, which need the views."""
    check_store_file(path)
    for attempt in range(attempts):
        try:
            with connect(path, read_only=True) as conn:
                _check_store(conn, path, views=canned)
                cursor = conn.execute(sql)
                columns = tuple(d[0] for d in cursor.description or ())
                return Table(columns, cursor.fetchall())
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or attempt == attempts - 1:
                raise
            time.sleep(wait_s)  # another process is writing a batch; it closes the file after
    raise AssertionError("unreachable")
