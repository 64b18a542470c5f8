"""Import cost of otel-llm: what a web application pays for ``import otel_llm``.

Each scenario runs in a fresh interpreter (``--runs`` times, after one discarded run that writes
the bytecode caches) and reports the median wall time from before the first import to the end of
the scenario — interpreter start-up excluded — and which heavy modules the scenario loaded:

- ``import otel_llm``
- ``import openai`` (the baseline of the next line: the SDK's own cost)
- ``import otel_llm; otel_llm.instrument_openai()`` (the web application's one line)
- the same with ``openai`` already imported (timed after it: otel-llm's own share)
- ``otel_llm.init()`` (import plus wiring: the SDK, DuckDB, the store's file)

Then whole commands, each timed from the parent as a fresh process (interpreter start-up
included), against ``python -c pass`` measured in the same run, with the targets for a command
line and for ``init()``: ``otel-llm --version`` at most ``VERSION_TARGET`` times the bare
interpreter, ``otel_llm.init()`` at most ``INIT_TARGET`` times.

Give ``--tree`` more than once to compare source trees in one invocation, e.g. main (before) and a
worktree (after); the last tree is compared with the first (ratio = first / last)::

    .venv/bin/python -m benchmarks.overhead.import_time --tree /work/main --tree . [--runs 9]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import ROOT

HEAVY = (
    "duckdb",
    "opentelemetry.sdk",
    "pydantic",
    "pydantic_settings",
    "httpx2",
    "aiohttp",
    "rich",
    "typer",
)
"""Modules worth naming when a scenario loads them."""

OPENAI = "import openai.resources.chat.completions, openai.resources.embeddings"
INSTRUMENT = "import otel_llm\notel_llm.instrument_openai()"
SCENARIOS = {
    "import otel_llm": ("", "import otel_llm"),
    "import openai": ("", OPENAI),
    "import otel_llm; instrument_openai()": ("", INSTRUMENT),
    "  the same, openai already imported": (OPENAI, INSTRUMENT),
    "otel_llm.init()": ("", "import otel_llm\ntelemetry = otel_llm.init(db_path=DB, otlp=False)"),
}
"""Name → (set-up, not timed; the timed body)."""

CHILD = """\
import sys, time
DB = sys.argv[1]
{setup}
start = time.perf_counter()
{body}
elapsed = time.perf_counter() - start
import json
otel_llm = sys.modules.get("otel_llm")
print(json.dumps({{
    "s": elapsed,
    "heavy": [m for m in {heavy!r} if m in sys.modules],
    "from": getattr(otel_llm, "__file__", None),
}}))
if "telemetry" in globals():
    telemetry.shutdown()
"""


VERSION_TARGET = 8.0
"""``otel-llm --version`` at most this many times ``python -c pass``."""
INIT_TARGET = 12.0
"""``import otel_llm; otel_llm.init()`` at most this many times ``python -c pass``."""
COMMANDS: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    "otel-llm --version": [
        "-c",
        "import sys; from otel_llm.cli import main; sys.argv[0] = 'otel-llm'; sys.exit(main())",
        "--version",
    ],
    "otel_llm.init()": [
        "-c",
        "import os, otel_llm; otel_llm.init(db_path='init.duckdb', otlp=False); os._exit(0)",
    ],
    "  then shutdown() at once": [
        "-c",
        "import otel_llm; otel_llm.init(db_path='init.duckdb', otlp=False).shutdown()",
    ],
}
"""Whole commands (the arguments after the interpreter), the bare interpreter first. ``init()``
is timed until it returns (the process then exits at once): the store's writer thread loads
DuckDB, Arrow and Parquet in the background from there on, so a process that shuts down at once
waits for that load instead (the last row, for information)."""


LOOP_PROBE = """\
import asyncio, json, os, sys, time
async def main():
    gaps = []
    async def ticker():
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last - 0.001)
            last = now
    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    import otel_llm
    started = time.perf_counter()
    telemetry = otel_llm.init(db_path=sys.argv[1], otlp=False)
    blocked = time.perf_counter() - started
    index = len(gaps) + 1  # the ticks after init() returned
    loaded = getattr(telemetry.exporter, "_loaded", None)
    while loaded is not None and not loaded.is_set():
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.05)
    task.cancel()
    print(json.dumps({"blocked": blocked, "after": max(gaps[index:], default=0.0)}))
    os._exit(0)
