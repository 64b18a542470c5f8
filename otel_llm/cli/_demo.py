"""``otel-llm demo``: simulated providers, a batch of streamed calls, the breakdown — checked.

Two simulated providers replay the measured distribution of 4,407 real calls, time-scaled; calls
start at a steady pace, at most ``concurrency`` in flight. Every call carries a draw key
(``call-<n>``), so its script depends on the seed and the call's number only, never on the order in
which concurrent requests arrive; the providers keep the script of every answer. After the run the
demo compares what the SDK measured (read back from the store) with what the providers
scripted for the winning attempts, source by source, within a stated tolerance
(:mod:`otel_llm.cli._accuracy`) — and when the machine was too busy to measure honestly, it
says so instead of printing the breakdown.

History: the store keeps earlier runs (the default file is the one an application writes, and
the demo never deletes spans); every run's spans carry their own ``service.instance.id``, and
the demo's tables show that run only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from otel_llm import _errors as e
from otel_llm._act._client import Client
from otel_llm._act._result import ChatResult
from otel_llm._act._source import Source
from otel_llm._defaults import DEFAULTS
from otel_llm._show._store._access import check_store
from otel_llm._show._store._breakdown import (
    RUN_ATTRIBUTE,
    Table,
    breakdown_sql,
    run_query,
    totals_sql,
    worst_stalls_sql,
)
from otel_llm._show._store._segments import SEGMENTS
from otel_llm._telemetry import _MIN_EVENTS, init
from otel_llm.cli._accuracy import (
    Scripted,
    SourceCheck,
    Tolerance,
    Totals,
    Verdict,
    check_source,
    disagreeing_calls,
    p99,
)
from otel_llm.cli._collector import sending_to, start_for_demo
from otel_llm.cli._render import Output
from otel_llm.simulator import (
    MEASURED_FIT,
    SCRIPT_KEY_FIELD,
    MeasuredPreset,
    ProviderStats,
    ScriptedFigures,
    SimulatedProvider,
    WireName,
    scripted_figures,
)

PROMPT = [{"role": "user", "content": "Summarise the benchmark run."}]
SERVICE_NAME = "otel-llm-demo"

DEMO_FIT = dataclasses.replace(MEASURED_FIT, chunks_median=30.0, interval_median_s=0.12)
"""The measured fit with a quarter of the chunks, each four times as far apart: the same first
chunk, silences and generation time (median (30 − 1) × 0.12 s ≈ 3.5 s), cadence still at most
0.25 s. A quarter of the chunks is a quarter of the CPU, which is what keeps the demo's own work
from delaying its chunks on a busy machine."""

DEMO_MODEL = "measured"

TOLERANCE_GAP_SHARE = 0.2
"""A measured gap may be off its scripted one by this share of the stall threshold."""
TOLERANCE_SHARE_POINTS = 2.0
"""Stall share may differ from the script by this many percentage points."""
TOLERANCE_DISAGREEING_SHARE = 0.02
"""Share of calls that may count stalls outside their own scripted range."""

LAG_PERIOD_S = 0.01
"""How often the event-loop lag probe wakes up (real seconds)."""

HEDGE_AFTER_S = 10.0
"""First-token hedge (simulated seconds): far above the measured median TTFT of 1.63 s."""
HEDGE_STALL_AFTER_S = 20.0
"""Stall hedge (simulated seconds): on the measured traffic about 19 % of calls have a
silence this long, within the default hedge budget."""

START_EVERY_S = 0.1
"""Calls start this far apart (simulated seconds), at most ``concurrency`` in flight: an
application's calls arrive over time, and fifty connections opened in the same millisecond
would make the first chunk of the last one late by the time the others took."""


@dataclass(frozen=True, slots=True)
class DemoBudget:
    """The demo's hedge budget: never the reason a call does not hedge, so whether a call
    hedges does not depend on how the calls interleave (the default budget would leave some to
    run out a 60 s read timeout).

    Both triggers are set, so the stall trigger has a bucket of ``burst`` tokens and the
    first-token trigger one of ``first_token_burst``, refilled only by what the full stall
    bucket overflows (:class:`~otel_llm._act._hedge_budget.HedgeBudgets`; both start full).
    With both bursts at least the
    concurrency and a ratio above the burst, every round's earning fills the stall bucket and
    spills at least one token into the first-token bucket; at most ``concurrency`` rounds run
    at once, each hedging at most once, so each bucket always holds a token for every round in
    flight, at any number of calls (``tests/tune/test_hedge_budgets.py`` checks it)."""

    ratio: float
    burst: float
    first_token_burst: float

    @classmethod
    def for_concurrency(cls, concurrency: int) -> DemoBudget:
        """The budget of a run with at most ``concurrency`` calls in flight."""
        burst = float(max(DEFAULTS.hedge_budget_burst, concurrency))
        return cls(ratio=burst + 1.0, burst=burst, first_token_burst=burst)


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """Knobs of the demo run."""

    db: Path
    calls: int
    concurrency: int
    time_scale: float
    seed: int
    gap_share: float = TOLERANCE_GAP_SHARE
    """How far off its script a measured gap may be, as a share of the threshold."""
    via_collector: bool = False
    """Send the spans over OTLP through the OpenTelemetry Collector (``otel-llm collector``'s
    ``duckdb`` config), which lands them in the store, instead of writing the store here."""
    hedge: bool = True
    """Hedge late and stalled calls (off: unhedged traffic, every completed call of which
    ``otel-llm tune`` can replay)."""
    apis: tuple[DemoApi, DemoApi] = ("openai", "openai")
    """The APIs the two simulated providers speak (the first is the primary): a hedge or a
    failover from one to the other crosses APIs when they differ."""

    @property
    def threshold_ms(self) -> int:
        """The stall threshold, scaled like the simulated time (the default at full scale)."""
        return max(1, round(DEFAULTS.stall_threshold_ms * self.time_scale))

    @property
    def tolerance(self) -> Tolerance:
        """What the comparison with the script allows at this threshold."""
        return Tolerance(
            gap_s=self.gap_share * self.threshold_ms / 1000,
            share_points=TOLERANCE_SHARE_POINTS,
            disagreeing_share=TOLERANCE_DISAGREEING_SHARE,
        )

    def scaled(self, seconds: float) -> float:
        """Simulated seconds in real seconds."""
        return seconds * self.time_scale


def unwritable(path: Path) -> str | None:
    """Why the demo cannot write its store at ``path`` (``None`` when it can): a path it
    cannot write, a directory that is not a store, or a file that is not a DuckDB store (a
    single-file store of an earlier version is migrated)."""
    if path.exists() and not (path.is_dir() and not any(path.iterdir())):
        try:
            check_store(path)
        except e.NotAStore as exc:
            return str(exc)
    folder = path if path.is_dir() else path.parent
    if not folder.is_dir():
        return f"{folder} is not a directory" if folder.exists() else f"{folder} does not exist"
    try:  # try for real: permission bits do not bind root, a read-only mount binds everyone
        target = folder / SEGMENTS if (folder / SEGMENTS).is_dir() else folder
        with tempfile.TemporaryFile(dir=target, prefix=".otel-llm-write-test-"):
            pass
    except OSError as exc:
        return f"{folder} is not writable ({exc.strerror or exc})"
    return None


class LagProbe:
    """Samples how late the event loop wakes a sleeping task (scheduler and CPU pressure)."""

    def __init__(self, period_s: float = LAG_PERIOD_S) -> None:
        self.period_s = period_s
        self.samples: list[float] = []

    async def run(self) -> None:
        """Sample until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(self.period_s)
            self.samples.append(max(0.0, loop.time() - start - self.period_s))


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """The answered calls (in call order) and how many failed."""

    results: tuple[ChatResult, ...]
    failed: int


