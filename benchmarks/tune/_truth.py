"""``otel-llm tune`` on known ground truth: record unhedged calls of a known distribution into a
store, ask ``tune`` for a setting, run that setting on fresh draws of the same distribution.

Everything runs the SDK's real path on virtual time (:func:`~otel_llm.testing.run_virtual`):
``otel_llm.Client`` streams from a :class:`~otel_llm.testing._memory_provider.MemoryProvider`
(the simulator's scripts event for event, every pause an ``asyncio.sleep`` on the loop), so
every time below is in simulated seconds and no real clock enters a figure.

* :func:`record` — unhedged calls, as a user with several sources has them: one ``Client`` per
  source, calls spread over them in turn, spans through the deriving processor into a real
  embedded store (:class:`~otel_llm._show._store._exporter.SegmentSpanExporter`), exactly the
  pipeline ``otel_llm.init()`` builds.
* :func:`tune` — ``otel-llm tune --db STORE --budget B --format json`` in a process of its own,
  through the command's real entry point (``python -m otel_llm.cli``).
* :func:`run_setting` — the recommendation's ``Client(...)`` arguments and watchdog on one
  ``Client`` over several sources, on draws from seeds the recording never used; a call's wall
  time is read on the loop's clock around ``client.chat`` (the whole call, as its caller waits
  for it), its requests are the requests the provider answered.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_llm._act._client import Client
from otel_llm._act._source import Source
from otel_llm._defaults import DEFAULTS
from otel_llm._errors import OtelLLMError
from otel_llm._measure._processor import DerivingSpanProcessor
from otel_llm._show._store._exporter import SegmentSpanExporter
from otel_llm._tune._hedging_model import Rules, percentiles
from otel_llm._tune._recorded import read_recorded
from otel_llm._tune._sample import Sample, sample
from otel_llm._tune._tuning import MAX_CALLS
from otel_llm.simulator._presets import FAST_STALLS, MeasuredPreset, Preset
from otel_llm.testing._memory_provider import MemoryProvider, Served
from otel_llm.testing._virtual import run_virtual

NO_TIMEOUT_S = 1000.0
"""Read timeout of every source: longer than any scripted gap (silences are capped at 600 s),
so without a watchdog nothing cuts an attempt short and no recorded attempt is censored."""

ARRIVAL_EVERY_S = 1.0
"""Mean time between call starts (a Poisson arrival process, simulated seconds)."""

MESSAGES: tuple[dict[str, str], ...] = ({"role": "user", "content": "Explain hedged requests."},)

PRESETS: Mapping[str, Preset] = {"measured": MeasuredPreset(), "fast-stalls": FAST_STALLS}
"""The distributions the proof runs on."""


def source_names(count: int) -> tuple[str, ...]:
    """``sim-1`` … ``sim-<count>``."""
    return tuple(f"sim-{number}" for number in range(1, count + 1))


def source_seeds(seed: int, count: int) -> dict[str, int]:
    """Each source's generator seed: ``seed × 100 + k`` (so runs of different seeds never share
    a generator for up to 100 sources)."""
    return {name: seed * 100 + k for k, name in enumerate(source_names(count))}


@dataclass(frozen=True, slots=True)
class Upstream:
    """Where the sources are: each source's base URL, the HTTP client that reaches them
    (``None``: the ``Client``'s own), and the scale of their time (the simulator's
    ``--time-scale``: every timeout the proof sets is scaled by it)."""

    base_urls: Mapping[str, str]
    http_client: Callable[[], httpx2.AsyncClient | None]
    time_scale: float = 1.0
    model: str = "sim"

    def source(self, name: str, priority: int, **fields: Any) -> Source:
        """Source ``name`` with the read timeout that never fires (scaled), unless ``fields``
        (a recommendation's ``source_kwargs``) set it."""
        settings: dict[str, Any] = {"timeout_s": NO_TIMEOUT_S * self.time_scale, **fields}
        return Source(
            name=name,
            provider="sim",
            base_url=self.base_urls[name],
            model=self.model,
            priority=priority,
            **settings,
        )


def in_memory(provider: MemoryProvider) -> Upstream:
    """The sources of an in-memory provider (``http://<source>.test/v1``)."""
    urls = {name: f"http://{name}.test/v1" for name in provider.seeds}
    return Upstream(urls, provider.client)


def _arrivals(calls: int, seed: int, every_s: float) -> list[float]:
    """Start times of ``calls`` calls, from 0 (Poisson, mean gap ``every_s``)."""
    rng = random.Random(f"arrivals/{seed}")
    times, now = [], 0.0
    for _ in range(calls):
        times.append(now)
        now += rng.expovariate(1.0 / every_s)
    return times


@dataclass(frozen=True, slots=True)
class Recording:
    """What :func:`record` wrote: the calls, and every script the provider served (in
    memory; empty over HTTP)."""

    store: Path
    calls: int
    served: tuple[Served, ...]
    spans_written: int
    spans_dropped: int


def store_pipeline(store: Path) -> tuple[TracerProvider, SegmentSpanExporter]:
    """The pipeline ``otel_llm.init(db_path=store)`` builds: an SDK tracer provider whose
    spans go through the deriving processor into the embedded store (not installed globally)."""
    exporter = SegmentSpanExporter(store)
    processor = DerivingSpanProcessor([SimpleSpanProcessor(exporter)])
    provider = TracerProvider(span_limits=SpanLimits(max_events=DEFAULTS.chunk_event_budget + 8))
    provider.add_span_processor(processor)
    return provider, exporter


async def record_calls(
    upstream: Upstream, provider: trace.TracerProvider, calls: int, seed: int, every_s: float
) -> None:
    """``calls`` unhedged streamed calls, spread in turn over the upstream's sources (one
    ``Client`` each), started ``every_s`` apart on average."""
    clients = [
        Client(
            [upstream.source(name, 0)],
            http_client=upstream.http_client(),
            tracer_provider=provider,
            seed=seed,
        )
        for name in upstream.base_urls
    ]
    loop = asyncio.get_running_loop()
    origin = loop.time()
    starts = _arrivals(calls, seed, every_s)

    async def one(index: int) -> None:
        await asyncio.sleep(origin + starts[index] - loop.time())
        await clients[index % len(clients)].chat(list(MESSAGES), stream=True)

    try:
        async with asyncio.TaskGroup() as group:
            for index in range(calls):
                group.create_task(one(index))
    finally:
        for client in clients:
            await client.aclose()


def record(store: Path, preset: Preset, calls: int, seed: int, *, sources: int = 3) -> Recording:
    """``calls`` unhedged streamed calls of ``preset`` into the store at ``store``, spread in
    turn over ``sources`` sources, on virtual time (:func:`record_calls`)."""
    provider, exporter = store_pipeline(store)
    upstream = MemoryProvider(preset, source_seeds(seed, sources))
    try:
        run_virtual(record_calls(in_memory(upstream), provider, calls, seed, ARRIVAL_EVERY_S))
    finally:
        provider.shutdown()
    stats = exporter.stats
    return Recording(store, calls, tuple(upstream.served), stats.written, stats.dropped)


def tune_run(
    store: Path,
    budget: float,
    *extra: str,
    source_timeout_s: float = NO_TIMEOUT_S,
    timeout_s: float = 600.0,
) -> tuple[dict[str, Any], int]:
    """``otel-llm tune --db STORE --budget BUDGET --timeout SOURCE_TIMEOUT_S --format json``
    (and ``extra``), run as the command runs (``python -m otel_llm.cli``): its JSON document and
    exit code, 0 or :data:`~otel_llm.cli._tune.TUNE_NOT_ENOUGH_EXIT` (too few data to
    recommend). ``--timeout`` tells tune the sources' ``TIMEOUT_S`` (the proof's sources never
    time out: :data:`NO_TIMEOUT_S`, scaled when the proof runs in real time); ``timeout_s``
    bounds the command's run."""
    from otel_llm.cli._tune import TUNE_NOT_ENOUGH_EXIT

    command = [sys.executable, "-m", "otel_llm.cli", "tune", "--db", str(store)]
    command += ["--budget", f"{budget:g}", "--timeout", f"{source_timeout_s:g}"]
    command += ["--format", "json", *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode not in (0, TUNE_NOT_ENOUGH_EXIT):
        raise RuntimeError(f"otel-llm tune exited {done.returncode}: {done.stderr.strip()}")
    document: dict[str, Any] = json.loads(done.stdout)
    return document, done.returncode


def tune(
    store: Path, budget: float, *extra: str, source_timeout_s: float = NO_TIMEOUT_S
) -> dict[str, Any]:
    """:func:`tune_run`'s document."""
    return tune_run(store, budget, *extra, source_timeout_s=source_timeout_s)[0]


@dataclass(frozen=True, slots=True)
class Setting:
    """A hedge setting as a client runs it: ``Client(**client_kwargs)`` and
    ``Source(**source_kwargs)`` on every source (the watchdog's timeouts)."""

    client_kwargs: Mapping[str, Any]
    source_kwargs: Mapping[str, Any]

    @classmethod
    def recommended(cls, document: Mapping[str, Any]) -> Setting:
        """The setting ``tune``'s JSON recommends (it must recommend one)."""
        recommendation = document.get("recommendation")
        if recommendation is None:
            raise ValueError("tune recommended nothing")
        return cls(dict(recommendation["client_kwargs"]), dict(recommendation["source_kwargs"]))


UNHEDGED = Setting({}, {})
"""No hedge keys, no watchdog: exactly the unhedged client (both triggers unset)."""


@dataclass(frozen=True, slots=True)
class Measured:
    """What fresh calls under one setting did (simulated seconds)."""

    walls_s: tuple[float, ...]
    """Each call's wall time (``inf``: it failed)."""
    requests: int
    """Requests the provider answered (every attempt, hedge legs included)."""
    attempts: int
    """Σ ``CallStats.attempts`` of the calls that succeeded."""
    hedges: int
    """Σ ``CallStats.hedges`` of the calls that succeeded."""

    @property
    def calls(self) -> int:
        return len(self.walls_s)

    @property
    def failures(self) -> int:
        return sum(1 for wall in self.walls_s if wall == math.inf)

    @property
    def p50_s(self) -> float:
        return percentiles(self.walls_s)[0]

    @property
    def p95_s(self) -> float:
        return percentiles(self.walls_s)[1]

    @property
    def p99_s(self) -> float:
        return percentiles(self.walls_s)[2]

    @property
    def requests_per_call(self) -> float:
        return self.requests / self.calls


async def run_calls(
    setting: Setting,
    upstream: Upstream,
    calls: int,
    seed: int,
    every_s: float,
    *,
    tracer_provider: trace.TracerProvider | None = None,
) -> tuple[list[float], int, int]:
    """``calls`` streamed calls through one ``Client`` over the upstream's sources (priority
    in order) under ``setting``: each call's wall time on the loop's clock (``inf``: failed),
    and Σ ``CallStats.attempts`` and ``.hedges`` of the calls that succeeded. Tracing is off
    unless ``tracer_provider`` is given."""
    provider = tracer_provider if tracer_provider is not None else trace.NoOpTracerProvider()
    walls: list[float] = [math.inf] * calls
    attempts = hedges = 0
    sources = [
        upstream.source(name, priority, **setting.source_kwargs)
        for priority, name in enumerate(upstream.base_urls)
    ]
    loop = asyncio.get_running_loop()
    origin = loop.time()
    starts = _arrivals(calls, seed, every_s)
    async with Client(
        sources,
        http_client=upstream.http_client(),
        tracer_provider=provider,
        seed=seed,
        **setting.client_kwargs,
    ) as client:

        async def one(index: int) -> None:
            nonlocal attempts, hedges
            await asyncio.sleep(origin + starts[index] - loop.time())
            started = loop.time()
            try:
                result = await client.chat(list(MESSAGES), stream=True)
            except OtelLLMError:
                return
            walls[index] = loop.time() - started
            attempts += result.stats.attempts
            hedges += result.stats.hedges

        async with asyncio.TaskGroup() as group:
            for index in range(calls):
                group.create_task(one(index))
    return walls, attempts, hedges


def run_setting(
    setting: Setting,
    preset: Preset,
    calls: int,
    seed: int,
    *,
    sources: int = 3,
    tracer_provider: trace.TracerProvider | None = None,
) -> Measured:
    """``calls`` streamed calls of ``preset`` under ``setting`` (:func:`run_calls`) on
    virtual time, against an in-memory provider seeded from ``seed``; its requests are the
    requests the provider answered."""
    upstream = MemoryProvider(preset, source_seeds(seed, sources))
    walls, attempts, hedges = run_virtual(
        run_calls(
            setting,
            in_memory(upstream),
            calls,
            seed,
            ARRIVAL_EVERY_S,
            tracer_provider=tracer_provider,
        )
    )
    return Measured(tuple(walls), len(upstream.served), attempts, hedges)


def ratio(measured: float, predicted: float) -> float:
    """``measured / predicted`` (how far the measurement is from the prediction)."""
    return measured / predicted


def within(measured: float, predicted: float, tolerance: float) -> bool:
    """Whether ``measured`` is within ``tolerance`` (a fraction) of ``predicted``."""
    return abs(measured - predicted) <= tolerance * predicted


def sources_of(served: Sequence[Served]) -> dict[str, int]:
    """Requests served per source."""
    counts: dict[str, int] = {}
    for item in served:
        counts[item.source] = counts.get(item.source, 0) + 1
    return counts


def read_sample(store: Path) -> Sample:
    """The sample ``otel-llm tune`` replays from ``store`` (its own reader and rules)."""
    from otel_llm._show._store._access import open_store

    with open_store(store) as conn:
        return sample(read_recorded(conn, since=None, max_calls=MAX_CALLS))


def rules_of(recommendation: Mapping[str, Any]) -> Rules:
    """The model's rules for a recommendation of ``tune``'s JSON (the defaults it tuned with
    for everything the recommendation does not name)."""
    return Rules(
        after_s=recommendation["after_s"],
        stall_after_s=recommendation["stall_after_s"],
        watchdog_s=recommendation["watchdog_s"],
        ratio=(
            DEFAULTS.hedge_budget_ratio
            if recommendation["budget_ratio"] is None  # unhedged: no budget is spent
            else recommendation["budget_ratio"]
        ),
    )


FRESH_SEED_OFFSET = 1000
"""Fresh draws use seed + 1000: generators (``source_seeds``) the recording never used."""


@dataclass(frozen=True, slots=True)
class Proof:
    """One preset's proof: the recording, tune's document, its sample, the fresh run."""

    preset: str
    recording: Recording
    document: dict[str, Any]
    sample: Sample
    """What tune replayed, read from the store by tune's own reader."""
    fresh_seed: int
    measured: Measured
    """The recommended setting on fresh draws."""

    @property
    def recommendation(self) -> dict[str, Any]:
        """Tune's recommendation (the proof needs one)."""
        found: dict[str, Any] | None = self.document["recommendation"]
        if found is None:
            raise ValueError(f"tune recommended nothing: {self.document.get('verdict')}")
        return found

    @property
    def predicted_p99_s(self) -> float:
        return float(self.recommendation["predicted"]["p99_s"])


def prove(
    preset: str, recorded: int, fresh: int, seed: int, budget: float, directory: Path
) -> Proof:
    """Record ``recorded`` unhedged calls of ``PRESETS[preset]`` into a store under
    ``directory``, tune it with ``budget`` through the CLI, run the recommendation on ``fresh``
    calls from fresh seeds."""
    store = directory / f"{preset}-store"
    recording = record(store, PRESETS[preset], recorded, seed)
    document = tune(store, budget)
    data = read_sample(store)
    fresh_seed = seed + FRESH_SEED_OFFSET
    measured = run_setting(Setting.recommended(document), PRESETS[preset], fresh, fresh_seed)
    return Proof(preset, recording, document, data, fresh_seed, measured)


def prove_all(
    presets: Sequence[str],
    recorded: int,
    fresh: int,
    seed: int,
    budget: float,
    directory: Path,
    *,
    processes: int = 2,
) -> dict[str, Proof]:
    """:func:`prove` for each preset, in up to ``processes`` processes of their own at once
    (the runs are on virtual time: how many run together changes no figure)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if processes <= 1:
        return {p: prove(p, recorded, fresh, seed, budget, directory) for p in presets}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=processes, mp_context=context) as pool:
        futures = {
            p: pool.submit(prove, p, recorded, fresh, seed, budget, directory) for p in presets
        }
        return {p: future.result() for p, future in futures.items()}
