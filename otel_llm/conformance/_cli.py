"""``python -m otel_llm.conformance``: run the suite.

::

    python -m otel_llm.conformance                          # every instrumentation: scorecard
    python -m otel_llm.conformance --instrumentation otel-llm [--case chat/] [--json]
    python -m otel_llm.conformance --list                   # the cases and their figures

With ``--instrumentation`` (a name, or ``module:attribute`` naming an
:class:`~otel_llm.conformance.Adapter` of one's own) the suite runs in this process for that
one instrumentation and prints each case's verdicts (``--json``: one JSON line per case).
Without it, it starts one such process per instrumentation installed (a peer that is not
installed is skipped and named) and prints the scorecard (``--json``: each case's verdicts as
a JSON line that names its instrumentation). ``--case`` and ``--wire`` select the cases in
every mode; the cases of a wire format whose SDK is not installed are skipped and named.

Exit status: 0; 1 when ``--require-exact`` names an instrumentation with a wrong or
unmeasured figure, or none judged at all (not installed, or no case of its wire formats
selected), or when an instrumentation's run failed; 2 for a command line that cannot run (an
unknown instrumentation, a ``--require-exact`` name that is not run, no case selected).
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from otel_llm.conformance._adapters import Adapter
    from otel_llm.conformance._case import Case
    from otel_llm.conformance._run import CaseResult

WIRES: Final = ("chat", "responses", "anthropic", "gemini")

EXIT_NOT_EXACT: Final = 1
"""An instrumentation ``--require-exact`` names is not exact, or a run failed."""
EXIT_USAGE: Final = 2
"""The command line cannot run (as argparse's own errors)."""

RUN_TIMEOUT_S: Final = 600.0
"""How long one instrumentation's process may take."""


class UsageError(Exception):
    """A command line that cannot run: said on standard error, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m otel_llm.conformance",
        description="The streaming-telemetry conformance suite and its scorecard.",
        epilog="Exit status: 0; 1 when an instrumentation --require-exact names is not exact "
        "(or was not judged), or a run failed; 2 for a command line that cannot run.",
    )
    parser.add_argument(
        "--instrumentation",
        help="run one instrumentation in this process: a name, or module:attribute of an Adapter",
    )
    parser.add_argument("--case", default="", help="only cases whose name contains this text")
    parser.add_argument(
        "--wire",
        choices=WIRES,
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
        help="exit 1 unless this instrumentation is exact on every figure of every case "
        "(repeatable)",
    )
    return parser


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def select(case_filter: str = "", wires: Sequence[str] = ()) -> list[Case]:
    """The cases whose name contains ``case_filter``, on ``wires`` (every wire when empty)."""
    from otel_llm.conformance._corpus import CASES

    return [
        case for case in CASES if case_filter in case.name and (not wires or case.wire in wires)
    ]


def _selected(case_filter: str, wires: Sequence[str]) -> list[Case]:
    """:func:`select`, refusing a selection with no case."""
    cases = select(case_filter, wires)
    if not cases:
        where = f" on {', '.join(wires)}" if wires else ""
        raise UsageError(f"no case's name contains {case_filter!r}{where}; see --list")
    return cases


def _playable(cases: Sequence[Case]) -> list[Case]:
    """The cases whose wire's SDK is installed; the others are named on standard error."""
    from otel_llm.conformance._drive import missing_sdks

    missing = missing_sdks(sorted({case.wire for case in cases}))
    for wire, sdk in missing.items():
        _say(f"skipped: the cases on {wire} (the {sdk} SDK is not installed)")
    return [case for case in cases if case.wire not in missing]


def _list(case_filter: str, wires: Sequence[str]) -> int:
    for case in _selected(case_filter, wires):
        expected = case.expected()
        print(f"{case.name:40} {case.kind:20} {case.what}")
        print(f"{'':40} {expected}")
    return 0


def resolve(name: str) -> Adapter:
    """The adapter a ``--instrumentation`` value names: a known name, or ``module:attribute``
    (a :class:`UsageError` says why not)."""
    from otel_llm.conformance._adapters import ADAPTERS, Adapter

    known = ADAPTERS.get(name)
    if known is not None:
        return known
    if ":" not in name:
        raise UsageError(
            f"unknown instrumentation {name!r}; known: {', '.join(ADAPTERS)}, or module:attribute"
        )
    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"--instrumentation {name}: cannot import {module_name!r}: {exc}") from exc
    adapter = getattr(module, attribute, None)
    if not isinstance(adapter, Adapter):
        what = "nothing" if adapter is None else f"a {type(adapter).__name__}"
        raise UsageError(
            f"--instrumentation {name}: {module_name}.{attribute} is {what}, "
            "not an otel_llm.conformance.Adapter"
        )
    _check(name, adapter)
    return adapter


