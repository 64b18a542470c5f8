"""Tail latency of the hedging strategies on the simulated measured distribution.

What it measures. Every strategy runs the same traffic — ``--calls`` streamed chat calls (default
1,000), ``--concurrency`` in flight (default 48) — through ``otel_llm.Client`` against three
simulated providers (``otel-llm provider --preset measured``, seeds S, S+1, S+2), each in its own
process so the client's event loop measures latency without the servers' CPU. The ``measured``
preset reproduces the user's 4,407 measured calls (SPEC §0): 19 % of calls hold a silence > 20 s
(median 55 s, heavy tail), 30 % of the others one moderate silence of 1.5–19.5 s, first chunk
after LogNormal(median 1.63 s). Each source draws its calls from its own seeded generator, so
stalls are independent across sources — that is what makes a hedge useful. Fresh provider
processes with the same seeds serve every strategy, so every strategy sees the same primary calls
(the priority-0 source serves every primary, in request order); ``oracle`` serves the same calls
without any silence (``--preset oracle``, same seeds): the lower bound a strategy can approach.

Strategies (all times in simulated seconds; every client-side duration — triggers, watchdog,
read timeout, stall threshold, backoff, breaker cool-down, stall window — is multiplied by the
same ``--time-scale`` as the simulator; connect timeouts stay real):

1. ``none``: no mitigation; the read timeout and watchdog (1000 s) are longer than any scripted
   silence (capped at 600 s), so nothing ever fires.
2. ``watchdog+retry``: the industry baseline, a fixed idle timeout then retry/failover: the
   watchdog kills an attempt after 20 s without a chunk (first chunk included) and the call
   retries on the next source (library defaults: ``max_attempts`` 3, backoff 0.5 s base). 20 s is
   the most favourable fixed value for this distribution: healthy cadence (≤ 0.25 s) and the
   moderate silences (≤ 19.5 s) never reach it, every silence of the 19 % stalled calls exceeds
   it, and only ~0.06 % of first chunks take longer. Any shorter timeout kills healthy streams,
   any longer one only waits longer.
3. ``first-token hedge``: ``hedge_after_s`` = 6 s, ≈ the 95th percentile of the measured time to
   first chunk (LogNormal(1.63 s, σ 0.78): p95 5.9 s) — the classic "hedge at p95" that costs
   ~5 % extra requests.
4. ``stall hedge``: ``hedge_stall_after_s`` = 10 s: 40× the longest normal chunk interval
   (0.25 s), so normal cadence never reaches it; beyond the 84th percentile of the moderate
   silences, so it hedges ≈ 19 % (stalled calls) + 4 % (moderate ones) ≈ 23 % of calls, inside the
   default hedge budget of 25 % extra requests. A lower trigger also hedges most moderate
   silences (5 s: ~31 %, 2 s: ~41 % of calls) and the budget then refuses hedges to calls that
   need them more.
5. ``both hedges``: 6 s and 10 s together (at most one hedge per round, so a call hedged for its
   first token is not stall-hedged).
6. ``oracle``: the same calls without silences, no mitigation.
7. ``both+watchdog`` (extra): both hedges plus the 20 s watchdog on every leg: a hedge leg that
   stalls too is killed and the call retries, with a new hedge round (SPEC R11).

The hedge budget is left at the library default (``hedge_budget_ratio`` 0.25, burst 10) unless
``--budget`` is given; the table's "primary trigger" column is the share of calls whose primary
script would fire the hedge trigger (computed from the seeded draws), so trigger − hedged ≈
hedges the budget refused. Tracing is off: the client gets ``trace.NoOpTracerProvider()``, so the
comparison holds no telemetry cost (the chunk clock still meters every attempt for
``CallStats``).

Reported per strategy: p50 / p95 / p99 of ``stats.call_ms`` (the whole call, retries included)
divided by the time scale, in simulated seconds — a failed call counts as +inf (it never
answered); requests per call (HTTP requests sent ÷ calls, counted by an httpx event hook and
checked against ``Σ stats.attempts``; 1.00 = no extra request); the share of calls that hedged
and, of those, the share the hedge leg won; failures. The reference lines give the scripted
durations (no client or simulator overhead) of the same draws for ``none`` and ``oracle``. The
target check: with stall hedging, p99 ≤ 1.3 × the oracle's p99 at ≤ 1.25 × its requests.

Run (the default takes ~4 minutes on 2 cores)::

    .venv/bin/python benchmarks/hedging_tail_latency.py [--calls 1000] [--concurrency 48]
        [--time-scale 0.02] [--seed 1] [--after 6] [--stall-after 10] [--watchdog 20]
        [--budget 0.25] [--strategies none,oracle,...] [--out benchmarks/results/hedging.txt]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import httpx
from opentelemetry import trace

from otel_llm.act._client import Client
from otel_llm.act._source import Source
from otel_llm.act._stats import CallStats
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
    "both+watchdog",
)

TARGET_P99 = 1.3
TARGET_REQUESTS = 1.25

_URL = re.compile(r"http://[^\s()]+/v1")


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
    calls: int
    concurrency: int
    time_scale: float
    seed: int
    after_s: float
    stall_after_s: float
    watchdog_s: float
    budget: float | None
    strategies: tuple[str, ...]


@dataclass
class Outcome:
    """What one strategy's calls did."""

    strategy: Strategy
    walls_s: list[float] = field(default_factory=list)
    stats: list[CallStats] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    requests: int = 0
    runtime_s: float = 0.0
    leaked_tasks: int = 0
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


