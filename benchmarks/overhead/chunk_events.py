"""Instructions per chunk event (``otel_llm.chunk``), on the wrapped openai path and the client's.

An attempt span records a chunk event for the first chunk, the last, the longest gap and every
gap above the 100 ms floor (at most 120 per span). A bursty stream whose gaps are often above the
floor pays for many of them. This benchmark streams the same answer twice per path, in separate
processes under ``valgrind --tool=callgrind``:

* ``events`` -- every gap is above the floor, so every chunk makes an event;
* ``none``   -- no gap is, so the span carries only the first, last and longest-gap events.

Both streams carry the same bytes through the same code; only the *metering* clock differs. It is
swapped (``otel_llm.testing.use_clock``) for a counter that moves a fixed step at every read of
it: 150 ms for ``events``, 1 µs for ``none``, both from the same start of about 11.6 days (so
timestamps are integers of the same size in both). A real 150 ms cadence would also change how
the HTTP stack reads the body (one read per chunk instead of many chunks per read) and so be
confounded; the stepped clock changes nothing but the gaps. The instructions per chunk event are

    (instructions of the ``events`` stream - those of the ``none`` stream) / (events - events)

Paths (each worker process warms up with one stream, then streams the measured answer
``--streams`` times between two ``os.getppid()`` calls, at which callgrind dumps its counters, as
``benchmarks/overhead/openai_sdk.py`` does; the cyclic garbage collector is paused for the measured
stream, since where its collections fall is chance: one landing in either stream would move the
figure by ~1,500 instructions per event):

* ``openai`` -- ``instrument_openai()`` around the openai SDK's sync client, streaming from the
  simulated provider (its own process, zero cadence), spans through ``DerivingSpanProcessor`` into
  a ``SimpleSpanProcessor`` and an ``InMemorySpanExporter``, metrics into an
  ``InMemoryMetricReader``;
* ``client`` -- ``otel_llm.Client`` streaming a scripted answer (``httpx2.MockTransport``, in
  memory), same span pipeline.

``--baseline REV`` also measures the package as it was at git revision ``REV`` (exported with
``git archive`` into a temporary directory; the same script drives it), for a before/after line.

Target: a chunk event <= 10,000 instructions on every path measured.

    .venv/bin/python -m benchmarks.overhead.chunk_events [--chunks 116] [--paths openai,client]
        [--streams 4] [--baseline REV] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks import ROOT as BENCH_ROOT
from benchmarks import child_command, child_env
from benchmarks.support.callgrind import marked_run, totals_of

PATHS = ("openai", "client")
SHAPES = {"events": 150_000_000, "none": 1_000}
"""Metering-clock step per read, in nanoseconds, of each stream shape."""
START_NS = 10**15
"""Where the stepped clock starts: about 11.6 days, a ``time.monotonic_ns()`` of a machine that has
been up a while. Both shapes then compute on integers of the same size, as in production; a
clock starting near zero would make the ``none`` stream's arithmetic cheaper (CPython adds
integers below 2**30 on a fast path) and bill that to the events."""
TARGET = 10_000
MODEL = "bench"
MESSAGES: Any = [{"role": "user", "content": "go"}]
ROOT = str(BENCH_ROOT)


# --- the worker process ---------------------------------------------------------------------


class SteppedClock:
    """Monotonic nanoseconds that move ``step`` at every read, from ``START_NS``."""

    def __init__(self, step: int) -> None:
        self.ns = START_NS
        self.step = step

    def __call__(self) -> int:
        self.ns += self.step
        return self.ns


class Pipeline:
    """Spans through the deriving processor into memory; metrics into a reader."""

    def __init__(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        from otel_llm import DerivingSpanProcessor

        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(
            DerivingSpanProcessor([SimpleSpanProcessor(self.exporter)])
        )

    def recorded(self, streams: int = 1) -> dict[str, Any]:
        """The chunk events and figures of the last of ``streams`` attempt spans ended since the
        last call (and forget them all)."""
        from otel_llm import _semconv as sc

        attempts = [
            span
            for span in self.exporter.get_finished_spans()
            if (span.attributes or {}).get(sc.SPAN_ROLE) == sc.SPAN_ROLE_ATTEMPT
        ]
        self.exporter.clear()
        self.reader.get_metrics_data()
        if len(attempts) != streams:
            raise SystemExit(f"expected {streams} attempt spans, got {len(attempts)}")
        span = attempts[-1]
        attrs = dict(span.attributes or {})
        events = [event for event in span.events if event.name == sc.CHUNK_EVENT]
        gaps = [
            g for e in events if isinstance(g := (e.attributes or {}).get(sc.CHUNK_GAP_NS), int)
        ]
        return {
            "events": len(events),
            "dropped_events": span.dropped_events,
            "chunks": attrs.get(sc.CHUNK_COUNT_RECORDED),
            "floor_ms": attrs.get(sc.CHUNK_EVENTS_FLOOR_MS),
            "min_gap_ms": min(gaps, default=0) / 1e6,
            "status": attrs.get(sc.METERING_STATUS),
        }


class OpenAIStreamer:
    """``instrument_openai()`` around the openai SDK's sync client."""

    def __init__(self, args: argparse.Namespace, pipeline: Pipeline) -> None:
        import openai

        from otel_llm import instrument_openai

        instrument_openai(
            tracer_provider=pipeline.tracer_provider, meter_provider=pipeline.meter_provider
        )
        self.client = openai.OpenAI(base_url=args.url, api_key="sk-bench", max_retries=0)
        self.header = args.script_header

    def stream(self, chunks: int) -> None:
        script = {"chunk_count": chunks, "chunk_interval_s": 0, "first_chunk_delay_s": 0}
        stream = self.client.chat.completions.create(
            model=MODEL,
            messages=MESSAGES,
            stream=True,
            extra_headers={self.header: json.dumps(script)},
        )
        for _ in stream:
            pass

    def close(self) -> None:
        self.client.close()