async def _run_calls(client: Client, options: DemoOptions, console: Console) -> RunOutcome:
    semaphore = asyncio.Semaphore(options.concurrency)
    answers: dict[int, ChatResult] = {}
    failures = 0

    async def one(number: int) -> None:
        nonlocal failures
        async with semaphore:
            try:
                answers[number] = await client.chat(
                    PROMPT, stream=True, extra_body={SCRIPT_KEY_FIELD: f"call-{number}"}
                )
            except e.OtelLLMError:
                failures += 1
            progress.advance(task)

    columns = (
        TextColumn("[bold]streamed calls"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    # a live bar on a terminal only: in a pipe it would be box drawing and carriage returns
    progress = Progress(*columns, console=console, transient=False, disable=not console.is_terminal)
    started = time.monotonic()
    with progress:
        task = progress.add_task("calls", total=options.calls)
        async with asyncio.TaskGroup() as group:
            for number in range(options.calls):
                group.create_task(one(number))
                await asyncio.sleep(options.scaled(START_EVERY_S))
    if not console.is_terminal:
        took = time.monotonic() - started
        console.print(f"{counted(options.calls, 'streamed call')} in {took:.1f} s")
    return RunOutcome(tuple(answers[n] for n in sorted(answers)), failures)


@dataclass(frozen=True, slots=True)
class DemoRun:
    """What one demo run produced: its id, the answers and the scripts behind them."""

    run_id: str
    outcome: RunOutcome
    verdict: Verdict
    stats: dict[str, ProviderStats]
    """Each source's simulator counters, with the scripts it drew (by answer id and key)."""
    written: int
    dropped: int | None
    """``None`` on the OTLP path: the SDK's exporter does not count what it could not send."""


def _tracer_provider(run_id: str) -> TracerProvider:
    resource = Resource.create({"service.name": SERVICE_NAME, RUN_ATTRIBUTE: run_id})
    return TracerProvider(resource=resource, span_limits=SpanLimits(max_events=_MIN_EVENTS))


def _totals(table: Table) -> dict[str, Totals]:
    return {
        str(row[0]): Totals(
            calls=int(row[1]),
            stalls=int(row[2]),
            stalled=int(row[3]),
            stall_s=int(row[4]) / 1000,
            wall_s=int(row[5]) / 1000,
        )
        for row in table.rows
    }


@dataclass(frozen=True, slots=True)
class Comparison:
    """The store's figures beside the script's, per source and per call."""

    checks: tuple[SourceCheck, ...]
    disagreeing: int
    gap_error_p99_s: float


def compare(
    options: DemoOptions,
    run_id: str,
    results: Sequence[ChatResult],
    providers: dict[str, SimulatedProvider],
    labels: dict[str, str],
    wires: dict[str, WireName] | None = None,
) -> Comparison:
    """Source-by-source comparison of the store with the script of every winning attempt."""
    tolerance = options.tolerance
    measured = _totals(run_query(options.db, totals_sql(run=run_id), canned=True))
    per_label: dict[str, list[ScriptedFigures]] = {label: [] for label in labels.values()}
    counts: list[tuple[int | None, ScriptedFigures]] = []
    errors: list[float] = []
    for result in results:
        script = providers[result.source].stats.script_of(result.response_id or "")
        if script is None:
            raise e.OtelLLMError(f"the simulator kept no script for answer {result.response_id}")
        figures = scripted_figures(
            script,
            threshold_s=options.threshold_ms / 1000,
            time_scale=options.time_scale,
            band_s=tolerance.gap_s,
            wire=(wires or {}).get(result.source, "chat"),
        )
        per_label[labels[result.source]].append(figures)
        counts.append((result.stats.stall_count, figures))
        if result.stats.max_inter_chunk_ms is not None:
            errors.append(abs(result.stats.max_inter_chunk_ms / 1000 - figures.longest_gap_s))
    checks = tuple(
        check_source(
            label,
            measured.get(label, Totals(0, 0, 0, 0.0, 0.0)),
            Scripted.of(per_label.get(label, ()), tolerance.gap_s),
            tolerance,
        )
        for label in sorted({*measured, *(k for k, v in per_label.items() if v)})
    )
    return Comparison(checks, disagreeing_calls(counts), p99(errors))


DemoApi = Literal["openai", "anthropic", "gemini"]
"""An API a simulated provider of the demo speaks (``openai``: OpenAI-compatible chat
completions)."""
DEMO_APIS: Final[tuple[DemoApi, ...]] = ("openai", "anthropic", "gemini")
_WIRE_OF: Final[dict[DemoApi, WireName]] = {
    "openai": "chat",
    "anthropic": "anthropic",
    "gemini": "gemini",
}
_SOURCES: Final = ("sim-a", "sim-b")


def parse_apis(text: str) -> tuple[DemoApi, DemoApi]:
    """``--providers``: two of :data:`DEMO_APIS`, comma-separated (a ValueError says why not)."""
    given = [part.strip().lower() for part in text.split(",")]
    if len(given) != 2:
        raise ValueError(f"name two APIs, primary first (got {len(given)}: {text!r})")
    known: dict[str, DemoApi] = {api: api for api in DEMO_APIS}
    first, second = (known.get(name) for name in given)
    if first is None or second is None:
        wrong = given[0] if first is None else given[1]
        raise ValueError(f"unknown API {wrong!r}; choose from {', '.join(DEMO_APIS)}")
    return first, second


def _provider_name(name: str, api: DemoApi) -> str:
    """The ``Source.provider`` of a demo source: the API's name, or the source's own for an
    OpenAI-compatible one (as a gateway would be named)."""
    return name if api == "openai" else api


def demo_models(apis: tuple[DemoApi, DemoApi]) -> tuple[str, str]:
    """Each source's model: the measured preset's name, told apart by the source's letter
    (``measured-a``, ``measured-b``) when both sources go by one provider name (both speak
    Anthropic's or Gemini's API), so that each keeps its own row in the store's tables."""
    names = [_provider_name(name, api) for name, api in zip(_SOURCES, apis, strict=True)]
    if names[0] != names[1]:
        return DEMO_MODEL, DEMO_MODEL
    first, second = (f"{DEMO_MODEL}-{name.removeprefix('sim-')}" for name in _SOURCES)
    return first, second


def _sources(
    options: DemoOptions, first: SimulatedProvider, second: SimulatedProvider
) -> list[Source]:
    """The two simulated providers, each speaking its API, with the default read timeout and
    watchdog budgets in simulated time."""
    timeouts = {
        "timeout_s": options.scaled(DEFAULTS.timeout_s),
        "inter_token_timeout_s": options.scaled(DEFAULTS.inter_token_timeout_s),
    }
    return [
        Source(
            name=name,
            provider=_provider_name(name, api),
            base_url=provider.base_url,
            model=model,
            api_key="sim-key" if api != "openai" else None,
            priority=priority,
            **timeouts,
        )
        for priority, (name, api, model, provider) in enumerate(
            zip(_SOURCES, options.apis, demo_models(options.apis), (first, second), strict=True)
        )
    ]


async def measure(options: DemoOptions, console: Console) -> DemoRun:
    """Serve two simulated providers, run the calls, and compare the store with the script."""
    run_id = uuid.uuid4().hex
    tracer_provider = _tracer_provider(run_id)
    collector = (
        start_for_demo(options.db, lambda text: console.print(text, markup=False))
        if options.via_collector
        else None
    )
    try:
        with sending_to(collector.ports) if collector else contextlib.nullcontext():
            telemetry = init(
                db_path=options.db,
                stall_threshold_ms=options.threshold_ms,
                tracer_provider=tracer_provider,
                set_global=False,
                duckdb=collector is None,
                otlp=collector is not None,
            )
    except BaseException:
        if collector is not None:
            collector.stop()
        raise
    scripts = dict.fromkeys(demo_models(options.apis), MeasuredPreset(fit=DEMO_FIT))
    probe = LagProbe()
    # Providers and meter share this process: a full collection over every module's objects
    # freezes both for tens of milliseconds, a "stall" no provider scripted. What exists now
    # is kept out of the collector's sight for the run (objects made during it are not).
    gc.collect()
    gc.freeze()
    try:
        async with (
            SimulatedProvider(
                scripts=scripts, time_scale=options.time_scale, seed=options.seed
            ) as first,
            SimulatedProvider(
                scripts=scripts, time_scale=options.time_scale, seed=options.seed + 1
            ) as second,
        ):
            sources = _sources(options, first, second)
            budget = DemoBudget.for_concurrency(options.concurrency)
            async with (
                Client(
                    sources,
                    stall_threshold_ms=options.threshold_ms,
                    hedge_after_s=options.scaled(HEDGE_AFTER_S) if options.hedge else None,
                    hedge_stall_after_s=(
                        options.scaled(HEDGE_STALL_AFTER_S) if options.hedge else None
                    ),
                    hedge_budget_ratio=budget.ratio,
                    hedge_budget_burst=budget.burst,
                    hedge_first_token_burst=budget.first_token_burst,
                    tracer_provider=tracer_provider,
                    seed=options.seed,
                ) as client,
                asyncio.TaskGroup() as group,
            ):
                lag = group.create_task(probe.run())
                try:
                    outcome = await _run_calls(client, options, console)
                finally:
                    lag.cancel()
    finally:
        telemetry.shutdown()
        gc.unfreeze()
        if collector is not None:
            collector.stop()  # it writes its last batches; the rest of its files are ingested
    stats = telemetry.exporter.stats if telemetry.exporter else None
    if collector is not None and collector.report.problems:
        raise e.CollectorError("; ".join(collector.report.problems))
    providers = {"sim-a": first, "sim-b": second}
    labels = {source.name: f"{source.provider_name}/{source.model}" for source in sources}
    wires = {name: _WIRE_OF[api] for name, api in zip(_SOURCES, options.apis, strict=True)}
    comparison = compare(options, run_id, outcome.results, providers, labels, wires)
    verdict = Verdict(
        checks=comparison.checks,
        disagreeing=comparison.disagreeing,
        calls=len(outcome.results),
        failed=outcome.failed,
        gap_error_p99_s=comparison.gap_error_p99_s,
        lag_p99_s=p99(probe.samples),
        lag_max_s=max(probe.samples, default=0.0),
        tolerance=options.tolerance,
    )
    return DemoRun(
        run_id=run_id,
        outcome=outcome,
        verdict=verdict,
        stats={name: provider.stats for name, provider in providers.items()},
        written=stats.written if stats else collector.report.spans if collector else 0,
        dropped=stats.dropped if stats else None,
    )


def _range(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def comparison_table(checks: Sequence[SourceCheck], tolerance: Tolerance) -> Table:
    """Measured beside scripted, per source (winning attempts of this run)."""
    rows = []
    for check in checks:
        measured, scripted = check.measured, check.scripted
        rows.append(
            (
                check.label,
                measured.calls,
                measured.stalls,
                _range(scripted.stalls_min, scripted.stalls_max),
                round(measured.stall_s, 2),
                f"{scripted.stall_s:.2f}±{scripted.stall_slack_s:.2f}",
                round(measured.share, 1),
                f"{scripted.share:.1f}±{scripted.share_slack(tolerance):.1f}",
                "yes" if not check.problems else "NO",
            )
        )
    columns = (
        "model",
        "calls",
        "stalls",
        "scripted",
        "stall_s",
        "scripted",
        "stall_%",
        "scripted",
        "within",
    )
    return Table(columns, rows)


def _say_history(options: DemoOptions, run: DemoRun, console: Console) -> None:
    total = run_query(options.db, "SELECT count(*) FROM llm_calls").rows[0][0]
    answered = len(run.outcome.results)
    earlier = int(total) - answered - run.outcome.failed
    history = (
        f"the file also keeps {earlier} calls of earlier runs (never deleted)"
        if earlier > 0
        else "no earlier runs in the file"
    )
    console.print(
        f"{counted(answered, 'call')} answered, {run.outcome.failed} failed. The tables show "
        f"this run only ({RUN_ATTRIBUTE} [bold]{run.run_id}[/bold]); {history}."
    )


def counted(count: int, noun: str) -> str:
    """``count`` of ``noun``: ``1 call``, ``4 calls``, ``1,200 calls``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


SLOWER: Final = 4.0
"""How much slower the demo advises running after a run too busy to measure honestly."""


def rerun_advice(time_scale: float) -> str:
    """What to do after a run too busy to measure honestly: a quieter machine, or a slower
    ``--time-scale`` while there is a slower one (real time, 1, is the slowest)."""
    if time_scale >= 1.0:
        return (
            "Run it again on a quieter machine: it ran in real time (--time-scale 1), the "
            "slowest the demo goes."
        )
    return (
        "Run it again on a quieter machine, or slower: --time-scale "
        f"{min(1.0, time_scale * SLOWER):g}."
    )


async def run_demo(options: DemoOptions, console: Console, out: Output) -> bool:
    """Run the demo and print what it measured beside what was scripted; False when the
    machine was too busy to measure honestly (the breakdown is then not printed).

    ``out`` gets the breakdown; in a machine format (csv, json) it gets nothing else, and the
    prose and the other tables go to ``console`` (standard error then) as plain tables."""
    human = out if not out.format.one_table else Output.stderr()
    tolerance = options.tolerance
    console.print(
        f"Simulated providers replay the measured distribution of 4,407 real calls "
        f"[bold]{1 / options.time_scale:g}× faster[/bold] (--time-scale {options.time_scale:g}); "
        f"the stall threshold is scaled to [bold]{options.threshold_ms} ms[/bold]. "
        + (
            f"Calls hedge onto the other provider when the first chunk is {HEDGE_AFTER_S:g} s "
            f"late or the stream stalls {HEDGE_STALL_AFTER_S:g} s (simulated)."
            if options.hedge
            else "Calls are not hedged (--no-hedge): traffic otel-llm tune replays whole."
        )
    )
    run = await measure(options, console)
    _say_history(options, run, console)
    verdict = run.verdict
    human.table(
        comparison_table(verdict.checks, tolerance),
        f"Measured vs scripted (winning attempts; a gap within {tolerance.gap_s * 1000:.0f} ms "
        f"of the threshold may count either way)",
    )
    console.print(
        f"[dim]Timing noise: event loop woken late by {verdict.lag_p99_s * 1000:.1f} ms (p99; "
        f"max {verdict.lag_max_s * 1000:.1f} ms), longest gaps off the script by "
        f"{verdict.gap_error_p99_s * 1000:.1f} ms (p99); {verdict.disagreeing} of "
        f"{verdict.calls} calls counted stalls outside their scripted range.[/dim]"
    )
    if not verdict.honest:
        console.print(
            "[bold red]This machine was too busy to measure honestly[/bold red]; the breakdown "
            "would not describe the providers, so it is not shown:"
        )
        for reason in verdict.reasons:
            console.print(f"  - {escape(reason)}")
        console.print(rerun_advice(options.time_scale))
        return False
    console.print(
        "[bold green]Every figure is within tolerance of the script[/bold green]: the SDK "
        "measured what the providers did."
    )
    out.table(
        run_query(options.db, breakdown_sql(run=run.run_id), canned=True),
        "Where the time went (winning attempts of this run)",
    )
    human.table(
        run_query(options.db, worst_stalls_sql(run=run.run_id), canned=True), "Worst stalls"
    )
    if run.dropped is None:
        console.print(f"[dim]{run.written} spans landed through the collector.[/dim]")
    else:
        console.print(f"[dim]{run.written} spans written, {run.dropped} dropped.[/dim]")
    console.print(
        f"\nSpans are in [bold]{options.db}[/bold]. Query them (every run) with\n"
        f"  otel-llm query --db {options.db}\n"
        f"  otel-llm query --db {options.db} --threshold-ms 500\n"
        f'  otel-llm query --db {options.db} "SELECT * FROM llm_calls LIMIT 5"\n'
        f"or any DuckDB client (1.4 or later) after running the SQL of\n"
        f"  otel-llm views --db {options.db}\n"
        f"(views llm_calls, llm_attempts; macro llm_attempts_at(ms); Grafana: its initSql)."
    )
    return True