asyncio.run(main())
"""
"""``init()`` called inside a running event loop with a 1 ms ticker: how long ``init()`` itself
blocked the loop, and the longest stall of the ticker after it returned (the store's writer
thread loading DuckDB, Arrow and Parquet beside the loop), until that load is done."""


def loop_probe(python: str, tree: Path, runs: int) -> None:
    """:data:`LOOP_PROBE` in ``runs`` fresh processes: the medians of both figures."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    blocked: list[float] = []
    after: list[float] = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as scratch:
            out = subprocess.run(
                [python, "-c", LOOP_PROBE, str(Path(scratch) / "store")], cwd=scratch, env=env,
                capture_output=True, text=True, timeout=120, check=True,
            )  # fmt: skip
        row = json.loads(out.stdout.strip().splitlines()[-1])
        blocked.append(row["blocked"])
        after.append(row["after"])
    blocked_ms, after_ms = statistics.median(blocked) * 1000, statistics.median(after) * 1000
    print(
        f"init() in a running loop ({tree.name}): blocked it {blocked_ms:.0f} ms; then the"
        f" longest stall of a 1 ms ticker {after_ms:.1f} ms (medians of {runs})"
    )


def run_command(python: str, tree: Path, arguments: list[str], runs: int) -> float:
    """The median wall time of ``runs`` fresh processes of a whole command (one untimed run
    first, for the bytecode caches), each in a new scratch directory."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    times: list[float] = []
    for index in range(runs + 1):
        with tempfile.TemporaryDirectory() as scratch:
            started = time.perf_counter()
            subprocess.run(
                [python, *arguments], cwd=scratch, env=env, capture_output=True, timeout=120,
                check=True,
            )  # fmt: skip
            if index:
                times.append(time.perf_counter() - started)
    return statistics.median(times)


def commands(python: str, tree: Path, runs: int) -> None:
    """The whole commands against the bare interpreter, with the targets judged."""
    print(f"\nwhole commands: median wall time of {runs} fresh processes (start-up included)")
    medians = {name: run_command(python, tree, argv, runs) for name, argv in COMMANDS.items()}
    bare = medians["python -c pass"]
    for name, median in medians.items():
        print(f"{name:<40}{median * 1000:>10.1f} ms{median / bare:>8.1f}x python -c pass")
    for name, target in (("otel-llm --version", VERSION_TARGET), ("otel_llm.init()", INIT_TARGET)):
        ratio = medians[name] / bare
        verdict = "PASS" if ratio <= target else "FAIL"
        print(f"{verdict}  {name} <= {target:g}x python -c pass: {ratio:.1f}x")


@dataclass
class Result:
    median_s: float
    heavy: list[str]


def run(python: str, tree: Path, scenario: tuple[str, str], runs: int) -> Result:
    """The median of ``runs`` fresh-process timings of a scenario with ``tree`` on the path."""
    setup, body = scenario
    code = CHILD.format(setup=setup, body=body, heavy=HEAVY)
    env = {**os.environ, "PYTHONPATH": str(tree)}  # the measured child needs nothing else
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    times: list[float] = []
    heavy: list[str] = []
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(runs + 1):
            db = str(Path(scratch) / f"{index}.duckdb")
            out = subprocess.run(
                [python, "-c", code, db],
                cwd=scratch,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            )
            row = json.loads(out.stdout.strip().splitlines()[-1])
            if row["from"] is not None and not Path(row["from"]).is_relative_to(tree):
                raise SystemExit(f"otel_llm came from {row['from']}, not from {tree}")
            if index:  # the first run writes the bytecode caches
                times.append(row["s"])
            heavy = row["heavy"]
    return Result(statistics.median(times), heavy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=Path, help="a source tree (repeatable)")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per scenario (median)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to run")
    args = parser.parse_args()
    trees = [tree.resolve() for tree in args.tree or [ROOT]]
    try:
        subprocess.run([args.python, "-c", "import openai"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        scenarios = {k: v for k, v in SCENARIOS.items() if OPENAI not in v}
        print("openai is not installed: the instrument_openai() scenarios are left out")
    else:
        scenarios = SCENARIOS
    print(f"median of {args.runs} fresh processes, interpreter start-up excluded ({args.python})")
    for number, tree in enumerate(trees):
        print(f"  tree {number}: {tree}")
    header = "".join(f"{f'tree {n} ms':>12}" for n in range(len(trees)))
    ratio = f"{'ratio':>8}" if len(trees) > 1 else ""
    print(f"{'scenario':<40}{header}{ratio}  heavy modules loaded (per tree)")
    for name, scenario in scenarios.items():
        results = [run(args.python, tree, scenario, args.runs) for tree in trees]
        cells = "".join(f"{r.median_s * 1000:>12.1f}" for r in results)
        if len(results) > 1:
            cells += f"{results[0].median_s / results[-1].median_s:>7.1f}×"
        loaded = " | ".join(", ".join(r.heavy) or "-" for r in results)
        print(f"{name:<40}{cells}  {loaded}")
    commands(args.python, trees[-1], args.runs)
    print()
    for tree in trees:
        loop_probe(args.python, tree, args.runs)


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main()