def _check(name: str, adapter: Adapter) -> None:
    """An adapter of one's own names known wire formats and figures (a misspelt one would
    make every case of it "not its API", or a figure "not measured", without a word)."""
    from otel_llm.conformance._figures import MEASURABLE

    wrong_wires = sorted(set(adapter.wires) - set(WIRES))
    if wrong_wires:
        raise UsageError(
            f"--instrumentation {name}: unknown wire format {wrong_wires[0]!r} in its wires; "
            f"known: {', '.join(WIRES)}"
        )
    for wire in sorted(adapter.wires):
        unknown = sorted(set(adapter.measures(wire)) - MEASURABLE)
        if unknown:
            raise UsageError(
                f"--instrumentation {name}: unknown figure {unknown[0]!r} in what it measures "
                f"on {wire}; known: {', '.join(sorted(MEASURABLE))}"
            )


def _verdict_line(result: CaseResult) -> str:
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
    return f"{result.case:40} {verdict}{extra}"


def not_exact(results: Sequence[CaseResult]) -> str | None:
    """Why ``results`` do not show an instrumentation exact on every figure of every case
    (``None`` when they do): a wrong or unmeasured figure, or no case judged at all."""
    if not results:
        return "no case was judged"
    counts = {
        status: sum(v.status == status for r in results for v in r.verdicts)
        for status in ("wrong", "not measured")
    }
    if not any(counts.values()):
        return None
    return f"{counts['wrong']} figures wrong, {counts['not measured']} not measured"


def _require(names: Sequence[str], results: dict[str, Sequence[CaseResult]]) -> int:
    """Exit status of ``--require-exact``: each name's results must be exact."""
    status = 0
    for name in names:
        reason = not_exact(results.get(name, ()))
        if reason is not None:
            _say(f"--require-exact {name}: not exact ({reason})")
            status = EXIT_NOT_EXACT
    return status


def _one(
    name: str, case_filter: str, wires: Sequence[str], as_json: bool, required: Sequence[str]
) -> int:
    from otel_llm.conformance._clocks import install

    install()  # before the instrumentation and the OpenTelemetry SDK read a clock
    from otel_llm.conformance._run import run

    adapter = resolve(name)
    strangers = [other for other in required if other not in (name, adapter.name)]
    if strangers:
        raise UsageError(
            f"--require-exact {strangers[0]}: only {adapter.name} runs here "
            "(without --instrumentation every installed instrumentation runs)"
        )
    missing = adapter.missing()
    if missing:
        raise UsageError(f"{adapter.name} needs {', '.join(missing)}, which is not installed")
    cases = _playable(_selected(case_filter, wires))
    results = run(adapter, cases)
    if not results and not as_json:
        _say(f"{adapter.name} instruments none of the selected cases' wire formats")
    for result in results:
        print(json.dumps(result.to_json()) if as_json else _verdict_line(result), flush=True)
    return _require(required, dict.fromkeys(required, results))


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


def run_in_subprocess(
    name: str, case_filter: str = "", wires: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Run one instrumentation in a process of its own; its results as JSON dicts (a
    :class:`RuntimeError` with its standard error when it failed or timed out)."""
    try:
        done = subprocess.run(
            command(name, case_filter, wires),
            capture_output=True,
            text=True,
            check=False,
            timeout=RUN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{name}: no result within {RUN_TIMEOUT_S:g} s") from exc
    return parse(name, done.returncode, done.stdout, done.stderr)


def _scorecard(args: argparse.Namespace) -> int:
    from otel_llm.conformance._adapters import ADAPTERS
    from otel_llm.conformance._run import CaseResult
    from otel_llm.conformance._scorecard import render

    unknown = [name for name in args.require_exact if name not in ADAPTERS]
    if unknown:
        raise UsageError(
            f"--require-exact {unknown[0]}: no such instrumentation; known: {', '.join(ADAPTERS)}"
        )
    cases = _playable(_selected(args.case, args.wire))
    played = sorted({case.wire for case in cases})
    ran: list[Adapter] = []
    results: dict[str, Sequence[CaseResult]] = {}
    status = 0
    for adapter in ADAPTERS.values():
        missing = adapter.missing()
        if missing:
            _say(f"skipped: {adapter.name} ({', '.join(missing)} not installed)")
            continue
        mine = [wire for wire in played if wire in adapter.wires]
        if not mine:  # none of its cases is selected: nothing to run
            ran.append(adapter)
            results[adapter.name] = []
            continue
        try:
            found = run_in_subprocess(adapter.name, args.case, mine)
        except RuntimeError as exc:
            _say(f"failed: {exc}")
            status = EXIT_NOT_EXACT
            continue
        ran.append(adapter)
        results[adapter.name] = [CaseResult.from_json(data) for data in found]
    if args.json:
        for adapter in ran:
            for result in results[adapter.name]:
                print(json.dumps({"instrumentation": adapter.name, **result.to_json()}))
    elif ran:
        print("\n".join(render(cases, ran, results)))
    return max(status, _require(args.require_exact, results))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module)."""
    args = _parser().parse_args(argv)
    try:
        if args.list:
            return _list(args.case, args.wire)
        if args.instrumentation:
            return _one(args.instrumentation, args.case, args.wire, args.json, args.require_exact)
        return _scorecard(args)
    except UsageError as exc:
        _say(f"python -m otel_llm.conformance: error: {exc}")
        return EXIT_USAGE
