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

from otel_llm._errors import ConfigurationError
from otel_llm._measure._stalls import validate_threshold_ms


@dataclass(frozen=True, slots=True)
class Table:
    """A query result: column names and rows."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


def _winners(threshold_ms: int | None) -> str:
    """Winning attempts at ``threshold_ms`` (``None``: each as measured)."""
    if threshold_ms is None:
        source = "llm_attempts"
    else:
        source = f"llm_attempts_at({validate_threshold_ms(threshold_ms, '--threshold-ms')})"
    return f"""
        SELECT a.*, c.hedges AS call_hedges, c.hedge_won AS call_hedge_won
        FROM llm_calls c
        JOIN {source} a ON a.call_span_id = c.span_id AND a.attempt = c.winner_attempt
        WHERE a.trace_id = c.trace_id
    """


def breakdown_sql(threshold_ms: int | None = None) -> str:
    """Per provider and model: calls, wall vs stall vs net generation, stall share, TTFT."""
    return f"""
    WITH w AS ({_winners(threshold_ms)})
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


def worst_stalls_sql(limit: int = 5, threshold_ms: int | None = None) -> str:
    """The calls whose winning attempt lost the most time to stalls."""
    return f"""
    WITH w AS ({_winners(threshold_ms)})
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


def run_query(path: Path, sql: str, *, attempts: int = 20, wait_s: float = 0.25) -> Table:
    """Run ``sql`` read-only on ``path``, waiting briefly while a writer holds the file."""
    if not path.exists():
        raise ConfigurationError("--db", f"{path} does not exist (run `otel-llm demo` first?)")
    for attempt in range(attempts):
        try:
            with duckdb.connect(str(path), read_only=True) as conn:
                cursor = conn.execute(sql)
                columns = tuple(d[0] for d in cursor.description or ())
                return Table(columns, cursor.fetchall())
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or attempt == attempts - 1:
                raise
            time.sleep(wait_s)  # another process is writing a batch; it closes the file after
    raise AssertionError("unreachable")
