"""Per-chunk CPU cost of ``instrument_openai()`` against the bare openai SDK and two peers.

Four variants stream the same long answer through the openai SDK's sync client
(``openai.OpenAI(...).chat.completions.create(..., stream=True)``, iterated to the end) from the
simulated provider, which runs in its own process with zero cadence:

* ``bare``        -- the openai SDK, no instrumentation;
* ``otel-llm``    -- ``otel_llm.instrument_openai()``;
* ``openllmetry`` -- ``opentelemetry.instrumentation.openai.OpenAIInstrumentor`` (OpenLLMetry);
* ``contrib``     -- ``opentelemetry.instrumentation.openai_v2.OpenAIInstrumentor`` (OTel contrib).

Every instrumented variant gets the same telemetry pipeline: an SDK ``TracerProvider`` (default
limits) whose spans go through a ``SimpleSpanProcessor`` to an ``InMemorySpanExporter``, and an
SDK ``MeterProvider`` with an ``InMemoryMetricReader`` (so histograms are really aggregated, not
dropped by the no-op default). otel-llm's spans additionally pass through its
``DerivingSpanProcessor`` (wrapping that same ``SimpleSpanProcessor``), as a user of otel-llm
would have it; the peers do not need it and do not get it, so its cost counts against otel-llm
only. No logger provider is installed (the global no-op one), so the contrib instrumentation's
``gen_ai.*`` log events go nowhere. The peers run with their default settings: OpenLLMetry
captures prompts and completions by default (``TRACELOOP_TRACE_CONTENT`` defaults to ``true``;
content is set as span attributes), adds one span event per streamed chunk (the SDK keeps the
last 128) and turns every chunk into a dict to accumulate the answer. The contrib
instrumentation does not capture content (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
unset means no content); with the ``opentelemetry-util-genai`` 1.1b0 this project pins,
``is_experimental_mode()`` is always true, so it takes its latest-experimental-conventions path
(spans from ``opentelemetry.util.genai.handler``) whatever ``OTEL_SEMCONV_STABILITY_OPT_IN``
says; per chunk it only copies id, model and content into buffers and times nothing. otel-llm
does not capture content by default either; per chunk it timestamps the read and the arrival,
classifies the chunk and notes finish reason and usage. The benchmark does not change any of
these variables; it warns when one of them is set in its environment.

Each variant runs in its own Python process (a subcommand of this script), so instrumentations
never stack -- neither peer fully uninstruments this openai release. Two figures per variant:

1. Primary, deterministic: instructions per chunk under ``valgrind --tool=callgrind``. Each
   variant process starts up, instruments, streams a warm-up answer, then streams the measured
   answer of ``--callgrind-chunks`` chunks between two calls of ``os.getppid()``;
   ``--dump-before=getppid`` makes callgrind dump its counters at each of them, so the middle
   dump holds exactly the measured stream -- the whole ``create()`` call, every chunk, the end
   of the spans and their export -- with start-up, instrumentation, warm-up and shut-down
   subtracted. instructions/chunk = that count / chunks. The processes run with
   ``PYTHONHASHSEED=0``, niced, one after another (``--jobs 2`` runs two at once: the counts do
   not change, but other work on the machine does).
2. Secondary, noisy: median ``time.process_time()`` per chunk of the measured stream of
   ``--chunks`` chunks, over ``--rounds`` rounds, without valgrind. All variant processes are
   started and warmed up first, then each round runs one stream per variant, one at a time, in a
   rotating order, so drift in the machine's load spreads over all variants.

Targets (judged on instructions; on CPU time with ``--no-callgrind``): otel-llm <= 1.05x bare,
and below every peer. The script also prints what each variant recorded for the measured stream
(spans, span events, metric points), so a variant that records nothing is visible.

    .venv/bin/python -m benchmarks.overhead.openai_sdk [--chunks 20000] [--rounds 5]
        [--callgrind-chunks 2000] [--no-callgrind] [--client sync|async] [--out FILE]

The default run takes about seven minutes on a 2-core machine, most of it under callgrind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from benchmarks import child_command, child_env
from benchmarks.support.callgrind import marked_run, totals_of
from benchmarks.support.provider import start_provider

VARIANTS = ("bare", "otel-llm", "openllmetry", "contrib")
PEERS = ("openllmetry", "contrib")
MODEL = "bench"
MESSAGES: Any = [{"role": "user", "content": "go"}]
EXTRA_ITEMS = 2
"""Items the SDK yields beside the incremental chunks: the role chunk and the finish chunk."""
TARGET_RATIO = 1.05
CONTENT_VARIABLES = (
    "TRACELOOP_TRACE_CONTENT",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
)


# --- the variant process ----------------------------------------------------------------------


@dataclass
class Pipeline:
    """The telemetry a variant records into (``None`` for ``bare``)."""

    spans: Any = None
    """The ``InMemorySpanExporter``."""
    metrics: Any = None
    """The ``InMemoryMetricReader``."""


def instrument(variant: str) -> Pipeline:
    """Install ``variant``'s instrumentation into a fresh SDK pipeline."""
    if variant == "bare":
        return Pipeline()
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    tracer_provider = TracerProvider()
    processor: SpanProcessor = SimpleSpanProcessor(exporter)
    if variant == "otel-llm":
        from otel_llm import DerivingSpanProcessor, instrument_openai

        tracer_provider.add_span_processor(DerivingSpanProcessor([processor]))
        instrument_openai(tracer_provider=tracer_provider, meter_provider=meter_provider)
    elif variant == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry

        tracer_provider.add_span_processor(processor)
        OpenLLMetry().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    elif variant == "contrib":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        Contrib: Any = OpenAIInstrumentor  # untyped

        tracer_provider.add_span_processor(processor)
        Contrib().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    else:
        raise ValueError(f"unknown variant {variant!r}")
    return Pipeline(spans=exporter, metrics=reader)


