"""``otel-llm tune`` on known ground truth (issue 13 §3): record unhedged calls of a known
distribution, tune, run the recommendation on fresh draws, compare predicted with measured.

Run (from the repository root)::

    .venv/bin/python -m benchmarks.tune.ground_truth
        [--presets measured,fast-stalls] [--recorded 10000] [--fresh 20000] [--seed 1]
        [--budget 1.25] [--store-dir DIR]
    .venv/bin/python -m benchmarks.tune.ground_truth --noise
        [--trials 200] [--recorded 2000] [--fresh 2000] [--presets measured]
    .venv/bin/python -m benchmarks.tune.ground_truth --loopback
        [--recorded 2000] [--fresh 2000] [--time-scale 0.1] [--rate 20]

**The proof** (default). Per preset: ``--recorded`` unhedged streamed calls through the real
``otel_llm.Client`` (three sources, one client each, calls spread over them in turn) on virtual
time, against the simulator's scripts served in memory
(:class:`~otel_llm.testing._memory_provider.MemoryProvider`), spans through the deriving processor
into a real embedded store; ``otel-llm tune --db STORE --budget B --format json`` through the
command's entry point; then ``--fresh`` calls of the recommended setting (its ``Client(...)`` and
``Source(...)`` arguments) through one real ``Client`` over three sources, on draws from seeds the
recording never used. Every time is simulated seconds (virtual time: no overhead, no real
clock). Printed: what tune used and chose, predicted and measured p50/p95/p99 and requests per
call, the ratios, and the check (measured p99 within 10 % of the predicted p99, requests per
call within the budget); then the same comparison against two deliberately wrong predictions of
the same setting on the same store (timelines read above a 20 s or a 60 s floor; hedge pools
without the attempts that stalled > 20 s), which the check must reject.

**The noise study** (``--noise``). The same proof on the package model alone, ``--trials`` times
with fresh seeds: the recorded sample exactly as tune reads the store
(:func:`~benchmarks.tune._noise.recorded_sample`), tune's own grid/replay/choice, and the
recommended setting on fresh draws through the package model (the client's stand-in; the proof
runs confirm it). Printed: the distribution of measured p99 / predicted p99, the share of trials
outside ±10 % (the check's false failures when tune is right), the tolerance that 99 % of trials
meet, and how often each wrong prediction would pass.

**Sizes.** The defaults (10,000 recorded — the most ``tune`` replays — and 20,000 fresh calls)
are what the ±10 % check needs: at 2,000 + 2,000 calls a third of all seeds miss ±10 % on the
measured preset with tune right (results: ``benchmarks/results/tune_ground_truth.txt``).

**Loopback** (``--loopback``). The measured preset's proof over real HTTP: three ``otel-llm
provider --preset measured --time-scale S`` processes, calls started at ``--rate`` per real
second, real time. Tune reads real seconds from the store and recommends real seconds, which are
run as they are; figures are printed in real seconds and, divided by the scale, simulated ones.
Overheads (HTTP, the simulator's sleeps, a loaded machine) stretch recorded and fresh runs alike.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import signal
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support.provider import launch, read_url
from benchmarks.tune._noise import (
    averaged_p99,
    model_run,
    predict,
    recorded_sample,
    stall_free_pool,
    tune_sample,
    wrong_floor,
)
from benchmarks.tune._truth import (
    FRESH_SEED_OFFSET,
    NO_TIMEOUT_S,
    PRESETS,
    UNHEDGED,
    Measured,
    Setting,
    Upstream,
    read_sample,
    record,
    record_calls,
    rules_of,
    run_calls,
    run_setting,
    source_seeds,
    store_pipeline,
    tune,
)
from otel_llm._tune._hedging_model import Rules
from otel_llm._tune._replay import Figures
from otel_llm._tune._sample import Sample
from otel_llm.simulator._presets import Preset

TOLERANCE = 0.10
"""The issue's check: measured p99 within 10 % of the predicted p99."""
WRONG_FLOORS_S = (20.0, 60.0)
"""The deliberately wrong floors: gaps up to 20 s (60 s) unseen."""
STALLED_S = 20.0
"""The deliberately biased pool: attempts with a gap above 20 s left out."""


def describe(rules: Rules) -> str:
    """A setting in the keys' words."""
    parts = []
    if rules.after_s is not None:
        parts.append(f"after {rules.after_s:g} s")
    if rules.stall_after_s is not None:
        parts.append(f"stall {rules.stall_after_s:g} s")
    parts.append("no watchdog" if rules.watchdog_s is None else f"watchdog {rules.watchdog_s:g} s")
    if rules.hedging:
        parts.append(f"ratio {rules.ratio:g}")
    return ", ".join(parts) if rules.hedging or rules.watchdog_s else "unhedged"


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank ``q`` quantile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


