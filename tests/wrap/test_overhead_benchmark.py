"""The per-chunk overhead benchmark of the wrapped SDKs (``benchmarks/overhead/wrapped_sdks.py``)
runs end to end at a tiny size without callgrind, each variant recording what it should, and
judges its two targets as they are written."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.overhead._per_chunk import BARE_TARGET, PEER_TARGET, verdicts
from tests.support import REPOSITORY

TINY = ("--chunks", "20", "--rounds", "1", "--warmup-chunks", "5", "--sdk")


def _row(stdout: str, variant: str) -> str:
    """The variant's line under ``recorded for the measured stream``."""
    lines = [line for line in stdout.splitlines() if line.startswith(f"  {variant} ")]
    assert lines, stdout
    return lines[0]


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("sdk", "peer", "peer_scope"),
    [
        ("anthropic", "openllmetry", "opentelemetry.instrumentation.anthropic"),
        ("litellm", "litellm-otel", "litellm: 'litellm_request'"),
    ],
)
def test_a_tiny_run_measures_every_variant_and_judges_the_sdk(
    sdk: str, peer: str, peer_scope: str
) -> None:
    """``--no-callgrind --chunks 20 --rounds 1``: bare records nothing, otel-llm and the peer
    their spans, and the SDK gets its PASS or FAIL line and a line in the summary."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.overhead.wrapped_sdks", "--no-callgrind", *TINY, sdk],
        capture_output=True,
        text=True,
        timeout=170,
        cwd=REPOSITORY,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.startswith("# benchmarks.overhead.wrapped_sdks: recorded ")
    assert f"== {sdk}: " in out
    assert "-- 20 chunks" in out
    assert _row(out, "bare").endswith("nothing (no instrumentation)")
    ours = _row(out, "otel-llm")
    assert ours.count("otel_llm: ") == 2  # the call span and its attempt span
    assert "gen_ai.client.operation.duration" in ours
    assert peer_scope in _row(out, peer)
    report, summary = out.split("== summary (CPU time per chunk", 1)
    judged = f"  {sdk}: otel-llm <= 1.05x bare and below every peer at 20 chunks (CPU time)"
    verdict = [line for line in report.splitlines() if judged in line]
    assert len(verdict) == 1, out
    assert verdict[0].split()[0] in ("PASS", "FAIL")
    listed = [line.split()[:2] for line in summary.splitlines()[1:] if line.strip()]
    assert [verdict[0].split()[0], sdk] in [[word, name.rstrip(":")] for word, name in listed]


@pytest.mark.parametrize(
    ("figures", "failed", "complete"),
    [
        ({"bare": 100.0, "otel-llm": 105.0, "peer": 105.1}, [], True),
        ({"bare": 100.0, "otel-llm": 105.1, "peer": 200.0}, [BARE_TARGET], True),
        ({"bare": 100.0, "otel-llm": 101.0, "peer": 101.0}, [PEER_TARGET], True),
        ({"bare": 100.0, "otel-llm": 120.0, "peer": 110.0}, [BARE_TARGET, PEER_TARGET], True),
        ({"bare": 100.0, "otel-llm": 101.0}, [], False),
        ({"otel-llm": 101.0, "peer": 200.0}, [], False),
    ],
)
def test_the_targets_are_judged_as_written(
    figures: dict[str, float], failed: list[str], complete: bool
) -> None:
    """At most 1.05x bare passes, a tie with a peer fails, a missing figure judges nothing."""
    verdict = verdicts(figures, ["peer"], "instructions")
    assert verdict.failed == failed
    assert verdict.complete is complete
    assert verdict.passed is (complete and not failed)
    assert [line.split()[0] for line in verdict.lines] == [
        "FAIL" if target in failed else "PASS"
        for target, needs in ((BARE_TARGET, "bare"), (PEER_TARGET, "peer"))
        if needs in figures
    ]
