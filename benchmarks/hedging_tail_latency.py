"""Tail latency of the hedging strategies on the simulated measured distribution.

Run (the default takes about 6.5 minutes on 2 cores; ``--calls 200`` for a quick look)::

    .venv/bin/python benchmarks/hedging_tail_latency.py [--calls 1000] [--rate 20]
        [--time-scale 0.1] [--seed 1] [--after 6] [--stall-after 10] [--watchdog 20]
        [--max-attempts 5] [--budget 0.25] [--strategies "stall hedge,stall+watchdog"]
        [--sequential] [--out benchmarks/results/hedging.txt]

What it measures. Every strategy sends the same traffic — ``--calls`` streamed chat calls (default
1,000) started at ``--rate`` calls per real second (default 20, open loop) — through
``otel_llm.Client`` to three simulated providers (``otel-llm provider --preset measured``, seeds
S, S+1, S+2), each in its own process, so the client's event loop measures latency without the
servers' CPU. The ``measured`` preset reproduces the user's 4,407 measured calls (SPEC §0): 19 %
of calls hold a silence > 20 s (median 55 s, heavy tail), 30 % of the others one moderate silence
of 1.5-19.5 s, the first chunk after LogNormal(median 1.63 s). Each source draws from its own
seeded generator, so stalls are independent across sources — what makes a hedge useful. Every
strategy gets fresh provider processes with the same seeds, so all strategies see the same
primary calls (the priority-0 source serves every primary, in request order; sim-1 serves hedges
and the first retry, sim-2 only when the others are unavailable); ``oracle`` serves the same calls
without any silence (``--preset oracle``, same seeds), the lower bound a strategy can approach.

Strategies (times in simulated seconds):

1. ``none``: no mitigation; read timeout and watchdog are 1000 s, longer than any scripted gap
   (silences are capped at 600 s), so nothing ever fires.
2. ``watchdog+retry``: the industry baseline — a fixed idle timeout, then retry/failover: the
   watchdog kills an attempt after 20 s without an incremental chunk (before the first one too)
   and the call retries on the next source. 20 s is the most favourable fixed value for this
   distribution: normal cadence (≤ 0.25 s) and the moderate silences (≤ 19.5 s) never reach it,
   every silence of the 19 % stalled calls exceeds it, and only ~0.06 % of first chunks take
   longer. A shorter timeout kills healthy streams; a longer one (deployed idle timeouts are often
   minutes) only waits longer.
3. ``first-token hedge``: ``hedge_after_s`` 6 s, ≈ the 95th percentile of the time to first chunk
   (LogNormal(1.63 s, σ 0.78): p95 5.9 s) — the classic "hedge at p95", ~5 % extra requests.
4. ``stall hedge``: ``hedge_stall_after_s`` 10 s: 40× the longest normal chunk interval (0.25 s),
   so normal cadence never reaches it, and above the 84th percentile of the moderate silences, so
   it hedges ≈ 19 % (stalled calls) + 4 % (moderate ones) ≈ 23 % of calls, inside the default
   hedge budget of 25 % extra requests. A lower trigger also hedges most moderate silences (5 s:
   ~31 %, 2 s: ~41 % of calls) and the budget then refuses hedges that stalled calls need more.
5. ``both hedges``: 6 s and 10 s (at most one hedge per round: a call hedged for its first
   token is not stall-hedged).
6. ``oracle``: the same calls without silences, no mitigation.
7. ``stall+watchdog`` (extra): the stall hedge plus the 20 s watchdog on every leg, so a hedge leg
   that stalls as well is killed and the call retries with a new round that may hedge again
   (SPEC R11) — the only way this client gets a third request into a call whose primary and hedge
   both stall (19 % × 19 % ≈ 3.6 % of calls, more than the 1 % a p99 may ignore).

Every client: ``max_attempts`` 5 (library default 3: with 19 % of attempts stalling, 3 leave
~0.7 % of the watchdog baseline's calls failed, which puts its p99 at the edge of +inf; 5 lets the
table show what the retries cost instead), the hedge budget at the library default
(``hedge_budget_ratio`` 0.25, burst 10) unless ``--budget`` is given, and tracing off: the client
gets ``trace.NoOpTracerProvider()``, so telemetry costs are not part of the comparison (the chunk
clock still meters every attempt for ``CallStats``). The "trigger" column is the share of calls
whose primary script fires the strategy's hedge trigger (from the seeded draws), so
trigger − hedged ≈ hedges the budget refused.

Time scale and load. Every client-side duration — triggers, watchdog, read timeout, stall
threshold, backoff, breaker cool-down, stall window — is multiplied by the simulator's
``--time-scale`` (connect timeouts stay real). The default is 0.1, not 0.01-0.02: the simulator
sleeps once per chunk (30 ms median cadence: 3 ms at 0.1), each sleep overshoots by up to ~1 ms
(the event loop's epoll timeout is rounded up to whole milliseconds) plus ~0.3 ms of writing, so
at 0.02 every stream's generation phase runs ~2× slower than scripted. That inflates the oracle's
tail (long generations) far more than the stall-dominated tails and biases the comparison towards
PASS. The client pays ~150-200 µs of CPU per chunk (httpx2/h11/SSE), so the load is set as an
arrival rate, the same for every strategy (same calls, same chunks per second; a closed loop would
push the short oracle calls, and their chunks, through several times faster). What overhead is
left shows in the "scripted reference" lines (the same draws, no overhead at all).

Overlap. To keep the run short, the next strategy starts (own client, fresh providers) once the
current one has started all its calls and has at most ``rate`` calls (one second of arrivals)
still in flight — its tail is calls waiting in long silences, which cost no CPU.
``--sequential`` starts each strategy only when the previous one has finished.

Reported per strategy: p50 / p95 / p99 of ``stats.call_ms`` (the whole call, retries included)
divided by the time scale, in simulated seconds — a failed call counts as +inf (it never
answered); requests per call (HTTP requests sent ÷ calls, counted by an httpx2 event hook and
checked against ``Σ stats.attempts``; 1.00 = no extra request); the share of calls that hedged
and, of those, the share won by the hedge leg; failures. The target check: with stall hedging,
p99 ≤ 1.3 × the oracle's p99 at ≤ 1.25 × its requests, evaluated against the measured oracle
(same overheads) and, as a cross-check, against the scripted oracle (no overheads).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
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
from _provider import launch, read_url
from opentelemetry import trace

from otel_llm._act._client import Client
from otel_llm._act._source import Source
from otel_llm._act._stats import CallStats
from otel_llm._errors import ProviderError
from otel_llm.simulator import Script, sample_measured

SOURCES = 3
"""Simulated providers per strategy (seeds ``seed``, ``seed + 1``, ...)."""

NO_TIMEOUT_S = 1000.0
"""Simulated read timeout and watchdog that never fire: above the longest scripted gap (600 s)."""

STALL_S = 20.0
"""What SPEC §0 calls a stalled call: a silence longer than this."""

STRATEGY_NAMES = (
    "none",
    "watchdog+retry",
    "first-token hedge",
    "stall hedge",
    "both hedges",
    "oracle",
    "stall+watchdog",
)

TARGET_P99 = 1.3
TARGET_REQUESTS = 1.25

MESSAGES = ({"role": "user", "content": "Explain hedged requests."},)


@dataclass(frozen=True, slots=True)
class Strategy:
    """One way of calling; durations are simulated seconds (scaled when the client is built)."""

    name: str
    preset: str = "measured"
    hedge_after_s: float | None = None
    hedge_stall_after_s: float | None = None
    watchdog_s: float | None = None
    stall_hedging: bool = False
    """Whether the target check applies to this strategy."""

    def describe(self) -> str:
        """The strategy's knobs, for the parameter list under the table."""
        parts = [f"preset {self.preset}"]
        if self.hedge_after_s is not None:
            parts.append(f"hedge_after_s {self.hedge_after_s:g}")
        if self.hedge_stall_after_s is not None:
            parts.append(f"hedge_stall_after_s {self.hedge_stall_after_s:g}")
        parts.append(
            f"watchdog {self.watchdog_s:g} s (ttft + inter-chunk)"
            if self.watchdog_s is not None
            else f"no watchdog (timeouts {NO_TIMEOUT_S:g} s)"
        )
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Options:
    """The command line."""

    calls: int
    rate: float
    max_attempts: int
    time_scale: float
    seed: int
    after_s: float
    stall_after_s: float
    watchdog_s: float
    budget: float | None
    strategies: tuple[str, ...]
    sequential: bool


