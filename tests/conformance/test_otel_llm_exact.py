"""otel-llm is exact on every case of the conformance suite: every figure of every case on
every wire format, read back from its spans, equals the script's truth (the suite in two
processes at once, one per pair of wire formats, as ``python -m otel_llm.conformance`` runs
it)."""

from __future__ import annotations

import subprocess

from otel_llm.conformance import CASES
from otel_llm.conformance._cli import command, parse

HALVES = (("chat", "responses"), ("anthropic", "gemini"))


def test_otel_llm_is_exact_on_every_case() -> None:
    """Every figure of every one of the suite's cases is exact for otel-llm."""
    running = [
        subprocess.Popen(
            command("otel-llm", wires=half),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for half in HALVES
    ]
    results = []
    for process in running:
        stdout, stderr = process.communicate(timeout=55)
        results.extend(parse("otel-llm", process.returncode, stdout, stderr))
    assert sorted(result["case"] for result in results) == sorted(case.name for case in CASES)
    wrong = [
        f"{result['case']} {verdict['figure']}: {verdict['expected']} -> {verdict['measured']}"
        for result in results
        for verdict in result["verdicts"]
        if verdict["status"] != "exact"
    ]
    assert wrong == []
