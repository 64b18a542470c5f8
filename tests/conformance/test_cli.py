"""``python -m otel_llm.conformance`` (``otel_llm/conformance/_cli.py``): the selection holds in
every mode, ``--require-exact`` fails what is not exact (alone or in the scorecard), and a
command line that cannot run says why with exit status 2, never a traceback.

A run of one instrumentation puts the process's clocks on virtual time, so those runs are
subprocesses; what fails before any case runs is checked in this process."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from otel_llm.conformance import ADAPTERS
from otel_llm.conformance import _adapters as adapters_module
from otel_llm.conformance._cli import EXIT_USAGE, UsageError, main, resolve

WRONG = "tests.support.conformance_adapters:WRONG"
"""otel-llm's adapter, off by one chunk, 250 ms and the finish reason."""


def conformance(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "otel_llm.conformance", *args],
        capture_output=True,
        text=True,
        timeout=55,
        check=False,
    )


def test_require_exact_fails_a_wrong_instrumentation_run_alone() -> None:
    """--instrumentation with --require-exact exits 1 for an adapter off by a known amount and
    names why; the same options on otel-llm exit 0."""
    wrong = conformance(
        "--instrumentation", WRONG, "--case", "chat/plain", "--require-exact", "wrong-on-purpose"
    )
    assert wrong.returncode == 1, wrong.stderr
    assert "chunks wrong (10 -> 11: +1)" in wrong.stdout
    assert "--require-exact wrong-on-purpose: not exact (3 figures wrong" in wrong.stderr
    right = conformance(
        "--instrumentation", "otel-llm", "--case", "chat/plain", "--require-exact", "otel-llm"
    )
    assert right.returncode == 0, right.stderr
    assert right.stdout.split() == ["chat/plain", "exact"]


def test_require_exact_fails_an_instrumentation_that_judged_nothing() -> None:
    """An instrumentation none of whose wire formats is selected was judged on nothing: it is
    not exact, and its run says so."""
    done = conformance(
        "--instrumentation", "contrib-openai-v2", "--wire", "gemini",
        "--require-exact", "contrib-openai-v2",
    )  # fmt: skip
    assert done.returncode == 1
    assert "instruments none of the selected cases' wire formats" in done.stderr
    assert "not exact (no case was judged)" in done.stderr


def test_require_exact_of_another_instrumentation_than_the_one_run_is_refused() -> None:
    """--require-exact naming an instrumentation that does not run is a usage error, not a
    pass."""
    done = conformance(
        "--instrumentation", WRONG, "--case", "chat/plain", "--require-exact", "otel-llm"
    )
    assert done.returncode == EXIT_USAGE
    assert "only wrong-on-purpose runs here" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_require_exact_name_is_refused_before_any_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A misspelt --require-exact name in the scorecard is exit 2 with the known names (a
    typo in a CI gate must not pass)."""
    assert main(["--require-exact", "otel_llm"]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert "--require-exact otel_llm: no such instrumentation" in error
    assert "otel-llm" in error


@pytest.mark.parametrize(
    "args", [["--case", "no-such-case"], ["--list", "--case", "no-such-case"],
             ["--case", "chat/", "--wire", "gemini"]],
)  # fmt: skip
def test_a_selection_without_a_case_is_refused(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """--case (and --wire) that select no case are exit 2 with the reason, not an empty
    scorecard or a traceback."""
    assert main(args) == EXIT_USAGE
    assert "no case's name contains" in capsys.readouterr().err


def test_list_keeps_to_the_wire(capsys: pytest.CaptureFixture[str]) -> None:
    """--list --wire gemini lists the Gemini cases only."""
    assert main(["--list", "--wire", "gemini"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line[:1] != " "]
    assert names
    assert all(name.startswith("gemini/") for name in names)


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("no_such_module:ADAPTER", "cannot import 'no_such_module'"),
        ("os:path", "os.path is a module, not an otel_llm.conformance.Adapter"),
        ("tests.support.conformance_adapters:NOPE", "is nothing, not an"),
        ("no-such-name", "unknown instrumentation 'no-such-name'"),
    ],
)
def test_a_bad_instrumentation_is_said_plainly(spec: str, said: str) -> None:
    """--instrumentation that names no adapter says what it names instead."""
    with pytest.raises(UsageError, match=said):
        resolve(spec)


def test_an_adapter_naming_an_unknown_wire_or_figure_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An adapter of one's own whose wires or measured figures are misspelt is refused with
    the known names (else its cases would be silently "not its API" or "not measured")."""
    import tests.support.conformance_adapters as module

    wrong = ADAPTERS["otel-llm"]
    misspelt = dataclasses.replace(wrong, wires=frozenset({"chat", "openai"}))
    monkeypatch.setattr(module, "WIRE", misspelt, raising=False)
    with pytest.raises(UsageError, match="unknown wire format 'openai'"):
        resolve("tests.support.conformance_adapters:WIRE")
    figure = dataclasses.replace(wrong, measures=lambda wire: frozenset({"chunks", "stall"}))
    monkeypatch.setattr(module, "FIGURE", figure, raising=False)
    with pytest.raises(UsageError, match="unknown figure 'stall' in what it measures on"):
        resolve("tests.support.conformance_adapters:FIGURE")


def test_the_scorecard_skips_and_names_an_instrumentation_not_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An adapter whose distribution is not installed is skipped and named; requiring it
    exact fails; the scorecard keeps to --case and --wire for the others."""
    absent = dataclasses.replace(
        ADAPTERS["otel-llm"], name="absent", requires=("no-such-distribution",)
    )
    monkeypatch.setattr(
        adapters_module, "ADAPTERS", {"otel-llm": ADAPTERS["otel-llm"], "absent": absent}
    )
    args = ["--case", "/plain", "--wire", "anthropic", "--json", "--require-exact", "absent"]
    status = main(args)
    out, err = capsys.readouterr()
    assert status == 1
    assert "skipped: absent (no-such-distribution not installed)" in err
    assert "--require-exact absent: not exact (no case was judged)" in err
    assert [line.split('"case": "')[1].split('"')[0] for line in out.splitlines()] == [
        "anthropic/plain"
    ]


def test_a_reader_that_goes_away_ends_the_listing_quietly() -> None:
    """--list into a pipe closed after its first line (``| head -1``) ends without a
    traceback; the pipe holds one page, so the listing outgrows it."""
    fcntl = pytest.importorskip("fcntl")
    if not hasattr(fcntl, "F_SETPIPE_SZ"):
        pytest.skip("the pipe's size cannot be set here")
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_llm.conformance", "--list"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write_end)
    with os.fdopen(read_end) as reader:
        assert reader.readline().startswith("chat/plain")
    _, error = process.communicate(timeout=30)
    assert "Traceback" not in error
    assert "BrokenPipeError" not in error