def _read_url(proc: subprocess.Popen[str]) -> str:
    """The base URL from the provider's first output line (killed if it stays silent)."""
    assert proc.stdout is not None
    killer = threading.Timer(30.0, proc.kill)
    killer.start()
    try:
        line = proc.stdout.readline()
    finally:
        killer.cancel()
    match = _URL.search(line)
    if match is None:
        raise RuntimeError(f"the simulated provider did not announce its URL: {line!r}")
    return match.group(0)


@contextlib.contextmanager
def providers(preset: str, time_scale: float, seeds: Sequence[int]) -> Iterator[list[str]]:
    """Serve one ``otel-llm provider`` process per seed; stop them all on the way out."""
    env = {**os.environ, "COLUMNS": "200"}  # one unwrapped announcement line
    procs: list[subprocess.Popen[str]] = []
    try:
        for seed in seeds:
            command = [sys.executable, "-m", "otel_llm.cli", "provider", "--port", "0"]
            command += ["--preset", preset, "--time-scale", str(time_scale), "--seed", str(seed)]
            procs.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env))
        yield [_read_url(proc) for proc in procs]
    finally:
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
    strategy: Strategy, urls: Sequence[str], options: Options, http: httpx.AsyncClient
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
    return Client(
        sources,
        stall_threshold_ms=max(1, round(1000 * scale)),
        hedge_after_s=strategy.hedge_after_s * scale if strategy.hedge_after_s else None,
        hedge_stall_after_s=(
            strategy.hedge_stall_after_s * scale if strategy.hedge_stall_after_s else None
        ),
        hedge_budget_ratio=options.budget,
        backoff_base_s=0.5 * scale,
        backoff_max_s=8.0 * scale,
        breaker_cooldown_s=30.0 * scale,
        stall_window_s=300.0 * scale,
        tracer_provider=trace.NoOpTracerProvider(),
        http_client=http,
        seed=options.seed,
    )