AVERAGED_SEEDS = 20
"""The averaged prediction: tune's replay of the chosen setting under this many draw seeds."""


@dataclass(frozen=True, slots=True)
class Trial:
    """One noise trial: tune's choice, its predictions (right and wrong), the fresh figures."""

    rules: Rules
    predicted: Figures
    """Tune's own prediction (its default draw seed)."""
    fresh: Figures
    p99s: dict[str, tuple[float, float]]
    """Per prediction (tune's, then the wrong ones): (its p99, its p99 averaged over
    :data:`AVERAGED_SEEDS` draw seeds)."""


def trial(preset: Preset, recorded: int, fresh: int, seed: int, budget: float) -> Trial | None:
    """Record, tune, run fresh — on the model alone (``None``: tune recommended nothing)."""
    data: Sample = recorded_sample(preset, recorded, seed)
    chosen = tune_sample(data, budget).recommendation
    if chosen is None:
        return None
    rules = chosen.rules
    variants = {"tune": data}
    for floor in WRONG_FLOORS_S:
        variants[f"wrong: timelines above a {floor:g} s floor"] = wrong_floor(data, floor)
    variants[f"wrong: pools without stalls > {STALLED_S:g} s"] = stall_free_pool(data, STALLED_S)
    p99s = {
        label: (
            predict(variant, rules).p99_s,
            averaged_p99(variant, rules, range(1, AVERAGED_SEEDS + 1)),
        )
        for label, variant in variants.items()
    }
    return Trial(rules, chosen.figures, model_run(rules, preset, fresh, seed), p99s)


def _spread(ratios: Sequence[float]) -> str:
    deviations = [abs(r - 1.0) for r in ratios]
    outside = sum(d > TOLERANCE for d in deviations)
    return (
        f"mean {statistics.fmean(ratios):.3f}, sd {statistics.pstdev(ratios):.3f}, quantiles "
        f"1% {quantile(ratios, 0.01):.3f} 50% {quantile(ratios, 0.5):.3f} 99% "
        f"{quantile(ratios, 0.99):.3f}; outside +-{TOLERANCE:.0%}: {outside / len(ratios):.1%}; "
        f"|dev| met by 95 %: {quantile(deviations, 0.95):.1%}, 99 %: "
        f"{quantile(deviations, 0.99):.1%}"
    )


def noise(options: argparse.Namespace) -> None:
    """The noise study."""
    tolerances = [float(t) for t in options.tolerances.split(",")]
    for name in options.presets.split(","):
        preset = PRESETS[name]
        started = time.perf_counter()
        trials = [
            t
            for s in range(options.trials)
            if (t := trial(preset, options.recorded, options.fresh, 10_000 + s, options.budget))
        ]
        over = sum(t.fresh.requests_per_call > options.budget for t in trials)
        chosen = Counter(describe(t.rules) for t in trials)
        print(
            f"\nnoise study, preset {name}: {len(trials)} trials (of {options.trials}), "
            f"{options.recorded:,} recorded calls -> tune --budget {options.budget:g} -> "
            f"{options.fresh:,} fresh calls (model), {time.perf_counter() - started:.0f} s"
        )
        print("  recommended: " + "; ".join(f"{k} x{v}" for k, v in chosen.most_common(6)))
        print(
            f"  fresh requests per call: max {max(t.fresh.requests_per_call for t in trials):.4f}"
            f", over the budget in {over} trials; predicted max "
            f"{max(t.predicted.requests_per_call for t in trials):.4f}"
        )
        predicted = quantile([t.predicted.p99_s for t in trials], 0.5)
        print(f"  predicted p99: median {predicted:.2f} s")
        for label in trials[0].p99s:
            for k, kind in enumerate(
                ("tune's prediction", f"averaged over {AVERAGED_SEEDS} draws")
            ):
                ratios = [t.fresh.p99_s / t.p99s[label][k] for t in trials]
                caught = ", ".join(
                    f"+-{tol:.0%} {sum(abs(r - 1.0) > tol for r in ratios) / len(ratios):.0%}"
                    for tol in tolerances
                )
                print(f"  {label}, {kind}: measured / predicted p99 {_spread(ratios)}")
                print(f"      outside the tolerance (failed check): {caught}")


def _figures(label: str, p50: float, p95: float, p99: float, requests: float) -> str:
    return f"  {label:34} p50 {p50:7.2f}  p95 {p95:7.2f}  p99 {p99:7.2f}  req/call {requests:.4f}"


def _measured(label: str, m: Measured) -> str:
    line = _figures(label, m.p50_s, m.p95_s, m.p99_s, m.requests_per_call)
    return line + (f"  ({m.failures} failed)" if m.failures else "")


