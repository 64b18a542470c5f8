"""Every clock of a suite process follows the virtual loop (``otel_llm/conformance/_clocks.py``):
in a process of its own, 100 virtual seconds read as 100 s on ``time.time``,
``time.perf_counter``, ``time.monotonic_ns``, ``timeit.default_timer`` and the OpenTelemetry
SDK's span timestamps (imported before the clocks were installed), in no real time."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import asyncio, json, time, timeit
from opentelemetry.sdk.trace import TracerProvider  # binds time_ns before the install
from otel_llm.conformance._clocks import install
from otel_llm.testing import VirtualTimeLoop

clocks = install()
real = clocks.originals["perf_counter"]
tracer = TracerProvider().get_tracer("t")

async def main():
    clocks.follow(asyncio.get_running_loop())
    before = (time.time(), time.perf_counter(), time.monotonic_ns(), timeit.default_timer())
    span = tracer.start_span("s")
    await asyncio.sleep(100)
    span.end()
    after = (time.time(), time.perf_counter(), time.monotonic_ns(), timeit.default_timer())
    return before, after, (span.end_time - span.start_time) / 1e9

started = real()
before, after, span_s = asyncio.Runner(loop_factory=VirtualTimeLoop).run(main())
print(json.dumps({
    "time": after[0] - before[0],
    "perf_counter": after[1] - before[1],
    "monotonic_ns": (after[2] - before[2]) / 1e9,
    "default_timer": after[3] - before[3],
    "span": span_s,
    "real": real() - started,
    "wall_near_now": abs(time.time() - clocks.originals["time"]()) < 200,
}))
"""


def test_every_clock_reads_virtual_time() -> None:
    """100 virtual seconds are 100 s on every clock an instrumentation may read, and the wall
    clock stays near the real date."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=55, check=True
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    for clock in ("time", "perf_counter", "monotonic_ns", "default_timer", "span"):
        assert abs(seen[clock] - 100.0) < 1e-6, (clock, seen[clock])
    assert seen["real"] < 10.0
    assert seen["wall_near_now"] is True
