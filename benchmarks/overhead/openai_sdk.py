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
   answers of each of ``--callgrind-chunks`` lengths (150, 1,000 and 2,000 chunks by default),
   each between two calls of ``os.getppid()``;
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

Targets (judged on instructions at every length; on CPU time with ``--no-callgrind``): otel-llm
<= 1.02x bare (``TARGET``), and below every peer. The script also prints what each variant
recorded for the measured stream (spans, span events, metric points), so a variant that records
nothing is visible.

    .venv/bin/python -m benchmarks.overhead.openai_sdk [--chunks 20000] [--rounds 5]
        [--callgrind-chunks 150,1000,2000] [--no-callgrind] [--client sync|async] [--out FILE]

The default run takes about seven minutes on a 2-core machine, most of it under callgrind.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import child_command, child_env
from benchmarks.overhead._per_chunk import (
    Result,
    Telemetry,
    callgrind_all,
    callgrind_worker,
    describe_recorded,
    in_memory_telemetry,
    publish,
    script_headers,
    table,
    timed,
    timing_worker,
    verdicts,
)
from benchmarks.support.provider import start_provider

VARIANTS = ("bare", "otel-llm", "openllmetry", "contrib")
PEERS = ("openllmetry", "contrib")
TARGET = 1.02
"""otel-llm's instructions per chunk at most this many times the bare SDK's, at every length."""
MODEL = "bench"
MESSAGES: Any = [{"role": "user", "content": "go"}]
EXTRA_ITEMS = 2
"""Items the SDK yields beside the incremental chunks: the role chunk and the finish chunk."""
CONTENT_VARIABLES = (
    "TRACELOOP_TRACE_CONTENT",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
)


# --- the variant process ----------------------------------------------------------------------


def instrument(variant: str) -> Telemetry:
    """Install ``variant``'s instrumentation into a fresh SDK pipeline."""
    if variant == "bare":
        return Telemetry()
    telemetry = in_memory_telemetry(deriving=variant == "otel-llm")
    providers = {
        "tracer_provider": telemetry.tracer_provider,
        "meter_provider": telemetry.meter_provider,
    }
    if variant == "otel-llm":
        from otel_llm import instrument_openai

        instrument_openai(**providers)
    elif variant == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry

        OpenLLMetry().instrument(**providers)
    elif variant == "contrib":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        Contrib: Any = OpenAIInstrumentor  # untyped

        Contrib().instrument(**providers)
    else:
        raise ValueError(f"unknown variant {variant!r}")
    return telemetry


class Streamer:
    """One variant's client: streams answers of a given length and counts the items."""

    extra_items = EXTRA_ITEMS

    def __init__(self, args: argparse.Namespace) -> None:
        warnings.simplefilter("ignore")  # the peers' pydantic/semconv deprecation warnings
        variant, base_url, client_kind = args.variant, args.url, args.client
        self.variant = variant
        self.header = args.script_header
        self.telemetry = instrument(variant)
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
        return self.telemetry.recorded()

    def close(self) -> None:
        if self.sync_client is not None:
            self.sync_client.close()
        if self.async_client is not None and self.loop is not None:
            self.loop.run_until_complete(self.async_client.close())
            self.loop.close()


# --- the driver -------------------------------------------------------------------------------


def worker_command(args: argparse.Namespace, variant: str, role: str) -> list[str]:
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
        "--callgrind-chunks",
        ",".join(map(str, args.callgrind_chunks)),
        "--warmup-chunks",
        str(args.warmup_chunks),
    ]


def report(args: argparse.Namespace, results: dict[str, Result], elapsed_s: float) -> str:
    lines: list[str] = []
    emit: Callable[[str], None] = lines.append
    use_callgrind = not args.no_callgrind
    lengths = ", ".join(f"{n:,}" for n in args.callgrind_chunks)
    emit(
        f"openai {args.openai_version}, {args.client} client, streamed chat completion, "
        "simulated provider in its own process, zero cadence"
    )
    if use_callgrind:
        emit(
            f"instructions: callgrind, one measured stream of each length ({lengths} chunks) "
            f"per variant process (after a {args.warmup_chunks:,}-chunk warm-up)"
        )
    emit(
        f"CPU time: time.process_time(), median of {args.rounds} rounds of {args.chunks:,} "
        "chunks (secondary: noisy on a shared machine)"
    )
    verdict_lines: list[str] = []
    per_chunk_t: dict[str, float] = {}
    for variant in args.variants:
        cpu = results[variant].cpu_per_chunk(args.chunks)
        if cpu is not None:
            per_chunk_t[variant] = cpu
    for measured in args.callgrind_chunks if use_callgrind else [args.chunks]:
        emit("")
        emit(f"== {measured:,} chunks")
        for line in table(args.variants, results, measured, args.chunks):
            emit(line)
        emit("recorded for the measured stream:")
        for variant in args.variants:
            recorded = results[variant].recorded.get(measured, {})
            emit(f"  {variant:<13}{describe_recorded(recorded)}")
        per_chunk_i: dict[str, float] = {}
        for variant in args.variants:
            inst = results[variant].instructions_per_chunk(measured)
            if inst is not None:
                per_chunk_i[variant] = inst
        figures, unit = (per_chunk_i, "instructions") if use_callgrind else (per_chunk_t, "CPU")
        for line in verdicts(figures, PEERS, unit, target=TARGET).lines:
            verdict_lines.append(f"{line}   [{measured:,} chunks]")
    if use_callgrind:
        emit("")
        emit("whole callgrind process (start-up, instrumentation, warm-up, streams, exit):")
        for variant in args.variants:
            total = results[variant].process_instructions
            emit(f"  {variant:<13}{total:>16,}" if total else f"  {variant:<13}{'-':>16}")
    emit("")
    lines.extend(verdict_lines)
    cpu_ours, cpu_base = per_chunk_t.get("otel-llm"), per_chunk_t.get("bare")
    if use_callgrind and cpu_ours is not None and cpu_base:
        emit(f"(CPU time, secondary: otel-llm {cpu_ours / cpu_base:.3f}x bare; not judged: noisy)")
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
        commands = {v: worker_command(args, v, "time-worker") for v in args.variants}
        timed(commands, child_env(), [args.chunks], args.rounds, results)
        if not args.no_callgrind:
            commands = {v: worker_command(args, v, "callgrind-worker") for v in args.variants}
            callgrind_all(commands, child_env(), args.callgrind_chunks, results, args.jobs)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    publish(report(args, results, time.monotonic() - started), args.out)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    assert __doc__ is not None
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000, help="chunks per timed stream")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per variant")
    parser.add_argument(
        "--callgrind-chunks",
        type=lambda text: [int(n) for n in text.split(",") if n],
        default=[150, 1_000, 2_000],
        help="chunks of each measured callgrind stream (comma-separated)",
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
        callgrind_worker(Streamer(arguments), arguments.callgrind_chunks, arguments.warmup_chunks)
    elif arguments.time_worker:
        timing_worker(Streamer(arguments), arguments.warmup_chunks)
    else:
        from benchmarks.support.header import print_header

        print_header(__spec__.name)
        main(arguments)
