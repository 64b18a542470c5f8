"""``otel-llm query``'s canned queries on a 1,000,000-call store, against their floor.

The floor of a query is the same aggregate over a flat table that already holds what it reads:
one row per call with its winning attempt's provider, model and figures, the call's hedge
counts, and -- for the re-thresholded queries -- the winner's chunk gaps and whether they can
decide its stall figures at another threshold. That table is built once per run from the same
store (not timed) and held by DuckDB in memory; the same rows are also written to one zstd
Parquet file, the floor of reading them from the format the store keeps. The benchmark checks
that each floor query returns exactly the rows of the query it stands for, then times them
(median of ``--runs`` after a cold run) and prints the ratios, and how long planning the query
alone takes (its EXPLAIN). Target: each query at most ``TARGET`` times its in-memory floor.

The store is laid out as the store's merges lay it out (the merge writer writes every segment).

The store is the one ``benchmarks/store/queries.py`` builds and caches (real SDK spans
replicated with fresh ids over 24 h).

    .venv/bin/python -m benchmarks.store.breakdown [--calls 1000000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from benchmarks.store.queries import build_store
from otel_llm import _semconv as sc
from otel_llm._figures import GENERATION_MS, STALL_COUNT, STALL_MS, TTFT_MS, WALL_MS
from otel_llm._measure._stalls import NS_PER_MS
from otel_llm._show._sql._views import (
    ATTEMPTS_VIEW,
    CALLS_VIEW,
    DUCKDB,
    could_stall_at,
    winner_on,
)
from otel_llm._show._store._access import open_store
from otel_llm._show._store._breakdown import breakdown_sql, worst_stalls_sql

TARGET = 1.5
"""Each canned query at most this many times its floor."""
RECENT = timedelta(hours=6)
RECENT_TARGET_S = 0.1
"""Over the store's last ``RECENT``, each canned query within this many seconds."""
THRESHOLDS = (None, 250, 500)
"""As measured, then re-thresholded."""

FLAT = "flat_winners"


def _listed(values: Iterable[str]) -> str:
    return ", ".join(f"'{value}'" for value in sorted(values))


def flat_table_sql() -> str:
    """One row per call: its winner's identity and figures as measured, the call's hedges, and
    what a re-threshold reads (the gaps, the measured threshold, whether they can decide)."""
    return f"""
    CREATE TEMP TABLE {FLAT} AS
    SELECT
        a.provider, a.model, a.trace_id,
        a.{WALL_MS.name}, a.{STALL_MS.name}, a.{GENERATION_MS.name}, a.{STALL_COUNT.name},
        a.{TTFT_MS.name}, a.max_inter_chunk_ms, a.chunk_count,
        c.hedges AS call_hedges, c.hedge_won AS call_hedge_won,
        t."ChunkGapNs" AS gaps,
        t."StallThresholdMs" AS measured_threshold,
        NOT coalesce(t."Outcome", '') IN ({_listed(sc.OUTCOMES_WITHOUT_FIGURES)})
            AND coalesce(t."MeteringStatus", '') IN
                ({_listed((sc.METERING_EXACT, sc.METERING_NOT_STREAMED))}) AS figured,
        coalesce(t."Stream", false) AND coalesce(t."ChunkCount", 0) >= 2 AS observable,
        coalesce(t."ChunkEventsFloorMs", 0) AS events_floor_ms
    FROM {CALLS_VIEW} c
    JOIN {ATTEMPTS_VIEW} a ON {winner_on("c", "a")}
    JOIN otel_traces t ON t."SpanId" = a.span_id AND t."TraceId" = a.trace_id
    WHERE a.trace_id = c.trace_id
    """