def script_headers(header: str, chunks: int) -> dict[str, str]:
    """The simulated provider's script for an answer of ``chunks`` chunks, zero cadence."""
    script = {"chunk_count": chunks, "chunk_interval_s": 0, "first_chunk_delay_s": 0}
    return {header: json.dumps(script)}


class Streamer:
    """One variant's client: streams answers of a given length and counts the items."""

    def __init__(self, args: argparse.Namespace) -> None:
        warnings.simplefilter("ignore")  # the peers' pydantic/semconv deprecation warnings
        variant, base_url, client_kind = args.variant, args.url, args.client
        self.variant = variant
        self.header = args.script_header
        self.pipeline = instrument(variant)
        import openai

        self.is_async = client_kind == "async"
        self.loop = asyncio.new_event_loop() if self.is_async else None
        self.sync_client = (
            None
            if self.is_async
            else openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
        )
        self.async_client = (
            openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
            if self.is_async
            else None
        )

    def stream(self, chunks: int) -> int:
        """Stream one answer of ``chunks`` chunks to its end; returns the items seen."""
        headers = script_headers(self.header, chunks)
        if self.sync_client is not None:
            stream = self.sync_client.chat.completions.create(
                model=MODEL, messages=MESSAGES, stream=True, extra_headers=headers
            )
            seen = 0
            for _ in stream:
                seen += 1
            return seen
        assert self.loop is not None
        return self.loop.run_until_complete(self._astream(headers))

    async def _astream(self, headers: dict[str, str]) -> int:
        assert self.async_client is not None
        stream: Any = await self.async_client.chat.completions.create(
            model=MODEL, messages=MESSAGES, stream=True, extra_headers=headers
        )
        seen = 0
        async for _ in stream:
            seen += 1
        return seen

    def recorded(self) -> dict[str, Any]:
        """What the variant recorded since the last call (and forget it)."""
        exporter, reader = self.pipeline.spans, self.pipeline.metrics
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
        data = reader.get_metrics_data()
        for resource_metrics in data.resource_metrics if data else ():
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    names.append(metric.name)
                    points += len(metric.data.data_points)
        return {"spans": spans, "metrics": sorted(set(names)), "metric_points": points}

    def close(self) -> None:
        if self.sync_client is not None:
            self.sync_client.close()
        if self.async_client is not None and self.loop is not None:
            self.loop.run_until_complete(self.async_client.close())
            self.loop.close()


def expect_items(variant: str, seen: int, chunks: int) -> None:
    if seen != chunks + EXTRA_ITEMS:
        raise SystemExit(f"{variant}: the stream yielded {seen} items, not {chunks + EXTRA_ITEMS}")


def callgrind_worker(args: argparse.Namespace) -> None:
    """Warm up, then the measured stream between two ``os.getppid()`` markers (callgrind dumps
    at each), then report what was recorded (after the second marker: not counted)."""
    streamer = Streamer(args)
    expect_items(args.variant, streamer.stream(args.warmup_chunks), args.warmup_chunks)
    streamer.recorded()
    os.getppid()
    seen = streamer.stream(args.chunks)
    os.getppid()
    expect_items(args.variant, seen, args.chunks)
    print(json.dumps({"recorded": streamer.recorded()}), flush=True)
    streamer.close()


