"""Per-chunk CPU cost of metering: the instrumented transport against the same transport bare.

The simulated provider runs in its own process, so only the client's CPU is measured
(``time.process_time``). Each round streams the same long answer once bare (no chunk clock, no
span) and once instrumented (chunk clock, attempt span with chunk events, the deriving processor,
an in-memory exporter); rounds alternate the order. The script prints the median CPU per chunk of
each and their ratio (target: ≤ 1.05×). CPU time on a shared 2-core machine is noisy, so with
``--callgrind`` the script also runs each variant once under ``valgrind --tool=callgrind`` and
compares instruction counts, which do not depend on what else the machine is doing.

    .venv/bin/python -m benchmarks.overhead.transport [--chunks 20000] [--rounds 15] [--callgrind]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable

import httpx2
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks import child_command, child_env
from benchmarks.support.provider import start_provider
from otel_llm._act._attempt import Attempt
from otel_llm._act._pool import Pool
from otel_llm._act._source import Source
from otel_llm._act._transport import chat_completion
from otel_llm._measure._processor import DerivingSpanProcessor
from otel_llm.simulator import SCRIPT_HEADER


async def measure(run: Callable[[], Awaitable[int]]) -> tuple[float, int]:
    start = time.process_time()
    chunks = await run()
    return time.process_time() - start, chunks


class Variants:
    """The two ways of streaming the same answer."""

    def __init__(self, base_url: str, chunks: int) -> None:
        script = {"chunk_count": chunks, "chunk_interval_s": 0, "first_chunk_delay_s": 0}
        self.headers = {SCRIPT_HEADER: json.dumps(script)}
        self.source = Source(name="sim", provider="sim", base_url=base_url, model="bench")
        self.payload = {"messages": [{"role": "user", "content": "go"}]}
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(
            DerivingSpanProcessor([SimpleSpanProcessor(self.exporter)])
        )
        self.tracer = self.provider.get_tracer("bench")
        self.http = httpx2.AsyncClient(headers=self.headers, timeout=120)
        self.pool = Pool(client=self.http)

    async def bare(self) -> int:
        completion = await chat_completion(self.pool, self.source, self.payload, stream=True)
        return len(completion.text.split())

    async def instrumented(self) -> int:
        attempt = Attempt(self.tracer, self.source, number=1, stream=True, threshold_ms=1000)
        await attempt.run(self.pool, self.payload)
        self.exporter.clear()
        return attempt.chunks

    async def close(self) -> None:
        await self.http.aclose()
        self.provider.shutdown()


async def timed(base_url: str, chunks: int, rounds: int) -> dict[str, list[float]]:
    variants = Variants(base_url, chunks)
    results: dict[str, list[float]] = {"bare": [], "instrumented": []}
    try:
        await variants.bare()  # warm up connections and caches
        await variants.instrumented()
        for index in range(rounds):
            order = [("bare", variants.bare), ("instrumented", variants.instrumented)]
            for name, run in order if index % 2 == 0 else reversed(order):
                cpu, seen = await measure(run)
                assert seen == chunks, (name, seen)
                results[name].append(cpu / chunks * 1e6)
    finally:
        await variants.close()
    return results


async def once(base_url: str, chunks: int, variant: str) -> None:
    """One warm-up and one measured stream of ``variant`` (what callgrind observes)."""
    variants = Variants(base_url, chunks)
    try:
        run = variants.bare if variant == "bare" else variants.instrumented
        await run()
        await run()
    finally:
        await variants.close()


def callgrind_instructions(base_url: str, chunks: int, variant: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                *child_command(__spec__.name),
                "--once",
                variant,
                "--url",
                base_url,
                "--chunks",
                str(chunks),
            ],
            check=True,
            capture_output=True,
            env=child_env(),
        )
        with open(out, encoding="utf-8") as handle:
            totals = re.search(r"^(?:summary|totals): (\d+)", handle.read(), re.MULTILINE)
        assert totals is not None
        return int(totals.group(1))


def main(chunks: int, rounds: int, callgrind: bool) -> None:
    proc, base_url = start_provider()
    try:
        results = asyncio.run(timed(base_url, chunks, rounds))
        counts = (
            {v: callgrind_instructions(base_url, chunks, v) for v in ("bare", "instrumented")}
            if callgrind
            else None
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    bare, inst = results["bare"], results["instrumented"]
    print(f"stream of {chunks} chunks, {rounds} rounds, client CPU per chunk:")
    print(f"  {'':24}{'median':>10}{'min':>10}")
    print(f"  {'bare transport':24}{statistics.median(bare):9.2f}µs{min(bare):9.2f}µs")
    print(f"  {'instrumented transport':24}{statistics.median(inst):9.2f}µs{min(inst):9.2f}µs")
    print(
        f"  {'ratio':24}{statistics.median(inst) / statistics.median(bare):9.3f}x"
        f"{min(inst) / min(bare):9.3f}x   (target <= 1.05x)"
    )
    if counts is not None:
        # each callgrind run streams the answer twice (warm-up + measured) plus start-up
        print("callgrind instructions of the whole client process (start-up included):")
        print(f"  bare transport          {counts['bare']:>15,}")
        print(f"  instrumented transport  {counts['instrumented']:>15,}")
        print(f"  ratio                   {counts['instrumented'] / counts['bare']:15.3f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--callgrind", action="store_true", help="also count instructions")
    parser.add_argument("--once", choices=["bare", "instrumented"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        asyncio.run(once(args.url, args.chunks, args.once))
    else:
        from benchmarks.support.header import print_header

        print_header(__spec__.name)
        if args.callgrind and shutil.which("valgrind") is None:
            parser.error("--callgrind needs valgrind on PATH")
        main(args.chunks, args.rounds, args.callgrind)