def _at(threshold: int | None) -> tuple[str, str, str]:
    """Stall ms, stall count and generation ms of a flat row at ``threshold`` (``None``: as
    measured), as ``llm_attempts_at`` re-derives them."""
    if threshold is None:
        return STALL_MS.name, STALL_COUNT.name, GENERATION_MS.name
    over = f"list_filter(gaps, lambda g: g > {threshold} * {NS_PER_MS})"
    usable = f"figured AND observable AND {threshold} >= events_floor_ms"
    here = f"{threshold} = measured_threshold AND {STALL_MS.name} IS NOT NULL"
    total = f"coalesce(list_sum({over}), 0) // {NS_PER_MS}"
    stall = f"CASE WHEN {usable} THEN {total} WHEN {here} THEN {STALL_MS.name} END"
    count = f"CASE WHEN {usable} THEN len({over}) WHEN {here} THEN {STALL_COUNT.name} END"
    generation = (
        f"CASE WHEN {usable} THEN greatest(0, {WALL_MS.name} - {total}) "
        f"WHEN {here} THEN greatest(0, {WALL_MS.name} - {STALL_MS.name}) "
        f"WHEN figured AND NOT observable THEN {WALL_MS.name} END"
    )
    return stall, count, generation


def floor_breakdown_sql(threshold: int | None, flat: str = FLAT) -> str:
    """The breakdown's aggregate over the flat table (``flat``: its relation)."""
    stall, count, generation = _at(threshold)
    wall = WALL_MS.name
    return f"""
    WITH w AS (
        SELECT provider, model, {wall}, {TTFT_MS.name}, call_hedges, call_hedge_won,
            {stall} AS s, {count} AS n, {generation} AS g
        FROM {flat}
    )
    SELECT
        provider || '/' || model AS model,
        count(*) AS calls,
        round(sum({wall}) / 1000.0, 1),
        round(sum(s) / 1000.0, 1),
        round(sum(g) / 1000.0, 1),
        round(100.0 * sum(s) / nullif(sum({wall}), 0), 1),
        count_if(n > 0),
        count_if(call_hedges > 0),
        count_if(call_hedge_won),
        round(quantile_cont({TTFT_MS.name}, 0.5) / 1000.0, 2),
        round(quantile_cont({wall}, 0.5) / 1000.0, 2),
        round(quantile_cont({wall}, 0.99) / 1000.0, 2)
    FROM w
    GROUP BY provider, w.model
    ORDER BY 1
    """


def floor_worst_sql(
    threshold: int | None, flat: str = FLAT, limit: int = 5, *, pruned: bool = False
) -> str:
    """The worst stalls over the flat table (``pruned``: re-deriving only the rows that can
    have stalled at the threshold, by the rule the canned query applies)."""
    stall, count, _ = _at(threshold)
    could = (
        f" WHERE {could_stall_at('max_inter_chunk_ms', str(threshold))}"
        if pruned and threshold is not None
        else ""
    )
    return f"""
    WITH w AS (SELECT *, {stall} AS s, {count} AS n FROM {flat}{could})
    SELECT left(trace_id, 16), provider || '/' || model,
        round({WALL_MS.name} / 1000.0, 2), round(s / 1000.0, 2), n,
        round(max_inter_chunk_ms / 1000.0, 2), round({TTFT_MS.name} / 1000.0, 2), chunk_count
    FROM w WHERE s > 0 ORDER BY s DESC LIMIT {limit}
    """