def timing_worker(args: argparse.Namespace) -> None:
    """Warm up, say ``ready``, then one measured stream per ``run`` line on stdin."""
    streamer = Streamer(args)
    expect_items(args.variant, streamer.stream(args.warmup_chunks), args.warmup_chunks)
    streamer.recorded()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        start = time.process_time()
        seen = streamer.stream(args.chunks)
        cpu = time.process_time() - start
        expect_items(args.variant, seen, args.chunks)
        print(json.dumps({"cpu_s": cpu, "recorded": streamer.recorded()}), flush=True)
    streamer.close()


# --- the driver -------------------------------------------------------------------------------


@dataclass
class Result:
    """What the driver learnt about one variant."""

    instructions: int | None = None
    """Instructions of the measured stream (callgrind)."""
    process_instructions: int | None = None
    """Instructions of the whole callgrind process."""
    cpu_us: list[float] = field(default_factory=list)
    """CPU µs per chunk, one per round."""
    recorded: dict[str, Any] = field(default_factory=dict)


def worker_command(args: argparse.Namespace, variant: str, role: str, chunks: int) -> list[str]:
    return [
        *child_command(__spec__.name),
        "--variant",
        variant,
        f"--{role}",
        "--url",
        args.url,
        "--client",
        args.client,
        "--script-header",
        args.script_header,
        "--chunks",
        str(chunks),
        "--warmup-chunks",
        str(args.warmup_chunks),
    ]


def read_reply(proc: subprocess.Popen[str], variant: str) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"{variant}: the worker process ended (exit code {proc.wait()})")
    reply: dict[str, Any] = json.loads(line)
    return reply


