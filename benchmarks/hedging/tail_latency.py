"""Tail latency of hedge settings on the simulated measured distribution: the client beside the
zero-overhead model's replay of the very same draws.

Run (the default grid of 12 settings and the oracle takes about 12 minutes on 2 cores;
``--calls 200`` for a quick look)::

    .venv/bin/python -m benchmarks.hedging.tail_latency [--calls 1000] [--rate 20]
        [--time-scale 0.1] [--seed 1] [--max-attempts 5] [--grid default]
        [--sequential] [--out benchmarks/results/hedging.txt] [--json PATH]

What it measures. Every setting of the grid (``benchmarks/hedging/_grid.py``, the grid
``hedging_model.py`` prints too; ``--grid`` takes ``default``, ``full`` or row names) sends the
same traffic — ``--calls`` streamed chat calls (default 1,000) started at ``--rate`` calls per
real second (default 20, open loop) — through ``otel_llm.Client`` to three simulated providers
(``otel-llm provider --preset measured``, seeds S, S+1, S+2), each in its own process, so the
client's event loop measures latency without the servers' CPU. The ``measured`` preset
reproduces the user's 4,407 measured calls: 19 % of calls hold a silence > 20 s
(median 55 s, heavy tail), 30 % of the others one moderate silence of 1.5-19.5 s, the first chunk
after LogNormal(median 1.63 s). Each source draws from its own seeded generator, so stalls are
independent across sources — what makes a hedge useful. The priority-0 source serves every
primary; a hedge goes to the first other source its breaker lets through (sim-1); a failed round
is retried once on the same source (``same_source_retries`` 1), then on the others. ``oracle``
serves the same calls without any silence (``--preset oracle``, same seeds), unhedged.

Same draws, call by call. Every request of call ``i`` carries the body field ``sim_key`` =
``call-i``: a provider then draws that request's script from a generator seeded by (its seed,
the key, how many earlier requests of the key it served) instead of its one generator in arrival
order. So which script every leg of every call gets does not depend on how the calls' hedges
and retries interleave on the wire, and the model can replay exactly those scripts. (In arrival
order, one hedge the client and the model decide differently shifts every later hedge's script,
and the two compare two samples of the p99 — ~±10 % apart at 1,000 calls.)

The model beside it (``benchmarks/hedging/_replay.py``): the same calls, call ``i`` starting at
``i / (rate × time scale)`` simulated seconds, replayed in one discrete-event pass on simulated
time — every round earns the hedge budget when it starts, every trigger spends it when it fires,
the breakers hear of every leg's end, the client's seeded generator draws the backoff and breaker
jitter in the order events happen — with the client's own source choice, breakers and hedge
budgets on zero-overhead timelines. A setting without hedging replays to the scripted walls
exactly (checked every run). What is left between client and model is the client's (and the
simulator's) own time: per-chunk CPU, timer wake-ups, the event loop's millisecond timer
resolution, which also shift which hedge the budget grants when it is short.

Target (issue 13 §2): per setting, the client's p99 within 5 % of the model's at the same request
ratio (requests per call within 0.02 of the model's). Reported per setting: client p50 / p95 /
p99 of ``stats.call_ms`` (the whole call, retries included) divided by the time scale, in
simulated seconds (a failed call counts as +inf), p99 over the oracle's, requests per call (HTTP
requests sent ÷ calls, counted by an httpx2 event hook and checked against ``Σ stats.attempts``);
the model's p99 over the scripted oracle's and requests per call; the differences; ``same``: the
calls whose requests and hedges the client and the model agree on, and for those the median and
p99 of client wall − model wall (the client's overhead per call, simulated seconds). ``both``
rows (both triggers) follow the client's budget: per trigger with fallthrough when the client
has ``hedge_first_token_burst`` (issue 13 §1), else one shared bucket without fallthrough.

Every client: ``max_attempts`` 5 (library default 3: with 19 % of attempts stalling, 3 leave
~0.7 % of the watchdog rows' calls failed, which puts their p99 at the edge of +inf), the hedge
budget burst 10, and tracing off: the client gets ``trace.NoOpTracerProvider()``, so telemetry
costs are not part of the comparison (the chunk clock still meters every attempt for
``CallStats``). Settings without a watchdog get read timeouts of 1000 s (longer than any scripted
gap: silences are capped at 600 s), so nothing fires.

Time scale and load. Every client-side duration — triggers, watchdog, read timeout, stall
threshold, backoff, breaker cool-down, stall window — is multiplied by the simulator's
``--time-scale`` (connect timeouts and the breaker's first cool-down, 1 real second, stay real).
The default is 0.1, not 0.01-0.02: the simulator sleeps once per chunk (30 ms median cadence:
3 ms at 0.1), each sleep overshoots by up to ~1 ms (the event loop's epoll timeout is rounded up
to whole milliseconds) plus ~0.3 ms of writing, so at 0.02 every stream's generation phase runs
~2× slower than scripted. The client pays ~150-200 µs of CPU per chunk (httpx2/h11/SSE), so the
load is set as an arrival rate, the same for every setting (same calls, same chunks per second).

Overlap. To keep the run short, the next setting starts (own client, fresh providers) once the
current one has started all its calls and has at most ``rate`` calls (one second of arrivals)
still in flight — its tail is calls waiting in long silences, which cost no CPU.
``--sequential`` starts each setting only when the previous one has finished.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx2
from opentelemetry import trace

from benchmarks.hedging._grid import BURST, Setting, parse_grid
from benchmarks.hedging._replay import ClientShape, KeyedScripts, Replay, call_key, replay
from benchmarks.support.provider import launch, read_url
from otel_llm._act._client import Client
from otel_llm._act._source import Source
from otel_llm._act._stats import CallStats
from otel_llm._errors import ProviderError
from otel_llm._tune._hedging_model import percentiles

SOURCES = 3
"""Simulated providers per setting (seeds ``seed``, ``seed + 1``, ...)."""

NO_TIMEOUT_S = 1000.0
"""Simulated read timeout and watchdog that never fire: above the longest scripted gap (600 s)."""

P99_TOLERANCE = 0.05
"""The target: the client's p99 within 5 % of the model's ..."""
REQUESTS_TOLERANCE = 0.02
"""... at the same request ratio: requests per call within 0.02 of the model's."""