def timed(run: Callable[[], list[tuple[Any, ...]]], runs: int) -> tuple[float, float]:
    """Cold and median seconds."""
    began = time.perf_counter()
    run()
    cold = time.perf_counter() - began
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        run()
        samples.append(time.perf_counter() - began)
    return cold, statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--segment-rows", type=int, default=250_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    store = build_store(args.calls, args.segment_rows)
    print(f"store: {store.calls:,} calls, {store.spans:,} spans in {store.segments} segments")
    failed = []
    with open_store(store.path, views=True) as conn, tempfile.TemporaryDirectory() as folder:
        began = time.perf_counter()
        conn.execute(flat_table_sql())
        (rows,) = conn.execute(f"SELECT count(*) FROM {FLAT}").fetchone() or (0,)
        print(f"flat table: {rows:,} rows, built in {time.perf_counter() - began:.1f} s (untimed)")
        flat_file = Path(folder) / "flat.parquet"
        conn.execute(f"COPY {FLAT} TO '{flat_file}' (FORMAT parquet, COMPRESSION zstd)")
        on_disk = f"read_parquet('{flat_file}')"
        print(
            "the floor: in memory (the target's); and as one zstd Parquet file of the same rows, "
            "the format the store keeps. planning: the query's EXPLAIN alone (binding the "
            "store's view over its segments, once per reference)"
        )
        print(
            f"{'query':<28}{'cold ms':>9}{'median ms':>11}{'planning':>10}{'floor ms':>10}"
            f"{'ratio':>8}{'in Parquet':>12}{'ratio':>8}"
        )
        cases = [
            (f"breakdown {t or 'as measured'}", breakdown_sql(t), floor_breakdown_sql, t, None)
            for t in THRESHOLDS
        ]
        cases += [  # calls tied on their stall come in any order: compare the stalls only
            (f"worst stalls {t or 'as measured'}", worst_stalls_sql(5, t), floor_worst_sql, t, 3)
            for t in THRESHOLDS
        ]
        for name, sql, floor_of, threshold, key in cases:
            floors = (floor_of(threshold), floor_of(threshold, on_disk))

            def rows_of(query: str, key: int | None = key) -> list[Any]:
                return [row if key is None else row[key] for row in conn.execute(query).fetchall()]

            ours = rows_of(sql)
            if any(rows_of(floor) != ours for floor in floors):
                raise SystemExit(f"{name}: the floor does not return the query's rows")
            cold, median = timed(lambda sql=sql: conn.execute(sql).fetchall(), args.runs)
            _, planning = timed(
                lambda sql=sql: conn.execute(f"EXPLAIN {sql}").fetchall(), args.runs
            )
            in_memory, in_parquet = (
                timed(lambda floor=floor: conn.execute(floor).fetchall(), args.runs)[1]
                for floor in floors
            )
            ratio = median / in_memory
            if ratio > TARGET:
                failed.append(name)
            print(
                f"{name:<28}{cold * 1000:>9.1f}{median * 1000:>11.1f}{planning * 1000:>10.1f}"
                f"{in_memory * 1000:>10.1f}{ratio:>7.1f}x{in_parquet * 1000:>12.1f}"
                f"{median / in_parquet:>7.1f}x"
            )
        print(
            f"{'FAIL' if failed else 'PASS'}  every canned query <= {TARGET}x its floor in memory"
            + (f": over in {', '.join(failed)}" if failed else "")
        )
        # the worst stalls re-thresholded skip the calls whose longest gap is shorter than T;
        # the floor above re-derives every row, as the target defines it. The same skip in
        # memory, for comparison (not judged):
        for t in THRESHOLDS:
            if t is None:
                continue
            pruned = floor_worst_sql(t, pruned=True)
            if [r[3] for r in conn.execute(pruned).fetchall()] != [
                r[3] for r in conn.execute(worst_stalls_sql(5, t)).fetchall()
            ]:
                raise SystemExit(f"worst stalls {t}: the pruned floor does not return its rows")
            ours = timed(lambda t=t: conn.execute(worst_stalls_sql(5, t)).fetchall(), args.runs)
            skip = timed(lambda q=pruned: conn.execute(q).fetchall(), args.runs)
            print(
                f"worst stalls {t}: the in-memory floor skipping the same calls "
                f"{skip[1] * 1000:.1f} ms, ours {ours[1] * 1000:.1f} ms "
                f"({ours[1] / skip[1]:.1f}x)"
            )
    since = store.end - RECENT
    slow = []
    recent = f"{RECENT / timedelta(hours=1):g} h"
    print(f"over the last {recent} (otel-llm query --since), target <= {RECENT_TARGET_S} s:")
    with open_store(store.path, views=True) as conn:
        for t in THRESHOLDS:
            for name, sql in (
                (f"breakdown {t or 'as measured'}", breakdown_sql(t, since=since)),
                (f"worst stalls {t or 'as measured'}", worst_stalls_sql(5, t, since=since)),
            ):
                cold, median = timed(lambda sql=sql: conn.execute(sql).fetchall(), args.runs)
                if median > RECENT_TARGET_S:
                    slow.append(name)
                print(f"{name:<28}{cold * 1000:>9.1f}{median * 1000:>11.1f}")
    print(
        f"{'FAIL' if slow else 'PASS'}  every canned query over the last {recent} <= "
        f"{RECENT_TARGET_S} s" + (f": over in {', '.join(slow)}" if slow else "")
    )
    _ = DUCKDB, duckdb  # the dialect and engine the canned queries are written for


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main()