def proof(name: str, preset: Preset, options: argparse.Namespace, directory: Path) -> None:
    """Record, tune through the CLI, run the recommendation on fresh draws; print the lot."""
    store = directory / f"{name}-store"
    started = time.perf_counter()
    recording = record(store, preset, options.recorded, options.seed)
    recorded_s = time.perf_counter() - started
    started = time.perf_counter()
    document = tune(store, options.budget)
    tune_s = time.perf_counter() - started
    data = document["data"]
    recommendation = document["recommendation"]
    print(
        f"\npreset {name}: {options.recorded:,} unhedged calls recorded (seed {options.seed}, "
        f"{recording.spans_written:,} spans, {recording.spans_dropped} dropped, "
        f"{recorded_s:.0f} s); tune {tune_s:.0f} s"
    )
    print(
        f"  tune used {data['calls']:,} calls, {data['attempts_used']:,} attempts "
        f"{data['sources']}, floor {data['floor_ms']} ms, censored {data['censored']}, "
        f"enough: {data['enough']}"
    )
    if recommendation is None:
        print(f"  no recommendation: {document.get('verdict')}")
        return
    rules = rules_of(recommendation)
    setting = Setting.recommended(document)
    print(f"  recommended: {describe(rules)}  -> {', '.join(recommendation['env'])}")
    print(f"     Client(**{setting.client_kwargs}), Source(**{setting.source_kwargs})")
    fresh_seed = options.seed + FRESH_SEED_OFFSET
    rows: list[tuple[str, dict[str, float], Measured]] = []
    if options.baseline:
        started = time.perf_counter()
        unhedged = run_setting(UNHEDGED, preset, options.fresh, fresh_seed)
        rows.append(("unhedged", document["baseline"], unhedged))
        print(f"  fresh unhedged run: {time.perf_counter() - started:.0f} s")
    started = time.perf_counter()
    measured = run_setting(setting, preset, options.fresh, fresh_seed)
    print(
        f"  fresh recommended run: {options.fresh:,} calls (seed {fresh_seed}), "
        f"{time.perf_counter() - started:.0f} s; hedges {measured.hedges:,}, requests "
        f"{measured.requests:,} (sum of CallStats.attempts {measured.attempts:,})"
    )
    rows.append(("recommended", recommendation["predicted"], measured))
    for label, predicted, run in rows:
        print(
            _figures(
                f"{label}: predicted",
                predicted["p50_s"],
                predicted["p95_s"],
                predicted["p99_s"],
                predicted["requests_per_call"],
            )
        )
        print(_measured(f"{label}: measured", run))
        ratios = [run.p50_s / predicted["p50_s"], run.p95_s / predicted["p95_s"]]
        ratios.append(run.p99_s / predicted["p99_s"])
        print(
            f"  {label + ': measured / predicted':34} p50 {ratios[0]:7.3f}  p95 "
            f"{ratios[1]:7.3f}  p99 {ratios[2]:7.3f}  req/call "
            f"{run.requests_per_call / predicted['requests_per_call']:.4f}"
        )
    p99_ratio = measured.p99_s / recommendation["predicted"]["p99_s"]
    within_budget = measured.requests_per_call <= options.budget
    verdict = abs(p99_ratio - 1.0) <= TOLERANCE and within_budget
    print(
        f"  check: measured p99 within {TOLERANCE:.0%} of predicted ({p99_ratio:.3f}) and "
        f"requests per call {measured.requests_per_call:.4f} <= {options.budget:g}: "
        + ("PASS" if verdict else "FAIL")
    )
    sample_ = read_sample(store)
    wrongs = [
        (f"timelines above a {floor:g} s floor", predict(wrong_floor(sample_, floor), rules))
        for floor in WRONG_FLOORS_S
    ]
    biased = predict(stall_free_pool(sample_, STALLED_S), rules)
    wrongs.append((f"pools without stalls > {STALLED_S:g} s", biased))
    for label, wrong in wrongs:
        ratio = measured.p99_s / wrong.p99_s
        caught = abs(ratio - 1.0) > TOLERANCE
        print(
            f"  wrong prediction ({label}): p99 {wrong.p99_s:.2f}, measured / wrong "
            f"{ratio:.3f} -> " + ("caught" if caught else "NOT caught (within the tolerance)")
        )


def _providers(seed: int, scale: float) -> tuple[list[subprocess.Popen[str]], Upstream]:
    """Three ``otel-llm provider --preset measured`` processes (seeds as :func:`source_seeds`)."""
    procs: list[subprocess.Popen[str]] = []
    urls: dict[str, str] = {}
    try:
        for name, source_seed in source_seeds(seed, 3).items():
            proc = launch(
                "--preset", "measured", "--time-scale", f"{scale:g}", "--seed", f"{source_seed}"
            )
            procs.append(proc)
            urls[name] = read_url(proc)
    except BaseException:  # stop the providers already started
        _stop(procs)
        raise
    return procs, Upstream(urls, lambda: None, time_scale=scale, model="measured")