class ClientStreamer:
    """``otel_llm.Client`` over a scripted in-memory upstream."""

    def __init__(self, args: argparse.Namespace, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.loop = asyncio.new_event_loop()

    def stream(self, chunks: int) -> None:
        self.loop.run_until_complete(self._stream(chunks))

    async def _stream(self, chunks: int) -> None:
        from otel_llm import Client, Source
        from otel_llm.testing import Scripted, sse_answer

        script = Scripted({"a": [sse_answer([f"w{i} " for i in range(chunks)], model=MODEL)]})
        http = script.client()
        source = Source(name="a", provider="openai", base_url="http://a.test/v1", model=MODEL)
        async with Client(
            [source],
            http_client=http,
            tracer_provider=self.pipeline.tracer_provider,
            meter_provider=self.pipeline.meter_provider,
        ) as client:
            await client.chat(MESSAGES)
        await http.aclose()

    def close(self) -> None:
        self.loop.close()


def worker(args: argparse.Namespace) -> None:
    """Warm up, then the measured stream between two ``os.getppid()`` markers."""
    from otel_llm.testing import use_clock

    warnings.simplefilter("ignore")
    pipeline = Pipeline()
    streamer: OpenAIStreamer | ClientStreamer = (
        OpenAIStreamer(args, pipeline) if args.path == "openai" else ClientStreamer(args, pipeline)
    )
    with use_clock(SteppedClock(SHAPES[args.shape])):
        streamer.stream(args.chunks)
        pipeline.recorded()
        gc.collect()
        gc.disable()  # a collection lands in one stream or the other by chance: not in either
        os.getppid()
        for _ in range(args.streams):
            streamer.stream(args.chunks)
        os.getppid()
        gc.enable()
    print(json.dumps({"recorded": pipeline.recorded(args.streams)}), flush=True)
    streamer.close()


# --- the driver -----------------------------------------------------------------------------


@dataclass
class Run:
    """One callgrind run: a path, a shape, a package revision."""

    path: str
    shape: str
    tree: str
    streams: int
    instructions: int = 0
    recorded: dict[str, Any] | None = None


def callgrind(args: argparse.Namespace, run: Run, package_dir: str) -> None:
    """Run one worker under callgrind; keep the count of the measured stream."""
    started = time.monotonic()
    env = {**child_env(package_dir), "PYTHONHASHSEED": "0"}
    command = [
        *child_command(__spec__.name),
        "--worker",
        "--path",
        run.path,
        "--shape",
        run.shape,
        "--chunks",
        str(args.chunks),
        "--streams",
        str(args.streams),
        "--url",
        args.url,
        "--script-header",
        args.script_header,
    ]
    with marked_run(command, env, f"{run.path}/{run.shape}") as (done, parts):
        run.instructions = totals_of(parts[1])
        run.recorded = json.loads(done.stdout.strip().splitlines()[-1])["recorded"]
        if args.keep:
            kept = os.path.join(args.keep, f"callgrind.{run.tree}.{run.path}.{run.shape}")
            shutil.copy(parts[1], kept)
    elapsed = time.monotonic() - started
    print(f"  {run.tree} {run.path}/{run.shape}: {elapsed:.0f} s", file=sys.stderr, flush=True)


def export_revision(revision: str, into: str) -> str:
    """The package at ``revision``, exported into ``into``; returns the directory to import."""
    archive = os.path.join(into, "package.tar")
    subprocess.run(
        ["git", "-C", ROOT, "archive", "--format=tar", "-o", archive, revision, "otel_llm"],
        check=True,
    )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


def per_event(runs: dict[tuple[str, str, str], Run], tree: str, path: str) -> float | None:
    with_events, without = runs.get((tree, path, "events")), runs.get((tree, path, "none"))
    if with_events is None or without is None or not with_events.recorded:
        return None
    assert without.recorded is not None
    extra = (with_events.recorded["events"] - without.recorded["events"]) * with_events.streams
    return (with_events.instructions - without.instructions) / extra if extra > 0 else None


def report(
    args: argparse.Namespace, runs: dict[tuple[str, str, str], Run], trees: list[str]
) -> str:
    lines: list[str] = []
    emit: Callable[[str], None] = lines.append
    emit(
        f"chunk events: {args.streams} measured streams of {args.chunks} chunks per process under "
        "callgrind (after a warm-up stream), metering clock stepped 150 ms (events) or 1 µs "
        "(none) per read; events = chunk events per span"
    )
    emit("")
    header = (
        f"{'package':<10}{'path':<8}{'shape':<8}{'instructions':>14}{'instr/chunk':>13}"
        f"{'events':>8}{'floor':>7}{'min gap':>9}  status"
    )
    emit(header)
    emit("-" * len(header))
    for tree in trees:
        for path in args.paths:
            for shape in SHAPES:
                run = runs[(tree, path, shape)]
                rec = run.recorded or {}
                emit(
                    f"{tree:<10}{path:<8}{shape:<8}{run.instructions:>14,}"
                    f"{run.instructions / (args.chunks * args.streams):>13,.0f}"
                    f"{rec.get('events', 0):>8}"
                    f"{rec.get('floor_ms', '-')!s:>7}{rec.get('min_gap_ms', 0):>7.0f}ms"
                    f"  {rec.get('status')}"
                )
    emit("")
    emit(
        "instructions per chunk event = (events - none)"
        " / ((events recorded with events - events recorded without) x streams)"
    )
    for path in args.paths:
        figures = {tree: per_event(runs, tree, path) for tree in trees}
        text = ", ".join(
            f"{tree} {value:,.0f}" if value is not None else f"{tree} -"
            for tree, value in figures.items()
        )
        if len(trees) == 2 and figures[trees[0]] and figures[trees[1]]:
            text += f" ({figures[trees[0]] / figures[trees[1]]:.1f}x fewer now)"  # type: ignore[operator]
        emit(f"  {path:<8}{text}")
    emit("")
    for path in args.paths:
        now = per_event(runs, "now", path)
        verdict = "PASS" if now is not None and now <= TARGET else "FAIL"
        shown = f"{now:,.0f}" if now is not None else "-"
        emit(f"{verdict}  {path}: a chunk event <= {TARGET:,} instructions: {shown}")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> None:
    from benchmarks.support.provider import start_provider
    from otel_llm.simulator import SCRIPT_HEADER

    args.script_header = SCRIPT_HEADER
    started = time.monotonic()
    trees = ["before", "now"] if args.baseline else ["now"]
    runs = {
        (tree, path, shape): Run(path, shape, tree, args.streams)
        for tree in trees
        for path in args.paths
        for shape in SHAPES
    }
    proc, args.url = (None, "-")
    if "openai" in args.paths:
        proc, args.url = start_provider()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            dirs = {"now": ROOT}
            if args.baseline:
                dirs["before"] = export_revision(args.baseline, tmp)
            for (tree, _, _), run in runs.items():
                callgrind(args, run, dirs[tree])
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
    text = report(args, runs, trees)
    if args.baseline:
        text = f"before = git revision {args.baseline}; now = this working tree\n" + text
    text += f"\n\nrun time {time.monotonic() - started:.0f} s"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    assert __doc__ is not None
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--chunks", type=int, default=116, help="chunks per stream (<= 117: one event each)"
    )
    parser.add_argument(
        "--paths",
        type=lambda text: [p for p in text.split(",") if p],
        default=list(PATHS),
        help="comma-separated subset of " + ",".join(PATHS),
    )
    parser.add_argument(
        "--streams", type=int, default=4, help="measured streams per process (averaged)"
    )
    parser.add_argument("--baseline", help="also measure the package at this git revision")
    parser.add_argument("--keep", help="copy the callgrind dumps of the measured streams here")
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--path", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--shape", choices=list(SHAPES), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--script-header", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = [p for p in args.paths if p not in PATHS]
    if unknown:
        parser.error(f"unknown paths {unknown}")
    if not args.worker and shutil.which("valgrind") is None:
        parser.error("valgrind is not on PATH")
    return args


if __name__ == "__main__":
    arguments = parse()
    if arguments.worker:
        worker(arguments)
    else:
        from benchmarks.support.header import print_header

        print_header(__spec__.name)
        main(arguments)