PER_TRIGGER = "hedge_first_token_burst" in inspect.signature(Client.__init__).parameters
"""Whether this client spends the hedge budget per trigger (issue 13 §1)."""

MESSAGES = ({"role": "user", "content": "Explain hedged requests."},)


@dataclass(frozen=True, slots=True)
class Strategy:
    """One setting of the grid on one preset (``oracle``: the same calls without silences)."""

    setting: Setting
    preset: str = "measured"

    @property
    def name(self) -> str:
        return "oracle" if self.preset == "oracle" else self.setting.name

    def describe(self) -> str:
        """The setting's knobs, for the parameter list under the table."""
        setting = self.setting
        parts = [f"preset {self.preset}"]
        if setting.after_s is not None:
            parts.append(f"hedge_after_s {setting.after_s:g}")
        if setting.stall_after_s is not None:
            parts.append(f"hedge_stall_after_s {setting.stall_after_s:g}")
        if setting.hedging:
            parts.append(f"hedge_budget_ratio {setting.budget:g}")
        parts.append(
            f"watchdog {setting.watchdog_s:g} s (ttft + inter-chunk)"
            if setting.watchdog_s is not None
            else f"no watchdog (timeouts {NO_TIMEOUT_S:g} s)"
        )
        return ", ".join(parts)


ORACLE = Strategy(Setting(), "oracle")


@dataclass(frozen=True, slots=True)
class Options:
    """The command line."""

    calls: int
    rate: float
    max_attempts: int
    time_scale: float
    seed: int
    grid: tuple[Setting, ...]
    sequential: bool

    @property
    def interval_s(self) -> float:
        """Simulated seconds between two calls' starts."""
        return 1.0 / (self.rate * self.time_scale)

    def shape(self) -> ClientShape:
        """The client the model replays."""
        return ClientShape.of_benchmark(
            self.time_scale, self.max_attempts, self.seed, per_trigger=PER_TRIGGER
        )


@dataclass
class Outcome:
    """What one setting's calls did (per call, in call order)."""

    strategy: Strategy
    calls: int
    walls_s: list[float] = field(default_factory=list)
    stats: list[CallStats | None] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    runtime_s: float = 0.0
    peak_in_flight: int = 0
    anomalies: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.walls_s = [math.inf] * self.calls
        self.stats = [None] * self.calls

    def quantiles(self) -> tuple[float, float, float]:
        """p50, p95, p99 of wall time (failed calls +inf, counted as very long)."""
        return percentiles(self.walls_s)

    @property
    def requests_per_call(self) -> float:
        return self.requests / self.calls


