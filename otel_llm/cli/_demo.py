"""``otel-llm demo``: simulated providers, a batch of streamed calls, the breakdown."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from otel_llm import _errors as e
from otel_llm._act._client import Client
from otel_llm._act._source import Source
from otel_llm._show._breakdown import breakdown_sql, run_query, worst_stalls_sql
from otel_llm._telemetry import init
from otel_llm.cli._render import Output
from otel_llm.simulator import SimulatedProvider

PROMPT = [{"role": "user", "content": "Summarise the benchmark run."}]


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """Knobs of the demo run."""

    db: Path
    calls: int
    concurrency: int
    time_scale: float
    seed: int

    @property
    def threshold_ms(self) -> int:
        """The stall threshold, scaled like the simulated time (1000 ms at full scale)."""
        return max(1, round(1000 * self.time_scale))

    def scaled(self, seconds: float) -> float:
        """Simulated seconds in real seconds."""
        return seconds * self.time_scale


async def _run_calls(client: Client, options: DemoOptions, console: Console) -> tuple[int, int]:
    semaphore = asyncio.Semaphore(options.concurrency)
    failures = 0

    async def one() -> None:
        nonlocal failures
        async with semaphore:
            try:
                await client.chat(PROMPT, stream=True)
            except e.OtelLLMError:
                failures += 1
            progress.advance(task)

    columns = (
        TextColumn("[bold]streamed calls"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("calls", total=options.calls)
        async with asyncio.TaskGroup() as group:
            for _ in range(options.calls):
                group.create_task(one())
    return options.calls - failures, failures


HEDGE_AFTER_S = 10.0
"""First-token hedge (simulated seconds): far above the measured median TTFT of 1.63 s."""
HEDGE_STALL_AFTER_S = 20.0
"""Stall hedge (simulated seconds): on the measured traffic about 19 % of calls have a
silence this long (SPEC R16), within the default hedge budget of 25 % extra requests."""


async def run_demo(options: DemoOptions, console: Console) -> None:
    """Serve two simulated providers, run hedged calls, write spans, print the breakdown."""
    telemetry = init(
        db_path=options.db, stall_threshold_ms=options.threshold_ms, set_global=False, otlp=False
    )
    console.print(
        f"Simulated providers replay the measured distribution (SPEC §0) "
        f"[bold]{1 / options.time_scale:g}×[/bold] faster; the stall threshold is scaled to "
        f"[bold]{options.threshold_ms} ms[/bold]. Calls hedge onto the other provider when the "
        f"first chunk is {HEDGE_AFTER_S:g} s late or the stream stalls {HEDGE_STALL_AFTER_S:g} s "
        f"(simulated)."
    )
    try:
        async with (
            SimulatedProvider(time_scale=options.time_scale, seed=options.seed) as first,
            SimulatedProvider(time_scale=options.time_scale, seed=options.seed + 1) as second,
        ):
            sources = [
                Source(name="sim-a", provider="sim-a", base_url=first.base_url, model="measured"),
                Source(
                    name="sim-b",
                    provider="sim-b",
                    base_url=second.base_url,
                    model="measured",
                    priority=1,
                ),
            ]
            async with Client(
                sources,
                stall_threshold_ms=options.threshold_ms,
                hedge_after_s=options.scaled(HEDGE_AFTER_S),
                hedge_stall_after_s=options.scaled(HEDGE_STALL_AFTER_S),
                tracer_provider=telemetry.tracer_provider,
                seed=options.seed,
            ) as client:
                ok, failed = await _run_calls(client, options, console)
    finally:
        telemetry.shutdown()
    stats = telemetry.exporter.stats if telemetry.exporter else None
    console.print(f"{ok} calls answered, {failed} failed.")
    out = Output.stdout()
    out.table(
        run_query(options.db, breakdown_sql(), canned=True),
        "Where the time went (winning attempts)",
    )
    out.table(run_query(options.db, worst_stalls_sql(), canned=True), "Worst stalls")
    if stats is not None:
        console.print(f"[dim]{stats.written} spans written, {stats.dropped} dropped.[/dim]")
    console.print(
        f"\nSpans are in [bold]{options.db}[/bold]. Query them with\n"
        f"  otel-llm query --db {options.db}\n"
        f"  otel-llm query --db {options.db} --threshold-ms 500\n"
        f'  otel-llm query --db {options.db} "SELECT * FROM llm_calls LIMIT 5"\n'
        f"or any DuckDB client: views llm_calls, llm_attempts; macro llm_attempts_at(ms)."
    )
