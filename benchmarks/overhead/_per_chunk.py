"""What the per-chunk overhead benchmarks of the wrapped SDKs share (``openai_sdk``,
``wrapped_sdks``).

Such a benchmark streams answers of given lengths through one SDK once per *variant* -- the bare
SDK, otel-llm, each peer instrumentation -- each variant in a process of its own, so
instrumentations never stack. This module holds both sides of that:

* the variant process (the worker): the in-memory telemetry every instrumented variant records
  into (:func:`in_memory_telemetry`) and reads back (:meth:`Telemetry.recorded`), and the two
  loops a worker runs -- :func:`callgrind_worker` (each measured stream between two
  ``os.getppid()`` markers, at which callgrind dumps its counters) and :func:`timing_worker`
  (one CPU-timed stream per ``run N`` line on its standard input);
* the driver: :func:`timed` (every variant process started and warmed up first, then rounds of
  one stream per variant and length, in a rotating order), :func:`callgrind` (one callgrind
  process per variant, all lengths in it), their :class:`Result`, the table and the verdict
  lines.

The workers speak JSON lines on standard output; the last line of a callgrind worker is what
each measured stream recorded.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchmarks.support.callgrind import marked_run, totals_of

TARGET_RATIO = 1.05
"""otel-llm's instructions (or CPU time) per chunk at most this many times the bare SDK's."""


# --- the variant process ----------------------------------------------------------------------


@dataclass
class Telemetry:
    """The telemetry a variant records into (all ``None`` for ``bare``)."""

    tracer_provider: Any = None
    meter_provider: Any = None
    spans: Any = None
    """The ``InMemorySpanExporter``."""
    metrics: Any = None
    """The ``InMemoryMetricReader``."""

    def recorded(self) -> dict[str, Any]:
        """What the variant recorded since the last call (and forget it)."""
        exporter, reader = self.spans, self.metrics
        if exporter is None:
            return {"spans": []}
        spans = []
        for span in exporter.get_finished_spans():
            scope = span.instrumentation_scope
            spans.append(
                {
                    "name": span.name,
                    "scope": scope.name if scope else "",
                    "attributes": len(span.attributes or {}),
                    "events": len(span.events),
                    "dropped_events": span.dropped_events,
                }
            )
        exporter.clear()
        points = 0
        names: list[str] = []
        data = reader.get_metrics_data() if reader is not None else None
        for resource_metrics in data.resource_metrics if data else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    names.append(metric.name)
                    points += len(metric.data.data_points)
        return {"spans": spans, "metrics": sorted(set(names)), "metric_points": points}


def in_memory_telemetry(*, deriving: bool) -> Telemetry:
    """A fresh SDK pipeline: a ``TracerProvider`` (default limits) whose spans go through a
    ``SimpleSpanProcessor`` to an ``InMemorySpanExporter`` -- wrapped in otel-llm's
    ``DerivingSpanProcessor`` when ``deriving`` -- and a ``MeterProvider`` with an
    ``InMemoryMetricReader`` (so histograms are really aggregated, not dropped by the no-op
    default)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    tracer_provider = TracerProvider()
    processor: SpanProcessor = SimpleSpanProcessor(exporter)
    if deriving:
        from otel_llm import DerivingSpanProcessor

        processor = DerivingSpanProcessor([processor])
    tracer_provider.add_span_processor(processor)
    return Telemetry(
        tracer_provider=tracer_provider,
        meter_provider=MeterProvider(metric_readers=[reader]),
        spans=exporter,
        metrics=reader,
    )


def script_headers(header: str, chunks: int) -> dict[str, str]:
    """The simulated provider's script for an answer of ``chunks`` chunks, zero cadence."""
    script = {"chunk_count": chunks, "chunk_interval_s": 0, "first_chunk_delay_s": 0}
    return {header: json.dumps(script)}


class Streamer(Protocol):
    """One variant's client in its worker process."""

    variant: str
    extra_items: int
    """Items the SDK yields beside the incremental chunks of an answer (its frame)."""

    def stream(self, chunks: int) -> int:
        """Stream one answer of ``chunks`` chunks to its end (and wait for what the variant
        does after it); return the items the SDK yielded."""
        ...

    def recorded(self) -> dict[str, Any]:
        """What the variant recorded since the last call (and forget it)."""
        ...

    def close(self) -> None: ...


def expect_items(streamer: Streamer, seen: int, chunks: int) -> None:
    """Stop the worker when a stream did not yield the whole answer."""
    wanted = chunks + streamer.extra_items
    if seen != wanted:
        raise SystemExit(f"{streamer.variant}: the stream yielded {seen} items, not {wanted}")