# --- the simulated providers -------------------------------------------------------------------


class Providers:
    """``otel-llm provider`` processes, one per seed; :meth:`stop` is idempotent."""

    def __init__(self, preset: str, time_scale: float, seeds: Sequence[int]) -> None:
        self._args = [
            ("--preset", preset, "--time-scale", str(time_scale), "--seed", str(seed))
            for seed in seeds
        ]
        self._procs: list[subprocess.Popen[str]] = []

    def launch(self) -> None:
        """Start every process (does not wait for them)."""
        self._procs.extend(launch(*args) for args in self._args)

    def urls(self) -> list[str]:
        """The base URLs the processes announce (blocks until all have)."""
        return [read_url(proc) for proc in self._procs]

    def stop(self) -> None:
        """Terminate the processes (kill after 10 s) and reap them."""
        procs, self._procs = self._procs, []
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


# --- one setting ---------------------------------------------------------------------------------


def build_client(
    strategy: Strategy, urls: Sequence[str], options: Options, http: httpx2.AsyncClient
) -> Client:
    """The client of ``strategy``: every duration scaled to the simulator's time."""
    scale = options.time_scale
    setting = strategy.setting
    watchdog = setting.watchdog_s * scale if setting.watchdog_s is not None else None
    sources = [
        Source(
            name=f"sim-{index}",
            provider="sim",
            base_url=url,
            model=strategy.preset,
            timeout_s=NO_TIMEOUT_S * scale,
            ttft_timeout_s=watchdog,
            inter_token_timeout_s=watchdog,
            priority=index,
        )
        for index, url in enumerate(urls)
    ]
    after, stall = setting.after_s, setting.stall_after_s
    return Client(
        sources,
        stall_threshold_ms=max(1, round(1000 * scale)),
        hedge_after_s=after * scale if after is not None else None,
        hedge_stall_after_s=stall * scale if stall is not None else None,
        hedge_budget_ratio=setting.budget,
        hedge_budget_burst=BURST,
        max_attempts=options.max_attempts,
        backoff_base_s=0.5 * scale,
        backoff_max_s=8.0 * scale,
        breaker_cooldown_s=30.0 * scale,
        stall_window_s=300.0 * scale,
        tracer_provider=trace.NoOpTracerProvider(),
        http_client=http,
        seed=options.seed,
    )


def _failure(exc: Exception) -> str:
    """A failure's kind, without the per-call details (chunk numbers, per-source reasons)."""
    reason = exc.reason if isinstance(exc, ProviderError) else str(exc)
    text = reason.split(" (", 1)[0]
    return f"{type(exc).__name__}: {text}"


class StrategyRun:
    """The calls of one setting, started at a fixed rate (open loop); ``handoff`` is set once
    every call was started and at most ``rate`` calls (one second of arrivals) are in flight."""

    def __init__(self, strategy: Strategy, urls: Sequence[str], options: Options) -> None:
        self.strategy = strategy
        self.urls = urls
        self.options = options
        self.outcome = Outcome(strategy, options.calls)
        self.handoff = asyncio.Event()
        self._all_sent = False
        self._in_flight = 0

    def _update_handoff(self) -> None:
        if self._all_sent and self._in_flight <= self.options.rate:
            self.handoff.set()

    async def run(self) -> Outcome:
        counted = 0

        async def count_request(request: httpx2.Request) -> None:
            nonlocal counted
            counted += 1

        limits = httpx2.Limits(max_connections=None, max_keepalive_connections=256)
        http = httpx2.AsyncClient(limits=limits, event_hooks={"request": [count_request]})
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with (
                build_client(self.strategy, self.urls, self.options, http) as client,
                asyncio.TaskGroup() as group,
            ):
                for index in range(self.options.calls):
                    await asyncio.sleep(max(0.0, started + index / self.options.rate - loop.time()))
                    group.create_task(self._call(client, index))
                self._all_sent = True
                self._update_handoff()
        finally:
            await http.aclose()
            self.handoff.set()
        self.outcome.runtime_s = loop.time() - started
        self.outcome.requests = counted
        check(self.outcome)
        return self.outcome

    async def _call(self, client: Client, index: int) -> None:
        outcome = self.outcome
        self._in_flight += 1
        outcome.peak_in_flight = max(outcome.peak_in_flight, self._in_flight)
        started = time.monotonic()
        try:
            result = await client.chat(MESSAGES, sim_key=call_key(index))
        except Exception as exc:  # a failed call is a result, never fatal to the benchmark
            outcome.failures[_failure(exc)] += 1
            return
        finally:
            self._in_flight -= 1
            self._update_handoff()
        elapsed_ms = (time.monotonic() - started) * 1000
        stats = result.stats
        if stats.call_ms is None:
            outcome.anomalies.append("a successful call has no stats.call_ms")
            wall_ms = elapsed_ms
        else:
            wall_ms = stats.call_ms
            if wall_ms > elapsed_ms + 1:
                outcome.anomalies.append(
                    f"stats.call_ms {wall_ms} > {elapsed_ms:.1f} ms the caller measured"
                )
        outcome.walls_s[index] = wall_ms / 1000 / self.options.time_scale
        outcome.stats[index] = stats


