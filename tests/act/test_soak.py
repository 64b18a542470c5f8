"""A smaller run of ``benchmarks/client/soak.py`` (mixed faults, watchdog kills, hedges,
callers that give up, at concurrency) in its own process: no failure caused by the client's own
state, no pool slot held, file descriptors and tasks back to their baseline, every span ended."""

from __future__ import annotations

import subprocess
import sys

from tests.support import REPOSITORY

ROOT = REPOSITORY


def test_a_small_soak_leaves_the_client_as_it_found_it() -> None:
    """400 calls at concurrency 40 (time scale 0.01): every requirement of the soak holds."""
    arguments = ["--calls", "400", "--concurrency", "40", "--seed", "3"]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.client.soak", *arguments],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
    assert done.stdout.count("PASS") == 8
    assert "failures caused by the client's own state: 0" in done.stdout