def callgrind_worker(
    streamer: Streamer, lengths: Sequence[int], warmup_chunks: int, *, collect: bool = False
) -> None:
    """Warm up, then each measured stream between two ``os.getppid()`` markers (callgrind dumps
    at each), then report what each recorded (read between the markers' pairs: not counted).

    With ``collect``, a full garbage collection runs before each measured stream (outside it):
    every variant's stream then starts from the same collector state, and a collection inside
    it is one its own allocations caused, not one that history happened to leave due."""
    expect_items(streamer, streamer.stream(warmup_chunks), warmup_chunks)
    streamer.recorded()
    recorded = []
    for chunks in lengths:
        if collect:
            gc.collect()
        os.getppid()
        seen = streamer.stream(chunks)
        os.getppid()
        expect_items(streamer, seen, chunks)
        recorded.append(streamer.recorded())
    print(json.dumps({"recorded": recorded}), flush=True)
    streamer.close()


def timing_worker(streamer: Streamer, warmup_chunks: int, *, collect: bool = False) -> None:
    """Warm up, say ``ready``, then one measured stream per ``run N`` line on stdin (``collect``:
    as in :func:`callgrind_worker`)."""
    expect_items(streamer, streamer.stream(warmup_chunks), warmup_chunks)
    streamer.recorded()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] != "run":
            break
        chunks = int(words[1])
        if collect:
            gc.collect()
        start = time.process_time()
        seen = streamer.stream(chunks)
        cpu = time.process_time() - start
        expect_items(streamer, seen, chunks)
        print(json.dumps({"cpu_s": cpu, "recorded": streamer.recorded()}), flush=True)
    streamer.close()


# --- the driver -------------------------------------------------------------------------------


@dataclass
class Result:
    """What the driver learnt about one variant, per answer length (chunks)."""

    instructions: dict[int, int] = field(default_factory=dict)
    """Instructions of the measured stream (callgrind)."""
    process_instructions: int | None = None
    """Instructions of the whole callgrind process."""
    cpu_us: dict[int, list[float]] = field(default_factory=dict)
    """CPU µs per chunk, one per round."""
    recorded: dict[int, dict[str, Any]] = field(default_factory=dict)

    def instructions_per_chunk(self, chunks: int) -> float | None:
        count = self.instructions.get(chunks)
        return count / chunks if count else None

    def cpu_per_chunk(self, chunks: int) -> float | None:
        """The median over the rounds."""
        rounds = self.cpu_us.get(chunks)
        return statistics.median(rounds) if rounds else None


def _read_reply(proc: subprocess.Popen[str], variant: str) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"{variant}: the worker process ended (exit code {proc.wait()})")
    reply: dict[str, Any] = json.loads(line)
    return reply