def check(outcome: Outcome) -> None:
    """Consistency of the counts the client reports."""
    stats = [item for item in outcome.stats if item is not None]
    attempts = sum(item.attempts for item in stats)
    if not outcome.failures and attempts != outcome.requests:
        outcome.anomalies.append(
            f"Σ stats.attempts = {attempts} but {outcome.requests} HTTP requests were sent"
        )
    odd = [
        item
        for item in stats
        if item.attempts < 1 + item.hedges or (item.hedge_won and item.hedges == 0)
    ]
    if odd:
        outcome.anomalies.append(
            f"{len(odd)} call(s) with inconsistent stats, e.g. attempts {odd[0].attempts}, "
            f"hedges {odd[0].hedges}, hedge_won {odd[0].hedge_won}"
        )


async def run_all(options: Options, chosen: Sequence[Strategy]) -> tuple[list[Outcome], int]:
    """Run the settings in order, each with fresh providers; returns the outcomes and the
    number of tasks left behind once every client is closed."""
    seeds = [options.seed + index for index in range(SOURCES)]
    this = asyncio.current_task()
    assert this is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, this.cancel)  # like Ctrl-C
    running: list[tuple[asyncio.Task[Outcome], Providers]] = []
    all_providers: list[Providers] = []
    try:
        for strategy in chosen:
            providers = Providers(strategy.preset, options.time_scale, seeds)
            all_providers.append(providers)
            providers.launch()
            urls = await asyncio.to_thread(providers.urls)
            print(f"running {strategy.name} ...", file=sys.stderr, flush=True)
            run = StrategyRun(strategy, urls, options)
            task = asyncio.create_task(run.run(), name=f"benchmark {strategy.name}")
            running.append((task, providers))
            if options.sequential:
                await asyncio.wait({task})
            else:
                await run.handoff.wait()
        outcomes = []
        for task, providers in running:
            outcome = await task
            await asyncio.to_thread(providers.stop)
            print(
                f"  {outcome.strategy.name}: {outcome.calls} calls in {outcome.runtime_s:.1f} s, "
                f"{sum(outcome.failures.values())} failed",
                file=sys.stderr,
                flush=True,
            )
            outcomes.append(outcome)
        await asyncio.sleep(0)
        leftover = len(asyncio.all_tasks()) - 1
        return outcomes, leftover
    finally:
        for task, _ in running:
            task.cancel()
        for providers in all_providers:
            providers.stop()


