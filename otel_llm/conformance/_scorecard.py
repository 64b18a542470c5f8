"""The scorecard: per case, per instrumentation, each figure exact, wrong (by how much) or not
measured; then a summary per instrumentation and the details of every wrong figure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from otel_llm.conformance._adapters import Adapter
from otel_llm.conformance._case import Case
from otel_llm.conformance._figures import FIGURES, THRESHOLDS_S, TIME_TOLERANCE_S
from otel_llm.conformance._run import CaseResult

MARK = {"exact": "=", "wrong": "X", "not measured": "."}
"""One character per figure in the table."""


@dataclass(frozen=True, slots=True)
class Tally:
    """One instrumentation's figures over its cases."""

    cases: int
    exact_cases: int
    """Cases where every figure it measures is exact."""
    figures: Counter[str]
    """``exact`` / ``wrong`` / ``not measured`` over every figure of every case."""


def tally(results: Sequence[CaseResult]) -> Tally:
    """Count one instrumentation's verdicts."""
    figures: Counter[str] = Counter()
    exact_cases = 0
    for result in results:
        statuses = [verdict.status for verdict in result.verdicts]
        figures.update(statuses)
        exact_cases += "wrong" not in statuses
    return Tally(len(results), exact_cases, figures)


def _row(result: CaseResult | None) -> str:
    if result is None:
        return "-" * len(FIGURES)
    return "".join(MARK[verdict.status] for verdict in result.verdicts)


def legend() -> list[str]:
    """How to read the table."""
    figures = " ".join(f"{k + 1}:{name}" for k, name in enumerate(FIGURES))
    return [
        f"Each cell: one character per figure, in order ({figures}).",
        "'=' exact, 'X' wrong, '.' not measured (records nothing for it), "
        "'-' not its API (the case's wire format is one it does not instrument).",
        f"Counts are exact; times (ttft, stall_s) within {TIME_TOLERANCE_S * 1000:g} ms; "
        f"stalls are gaps strictly longer than {' and '.join(f'{t:g} s' for t in THRESHOLDS_S)}.",
    ]


def render(
    cases: Sequence[Case],
    adapters: Sequence[Adapter],
    results: Mapping[str, Sequence[CaseResult]],
) -> list[str]:
    """The scorecard's lines (see the module)."""
    by_case = {name: {result.case: result for result in found} for name, found in results.items()}
    names = [adapter.name for adapter in adapters]
    width = max(len(FIGURES), *(len(name) for name in names)) + 2
    case_width = max(len(case.name) for case in cases) + 2
    lines = ["", *legend(), ""]
    lines.append("case".ljust(case_width) + "".join(name.ljust(width) for name in names))
    for case in cases:
        cells = "".join(_row(by_case[name].get(case.name)).ljust(width) for name in names)
        lines.append(case.name.ljust(case_width) + cells)
    lines += ["", "Summary per instrumentation (over the cases of the APIs it instruments):", ""]
    for adapter in adapters:
        count = tally(results[adapter.name])
        measured = count.figures["exact"] + count.figures["wrong"]
        lines.append(
            f"  {adapter.name}: {count.cases} cases, {count.exact_cases} with every measured "
            f"figure exact; figures: {count.figures['exact']} exact, {count.figures['wrong']} "
            f"wrong, {count.figures['not measured']} not measured "
            f"({measured} of {sum(count.figures.values())} measured)"
        )
    lines += ["", "Wrong figures (expected -> recorded, difference):", ""]
    for adapter in adapters:
        wrong = [
            (result, verdict)
            for result in results[adapter.name]
            for verdict in result.verdicts
            if verdict.status == "wrong"
        ]
        lines.append(f"  {adapter.name}: {len(wrong)} wrong")
        for result, verdict in wrong:
            lines.append(
                f"    {result.case:34} {verdict.figure:12} {verdict.expected} -> "
                f"{verdict.measured} ({verdict.difference})"
            )
    return [line.rstrip() for line in lines]