def timed(
    commands: Mapping[str, Sequence[str]],
    env: Mapping[str, str],
    lengths: Sequence[int],
    rounds: int,
    results: Mapping[str, Result],
) -> None:
    """Every variant's timing worker (``commands[variant]``) warms up, then ``rounds`` rounds of
    one stream per variant and length, the variants in turn, in a rotating order, so drift in
    the machine's load spreads over all of them."""
    workers: dict[str, subprocess.Popen[str]] = {}
    try:
        for variant, command in commands.items():
            workers[variant] = subprocess.Popen(
                list(command),
                env=dict(env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        for variant, proc in workers.items():
            _read_reply(proc, variant)  # ready
        order = list(commands)
        for index in range(rounds):
            shift = index % len(order)
            for variant in order[shift:] + order[:shift]:
                proc = workers[variant]
                assert proc.stdin is not None
                for chunks in lengths:
                    proc.stdin.write(f"run {chunks}\n")
                    proc.stdin.flush()
                    reply = _read_reply(proc, variant)
                    cpu_us = reply["cpu_s"] / chunks * 1e6
                    results[variant].cpu_us.setdefault(chunks, []).append(cpu_us)
                    results[variant].recorded[chunks] = reply["recorded"]
            print(f"  round {index + 1}/{rounds} done", file=sys.stderr, flush=True)
    finally:
        for proc in workers.values():
            if proc.stdin is not None and not proc.stdin.closed:
                proc.stdin.close()
        for proc in workers.values():
            proc.wait(timeout=60)


def callgrind(
    command: Sequence[str],
    env: Mapping[str, str],
    variant: str,
    lengths: Sequence[int],
    result: Result,
) -> None:
    """Run ``variant``'s callgrind worker once under callgrind, with ``PYTHONHASHSEED=0``; keep
    the count of each measured stream (the dumps between each pair of markers)."""
    started = time.monotonic()
    env = {**env, "PYTHONHASHSEED": "0"}
    with marked_run(command, env, variant, markers=2 * len(lengths)) as (done, parts):
        counts = [totals_of(part) for part in parts]
        for index, chunks in enumerate(lengths):
            result.instructions[chunks] = counts[2 * index + 1]
        result.process_instructions = sum(counts)
        recorded = json.loads(done.stdout.strip().splitlines()[-1])["recorded"]
        for chunks, what in zip(lengths, recorded, strict=True):
            result.recorded[chunks] = what
    elapsed = time.monotonic() - started
    print(f"  callgrind: {variant} done in {elapsed:.0f} s", file=sys.stderr, flush=True)


def callgrind_all(
    commands: Mapping[str, Sequence[str]],
    env: Mapping[str, str],
    lengths: Sequence[int],
    results: Mapping[str, Result],
    jobs: int,
) -> None:
    """:func:`callgrind` for every variant's worker (``commands[variant]``), ``jobs`` at once."""
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for _ in pool.map(
            lambda variant: callgrind(commands[variant], env, variant, lengths, results[variant]),
            commands,
        ):
            pass


def publish(text: str, out: str | None) -> None:
    """Print a benchmark's report, and write it to ``out`` too when given."""
    print(text)
    if out:
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")


# --- the report -------------------------------------------------------------------------------


def ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.3f}x" if value is not None and base else "-"


def describe_recorded(recorded: Mapping[str, Any]) -> str:
    """One line: each span (scope, name, attribute and event counts) and the metric points."""
    spans = recorded.get("spans", [])
    if "metrics" not in recorded:
        return "nothing (no instrumentation)"
    if not spans:
        text = "NO SPANS"
    else:
        text = "; ".join(
            f"{s['scope']}: '{s['name']}' {s['attributes']} attrs, {s['events']} events"
            + (f" (+{s['dropped_events']} dropped)" if s["dropped_events"] else "")
            for s in spans
        )
    names = recorded.get("metrics", [])
    return f"{text}; metrics: {recorded.get('metric_points', 0)} points in {len(names)}" + (
        f" ({', '.join(names)})" if names else ""
    )


def table(
    variants: Sequence[str],
    results: Mapping[str, Result],
    instruction_chunks: int,
    cpu_chunks: int,
) -> list[str]:
    """Per variant: instructions per chunk of the ``instruction_chunks`` stream and CPU µs per
    chunk of the ``cpu_chunks`` streams (median, min, max), each with its ratio to ``bare``."""
    bare = results.get("bare")
    bare_i = bare.instructions_per_chunk(instruction_chunks) if bare else None
    bare_t = bare.cpu_per_chunk(cpu_chunks) if bare else None
    header = f"{'variant':<13}{'instr/chunk':>13}{'ratio':>9}{'CPU µs/chunk':>15}{'ratio':>9}"
    header += f"{'CPU min':>10}{'max':>9}"
    lines = [header, "-" * len(header)]
    for variant in variants:
        result = results[variant]
        inst = result.instructions_per_chunk(instruction_chunks)
        cpu = result.cpu_per_chunk(cpu_chunks)
        rounds = result.cpu_us.get(cpu_chunks)
        lines.append(
            f"{variant:<13}"
            + (f"{inst:>13,.0f}" if inst is not None else f"{'-':>13}")
            + f"{ratio(inst, bare_i):>9}"
            + (f"{cpu:>15.2f}" if cpu is not None else f"{'-':>15}")
            + f"{ratio(cpu, bare_t):>9}"
            + (f"{min(rounds):>10.2f}{max(rounds):>9.2f}" if rounds else "")
        )
    return lines


@dataclass
class Verdict:
    """The two targets judged on one set of per-chunk figures."""

    lines: list[str]
    """One PASS or FAIL line per target judged."""
    failed: list[str]
    """The targets judged and not met."""
    complete: bool
    """Both targets could be judged (otel-llm, bare and a peer measured)."""

    @property
    def passed(self) -> bool:
        return self.complete and not self.failed


BARE_TARGET = f"otel-llm <= {TARGET_RATIO:.2f}x bare"
PEER_TARGET = "otel-llm below every peer"


def verdicts(
    figures: Mapping[str, float], peers: Sequence[str], unit: str, target: float = TARGET_RATIO
) -> Verdict:
    """``otel-llm <= target x bare`` and ``otel-llm below every peer`` judged on ``figures``
    (per chunk, by variant)."""
    bare_target = f"otel-llm <= {target:.2f}x bare"
    lines: list[str] = []
    failed: list[str] = []
    judged = 0
    ours, base = figures.get("otel-llm"), figures.get("bare")
    if ours is not None and base is not None:
        judged += 1
        met = ours <= target * base
        failed += [] if met else [bare_target]
        lines.append(
            f"{'PASS' if met else 'FAIL'}  {bare_target} ({unit}): {ours / base:.3f}x "
            f"(+{ours - base:,.1f} per chunk)"
        )
    present = [p for p in peers if p in figures]
    if ours is not None and present:
        judged += 1
        met = all(ours < figures[p] for p in present)
        failed += [] if met else [PEER_TARGET]
        detail = ", ".join(f"{p} {figures[p] / ours:.3f}x ours" for p in present)
        lines.append(f"{'PASS' if met else 'FAIL'}  {PEER_TARGET} ({unit}): {detail}")
    return Verdict(lines, failed, complete=judged == 2)