# --- the model beside it -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparison:
    """One setting: the client's calls beside the model's replay of the same draws."""

    client: Outcome
    model: Replay
    client_oracle_p99: float
    model_oracle_p99: float

    @property
    def name(self) -> str:
        return self.client.strategy.name

    @property
    def model_quantiles(self) -> tuple[float, float, float]:
        return percentiles([outcome.wall_s for outcome in self.model.outcomes])

    @property
    def model_requests(self) -> float:
        return statistics.fmean(outcome.requests for outcome in self.model.outcomes)

    @property
    def p99_difference(self) -> float:
        """Client p99 over the model's, minus 1."""
        return self.client.quantiles()[2] / self.model_quantiles[2] - 1.0

    @property
    def requests_difference(self) -> float:
        """Client requests per call minus the model's."""
        return self.client.requests_per_call - self.model_requests

    @property
    def passed(self) -> bool:
        return (
            abs(self.p99_difference) <= P99_TOLERANCE
            and abs(self.requests_difference) <= REQUESTS_TOLERANCE
        )

    def agreeing(self) -> list[int]:
        """Calls whose requests and hedges per trigger the client and the model agree on."""
        same = []
        for index, (stats, model) in enumerate(
            zip(self.client.stats, self.model.outcomes, strict=True)
        ):
            if stats is not None and (stats.attempts, stats.hedges) == (
                model.requests,
                model.hedges,
            ):
                same.append(index)
        return same

    def overhead_s(self) -> tuple[float, float]:
        """Median and p99 of client wall − model wall over the agreeing calls (simulated s)."""
        differences = [
            self.client.walls_s[index] - self.model.outcomes[index].wall_s
            for index in self.agreeing()
        ]
        if len(differences) < 2:
            return math.nan, math.nan
        cuts = statistics.quantiles(differences, n=100, method="inclusive")
        return cuts[49], cuts[98]

    def record(self) -> dict[str, object]:
        """The row for ``--json`` (the frontier picture reads it)."""
        setting = self.client.strategy.setting
        c50, c95, c99 = self.client.quantiles()
        m50, m95, m99 = self.model_quantiles
        return {
            "name": self.name,
            "stall_after_s": setting.stall_after_s,
            "after_s": setting.after_s,
            "watchdog_s": setting.watchdog_s,
            "budget": setting.budget,
            "client": {
                "p50": c50,
                "p95": c95,
                "p99": c99,
                "requests": self.client.requests_per_call,
            },
            "model": {"p50": m50, "p95": m95, "p99": m99, "requests": self.model_requests},
            "client_oracle_p99": self.client_oracle_p99,
            "model_oracle_p99": self.model_oracle_p99,
            "passed": self.passed,
        }


def compare(options: Options, outcomes: Sequence[Outcome]) -> tuple[list[Comparison], list[str]]:
    """Each setting's outcome beside its replay; the problems the replay's own checks found."""
    scripts = KeyedScripts([options.seed + index for index in range(SOURCES)])
    oracle_walls = [scripts.oracle_s(index) for index in range(options.calls)]
    model_oracle_p99 = percentiles(oracle_walls)[2]
    oracle = next(outcome for outcome in outcomes if outcome.strategy.preset == "oracle")
    client_oracle_p99 = oracle.quantiles()[2]
    problems = []
    comparisons = []
    for outcome in outcomes:
        if outcome.strategy.preset == "oracle":
            continue
        setting = outcome.strategy.setting
        result = replay(
            setting.rules(options.max_attempts),
            options.calls,
            options.interval_s,
            scripts.draws(),
            options.shape(),
        )
        if not setting.hedging and setting.watchdog_s is None:
            scripted = [scripts.leg(0, index, 0).end_s for index in range(options.calls)]
            walls = [item.wall_s for item in result.outcomes]
            if any(abs(a - b) > 1e-9 for a, b in zip(walls, scripted, strict=True)):
                problems.append(f"  {setting.name}: the replay's walls differ from the scripts'")
        if result.cap_excess > 1e-9:
            problems.append(
                f"  {setting.name}: the replay spent {result.cap_excess:g} over the cap"
            )
        comparisons.append(Comparison(outcome, result, client_oracle_p99, model_oracle_p99))
    return comparisons, problems


# --- the report ----------------------------------------------------------------------------------


def strategies(options: Options) -> list[Strategy]:
    """The grid's settings in order, then the oracle (the ratios need it)."""
    return [*(Strategy(setting) for setting in options.grid), ORACLE]


def _seconds(value: float) -> str:
    return "inf" if value >= 1e12 else f"{value:.1f}"


def _row(comparison: Comparison) -> str:
    client = comparison.client
    c50, c95, c99 = client.quantiles()
    m99 = comparison.model_quantiles[2]
    same = comparison.agreeing()
    overhead50, overhead99 = comparison.overhead_s()
    return (
        f"  {comparison.name:<26}{_seconds(c50):>6}{_seconds(c95):>7}{_seconds(c99):>7}"
        f"{c99 / comparison.model_oracle_p99:>7.2f}x{client.requests_per_call:>7.3f}"
        f"{_seconds(m99):>8}{m99 / comparison.model_oracle_p99:>7.2f}x"
        f"{comparison.model_requests:>7.3f}"
        f"{comparison.p99_difference:>+8.1%}{comparison.requests_difference:>+8.3f}"
        f"{len(same) / client.calls:>7.1%}{overhead50:>7.2f}{overhead99:>7.2f}"
        f"{sum(client.failures.values()):>5}{client.runtime_s:>5.0f}s"
        f"  {'PASS' if comparison.passed else 'FAIL'}"
    )


