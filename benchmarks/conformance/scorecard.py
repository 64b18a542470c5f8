"""The conformance scorecard: every case of ``otel_llm.conformance`` through every
instrumentation installed here, each in a process of its own; per case and instrumentation
each figure exact, wrong (by how much) or not measured, a summary per instrumentation and every
wrong figure with its expected and recorded values.

    .venv/bin/python -m benchmarks.conformance.scorecard [--case TEXT] [--parallel 2]
        [--out benchmarks/results/conformance_scorecard.txt]

About a minute on a 2-core machine (the cases run on virtual time). The instrumentations run
with their defaults; each is given an SDK ``TracerProvider`` into an ``InMemorySpanExporter``
and a ``MeterProvider`` with an ``InMemoryMetricReader`` (delta temporality), otel-llm's spans
through its ``DerivingSpanProcessor``.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from benchmarks import ROOT
from benchmarks.support.header import header
from otel_llm.conformance import ADAPTERS, CASES, NOT_ADAPTED, Adapter, CaseResult
from otel_llm.conformance._cli import command, parse
from otel_llm.conformance._scorecard import render

OUT = ROOT / "benchmarks" / "results" / "conformance_scorecard.txt"


def _installed() -> list[Adapter]:
    """The adapters whose instrumentation and SDKs are installed here."""
    return [adapter for adapter in ADAPTERS.values() if not adapter.missing()]


def _run_all(case_filter: str, parallel: int) -> dict[str, list[CaseResult]]:
    """Every installed adapter's results, ``parallel`` processes at a time."""
    names = [adapter.name for adapter in _installed()]
    results: dict[str, list[CaseResult]] = {}
    while names:
        batch, names = names[:parallel], names[parallel:]
        running = {
            name: subprocess.Popen(
                command(name, case_filter),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in batch
        }
        for name, process in running.items():
            stdout, stderr = process.communicate(timeout=600)
            data = parse(name, process.returncode, stdout, stderr)
            results[name] = [CaseResult.from_json(item) for item in data]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="", help="only cases whose name contains this text")
    parser.add_argument("--parallel", type=int, default=2, help="processes at a time")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the scorecard")
    args = parser.parse_args()
    cases = [case for case in CASES if args.case in case.name]
    results = _run_all(args.case, max(1, args.parallel))
    adapters = _installed()
    lines = [header(__spec__.name)]
    lines.append(
        f"{len(cases)} cases on {len({case.wire for case in cases})} wire formats, "
        "each through the real SDK against the simulated provider, on virtual time"
    )
    lines.append("instrumentations (each in its own process, with its defaults):")
    for adapter in adapters:
        lines.append(f"  {adapter.name} ({adapter.family}): {adapter.versions()}")
        lines.append(f"    wire formats: {', '.join(sorted(adapter.wires))}")
        lines.append(f"    reads: {adapter.reads}")
    for adapter in ADAPTERS.values():
        if missing := adapter.missing():
            lines.append(f"  skipped: {adapter.name} ({', '.join(missing)} not installed)")
    lines.append(NOT_ADAPTED)
    lines.extend(render(cases, adapters, results))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
