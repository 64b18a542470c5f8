"""What the embedded store costs: throughput, event-loop lag, memory per queued span, cost per
write — beside the store turned off and (``--baseline REV``) the store of an earlier commit, in
one run. Targets (issue 11) are printed as PASS/FAIL lines:

- ≥ 20,000 attempt spans written per CPU-second, with ~30 chunk events each, on one core;
- event-loop lag p99 ≤ 5 ms and max ≤ 20 ms during a 10,000-span burst (a 1 ms sleep loop
  measuring its overshoot), ``--burners 2`` beside two processes spinning on the CPU;
- ≤ 1 KB held per waiting span in every state: packed in the writer's queue (measured by the
  allocator, beside what the SDK spans themselves hold) and encoded while the store cannot be
  written;
- fixed cost per write ≤ 5 ms (a segment of one span, fsync included).

The cost of a chunk event on the call path is ``benchmarks/overhead/chunk_events.py``'s.

    .venv/bin/python -m benchmarks.store.throughput [--spans 20000] [--baseline 219e388]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from benchmarks import ROOT, child_env
from benchmarks.support.burners import cpu_burners
from otel_llm import _semconv as sc
from otel_llm._measure._processor import DerivingSpanProcessor
from otel_llm._measure._spans import AttemptSpan

MS = 1_000_000
Checks = list[tuple[bool, str]]


class _Keep(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def attempt_spans(count: int, events: int = 30, seed: int = 11) -> list[ReadableSpan]:
    """``count`` finished attempt spans of a streamed call, each with ``events`` chunk events
    (every gap above the 100 ms floor), made by the real processor and attempt span."""
    keep = _Keep()
    provider = TracerProvider(shutdown_on_exit=False)  # else atexit keeps every span alive
    provider.add_span_processor(DerivingSpanProcessor([SimpleSpanProcessor(keep)]))
    tracer = provider.get_tracer("bench")
    rnd = random.Random(seed)
    common = {
        sc.GEN_AI_OPERATION_NAME: "chat",
        sc.GEN_AI_PROVIDER_NAME: "sim",
        sc.GEN_AI_REQUEST_MODEL: "sim-model",
        sc.ATTEMPT_SOURCE: "sim-1",
    }
    for _ in range(count):
        call = tracer.start_span(
            "chat sim-model",
            attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_CALL, **common, sc.GEN_AI_REQUEST_STREAM: True},
            start_time=0,
        )
        attempt = AttemptSpan(
            tracer,
            "chat sim-model",
            attributes={**common, sc.ATTEMPT_NUMBER: 1, sc.ATTEMPT_LEG: sc.LEG_PRIMARY},
            threshold_ms=1000,
            streamed=True,
            context=trace.set_span_in_context(call),
            start_ns=0,
        )
        at = 400 * MS
        for _ in range(events + 1):
            attempt.clock.mark_at(at)
            at += (120 + rnd.randrange(1500)) * MS
        attempt.finish(
            sc.OUTCOME_OK,
            attributes={sc.GEN_AI_USAGE_INPUT_TOKENS: 40, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 300},
            end_ns=at,
        )
        call.end(end_time=at)
    return [s for s in keep.spans if (s.attributes or {}).get(sc.SPAN_ROLE) == sc.SPAN_ROLE_ATTEMPT]


# --- throughput, one core -----------------------------------------------------------------------

_THROUGHPUT = textwrap.dedent(
    """
    import gc, json, os, sys, time, tempfile
    os.sched_setaffinity(0, {{os.sched_getaffinity(0).pop()}})  # one core for every thread
    from benchmarks.store.throughput import attempt_spans
    try:
        from otel_llm._show._store._exporter import SegmentSpanExporter
    except ImportError:  # a baseline from before the store's folder: its one-file exporter
        from otel_llm._show._duckdb_exporter import DuckDBSpanExporter as SegmentSpanExporter
    spans = attempt_spans({spans})
    events = sum(len(s.events) for s in spans) / len(spans)
    gc.freeze()  # the fixture's 20,000 SDK spans (~300 MB) are no part of the store's cost
    with tempfile.TemporaryDirectory() as tmp:
        exporter = SegmentSpanExporter(os.path.join(tmp, {name!r}))
        loaded = getattr(exporter, "_loaded", None)  # the writer's one-time imports (~0.4 s)
        if loaded is not None:
            exporter.start()
            assert loaded.wait(120)
        cpu, wall = time.process_time(), time.perf_counter()
        exporter.export(spans)
        assert exporter.force_flush(600_000)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        written = exporter.stats.written
        exporter.shutdown()
    print(json.dumps(dict(written=written, cpu=cpu, wall=wall, events=events)))
    """
)


def throughput(tree: Path, spans: int, name: str) -> dict[str, float]:
    """Spans written per second by the store of ``tree``, all its threads on one core."""
    code = _THROUGHPUT.format(spans=spans, name=name)
    out = subprocess.run(
        [sys.executable, "-P", "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=tree,
        env=child_env(tree),
    )
    if out.returncode != 0:
        raise SystemExit(f"throughput run in {tree} failed:\n{out.stderr}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# --- event-loop lag during a burst --------------------------------------------------------------


LATE_S = 0.003
"""A probe this late is explained (see :class:`Blame`)."""


def _waited_for_cpu_ns(thread_id: int | None) -> int:
    """Nanoseconds the thread has spent runnable but not running (Linux schedstat; 0 where
    it cannot be read)."""
    if thread_id is None:
        return 0
    try:
        with open(f"/proc/self/task/{thread_id}/schedstat") as schedstat:
            return int(schedstat.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


@dataclasses.dataclass
class Blame:
    """Why the late probes (over :data:`LATE_S`) were late, from the kernel's schedstat: the
    event loop's thread waited for a CPU itself (it was busy enough for the scheduler to
    preempt it), or the writer thread waited for one (preempted while it held the GIL the
    loop needed), or neither."""

    loop: int = 0
    writer: int = 0
    other: int = 0

    def add(self, late_s: float, loop_waited_ns: int, writer_waited_ns: int) -> None:
        half = late_s * 1e9 / 2
        if loop_waited_ns >= half:
            self.loop += 1
        elif writer_waited_ns >= half:
            self.writer += 1
        else:
            self.other += 1


async def _lag_during_burst(
    spans: list[ReadableSpan], exporter: SpanExporter | None, blame: Blame
) -> list[float]:
    """Overshoots of a 1 ms sleep loop while ``spans`` end in bursts of 50 every millisecond
    (as a SimpleSpanProcessor hands them over) and until the store has written them."""
    samples: list[float] = []
    done = asyncio.Event()
    loop_thread = threading.get_native_id()

    def writer_thread() -> int | None:
        thread = getattr(exporter, "_thread", None)
        return getattr(thread, "native_id", None)

    async def probe() -> None:
        while not done.is_set():
            writer = writer_thread()
            loop_before, writer_before = _waited_for_cpu_ns(loop_thread), _waited_for_cpu_ns(writer)
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            late = time.perf_counter() - before - 0.001
            samples.append(late)
            if late > LATE_S:
                blame.add(
                    late,
                    _waited_for_cpu_ns(loop_thread) - loop_before,
                    _waited_for_cpu_ns(writer) - writer_before,
                )

    task = asyncio.create_task(probe())
    await asyncio.sleep(0.05)
    for start in range(0, len(spans), 50):
        if exporter is not None:
            exporter.export(spans[start : start + 50])
        await asyncio.sleep(0.001)
    if exporter is not None:
        flushed = await asyncio.to_thread(exporter.force_flush, 600_000)
        assert flushed
    await asyncio.sleep(0.05)
    done.set()
    await task
    return samples


def lag(spans: list[ReadableSpan], store: bool, blame: Blame) -> list[float]:
    try:
        from otel_llm._show._store._exporter import SegmentSpanExporter
    except ImportError:  # a baseline from before the store's folder: its one-file exporter
        from otel_llm._show._duckdb_exporter import DuckDBSpanExporter as SegmentSpanExporter

    with tempfile.TemporaryDirectory() as tmp:
        exporter = SegmentSpanExporter(Path(tmp) / "store") if store else None
        try:
            return asyncio.run(_lag_during_burst(spans, exporter, blame))
        finally:
            if exporter is not None:
                exporter.shutdown()


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


# --- memory per queued span ---------------------------------------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def held_per_span(count: int) -> tuple[float, float]:
    """Bytes held per span while the store cannot be written: exactly (the encoded segments
    waiting) and as resident memory growth, from the moment the first 2,000 are held (so the
    transient cost of making spans here is not counted)."""
    try:
        from otel_llm._show._store._exporter import SegmentSpanExporter
    except ImportError:  # a baseline from before the store's folder: its one-file exporter
        from otel_llm._show._duckdb_exporter import DuckDBSpanExporter as SegmentSpanExporter

    chunk = 2000
    with tempfile.TemporaryDirectory() as tmp:
        blocker = Path(tmp) / "a-file"
        blocker.write_text("not a directory")
        exporter = SegmentSpanExporter(blocker / "store", retry_s=3600, shutdown_timeout_s=1)
        before = 0
        for start in range(0, count + chunk, chunk):
            exporter.export(attempt_spans(chunk, seed=start))  # made, handed over, dropped
            exporter.force_flush(120_000)  # fails (unwritable) once the spans are encoded
            if start == 0:
                gc.collect()
                before = _rss()
        gc.collect()
        grown = _rss() - before
        held = sum(len(segment.data) for segment in exporter._encoded)
        pending = exporter.stats.pending
        logging.getLogger("otel_llm").disabled = True  # the counted loss at shutdown is expected
        exporter.shutdown()
        logging.getLogger("otel_llm").disabled = False
    return held / pending, grown / count


def queued_per_span(count: int) -> tuple[float, float]:
    """Bytes the allocator holds per span: for ``count`` finished SDK spans, and for the same
    spans queued in a writer that waits (the SDK spans dropped once handed over)."""
    import tracemalloc

    try:
        from otel_llm._show._store._exporter import SegmentSpanExporter
    except ImportError:  # a baseline from before the store's folder: its one-file exporter
        from otel_llm._show._duckdb_exporter import DuckDBSpanExporter as SegmentSpanExporter

    with tempfile.TemporaryDirectory() as tmp:
        exporter = SegmentSpanExporter(
            Path(tmp) / "store", flush_interval_s=3600, segment_spans=10 * count
        )
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        spans = attempt_spans(count)
        gc.collect()
        made = tracemalloc.get_traced_memory()[0] - before
        exporter.export(spans)
        del spans
        gc.collect()
        queued = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert exporter.stats.pending == count
        exporter.shutdown()
    return made / count, queued / count


# --- fixed cost per write -----------------------------------------------------------------------


def cost_per_write(writes: int) -> tuple[float, float]:
    """CPU and wall milliseconds to write a segment of one span, over ``writes`` writes."""
    try:
        from otel_llm._show._store._exporter import SegmentSpanExporter
    except ImportError:  # a baseline from before the store's folder: its one-file exporter
        from otel_llm._show._duckdb_exporter import DuckDBSpanExporter as SegmentSpanExporter

    spans = attempt_spans(writes)
    with tempfile.TemporaryDirectory() as tmp:
        exporter = SegmentSpanExporter(Path(tmp) / "store")
        exporter.export(spans[:1])
        exporter.force_flush(60_000)  # the store is created once
        cpu, wall = time.process_time(), time.perf_counter()
        for span in spans[1:]:
            exporter.export([span])
            exporter.force_flush(60_000)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        exporter.shutdown()
    return cpu / (writes - 1) * 1000, wall / (writes - 1) * 1000


def _tree_at(rev: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "otel_llm"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--queued", type=int, default=20_000)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--baseline", default="219e388", help="commit of the store to compare")
    parser.add_argument(
        "--burners", type=int, default=0, help="processes spinning on the CPU beside the lag part"
    )
    parser.add_argument(
        "--only",
        choices=("throughput", "lag", "memory", "write"),
        action="append",
        help="run only these parts (repeatable)",
    )
    args = parser.parse_args()
    parts = set(args.only or ("throughput", "lag", "memory", "write"))
    checks: Checks = []
    if "throughput" in parts:
        _throughput_part(args, checks)
    if "lag" in parts:
        with cpu_burners(args.burners):
            _lag_part(args, checks)
    if "memory" in parts:
        _memory_part(args, checks)
    if "write" in parts:
        _write_part(args, checks)
    print("== targets")
    for ok, text in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")


def _throughput_part(args: argparse.Namespace, checks: Checks) -> None:
    print(f"== throughput: {args.spans:,} attempt spans, all threads pinned to one core")
    print("  (per CPU-second: the process's CPU time from export() to the last segment sealed;")
    print("   the writer's one-time imports are done before, the fixture's spans kept from GC)")
    ours = throughput(ROOT, args.spans, "store")
    per_cpu = ours["written"] / ours["cpu"]
    print(
        f"  otel-llm (segments)   {per_cpu:>10,.0f} spans/CPU-s  "
        f"{ours['cpu'] / ours['written'] * 1e6:6.1f} µs CPU/span   "
        f"{ours['written'] / ours['wall']:>8,.0f} spans/s wall   "
        f"{ours['events']:.0f} chunk events/span"
    )
    if args.baseline:
        with tempfile.TemporaryDirectory() as tmp:
            old = throughput(_tree_at(args.baseline, Path(tmp)), args.spans, "store.duckdb")
        old_per_cpu = old["written"] / old["cpu"]
        print(
            f"  {args.baseline:<20}  {old_per_cpu:>10,.0f} spans/CPU-s  "
            f"{old['cpu'] / old['written'] * 1e6:6.1f} µs CPU/span   "
            f"{old['written'] / old['wall']:>8,.0f} spans/s wall   "
            f"ratio {per_cpu / old_per_cpu:.2f}x"
        )
    checks.append((per_cpu >= 20_000, f"≥ 20,000 spans per CPU-second on one core: {per_cpu:,.0f}"))


def _lag_part(args: argparse.Namespace, checks: Checks) -> None:
    print(
        f"== event-loop lag during a {args.burst:,}-span burst (1 ms sleep loop overshoot), "
        f"{args.burners} CPU burners beside"
    )
    spans = attempt_spans(args.burst)
    # The fixture's 10,000 finished SDK spans (~150 MB of objects, which no application holds:
    # its span processor hands spans over in batches and lets them go) would make each full
    # collection of the garbage collector a 0.3-0.6 s pause wherever it falls, store on or off.
    gc.freeze()
    figures = {}
    for label, store in (("store off", False), ("store on", True)):
        blame = Blame()
        samples = lag(spans, store, blame)
        figures[label] = (percentile(samples, 0.5), percentile(samples, 0.99), max(samples))
        p50, p99, worst = (x * 1000 for x in figures[label])
        print(f"  {label:10}  p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   max {worst:6.2f} ms")
        late = blame.loop + blame.writer + blame.other
        print(
            f"  {'':10}  {late} of {len(samples)} probes over {LATE_S * 1000:g} ms: the loop "
            f"waited for a CPU in {blame.loop}, the writer (holding the GIL) in {blame.writer}, "
            f"neither in {blame.other}"
        )
    del spans
    gc.unfreeze()
    _, p99, worst = figures["store on"]
    _, off_p99, off_max = figures["store off"]
    print(
        f"  ratio on/off: p99 {p99 / max(off_p99, 1e-6):.1f}x, "
        f"max {worst / max(off_max, 1e-6):.1f}x"
    )
    checks.append((p99 <= 0.005, f"loop lag p99 ≤ 5 ms: {p99 * 1000:.2f} ms"))
    checks.append((worst <= 0.020, f"loop lag max ≤ 20 ms: {worst * 1000:.2f} ms"))


def _memory_part(args: argparse.Namespace, checks: Checks) -> None:
    print(f"== memory per queued span ({args.queued:,} attempt spans of 31 chunk events)")
    sdk, queued = queued_per_span(args.queued)
    print(
        f"  waiting for the writer (packed)  {queued:7.0f} B/span   "
        f"the SDK spans themselves {sdk:7.0f} B/span   ratio {queued / sdk:.3f}"
    )
    exact, resident = held_per_span(args.queued)
    print(
        f"  held while the store is unwritable (encoded, exact) {exact:7.0f} B/span   "
        f"resident growth {resident:7.0f} B/span"
    )
    worst = max(queued, exact, resident)
    checks.append((worst <= 1024, f"≤ 1 KB per waiting span, in every state: {worst:.0f} B"))


def _write_part(args: argparse.Namespace, checks: Checks) -> None:
    print(f"== fixed cost per write ({args.writes} segments of one span, fsync included)")
    cpu_ms, wall_ms = cost_per_write(args.writes)
    print(f"  {cpu_ms:.2f} ms CPU, {wall_ms:.2f} ms wall per write")
    checks.append((cpu_ms <= 5, f"fixed cost per write ≤ 5 ms: {cpu_ms:.2f} ms CPU"))


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main()