def at_the_p99(comparison: Comparison, around: int = 6) -> list[str]:
    """The calls that make the client's p99 of ``comparison`` (the ``around`` either side of its
    rank, by client wall) beside the model's figures for the same calls: whether the p99 moved by
    the client's overhead on the same decisions or by a decision taken differently."""
    client, model = comparison.client, comparison.model.outcomes
    order = sorted(range(client.calls), key=lambda index: client.walls_s[index])
    rank = round(0.99 * (client.calls - 1))
    lines = [
        f"the calls at the client's p99 of the row furthest from the model ({comparison.name}, "
        f"dp99 {comparison.p99_difference:+.1%}), by client wall: call, client wall / model wall "
        "(s), requests and hedges client / model"
    ]
    for position in range(max(0, rank - around), min(client.calls, rank + around + 1)):
        index = order[position]
        stats = client.stats[index]
        ours = model[index]
        requests = "-" if stats is None else f"{stats.attempts}/{stats.hedges}"
        mark = "  <- p99" if position == rank else ""
        lines.append(
            f"  {position + 1:>5}. call {index:>4}  {_seconds(client.walls_s[index]):>6} / "
            f"{_seconds(ours.wall_s):>6}  {requests} / {ours.requests}/{ours.hedges}{mark}"
        )
    return lines


def report(
    options: Options,
    outcomes: Sequence[Outcome],
    comparisons: Sequence[Comparison],
    problems: Sequence[str],
    leftover_tasks: int,
    runtime_s: float,
    machine: str,
) -> list[str]:
    scale = options.time_scale
    oracle = next(outcome for outcome in outcomes if outcome.strategy.preset == "oracle")
    o50, o95, o99 = oracle.quantiles()
    first = comparisons[0] if comparisons else None
    model_oracle = first.model_oracle_p99 if first is not None else math.nan
    budget = "per trigger, fallthrough (issue 13 §1)" if PER_TRIGGER else "one shared bucket"
    lines = [
        f"hedging tail latency, client beside the model: {options.calls} calls per setting "
        f"started at {options.rate:g}/s (open loop), time scale {scale:g} (1 simulated s = "
        f"{1000 * scale:g} ms real), {SOURCES} simulated providers per setting (seeds "
        f"{options.seed}..{options.seed + SOURCES - 1}, keyed draws: sim_key call-i), "
        f"{'sequential' if options.sequential else 'overlapped'}",
        "simulated seconds; client = stats.call_ms / time scale (failed calls count as inf); "
        "model = the zero-overhead replay of the same draws in time order",
        "",
        f"  {'':<26}{'--------------- client ---------------':>38}"
        f"{'-------- model --------':>24}{'---- client-model ----':>43}",
        f"  {'setting':<26}{'p50':>6}{'p95':>7}{'p99':>7}{'p99/orc':>8}{'req':>7}"
        f"{'p99':>8}{'p99/orc':>8}{'req':>7}{'dp99':>8}{'dreq':>8}{'same':>7}{'ovh50':>7}"
        f"{'ovh99':>7}{'fail':>5}{'run':>6}",
        *(_row(comparison) for comparison in comparisons),
        "",
        "  p99/orc = p99 over the scripted oracle's p99 (both; the measured oracle run is below); "
        "req = requests per call;",
        "  dp99 = client p99 / model p99 - 1; dreq = client req - model req; same = calls whose "
        "requests and hedges agree;",
        "  ovh50/ovh99 = median / p99 of client wall - model wall over those calls (simulated s); "
        "run = real s",
        "",
        f"oracle (the same calls without silences, unhedged): measured p50 {_seconds(o50)}  p95 "
        f"{_seconds(o95)}  p99 {_seconds(o99)} s, {oracle.requests_per_call:.3f} req/call; "
        f"scripted p99 {model_oracle:.1f} s (measured/scripted {o99 / model_oracle - 1:+.1%}: "
        "the overhead on long unstalled generations)",
        "",
        f"target: the client's p99 within {P99_TOLERANCE:.0%} of the model's at the same request "
        f"ratio (req within {REQUESTS_TOLERANCE:g})",
    ]
    for comparison in comparisons:
        verdict = "PASS" if comparison.passed else "FAIL"
        lines.append(
            f"    {verdict}  {comparison.name:<26} p99 {comparison.p99_difference:+.1%}, "
            f"req {comparison.requests_difference:+.3f}"
        )
    if comparisons:
        overall = "PASS" if all(comparison.passed for comparison in comparisons) else "FAIL"
        lines.append(f"    {overall} overall (PASS if every setting run meets both bounds)")
        worst = max(comparisons, key=lambda comparison: abs(comparison.p99_difference))
        lines += ["", *at_the_p99(worst)]
    lines += [
        "",
        "parameters (simulated seconds; the client's durations are scaled like the simulator):",
        *(f"  {outcome.strategy.name:<26}{outcome.strategy.describe()}" for outcome in outcomes),
        f"  every client: hedge budget {budget}, burst {BURST:g}, max_attempts "
        f"{options.max_attempts}, backoff 0.5-8 s, stall threshold {max(1, round(1000 * scale))} "
        "ms real, tracing off (NoOpTracerProvider)",
    ]
    all_problems = [*problems]
    all_problems += [
        f"  {outcome.strategy.name}: {text}"
        for outcome in outcomes
        for text in [*outcome.anomalies, *(f"{n}x {why}" for why, n in outcome.failures.items())]
    ]
    if leftover_tasks:
        all_problems.append(f"  {leftover_tasks} task(s) still pending after every client closed")
    if all_problems:
        lines += ["", "failures and anomalies:", *all_problems]
    lines += ["", f"total runtime {runtime_s:.0f} s; {machine}"]
    return lines