async def run_calls(strategy: Strategy, urls: Sequence[str], options: Options) -> Outcome:
    """Run the calls of one strategy with ``concurrency`` in flight."""
    outcome = Outcome(strategy)
    counted = 0

    async def count_request(request: httpx.Request) -> None:
        nonlocal counted
        counted += 1

    limits = httpx.Limits(max_connections=4 * options.concurrency, max_keepalive_connections=None)
    http = httpx.AsyncClient(limits=limits, event_hooks={"request": [count_request]})
    messages = [{"role": "user", "content": "Explain hedged requests."}]
    pending = iter(range(options.calls))

    async def worker(client: Client) -> None:
        for _ in pending:
            started = time.monotonic()
            try:
                result = await client.chat(messages)
            except Exception as exc:  # a failed call: recorded, never fatal to the benchmark
                outcome.walls_s.append(math.inf)
                outcome.failures[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
                continue
            stats = result.stats
            if stats.call_ms is None:
                outcome.anomalies.append("a successful call has no call_ms")
                wall_ms = (time.monotonic() - started) * 1000
            else:
                wall_ms = stats.call_ms
            outcome.walls_s.append(wall_ms / 1000 / options.time_scale)
            outcome.stats.append(stats)

    started = time.monotonic()
    try:
        async with (
            build_client(strategy, urls, options, http) as client,
            asyncio.TaskGroup() as group,
        ):
            for _ in range(min(options.concurrency, options.calls)):
                group.create_task(worker(client))
    finally:
        await http.aclose()
    outcome.runtime_s = time.monotonic() - started
    outcome.requests = counted
    await asyncio.sleep(0)
    outcome.leaked_tasks = len(asyncio.all_tasks()) - 1
    check(outcome)
    return outcome


def check(outcome: Outcome) -> None:
    """Consistency of the counts the client reports."""
    attempts = sum(stats.attempts for stats in outcome.stats)
    if not outcome.failures and attempts != outcome.requests:
        outcome.anomalies.append(
            f"Σ stats.attempts = {attempts} but {outcome.requests} HTTP requests were sent"
        )
    for stats in outcome.stats:
        if stats.attempts < 1 + stats.hedges or (stats.hedge_won and stats.hedges == 0):
            outcome.anomalies.append(
                f"inconsistent stats: attempts {stats.attempts}, hedges {stats.hedges}, "
                f"hedge_won {stats.hedge_won}"
            )
            break
    if outcome.leaked_tasks:
        outcome.anomalies.append(f"{outcome.leaked_tasks} task(s) still pending after the run")


def run_strategy(strategy: Strategy, options: Options) -> Outcome:
    seeds = [options.seed + index for index in range(SOURCES)]
    with providers(strategy.preset, options.time_scale, seeds) as urls:
        return asyncio.run(run_calls(strategy, urls, options))


# --- the scripted reference ----------------------------------------------------------------------


def gaps(script: Script) -> list[float]:
    """Time to first chunk, then every gap between consecutive chunks (scripted seconds)."""
    silence: Counter[int] = Counter()
    for item in script.silences:
        silence[item.after_chunk] += item.duration_s  # type: ignore[assignment]
    return [script.first_chunk_delay_s] + [
        script.chunk_interval_s + silence[index] for index in range(script.chunk_count - 1)
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
        if not (after or stall):
            return None
        if after and stall:
            return self.ttft_over_after + self.gap_over_stall_after_in_time
        return self.ttft_over_after if after else self.gap_over_stall_after


def quantiles(values: Sequence[float]) -> tuple[float, float, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[94], cuts[98]


# --- the report ----------------------------------------------------------------------------------


def strategies(options: Options) -> list[Strategy]:
    after, stall, watchdog = options.after_s, options.stall_after_s, options.watchdog_s
    everything = [
        Strategy("none", watchdog_s=None),
        Strategy("watchdog+retry", watchdog_s=watchdog),
        Strategy("first-token hedge", hedge_after_s=after),
        Strategy("stall hedge", hedge_stall_after_s=stall, stall_hedging=True),
        Strategy("both hedges", hedge_after_s=after, hedge_stall_after_s=stall, stall_hedging=True),
        Strategy("oracle", preset="oracle"),
        Strategy(
            "both+watchdog",
            hedge_after_s=after,
            hedge_stall_after_s=stall,
            watchdog_s=watchdog,
            stall_hedging=True,
        ),
    ]
    known = {strategy.name: strategy for strategy in everything}
    chosen = [known[name] for name in options.strategies]
    if "oracle" not in options.strategies:
        chosen.append(known["oracle"])  # the target check needs it
    return chosen


def _seconds(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.1f}"


def report(
    options: Options, outcomes: list[Outcome], reference: Reference, runtime_s: float
) -> list[str]:
    scale = options.time_scale
    lines = [
        f"hedging tail latency: {options.calls} calls per strategy, {options.concurrency} in "
        f"flight, time scale {scale:g} (1 simulated s = {1000 * scale:g} ms), {SOURCES} "
        f"simulated providers per strategy (seeds {options.seed}..{options.seed + SOURCES - 1})",
        "wall time of the whole call (stats.call_ms / time scale) in simulated seconds; "
        "failed calls count as inf",
        "",
        f"  {'strategy':<19}{'p50':>7}{'p95':>8}{'p99':>8}{'p99/orc':>9}{'req/call':>10}"
        f"{'trigger':>9}{'hedged':>8}{'won':>7}{'failed':>8}{'run':>7}",
    ]
    oracle = next(outcome for outcome in outcomes if outcome.strategy.preset == "oracle")
    oracle_p99 = oracle.percentile(0.99)
    for outcome in outcomes:
        p50, p95, p99 = (outcome.percentile(q) for q in (0.50, 0.95, 0.99))
        hedged = outcome.hedged
        trigger = reference.trigger_rate(outcome.strategy)
        lines.append(
            f"  {outcome.strategy.name:<19}{_seconds(p50):>7}{_seconds(p95):>8}"
            f"{_seconds(p99):>8}{p99 / oracle_p99:>8.2f}x{outcome.requests_per_call:>9.3f}x"
            f"{'-' if trigger is None else f'{trigger:.1%}':>9}"
            f"{hedged / outcome.calls:>8.1%}"
            f"{(f'{outcome.hedge_won / hedged:.0%}' if hedged else '-'):>7}"
            f"{sum(outcome.failures.values()):>8}{outcome.runtime_s:>6.0f}s"
        )
    measured_q = quantiles(reference.measured)
    oracle_q = quantiles(reference.oracle)
    lines += [
        "",
        "  columns: req/call = HTTP requests / calls; trigger = share of primary scripts that "
        "would fire the hedge trigger",
        "  (trigger - hedged ~ hedges refused by the budget); hedged = calls with a hedge leg; "
        "won = of those, won by the hedge leg",
        "",
        "scripted reference (the same draws, no client or simulator overhead):",
        f"  none   p50 {measured_q[0]:.1f}  p95 {measured_q[1]:.1f}  p99 {measured_q[2]:.1f}   "
        f"{reference.stalled:.1%} of primary calls hold a silence > {STALL_S:g} s",
        f"  oracle p50 {oracle_q[0]:.1f}  p95 {oracle_q[1]:.1f}  p99 {oracle_q[2]:.1f}   "
        f"TTFT > {options.after_s:g} s: {reference.ttft_over_after:.1%}; a gap > "
        f"{options.stall_after_s:g} s: {reference.gap_over_stall_after:.1%}",
        "",
        f"target: with stall hedging, p99 <= {TARGET_P99}x oracle p99 ({oracle_p99:.1f} s -> "
        f"<= {TARGET_P99 * oracle_p99:.1f} s) at <= {TARGET_REQUESTS}x its requests "
        f"({oracle.requests_per_call:.2f}x)",
    ]
    verdicts = []
    for outcome in outcomes:
        if not outcome.strategy.stall_hedging:
            continue
        p99_ratio = outcome.percentile(0.99) / oracle_p99
        requests_ratio = outcome.requests_per_call / oracle.requests_per_call
        passed = p99_ratio <= TARGET_P99 and requests_ratio <= TARGET_REQUESTS
        verdicts.append(passed)
        lines.append(
            f"  {'PASS' if passed else 'FAIL'}  {outcome.strategy.name:<15} p99 {p99_ratio:.2f}x "
            f"oracle, {requests_ratio:.3f}x requests"
        )
    if verdicts:
        lines.append(
            f"  overall: {'PASS' if any(verdicts) else 'FAIL'} (as measured; PASS if any "
            "stall-hedging strategy meets both bounds)"
        )
    budget = f"{options.budget:g}" if options.budget is not None else "0.25 (library default)"
    lines += [
        "",
        "parameters (simulated seconds; the client's durations are scaled like the simulator):",
        *(f"  {outcome.strategy.name:<19}{outcome.strategy.describe()}" for outcome in outcomes),
        f"  every client: hedge budget ratio {budget}, burst 10, max_attempts 3, backoff 0.5-8 s, "
        f"stall threshold {max(1, round(1000 * scale))} ms real, tracing off (NoOpTracerProvider)",
    ]
    problems = [
        (outcome.strategy.name, text)
        for outcome in outcomes
        for text in [*outcome.anomalies, *(f"{n}x {why}" for why, n in outcome.failures.items())]
    ]
    if problems:
        lines += ["", "failures and anomalies:"]
        lines += [f"  {name}: {text}" for name, text in problems]
    lines += ["", f"total runtime {runtime_s:.0f} s"]
    return lines


def main(options: Options, out: str | None) -> None:
    started = time.monotonic()
    reference = Reference.of(options)
    outcomes = []
    for strategy in strategies(options):
        print(f"running {strategy.name} ...", file=sys.stderr, flush=True)
        outcome = run_strategy(strategy, options)
        print(
            f"  {outcome.calls} calls in {outcome.runtime_s:.1f} s, "
            f"{sum(outcome.failures.values())} failed",
            file=sys.stderr,
            flush=True,
        )
        outcomes.append(outcome)
    lines = report(options, outcomes, reference, time.monotonic() - started)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if out is not None:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(text)


def parse(argv: Sequence[str] | None = None) -> tuple[Options, str | None]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per strategy")
    parser.add_argument("--concurrency", type=int, default=48, help="calls in flight")
    parser.add_argument("--time-scale", type=float, default=0.02, help="real s per simulated s")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first provider")
    parser.add_argument("--after", type=float, default=6.0, help="first-token hedge trigger (s)")
    parser.add_argument("--stall-after", type=float, default=10.0, help="stall hedge trigger (s)")
    parser.add_argument("--watchdog", type=float, default=20.0, help="watchdog timeout (s)")
    parser.add_argument("--budget", type=float, help="hedge_budget_ratio (library default 0.25)")
    parser.add_argument(
        "--strategies",
        default=",".join(STRATEGY_NAMES),
        help="comma-separated subset (oracle always runs)",
    )
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args(argv)
    if args.calls < 2 or args.concurrency < 1 or not 0 < args.time_scale <= 1:
        parser.error("need --calls >= 2, --concurrency >= 1 and 0 < --time-scale <= 1")
    names = tuple(name.strip() for name in args.strategies.split(",") if name.strip())
    options = Options(
        calls=args.calls,
        concurrency=args.concurrency,
        time_scale=args.time_scale,
        seed=args.seed,
        after_s=args.after,
        stall_after_s=args.stall_after,
        watchdog_s=args.watchdog,
        budget=args.budget,
        strategies=names,
    )
    unknown = [name for name in names if name not in STRATEGY_NAMES]
    if unknown:
        parser.error(f"unknown strategies {unknown}; known: {', '.join(STRATEGY_NAMES)}")
    return options, args.out


if __name__ == "__main__":
    main(*parse())
