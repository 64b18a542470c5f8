"""``python -m otel_llm.conformance``: run the suite.

::

    python -m otel_llm.conformance                          # every instrumentation: scorecard
    python -m otel_llm.conformance --instrumentation otel-llm [--case chat/] [--json]
    python -m otel_llm.conformance --list                   # the cases and their figures

With ``--instrumentation`` (a name, or ``module:attribute`` naming an
:class:`~otel_llm.conformance.Adapter` of one's own) the suite runs in this process for that
one instrumentation and
prints each case's verdicts (``--json``: one JSON line per case). Without it, it starts one
such process per instrumentation installed (a peer that is not installed is skipped and named)
and prints the scorecard. The exit status is 1 when ``--require-exact`` names an
instrumentation with a wrong or unmeasured figure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m otel_llm.conformance",
        description="The streaming-telemetry conformance suite and its scorecard.",
    )
    parser.add_argument(
        "--instrumentation",
        help="run one instrumentation in this process: a name, or module:attribute of an Adapter",
    )
    parser.add_argument("--case", default="", help="only cases whose name contains this text")
    parser.add_argument(
        "--wire",
        choices=("chat", "responses", "anthropic", "gemini"),
        action="append",
        default=[],
        help="only cases on this wire format (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON line per case")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument(
        "--require-exact",
        action="append",
        default=[],
        metavar="NAME",
        help="exit 1 unless this instrumentation is exact on every figure of every case",
    )
    return parser


def _list(case_filter: str) -> int:
    from otel_llm.conformance._corpus import CASES

    for case in CASES:
        if case_filter in case.name:
            expected = case.expected()
            print(f"{case.name:40} {case.kind:20} {case.what}")
            print(f"{'':40} {expected}")
    return 0


def _one(name: str, case_filter: str, wires: Sequence[str], as_json: bool) -> int:
    from otel_llm.conformance._clocks import install

    install()  # before the instrumentation and the OpenTelemetry SDK read a clock
    from otel_llm.conformance._adapters import ADAPTERS
    from otel_llm.conformance._corpus import CASES
    from otel_llm.conformance._run import run

    adapter = ADAPTERS.get(name)
    if adapter is None and ":" in name:  # an adapter of one's own: module:attribute
        module, _, attribute = name.partition(":")
        adapter = getattr(importlib.import_module(module), attribute)
    if adapter is None:
        known = ", ".join(ADAPTERS)
        print(
            f"unknown instrumentation {name!r}; known: {known}, or module:attribute",
            file=sys.stderr,
        )
        return 2
    cases = [
        case for case in CASES if case_filter in case.name and (not wires or case.wire in wires)
    ]
    results = run(adapter, cases)
    for result in results:
        if as_json:
            print(json.dumps(result.to_json()))
            continue
        wrong = [v for v in result.verdicts if v.status == "wrong"]
        unmeasured = sum(v.status == "not measured" for v in result.verdicts)
        verdict = (
            "exact"
            if not wrong
            else "; ".join(
                f"{v.figure} wrong ({v.expected} -> {v.measured}: {v.difference})" for v in wrong
            )
        )
        extra = f" ({unmeasured} not measured)" if unmeasured else ""
        print(f"{result.case:40} {verdict}{extra}")
    return 0


def command(name: str, case_filter: str = "", wires: Sequence[str] = ()) -> list[str]:
    """The command that runs one instrumentation in a process of its own, as JSON lines."""
    selected = [option for wire in wires for option in ("--wire", wire)]
    return [
        sys.executable,
        "-m",
        "otel_llm.conformance",
        "--instrumentation",
        name,
        "--json",
        "--case",
        case_filter,
        *selected,
    ]


def parse(name: str, returncode: int, stdout: str, stderr: str) -> list[dict[str, Any]]:
    """The JSON results of a finished :func:`command`; raises with its stderr when it
    failed."""
    if returncode != 0:
        raise RuntimeError(f"{name}: exit {returncode}\n{stderr[-4000:]}")
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def run_in_subprocess(name: str, case_filter: str = "") -> list[dict[str, Any]]:
    """Run one instrumentation in a process of its own; its results as JSON dicts."""
    done = subprocess.run(
        command(name, case_filter), capture_output=True, text=True, check=False, timeout=600
    )
    return parse(name, done.returncode, done.stdout, done.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module)."""
    args = _parser().parse_args(argv)
    if args.list:
        return _list(args.case)
    if args.instrumentation:
        return _one(args.instrumentation, args.case, args.wire, args.json)
    from otel_llm.conformance._adapters import ADAPTERS
    from otel_llm.conformance._corpus import CASES
    from otel_llm.conformance._run import CaseResult
    from otel_llm.conformance._scorecard import render

    cases = [case for case in CASES if args.case in case.name]
    results = {
        name: [CaseResult.from_json(data) for data in run_in_subprocess(name, args.case)]
        for name in ADAPTERS
    }
    print("\n".join(render(cases, list(ADAPTERS.values()), results)))
    failing = [
        name
        for name in args.require_exact
        if any(v.status != "exact" for r in results.get(name, []) for v in r.verdicts)
    ]
    return 1 if failing else 0