def _stop(procs: Sequence[subprocess.Popen[str]]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def loopback(options: argparse.Namespace, directory: Path) -> None:
    """The measured preset's proof over real loopback HTTP at a time scale (real time)."""
    scale, every_s = options.time_scale, 1.0 / options.rate
    store = directory / "loopback-store"
    print(
        f"\nloopback: measured preset over real HTTP (otel-llm provider processes), time scale "
        f"{scale:g} (1 s real = {1 / scale:g} s simulated), {options.rate:g} calls per second"
    )
    procs, upstream = _providers(options.seed, scale)
    try:
        pipeline, exporter = store_pipeline(store)
    except BaseException:
        _stop(procs)
        raise
    started = time.perf_counter()
    try:
        asyncio.run(record_calls(upstream, pipeline, options.recorded, options.seed, every_s))
    finally:
        pipeline.shutdown()
        _stop(procs)
    print(
        f"  recorded {options.recorded:,} calls in {time.perf_counter() - started:.0f} s "
        f"({exporter.stats.written:,} spans, {exporter.stats.dropped} dropped)"
    )
    document = tune(store, options.budget, source_timeout_s=NO_TIMEOUT_S * scale)
    recommendation = document["recommendation"]
    data = document["data"]
    print(f"  tune used {data['calls']:,} calls, floor {data['floor_ms']} ms")
    if recommendation is None:
        print(f"  no recommendation: {document.get('verdict')}")
        return
    rules = rules_of(recommendation)
    setting = Setting.recommended(document)
    print(f"  recommended (real seconds): {describe(rules)} -> {', '.join(recommendation['env'])}")
    fresh_seed = options.seed + FRESH_SEED_OFFSET
    procs, upstream = _providers(fresh_seed, scale)
    started = time.perf_counter()
    try:
        walls, attempts, hedges = asyncio.run(
            run_calls(setting, upstream, options.fresh, fresh_seed, every_s)
        )
    finally:
        _stop(procs)
    measured = Measured(tuple(walls), attempts, attempts, hedges)
    print(f"  fresh run: {options.fresh:,} calls in {time.perf_counter() - started:.0f} s")
    predicted = recommendation["predicted"]
    for label, factor in (("real s", 1.0), ("simulated s", 1.0 / scale)):
        print(
            _figures(
                f"predicted ({label})",
                predicted["p50_s"] * factor,
                predicted["p95_s"] * factor,
                predicted["p99_s"] * factor,
                predicted["requests_per_call"],
            )
        )
        print(
            _figures(
                f"measured ({label})",
                measured.p50_s * factor,
                measured.p95_s * factor,
                measured.p99_s * factor,
                measured.requests_per_call,
            )
            + (f"  ({measured.failures} failed)" if measured.failures else "")
        )
    ratio = measured.p99_s / predicted["p99_s"]
    print(
        f"  measured / predicted p99 {ratio:.3f}, requests per call "
        f"{measured.requests_per_call:.4f} (sum of CallStats.attempts over the calls)"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--presets", default="measured,fast-stalls")
    parser.add_argument("--recorded", type=int, default=10_000)
    parser.add_argument("--fresh", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget", type=float, default=1.25)
    parser.add_argument("--noise", action="store_true", help="the model-only noise study")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--tolerances", default="0.10,0.20,0.30", help="--noise: checks to rate")
    parser.add_argument("--store-dir", type=Path, default=None)
    parser.add_argument(
        "--no-baseline", dest="baseline", action="store_false", help="skip the unhedged run"
    )
    parser.add_argument(
        "--loopback", action="store_true", help="the measured preset over real loopback HTTP"
    )
    parser.add_argument("--time-scale", type=float, default=0.1, help="--loopback: real/simulated")
    parser.add_argument("--rate", type=float, default=20.0, help="--loopback: calls per second")
    options = parser.parse_args(argv)
    if options.loopback:
        with tempfile.TemporaryDirectory(prefix="tune-truth-") as scratch:
            directory = options.store_dir or Path(scratch)
            directory.mkdir(parents=True, exist_ok=True)
            loopback(options, directory)
        return
    if options.noise:
        noise(options)
        return
    print(
        f"tune ground truth: --budget {options.budget:g}, {options.recorded:,} recorded and "
        f"{options.fresh:,} fresh calls per preset, virtual time (simulated seconds)"
    )
    with tempfile.TemporaryDirectory(prefix="tune-truth-") as scratch:
        directory = options.store_dir or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        for name in options.presets.split(","):
            proof(name, PRESETS[name], options, directory)


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main()