@dataclass
class Outcome:
    """What one strategy's calls did."""

    strategy: Strategy
    walls_s: list[float] = field(default_factory=list)
    stats: list[CallStats] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    runtime_s: float = 0.0
    peak_in_flight: int = 0
    anomalies: list[str] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self.walls_s)

    def percentile(self, q: float) -> float:
        """``q``-quantile (linear interpolation) of wall time; failed calls are +inf."""
        ordered = sorted(self.walls_s)
        position = q * (len(ordered) - 1)
        low = math.floor(position)
        high = min(low + 1, len(ordered) - 1)
        if math.isinf(ordered[high]):
            return ordered[high] if position > low else ordered[low]
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)

    @property
    def requests_per_call(self) -> float:
        return self.requests / self.calls

    @property
    def hedged(self) -> int:
        return sum(1 for stats in self.stats if stats.hedges > 0)

    @property
    def hedge_won(self) -> int:
        return sum(1 for stats in self.stats if stats.hedge_won)


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


# --- one strategy --------------------------------------------------------------------------------


def build_client(
    strategy: Strategy, urls: Sequence[str], options: Options, http: httpx2.AsyncClient
) -> Client:
    """The client of ``strategy``: every duration scaled to the simulator's time."""
    scale = options.time_scale
    watchdog = strategy.watchdog_s * scale if strategy.watchdog_s is not None else None
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
    after, stall = strategy.hedge_after_s, strategy.hedge_stall_after_s
    return Client(
        sources,
        stall_threshold_ms=max(1, round(1000 * scale)),
        hedge_after_s=after * scale if after is not None else None,
        hedge_stall_after_s=stall * scale if stall is not None else None,
        hedge_budget_ratio=options.budget,
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
    """The calls of one strategy, started at a fixed rate (open loop); ``handoff`` is set once
    every call was started and at most ``rate`` calls (one second of arrivals) are in flight."""

    def __init__(self, strategy: Strategy, urls: Sequence[str], options: Options) -> None:
        self.strategy = strategy
        self.urls = urls
        self.options = options
        self.outcome = Outcome(strategy)
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
                    group.create_task(self._call(client))
                self._all_sent = True
                self._update_handoff()
        finally:
            await http.aclose()
            self.handoff.set()
        self.outcome.runtime_s = loop.time() - started
        self.outcome.requests = counted
        check(self.outcome)
        return self.outcome

    async def _call(self, client: Client) -> None:
        outcome = self.outcome
        self._in_flight += 1
        outcome.peak_in_flight = max(outcome.peak_in_flight, self._in_flight)
        started = time.monotonic()
        try:
            result = await client.chat(MESSAGES)
        except Exception as exc:  # a failed call is a result, never fatal to the benchmark
            outcome.walls_s.append(math.inf)
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
        outcome.walls_s.append(wall_ms / 1000 / self.options.time_scale)
        outcome.stats.append(stats)


def check(outcome: Outcome) -> None:
    """Consistency of the counts the client reports."""
    attempts = sum(stats.attempts for stats in outcome.stats)
    if not outcome.failures and attempts != outcome.requests:
        outcome.anomalies.append(
            f"Σ stats.attempts = {attempts} but {outcome.requests} HTTP requests were sent"
        )
    odd = [
        stats
        for stats in outcome.stats
        if stats.attempts < 1 + stats.hedges or (stats.hedge_won and stats.hedges == 0)
    ]
    if odd:
        outcome.anomalies.append(
            f"{len(odd)} call(s) with inconsistent stats, e.g. attempts {odd[0].attempts}, "
            f"hedges {odd[0].hedges}, hedge_won {odd[0].hedge_won}"
        )


async def run_all(options: Options, chosen: Sequence[Strategy]) -> tuple[list[Outcome], int]:
    """Run the strategies in order, each with fresh providers; returns the outcomes and the
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


# --- the scripted reference ----------------------------------------------------------------------


def gaps(script: Script) -> list[float]:
    """Time to first chunk, then every gap between consecutive chunks (scripted seconds)."""
    silence: dict[int, float] = {}
    for item in script.silences:
        silence[item.after_chunk] = silence.get(item.after_chunk, 0.0) + item.duration_s
    return [script.first_chunk_delay_s] + [
        script.chunk_interval_s + silence.get(index, 0.0) for index in range(script.chunk_count - 1)
    ]


@dataclass(frozen=True, slots=True)
class Reference:
    """The first ``calls`` draws of the primary source's seed, as scripted."""

    measured: list[float]
    oracle: list[float]
    stalled: float
    ttft_over_after: float
    gap_over_stall_after: float
    gap_over_stall_after_in_time: float
    """A gap > the stall trigger in a call whose first chunk came within the first-token one."""

    @classmethod
    def of(cls, options: Options) -> Reference:
        measured = random.Random(options.seed)
        oracle = random.Random(options.seed)
        walls: list[float] = []
        clean: list[float] = []
        stalled = late = gapped = gapped_in_time = 0
        for _ in range(options.calls):
            script = sample_measured(measured)
            clean.append(sample_measured(oracle, silences=False).nominal_duration_s)
            walls.append(script.nominal_duration_s)
            steps = gaps(script)
            stalled += any(silence.duration_s > STALL_S for silence in script.silences)
            late += steps[0] > options.after_s
            gap = max(steps[1:], default=0.0) > options.stall_after_s
            gapped += gap
            gapped_in_time += gap and steps[0] <= options.after_s
        n = options.calls
        return cls(walls, clean, stalled / n, late / n, gapped / n, gapped_in_time / n)

    def trigger_rate(self, strategy: Strategy) -> float | None:
        """Share of primary calls whose script fires a hedge trigger of ``strategy``."""
        after = strategy.hedge_after_s is not None
        stall = strategy.hedge_stall_after_s is not None
        if after and stall:
            return self.ttft_over_after + self.gap_over_stall_after_in_time
        if after:
            return self.ttft_over_after
        return self.gap_over_stall_after if stall else None


def quantiles(values: Sequence[float]) -> tuple[float, float, float]:
    """p50, p95, p99 (linear interpolation)."""
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[94], cuts[98]


# --- the report ----------------------------------------------------------------------------------


def strategies(options: Options) -> list[Strategy]:
    """The chosen strategies in table order (the oracle always, the target check needs it)."""
    after, stall, watchdog = options.after_s, options.stall_after_s, options.watchdog_s
    everything = [
        Strategy("none"),
        Strategy("watchdog+retry", watchdog_s=watchdog),
        Strategy("first-token hedge", hedge_after_s=after),
        Strategy("stall hedge", hedge_stall_after_s=stall, stall_hedging=True),
        Strategy("both hedges", hedge_after_s=after, hedge_stall_after_s=stall, stall_hedging=True),
        Strategy("oracle", preset="oracle"),
        Strategy(
            "stall+watchdog", hedge_stall_after_s=stall, watchdog_s=watchdog, stall_hedging=True
        ),
    ]
    return [s for s in everything if s.name in options.strategies or s.preset == "oracle"]


def _seconds(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.1f}"


def _row(outcome: Outcome, oracle_p99: float, reference: Reference) -> str:
    p50, p95, p99 = (outcome.percentile(q) for q in (0.50, 0.95, 0.99))
    hedged = outcome.hedged
    trigger = reference.trigger_rate(outcome.strategy)
    return (
        f"  {outcome.strategy.name:<19}{_seconds(p50):>7}{_seconds(p95):>8}{_seconds(p99):>8}"
        f"{p99 / oracle_p99:>8.2f}x{outcome.requests_per_call:>9.3f}x"
        f"{'-' if trigger is None else f'{trigger:.1%}':>9}{hedged / outcome.calls:>8.1%}"
        f"{(f'{outcome.hedge_won / hedged:.0%}' if hedged else '-'):>7}"
        f"{sum(outcome.failures.values()):>8}{outcome.peak_in_flight:>6}{outcome.runtime_s:>6.0f}s"
    )


def _target(outcomes: Sequence[Outcome], oracle: Outcome, oracle_p99: float) -> list[str]:
    lines = []
    verdicts = []
    for outcome in outcomes:
        if not outcome.strategy.stall_hedging:
            continue
        p99 = outcome.percentile(0.99)
        requests = outcome.requests_per_call / oracle.requests_per_call
        passed = p99 / oracle_p99 <= TARGET_P99 and requests <= TARGET_REQUESTS
        verdicts.append(passed)
        verdict = "PASS" if passed else "FAIL"
        lines.append(
            f"    {verdict}  {outcome.strategy.name:<15} p99 {_seconds(p99)} s "
            f"= {p99 / oracle_p99:.2f}x, {requests:.3f}x requests"
        )
    if verdicts:
        verdict = "PASS" if any(verdicts) else "FAIL"
        lines.append(
            f"    {verdict} overall (PASS if any stall-hedging strategy meets both bounds)"
        )
    return lines


def report(
    options: Options,
    outcomes: Sequence[Outcome],
    reference: Reference,
    leftover_tasks: int,
    runtime_s: float,
    machine: str,
) -> list[str]:
    scale = options.time_scale
    oracle = next(outcome for outcome in outcomes if outcome.strategy.preset == "oracle")
    oracle_p99 = oracle.percentile(0.99)
    measured_q = quantiles(reference.measured)
    oracle_q = quantiles(reference.oracle)
    budget = f"{options.budget:g}" if options.budget is not None else "0.25 (library default)"
    lines = [
        f"hedging tail latency: {options.calls} calls per strategy started at {options.rate:g}/s "
        f"(open loop), time scale {scale:g} (1 simulated s = {1000 * scale:g} ms real), "
        f"{SOURCES} simulated providers per strategy (seeds {options.seed}.."
        f"{options.seed + SOURCES - 1}), {'sequential' if options.sequential else 'overlapped'}",
        "wall time of the whole call (stats.call_ms / time scale) in simulated seconds; "
        "failed calls count as inf",
        "",
        f"  {'strategy':<19}{'p50':>7}{'p95':>8}{'p99':>8}{'p99/orc':>9}{'req/call':>10}"
        f"{'trigger':>9}{'hedged':>8}{'won':>7}{'failed':>8}{'peak':>6}{'run':>7}",
        *(_row(outcome, oracle_p99, reference) for outcome in outcomes),
        "",
        "  req/call = HTTP requests / calls; trigger = primary calls whose script fires the hedge "
        "trigger;",
        "  hedged = calls with a hedge leg (trigger - hedged ~ refused by the hedge budget); "
        "won = of those, won by the hedge leg;",
        "  peak = most calls in flight; run = first call started to last call ended (real s)",
        "",
        "scripted reference (the same draws, no client or simulator overhead):",
        f"  none   p50 {measured_q[0]:.1f}  p95 {measured_q[1]:.1f}  p99 {measured_q[2]:.1f}   "
        f"{reference.stalled:.1%} of primary calls hold a silence > {STALL_S:g} s",
        f"  oracle p50 {oracle_q[0]:.1f}  p95 {oracle_q[1]:.1f}  p99 {oracle_q[2]:.1f}   "
        f"primary calls with TTFT > {options.after_s:g} s: {reference.ttft_over_after:.1%}, "
        f"with a gap > {options.stall_after_s:g} s: {reference.gap_over_stall_after:.1%}",
        "",
        f"target: with stall hedging, p99 <= {TARGET_P99}x the oracle's p99 at <= "
        f"{TARGET_REQUESTS}x its requests (the oracle made {oracle.requests_per_call:.2f}x)",
        f"  against the measured oracle (p99 {oracle_p99:.1f} s, same overheads):",
        *_target(outcomes, oracle, oracle_p99),
        f"  cross-check against the scripted oracle (p99 {oracle_q[2]:.1f} s, no overheads):",
        *_target(outcomes, oracle, oracle_q[2]),
        "",
        "parameters (simulated seconds; the client's durations are scaled like the simulator):",
        *(f"  {outcome.strategy.name:<19}{outcome.strategy.describe()}" for outcome in outcomes),
        f"  every client: hedge budget ratio {budget}, burst 10, "
        f"max_attempts {options.max_attempts}, backoff 0.5-8 s, "
        f"stall threshold {max(1, round(1000 * scale))} ms real, tracing off "
        "(NoOpTracerProvider)",
    ]
    problems = [
        f"  {outcome.strategy.name}: {text}"
        for outcome in outcomes
        for text in [*outcome.anomalies, *(f"{n}x {why}" for why, n in outcome.failures.items())]
    ]
    if leftover_tasks:
        problems.append(f"  {leftover_tasks} task(s) still pending after every client closed")
    if problems:
        lines += ["", "failures and anomalies:", *problems]
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


def main(options: Options, out: str | None) -> None:
    started = time.monotonic()
    cpu_started = time.process_time()
    reference = Reference.of(options)
    try:
        outcomes, leftover = asyncio.run(run_all(options, strategies(options)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted; the simulated providers were stopped", file=sys.stderr)
        raise SystemExit(130) from None
    machine = _machine(time.process_time() - cpu_started)
    lines = report(options, outcomes, reference, leftover, time.monotonic() - started, machine)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if out is not None:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(text)


def parse(argv: Sequence[str] | None = None) -> tuple[Options, str | None]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per strategy")
    parser.add_argument("--rate", type=float, default=20.0, help="calls started per real second")
    parser.add_argument("--max-attempts", type=int, default=5, help="client max_attempts")
    parser.add_argument("--time-scale", type=float, default=0.1, help="real s per simulated s")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first provider")
    parser.add_argument("--after", type=float, default=6.0, help="first-token hedge trigger (s)")
    parser.add_argument("--stall-after", type=float, default=10.0, help="stall hedge trigger (s)")
    parser.add_argument("--watchdog", type=float, default=20.0, help="watchdog timeout (s)")
    parser.add_argument("--budget", type=float, help="hedge_budget_ratio (library default 0.25)")
    parser.add_argument(
        "--strategies",
        default=",".join(STRATEGY_NAMES),
        help="comma-separated subset (the oracle always runs)",
    )
    parser.add_argument(
        "--sequential", action="store_true", help="start a strategy only when the last ended"
    )
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args(argv)
    if args.calls < 2 or args.rate <= 0 or args.max_attempts < 1 or not 0 < args.time_scale <= 1:
        parser.error("need --calls >= 2, --rate > 0, --max-attempts >= 1, 0 < --time-scale <= 1")
    names = tuple(name.strip() for name in args.strategies.split(",") if name.strip())
    unknown = [name for name in names if name not in STRATEGY_NAMES]
    if unknown:
        parser.error(f"unknown strategies {unknown}; known: {', '.join(STRATEGY_NAMES)}")
    options = Options(
        calls=args.calls,
        rate=args.rate,
        max_attempts=args.max_attempts,
        time_scale=args.time_scale,
        seed=args.seed,
        after_s=args.after,
        stall_after_s=args.stall_after,
        watchdog_s=args.watchdog,
        budget=args.budget,
        strategies=names,
        sequential=args.sequential,
    )
    return options, args.out


if __name__ == "__main__":
    main(*parse())
