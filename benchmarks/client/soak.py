"""A bounded soak of the resilient client: thousands of calls at high concurrency against two
simulated providers (separate processes, real HTTP over loopback), with mixed faults, watchdog
kills, both hedge triggers and callers that give up — time-scaled so it runs in about a minute.

It proves the client can be left running: no failure caused by its own state (every call whose
script is healthy must be answered, whatever the faulty calls around it did to the pool), no
slot of the connection pool held once nothing is in flight, file descriptors back to their
baseline after ``aclose()``, memory flat from the first quarter of the calls to the last (read
once the store has sealed its first segment), no task and no span left behind, and every span
in the embedded store (the spans go through the deriving processor into a segment store, as
``init()`` wires them), none dropped.

    .venv/bin/python -m benchmarks.client.soak                 # 2,000 calls at concurrency 50
    .venv/bin/python -m benchmarks.client.soak --calls 20000   # longer
    .venv/bin/python -m benchmarks.client.soak --burners 2     # beside two CPU-burning processes

``tests/act/test_soak.py`` runs a smaller version of the same soak in the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from benchmarks.support.burners import cpu_burners
from benchmarks.support.provider import start_provider
from otel_llm import Client, OtelLLMError, SegmentSpanExporter, Source
from otel_llm._defaults import DEFAULTS
from otel_llm._measure._processor import DerivingSpanProcessor
from otel_llm._show._store._breakdown import run_query
from otel_llm.simulator import Script, Silence

HEALTHY = ("smooth", "late-first", "stall", "keepalive-stall")
"""Kinds of call whose script always ends in a complete answer: each must be answered."""

# Scripted seconds; the providers run them ``time_scale`` times faster and the client's
# durations are scaled alike (not the connect timeout: connecting is real work, not scripted), so
# the proportions of a real deployment are kept.
_STALL = Silence(after_chunk=5, duration_s=30.0)
_PINGED_STALL = Silence(after_chunk=3, duration_s=25.0, keepalive_every_s=2.0)
MIX: dict[str, tuple[float, Script]] = {
    "smooth": (0.36, Script(first_chunk_delay_s=1.0, chunk_count=20, chunk_interval_s=0.2)),
    "late-first": (0.10, Script(first_chunk_delay_s=14.0, chunk_count=10, chunk_interval_s=0.2)),
    "stall": (0.10, Script(chunk_count=20, chunk_interval_s=0.2, silences=(_STALL,))),
    "keepalive-stall": (
        0.04,
        Script(chunk_count=10, chunk_interval_s=0.2, silences=(_PINGED_STALL,)),
    ),
    "dead-first": (0.07, Script(first_chunk_delay_s=500.0)),
    "server-error": (0.05, Script(error_status=503)),
    "rate-limited": (0.04, Script(error_status=429)),  # Retry-After: set per run, scaled
    "reset": (0.05, Script(chunk_count=10, fault="reset", fault_after_chunk=4)),
    "truncated": (0.05, Script(chunk_count=10, fault="truncate", fault_after_chunk=4)),
    "malformed": (0.04, Script(chunk_count=10, fault="malformed", fault_after_chunk=4)),
    "caller-gives-up": (
        0.10,
        Script(first_chunk_delay_s=2.0, chunk_count=40, chunk_interval_s=0.5),
    ),
}
"""Kind of call → (share of the calls, its script)."""


class SpanCounter(SpanProcessor):
    """Counts spans started and ended (no storage, so memory measures the client alone)."""

    def __init__(self) -> None:
        self.started = 0
        self.ended = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started += 1

    def on_end(self, span: ReadableSpan) -> None:
        self.ended += 1


@dataclass
class Report:
    """What the soak measured."""

    calls: int
    seconds: float
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    healthy_failures: list[str] = field(default_factory=list)
    foreign_errors: list[str] = field(default_factory=list)
    pool_replacements: int = 0
    slots_held_idle: int = -1
    fds_before: int = 0
    fds_after: int = 0
    rss_quarters_kb: list[int] = field(default_factory=list)
    leftover_tasks: list[str] = field(default_factory=list)
    spans_started: int = 0
    spans_ended: int = 0
    store_rows: int = 0
    store_dropped: int = 0
    hedges: int = 0
    attempts: int = 0
    gc_pauses_s: list[float] = field(default_factory=list)
    """Every collection of the oldest generation, in seconds."""
    loop_lag_s: list[float] = field(default_factory=list)
    """How late a 10 ms timer woke, sampled throughout."""

    @property
    def rss_growth_kb(self) -> int:
        """RSS of the last quarter's end minus the first's."""
        return self.rss_quarters_kb[-1] - self.rss_quarters_kb[0]

    def failures_of_ours(self) -> int:
        """Failures the client's own state caused: healthy calls that failed, errors outside
        the library's hierarchy."""
        return len(self.healthy_failures) + len(self.foreign_errors)

    def passed(self) -> dict[str, bool]:
        """Each requirement of the soak, met or not."""
        return {
            "no failure caused by the client's own state": self.failures_of_ours() == 0,
            "the pool never had to be replaced": self.pool_replacements == 0,
            "no pool slot held once nothing is in flight": self.slots_held_idle == 0,
            "file descriptors back to the baseline": self.fds_after <= self.fds_before,
            "RSS flat from the first quarter to the last (< 16 MiB)": self.rss_growth_kb
            < 16 * 1024,
            "no task left behind": not self.leftover_tasks,
            "every span ended": self.spans_started == self.spans_ended,
            "every ended span in the store, none dropped": self.store_rows == self.spans_ended
            and self.store_dropped == 0,
        }

    def print(self) -> None:
        print(
            f"{self.calls} calls in {self.seconds:.1f} s ({self.calls / self.seconds:.0f}/s); "
            f"{self.attempts} attempts, {self.hedges} hedges"
        )
        print(f"  {'kind':<16} {'answered':>8} {'failed':>7} {'cancelled':>9}")
        kinds = sorted({kind for kind, _ in self.outcomes})
        for kind in kinds:
            row = [self.outcomes[(kind, what)] for what in ("ok", "failed", "cancelled")]
            print(f"  {kind:<16} {row[0]:>8} {row[1]:>7} {row[2]:>9}")
        print(f"failures caused by the client's own state: {self.failures_of_ours()}")
        for line in (self.healthy_failures + self.foreign_errors)[:10]:
            print(f"    {line}")
        print(
            f"pool replacements: {self.pool_replacements}; slots held with nothing in flight: "
            f"{self.slots_held_idle}"
        )
        print(
            f"file descriptors: {self.fds_before} before the client, {self.fds_after} after "
            "aclose()"
        )
        quarters = ", ".join(f"{kb / 1024:.1f}" for kb in self.rss_quarters_kb)
        print(
            f"RSS at the end of each quarter (MiB): {quarters}; last − first: "
            f"{self.rss_growth_kb / 1024:+.1f} MiB"
        )
        print(
            f"leftover tasks: {len(self.leftover_tasks)}; spans started {self.spans_started}, "
            f"ended {self.spans_ended}; in the store {self.store_rows}, dropped "
            f"{self.store_dropped}"
        )
        lags = sorted(self.loop_lag_s) or [0.0]
        print(
            f"oldest-generation collections: {len(self.gc_pauses_s)}, longest "
            f"{max(self.gc_pauses_s, default=0.0) * 1000:.0f} ms; loop lag p50 "
            f"{lags[len(lags) // 2] * 1000:.1f} ms, p99 {lags[int(len(lags) * 0.99)] * 1000:.1f} "
            f"ms, max {lags[-1] * 1000:.0f} ms; load average {os.getloadavg()[0]:.1f}"
        )
        for requirement, ok in self.passed().items():
            print(f"{'PASS' if ok else 'FAIL'}  {requirement}")