def _machine(cpu_s: float) -> str:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()
    return (
        f"client CPU {cpu_s:.0f} s, providers CPU {children.ru_utime + children.ru_stime:.0f} s, "
        f"{os.cpu_count()} cores, load average at the end {load[0]:.2f} / {load[1]:.2f} / "
        f"{load[2]:.2f} (1 / 5 / 15 min)"
    )


def main(options: Options, out: str | None, json_out: str | None) -> None:
    started = time.monotonic()
    cpu_started = time.process_time()
    try:
        outcomes, leftover = asyncio.run(run_all(options, strategies(options)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted; the simulated providers were stopped", file=sys.stderr)
        raise SystemExit(130) from None
    machine = _machine(time.process_time() - cpu_started)
    comparisons, problems = compare(options, outcomes)
    lines = report(
        options, outcomes, comparisons, problems, leftover, time.monotonic() - started, machine
    )
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if out is not None:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(text)
    if json_out is not None:
        document = {
            "calls": options.calls,
            "rate": options.rate,
            "time_scale": options.time_scale,
            "seed": options.seed,
            "per_trigger": PER_TRIGGER,
            "rows": [comparison.record() for comparison in comparisons],
        }
        with open(json_out, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1)
            handle.write("\n")


def parse(argv: Sequence[str] | None = None) -> tuple[Options, str | None, str | None]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per setting")
    parser.add_argument("--rate", type=float, default=20.0, help="calls started per real second")
    parser.add_argument("--max-attempts", type=int, default=5, help="client max_attempts")
    parser.add_argument("--time-scale", type=float, default=0.1, help="real s per simulated s")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first provider")
    parser.add_argument(
        "--grid", default="default", help="default, full, or row names separated by commas"
    )
    parser.add_argument(
        "--sequential", action="store_true", help="start a setting only when the last ended"
    )
    parser.add_argument("--out", help="also write the report to this file")
    parser.add_argument("--json", help="also write the rows as JSON (for hedging_frontier.py)")
    args = parser.parse_args(argv)
    if args.calls < 2 or args.rate <= 0 or args.max_attempts < 1 or not 0 < args.time_scale <= 1:
        parser.error("need --calls >= 2, --rate > 0, --max-attempts >= 1, 0 < --time-scale <= 1")
    try:
        grid = parse_grid(args.grid)
    except ValueError as exc:
        parser.error(str(exc))
    options = Options(
        calls=args.calls,
        rate=args.rate,
        max_attempts=args.max_attempts,
        time_scale=args.time_scale,
        seed=args.seed,
        grid=grid,
        sequential=args.sequential,
    )
    return options, args.out, args.json


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main(*parse())
