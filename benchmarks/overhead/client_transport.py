"""Per-chunk cost of ``otel_llm.Client`` against a bare httpx2 SSE loop, in instructions.

The floor is what any Python client of a streamed chat completion pays: an ``httpx2.AsyncClient``
streams the POST, ``httpx2.EventSource`` decodes the server-sent events and ``json.loads`` parses
each one (the *bare* variant; it keeps nothing but a chunk count). ``otel_llm.Client`` does that
and everything it promises on top: the typed, checked chunk fields (a malformed chunk names its
field), the exact answer text, the chunk clock, the attempt and call spans with their chunk
events, the metrics -- recorded into an in-memory SDK pipeline (*otel-llm*), and once with no-op
providers to show what the telemetry costs on its own (*untraced*). For information, *lines* is
the leanest loop a hand-written client might use (``aiter_lines``, ``data:`` lines only: not a
whole SSE reader); the target is judged against *bare*.

Each variant runs in a process of its own under callgrind against the simulated provider (its own
process, zero cadence); each measured stream sits between two ``os.getppid()`` markers, after a
warm-up stream, so start-up, connection set-up and the warm-up are not counted. The target: the
client at most ``TARGET`` times the bare loop per chunk, at every length.

    .venv/bin/python -m benchmarks.overhead.client_transport [--lengths 150,1000,2000] [--out F]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
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
)
from benchmarks.support.provider import start_provider

VARIANTS = ("bare", "lines", "otel-llm", "untraced")
TARGET = 1.10
"""``otel_llm.Client`` per chunk at most this many times the bare SSE loop."""
MESSAGES: Any = [{"role": "user", "content": "go"}]


# --- the variant process ----------------------------------------------------------------------


class Streamer:
    """One variant's client: streams answers of a given length and counts the chunks."""

    extra_items = 0

    def __init__(self, args: argparse.Namespace) -> None:
        import httpx2

        from otel_llm.simulator import SCRIPT_HEADER

        self.variant = args.variant
        self.header = SCRIPT_HEADER
        self.url = args.url
        self.loop = asyncio.new_event_loop()
        self.http = httpx2.AsyncClient(timeout=120)
        self.telemetry = Telemetry()
        self.client: Any = None
        if self.variant != "bare":
            from opentelemetry import metrics, trace

            import otel_llm

            if self.variant == "otel-llm":
                self.telemetry = in_memory_telemetry(deriving=True)
                tracer_provider = self.telemetry.tracer_provider
                meter_provider = self.telemetry.meter_provider
            else:
                tracer_provider = trace.NoOpTracerProvider()
                meter_provider = metrics.NoOpMeterProvider()
            source = otel_llm.Source(name="sim", provider="sim", base_url=self.url, model="bench")
            self.client = otel_llm.Client(
                [source],
                http_client=self.http,
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
            )

    def stream(self, chunks: int) -> int:
        """Stream one answer of ``chunks`` chunks to its end; returns the chunks seen."""
        script = {"chunk_count": chunks, "chunk_interval_s": 0, "first_chunk_delay_s": 0}
        self.http.headers[self.header] = json.dumps(script)
        if self.variant == "lines":
            return self.loop.run_until_complete(self._lines())
        if self.client is None:
            return self.loop.run_until_complete(self._bare())
        result = self.loop.run_until_complete(self.client.chat(MESSAGES, stream=True))
        return int(result.stats.chunk_count or 0)

    async def _bare(self) -> int:
        import httpx2

        seen = 0
        body = {"model": "bench", "messages": MESSAGES, "stream": True}
        async with self.http.stream("POST", f"{self.url}/chat/completions", json=body) as response:
            async for event in httpx2.EventSource(response):
                if event.data == "[DONE]":
                    continue
                choices = json.loads(event.data)["choices"]
                if choices and choices[0]["delta"].get("content"):
                    seen += 1
        return seen

    async def _lines(self) -> int:
        """The leanest loop a hand-written client might use: the body's text lines, ``data:``
        lines parsed (no event types, no multi-line data: not a whole SSE reader)."""
        seen = 0
        body = {"model": "bench", "messages": MESSAGES, "stream": True}
        async with self.http.stream("POST", f"{self.url}/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if not line.startswith("data:") or line == "data: [DONE]":
                    continue
                choices = json.loads(line[5:])["choices"]
                if choices and choices[0]["delta"].get("content"):
                    seen += 1
        return seen

    def recorded(self) -> dict[str, Any]:
        return self.telemetry.recorded()

    def close(self) -> None:
        if self.client is not None:
            self.loop.run_until_complete(self.client.aclose())
        self.loop.run_until_complete(self.http.aclose())
        self.loop.close()


# --- the driver -------------------------------------------------------------------------------


def worker_command(args: argparse.Namespace, variant: str) -> list[str]:
    return [
        *child_command(__spec__.name),
        "--variant",
        variant,
        "--url",
        args.url,
        "--lengths",
        ",".join(map(str, args.lengths)),
        "--warmup-chunks",
        str(args.warmup_chunks),
    ]


def report(args: argparse.Namespace, results: dict[str, Result], elapsed_s: float) -> str:
    lines = [
        "streamed chat completions from the simulated provider (its own process, zero cadence);",
        "instructions per chunk of one measured stream per length (callgrind, after a "
        f"{args.warmup_chunks}-chunk warm-up stream)",
        "",
        f"{'variant':<12}" + "".join(f"{f'{n:,} chunks':>16}{'ratio':>8}" for n in args.lengths),
    ]
    bare = results["bare"]
    for variant in args.variants:
        cells = ""
        for chunks in args.lengths:
            mine = results[variant].instructions_per_chunk(chunks)
            base = bare.instructions_per_chunk(chunks)
            cells += f"{mine:>16,.0f}" if mine is not None else f"{'-':>16}"
            cells += f"{mine / base:>7.3f}x" if mine and base else f"{'-':>8}"
        lines.append(f"{variant:<12}{cells}")
    lines += ["", "recorded for the longest stream:"]
    longest = max(args.lengths)
    for variant in args.variants:
        lines.append(f"  {variant:<10}{describe_recorded(results[variant].recorded[longest])}")
    lines.append("")
    for chunks in args.lengths:
        mine = results["otel-llm"].instructions_per_chunk(chunks)
        base = bare.instructions_per_chunk(chunks)
        if mine is None or not base:
            continue
        verdict = "PASS" if mine <= TARGET * base else "FAIL"
        lines.append(
            f"{verdict}  otel_llm.Client <= {TARGET:.2f}x the bare SSE loop at {chunks:,} chunks: "
            f"{mine / base:.3f}x ({mine - base:+,.0f} instructions per chunk)"
        )
    lines.append(f"\nrun time {elapsed_s:.0f} s")
    return "\n".join(lines)


def main(args: argparse.Namespace) -> None:
    started = time.monotonic()
    results = {variant: Result() for variant in args.variants}
    proc, args.url = start_provider()
    try:
        commands = {variant: worker_command(args, variant) for variant in args.variants}
        callgrind_all(commands, child_env(), args.lengths, results, args.jobs)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    publish(report(args, results, time.monotonic() - started), args.out)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    assert __doc__ is not None
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lengths",
        type=lambda text: [int(n) for n in text.split(",") if n],
        default=[150, 1000, 2000],
        help="chunks of each measured stream",
    )
    parser.add_argument("--warmup-chunks", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=1, help="callgrind processes at once")
    parser.add_argument(
        "--variants",
        type=lambda text: [v for v in text.split(",") if v],
        default=list(VARIANTS),
        help="comma-separated subset of " + ",".join(VARIANTS) + " (bare and otel-llm needed)",
    )
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    if arguments.variant:
        callgrind_worker(Streamer(arguments), arguments.lengths, arguments.warmup_chunks)
    else:
        from benchmarks.support.header import print_header

        print_header(__spec__.name)
        main(arguments)
