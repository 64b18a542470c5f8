"""``otel-llm report`` on a large store: how long it takes and how big the page gets.

Builds a store of about ``--calls`` calls by replicating the spans of a real demo store (run
``otel-llm demo --db SOURCE`` first) into one Parquet segment: each copy gets new trace and
span ids and is shifted in time by the source's span, so the copies follow each other like
later runs. Then it writes the report and prints its size and time, and the size of the page
without the inlined runtime (what the data adds)::

    otel-llm demo --db /tmp/demo-store --calls 300
    python -m benchmarks.store.report_size /tmp/demo-store /tmp/big-store --calls 1000000
"""

from __future__ import annotations

import argparse
import math
import shutil
import time
from pathlib import Path

import duckdb

from otel_llm._show._report._write import write_report
from otel_llm._show._sql._table import TABLE
from otel_llm._show._sql._views import CALLS_VIEW
from otel_llm._show._store._access import open_store
from otel_llm._show._store._segments import SCHEMA_SEGMENT, SEGMENTS, SegmentStore


def _copy_sql(source_glob: str, copies: int, shift_ns: int, target: Path) -> str:
    def new_id(column: str, length: int) -> str:
        return f"""CASE WHEN "{column}" IS NULL OR "{column}" = '' THEN "{column}"
            ELSE substr(md5("{column}" || '-' || k), 1, {length}) END"""

    shift = f"to_microseconds(k * {shift_ns // 1000})"
    return f"""COPY (
    SELECT * REPLACE (
        {new_id("TraceId", 32)} AS "TraceId",
        {new_id("SpanId", 16)} AS "SpanId",
        {new_id("ParentSpanId", 16)} AS "ParentSpanId",
        "Timestamp" + {shift} AS "Timestamp",
        list_transform("Events.Timestamp", lambda t: t + {shift}) AS "Events.Timestamp"
    )
    FROM read_parquet('{source_glob}', union_by_name = true), range({copies}) copies(k)
) TO '{target}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880)"""


def build(source: Path, target: Path, calls: int) -> int:
    """A store at ``target`` of about ``calls`` calls copied from ``source``; the calls."""
    with open_store(source) as conn:
        row = conn.execute(
            f"SELECT count(*), epoch_ns(max(started_at)) - epoch_ns(min(started_at)) "
            f"FROM {CALLS_VIEW}"
        ).fetchone()
        assert row is not None, f"{source} has no calls"
        assert row[0], f"{source} has no calls"
        source_calls, span_ns = int(row[0]), int(row[1])
        end_ns = conn.execute(
            f'SELECT max(epoch_ns("Timestamp") + "Duration") - min(epoch_ns("Timestamp")) '
            f"FROM {TABLE}"
        ).fetchone()
    shift_ns = max(span_ns, int(end_ns[0]) if end_ns else 0) + 1_000_000_000
    copies = math.ceil(calls / source_calls)
    if target.exists():
        shutil.rmtree(target)
    store = SegmentStore(target)
    store.create()
    glob = str(SegmentStore(source).segments_dir / "*.parquet")
    segment = target / SEGMENTS / f"{1:020d}-replicated.parquet"
    with duckdb.connect() as conn:
        conn.execute(_copy_sql(glob, copies, shift_ns, segment))
    assert (target / SEGMENTS / SCHEMA_SEGMENT).exists()
    with open_store(target) as conn:
        total = conn.execute(f"SELECT count(*) FROM {CALLS_VIEW}").fetchone()
    return int(total[0]) if total else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a demo store to copy the spans of")
    parser.add_argument("target", type=Path, help="the store to build (replaced)")
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    calls = build(args.source, args.target, args.calls)
    built = time.perf_counter() - started
    size = sum(p.stat().st_size for p in (args.target / SEGMENTS).glob("*.parquet"))
    print(f"store: {calls:,} calls, {size / 1e6:.1f} MB of segments, built in {built:.1f} s")
    output = args.output or args.target.parent / "report-size.html"
    started = time.perf_counter()
    written = write_report(args.target, output)
    took = time.perf_counter() - started
    from otel_llm._show._report._html import vega_runtime

    runtime = len(vega_runtime().encode("utf-8"))
    print(
        f"report: {written.path} {written.bytes / 1e6:.3f} MB in {took:.1f} s "
        f"(Vega runtime {runtime / 1e6:.3f} MB, the rest {(written.bytes - runtime) / 1e3:.0f} kB)"
    )


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main()
