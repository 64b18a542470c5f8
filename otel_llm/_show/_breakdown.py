"""Canned queries: the wall / stall / net-generation breakdown and the worst stalls.

Both read the winning attempt of every call through ``llm_attempts_at(threshold)``, so the same
query answers "as measured" (the configured threshold) and "what if the threshold were N ms".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otel_llm._errors import ConfigurationError
from otel_llm._measure._stalls import validate_threshold_ms
from otel_llm._show._store import open_store


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


def run_query(path: Path, sql: str, *, canned: bool = False) -> Table:
    """Run ``sql`` read-only on the store at ``path`` (a segment directory, or a single-file
    store of an earlier version). ``canned``: ``sql`` is one of this module's queries, which
    need the views."""
    with open_store(path, views=canned) as conn:
        cursor = conn.execute(sql)
        columns = tuple(d[0] for d in cursor.description or ())
        return Table(columns, cursor.fetchall())