class _OldestCollections:
    """Times each collection of the oldest generation (``gc.callbacks``)."""

    def __init__(self, into: list[float]) -> None:
        self._into = into
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._into.append(time.perf_counter() - self._started)


async def _probe_lag(into: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(0.01)
        into.append(time.perf_counter() - before - 0.01)


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss_kb() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _held_slots(client: Client) -> int:
    """Connections of the client's pool that are not idle (nothing of ours is in flight)."""
    transport = client._pool.http._transport
    pool = getattr(transport, "_pool", None)
    return sum(not conn.is_idle() and not conn.is_closed() for conn in pool.connections)


def _kinds(rng: random.Random, calls: int) -> list[str]:
    names = list(MIX)
    weights = [MIX[name][0] for name in names]
    return rng.choices(names, weights=weights, k=calls)


async def soak(
    urls: list[str],
    *,
    calls: int,
    concurrency: int,
    time_scale: float,
    seed: int,
    with_store: bool = True,
) -> Report:
    """Run the soak against providers at ``urls`` (already started)."""
    rng = random.Random(seed)
    kinds = _kinds(rng, calls)
    s = time_scale
    sources = [
        Source(
            name=f"sim-{i}",
            provider="sim",
            base_url=url,
            model="soak",
            timeout_s=120 * s,
            ttft_timeout_s=60 * s,
            inter_token_timeout_s=60 * s,
            connect_timeout_s=DEFAULTS.connect_timeout_s,  # real: connecting is not scripted
        )
        for i, url in enumerate(urls)
    ]
    counter = SpanCounter()
    provider = TracerProvider()
    provider.add_span_processor(counter)
    store = Path(tempfile.mkdtemp(prefix="otel-llm-soak-")) / "store"
    exporter = SegmentSpanExporter(store)  # the embedded default, as init() wires it
    if with_store:
        provider.add_span_processor(DerivingSpanProcessor([SimpleSpanProcessor(exporter)]))
    gc.collect()
    report = Report(calls=calls, seconds=0.0, fds_before=_fds())
    before_tasks = asyncio.all_tasks()
    client = Client(
        sources,
        tracer_provider=provider,
        hedge_after_s=10 * s,
        hedge_stall_after_s=20 * s,
        hedge_budget_ratio=0.5,
        backoff_base_s=0.5 * s,
        backoff_max_s=8 * s,
        rate_limit_wait_s=1 * s,
        rate_limit_max_wait_s=10 * s,
        stall_window_s=60 * s,
        breaker_first_cooldown_s=1 * s,
        breaker_cooldown_s=5 * s,
        pool_max_connections=100,
        seed=seed,
    )
    done = 0
    quarter = max(1, calls // 4)

    async def one(kind: str, delay_rng: random.Random) -> None:
        nonlocal done
        script = MIX[kind][1]
        if kind == "rate-limited":  # the header is real milliseconds: 2 scripted seconds
            script = script.model_copy(update={"retry_after_ms": f"{2000 * s:g}"})
        params: dict[str, Any] = {"sim": script.model_dump(mode="json")}
        try:
            work = client.chat([{"role": "user", "content": kind}], **params)
            if kind == "caller-gives-up":
                result = await asyncio.wait_for(work, delay_rng.uniform(1.0, 40.0) * s)
            else:
                result = await work
            report.outcomes[(kind, "ok")] += 1
            report.attempts += result.stats.attempts
            report.hedges += result.stats.hedges
        except TimeoutError:
            report.outcomes[(kind, "cancelled")] += 1
        except OtelLLMError as exc:
            report.outcomes[(kind, "failed")] += 1
            attempts = getattr(exc, "attempts", 0)
            report.attempts += attempts if isinstance(attempts, int) else 0
            if kind in HEALTHY:
                report.healthy_failures.append(f"{kind}: {type(exc).__name__}: {exc}")
        except Exception as exc:  # a bug: outside the library's hierarchy
            report.outcomes[(kind, "failed")] += 1
            report.foreign_errors.append(f"{kind}: {type(exc).__name__}: {exc}")
        done += 1
        if done % quarter == 0 and len(report.rss_quarters_kb) < 4:
            if not report.rss_quarters_kb:  # the store's first segment sizes Arrow's pool once
                await asyncio.to_thread(exporter.force_flush)
            report.rss_quarters_kb.append(_rss_kb())

    work = ((kind, random.Random(rng.random())) for kind in kinds)

    async def worker() -> None:  # ``concurrency`` callers, each making one call at a time
        for kind, delay_rng in work:
            await one(kind, delay_rng)

    collections = _OldestCollections(report.gc_pauses_s)
    gc.callbacks.append(collections)
    stop_probe = asyncio.Event()
    probe = asyncio.create_task(_probe_lag(report.loop_lag_s, stop_probe))
    started = time.monotonic()
    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        report.seconds = time.monotonic() - started
        gc.callbacks.remove(collections)
        stop_probe.set()
        await probe
    report.pool_replacements = client.pool_replacements
    report.slots_held_idle = _held_slots(client)
    await client.aclose()
    provider.shutdown()
    await asyncio.sleep(0)
    gc.collect()
    current = asyncio.current_task()
    report.leftover_tasks = [
        repr(task)
        for task in asyncio.all_tasks() - before_tasks
        if task is not current and not task.done()
    ]
    report.fds_after = _fds()
    report.spans_started, report.spans_ended = counter.started, counter.ended
    exporter.shutdown()
    report.store_rows = (
        run_query(store, "SELECT count(*) FROM otel_traces").rows[0][0]
        if with_store
        else counter.ended
    )
    report.store_dropped = exporter.stats.dropped
    shutil.rmtree(store.parent, ignore_errors=True)
    return report


def run(
    calls: int,
    concurrency: int,
    time_scale: float,
    seed: int,
    with_store: bool = True,
    burners: int = 0,
) -> Report:
    """Start two providers (and ``burners`` processes spinning on the CPU), run the soak, stop
    them."""
    started = [start_provider("--time-scale", str(time_scale), "--seed", str(i)) for i in (1, 2)]
    try:
        with cpu_burners(burners):
            return asyncio.run(
                soak(
                    [url for _, url in started],
                    calls=calls,
                    concurrency=concurrency,
                    time_scale=time_scale,
                    seed=seed,
                    with_store=with_store,
                )
            )
    finally:
        for proc, _ in started:
            proc.terminate()
            proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument(
        "--time-scale",
        type=float,
        default=0.01,
        help="every scripted duration is multiplied by this (0.01: 100 times faster)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-store", action="store_true", help="without the embedded store (to compare)"
    )
    parser.add_argument(
        "--burners", type=int, default=0, help="processes spinning on the CPU beside the soak"
    )
    args = parser.parse_args()
    report = run(
        args.calls, args.concurrency, args.time_scale, args.seed, not args.no_store, args.burners
    )
    report.print()
    sys.exit(0 if all(report.passed().values()) else 1)


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main()