def timed(args: argparse.Namespace, results: dict[str, Result]) -> None:
    """All variant processes warm up, then ``rounds`` rounds of one stream each, in turn."""
    workers: dict[str, subprocess.Popen[str]] = {}
    try:
        for variant in args.variants:
            workers[variant] = subprocess.Popen(
                worker_command(args, variant, "time-worker", args.chunks),
                env=child_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        for variant, proc in workers.items():
            read_reply(proc, variant)  # ready
        order = list(args.variants)
        for index in range(args.rounds):
            shift = index % len(order)
            for variant in order[shift:] + order[:shift]:
                proc = workers[variant]
                assert proc.stdin is not None
                proc.stdin.write("run\n")
                proc.stdin.flush()
                reply = read_reply(proc, variant)
                results[variant].cpu_us.append(reply["cpu_s"] / args.chunks * 1e6)
                results[variant].recorded = reply["recorded"]
            print(f"  round {index + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        for proc in workers.values():
            if proc.stdin is not None and not proc.stdin.closed:
                proc.stdin.close()
        for proc in workers.values():
            proc.wait(timeout=60)


def callgrind(args: argparse.Namespace, variant: str, result: Result) -> None:
    """Run ``variant`` once under callgrind; keep the count of the measured stream."""
    started = time.monotonic()
    env = {**child_env(), "PYTHONHASHSEED": "0"}
    command = worker_command(args, variant, "callgrind-worker", args.callgrind_chunks)
    with marked_run(command, env, variant) as (done, parts):
        counts = [totals_of(part) for part in parts]
        result.instructions = counts[1]
        result.process_instructions = sum(counts)
        result.recorded = json.loads(done.stdout.strip().splitlines()[-1])["recorded"]
    elapsed = time.monotonic() - started
    print(f"  callgrind: {variant} done in {elapsed:.0f} s", file=sys.stderr, flush=True)


def ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.3f}x" if value is not None and base else "-"


def describe_recorded(recorded: dict[str, Any]) -> str:
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


def report(args: argparse.Namespace, results: dict[str, Result], elapsed_s: float) -> str:
    lines: list[str] = []
    emit: Callable[[str], None] = lines.append
    use_callgrind = not args.no_callgrind
    bare = results.get("bare")
    bare_i = bare.instructions / args.callgrind_chunks if bare and bare.instructions else None
    bare_t = statistics.median(bare.cpu_us) if bare and bare.cpu_us else None
    emit(
        f"openai {args.openai_version}, {args.client} client, streamed chat completion, "
        "simulated provider in its own process, zero cadence"
    )
    if use_callgrind:
        emit(
            f"instructions: callgrind, one measured stream of {args.callgrind_chunks:,} chunks "
            f"per variant process (after a {args.warmup_chunks:,}-chunk warm-up)"
        )
    emit(
        f"CPU time: time.process_time(), median of {args.rounds} rounds of {args.chunks:,} "
        "chunks (secondary: noisy on a shared machine)"
    )
    emit("")
    header = f"{'variant':<13}{'instr/chunk':>13}{'ratio':>9}{'CPU µs/chunk':>15}{'ratio':>9}"
    header += f"{'CPU min':>10}{'max':>9}"
    emit(header)
    emit("-" * len(header))
    per_chunk_i: dict[str, float] = {}
    per_chunk_t: dict[str, float] = {}
    for variant in args.variants:
        result = results[variant]
        inst = result.instructions / args.callgrind_chunks if result.instructions else None
        cpu = statistics.median(result.cpu_us) if result.cpu_us else None
        if inst is not None:
            per_chunk_i[variant] = inst
        if cpu is not None:
            per_chunk_t[variant] = cpu
        emit(
            f"{variant:<13}"
            + (f"{inst:>13,.0f}" if inst is not None else f"{'-':>13}")
            + f"{ratio(inst, bare_i):>9}"
            + (f"{cpu:>15.2f}" if cpu is not None else f"{'-':>15}")
            + f"{ratio(cpu, bare_t):>9}"
            + (f"{min(result.cpu_us):>10.2f}{max(result.cpu_us):>9.2f}" if result.cpu_us else "")
        )
    emit("")
    if use_callgrind:
        emit("whole callgrind process (start-up, instrumentation, warm-up, measured stream, exit):")
        for variant in args.variants:
            total = results[variant].process_instructions
            emit(f"  {variant:<13}{total:>16,}" if total else f"  {variant:<13}{'-':>16}")
        emit("")
    emit("recorded for the measured stream:")
    for variant in args.variants:
        emit(f"  {variant:<13}{describe_recorded(results[variant].recorded)}")
    emit("")
    figures, unit = (per_chunk_i, "instructions") if use_callgrind else (per_chunk_t, "CPU time")
    ours, base = figures.get("otel-llm"), figures.get("bare")
    if ours is not None and base is not None:
        verdict = "PASS" if ours <= TARGET_RATIO * base else "FAIL"
        emit(
            f"{verdict}  otel-llm <= {TARGET_RATIO:.2f}x bare ({unit}): {ours / base:.3f}x "
            f"(+{ours - base:,.1f} per chunk)"
        )
    peers = [p for p in PEERS if p in figures]
    if ours is not None and peers:
        below = all(ours < figures[p] for p in peers)
        detail = ", ".join(f"{p} {figures[p] / ours:.3f}x ours" for p in peers)
        emit(f"{'PASS' if below else 'FAIL'}  otel-llm below every peer ({unit}): {detail}")
    if use_callgrind and ours is not None and base is not None and per_chunk_t.get("bare"):
        cpu_ours, cpu_base = per_chunk_t.get("otel-llm"), per_chunk_t["bare"]
        if cpu_ours is not None:
            emit(
                f"(CPU time, secondary: otel-llm {cpu_ours / cpu_base:.3f}x bare; "
                "not judged: noisy)"
            )
    emit("")
    emit(f"run time {elapsed_s:.0f} s")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> None:
    import openai

    from otel_llm.simulator import SCRIPT_HEADER

    args.openai_version = openai.__version__
    args.script_header = SCRIPT_HEADER
    for name in CONTENT_VARIABLES:
        if name in os.environ:
            print(f"note: {name}={os.environ[name]!r} is set: not the default", file=sys.stderr)
    started = time.monotonic()
    results = {variant: Result() for variant in args.variants}
    proc, args.url = start_provider()
    try:
        print(f"CPU time: {args.rounds} rounds ...", file=sys.stderr, flush=True)
        timed(args, results)
        if not args.no_callgrind:
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                for _ in pool.map(lambda v: callgrind(args, v, results[v]), args.variants):
                    pass
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    text = report(args, results, time.monotonic() - started)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    assert __doc__ is not None
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000, help="chunks per timed stream")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per variant")
    parser.add_argument(
        "--callgrind-chunks", type=int, default=2_000, help="chunks of the callgrind stream"
    )
    parser.add_argument("--warmup-chunks", type=int, default=200)
    parser.add_argument("--no-callgrind", action="store_true", help="CPU time only")
    parser.add_argument(
        "--jobs", type=int, default=1, help="callgrind processes at once (default 1)"
    )
    parser.add_argument("--client", choices=["sync", "async"], default="sync")
    parser.add_argument(
        "--variants",
        type=lambda text: [v for v in text.split(",") if v],
        default=list(VARIANTS),
        help="comma-separated subset of " + ",".join(VARIANTS),
    )
    parser.add_argument("--out", help="also write the table to this file")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--callgrind-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--time-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--script-header", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}")
    if not args.variant and not args.no_callgrind and shutil.which("valgrind") is None:
        parser.error("valgrind is not on PATH (use --no-callgrind for CPU time only)")
    return args


if __name__ == "__main__":
    arguments = parse()
    if arguments.callgrind_worker:
        callgrind_worker(arguments)
    elif arguments.time_worker:
        timing_worker(arguments)
    else:
        from benchmarks.support.header import print_header

        print_header(__spec__.name)
        main(arguments)
