"""A smaller run of ``benchmarks/soak.py`` (mixed faults, watchdog kills, hedges, callers that
give up, at concurrency) in its own process: no failure caused by the client's own state, no
pool slot held, file descriptors and tasks back to their baseline, every span ended."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SOAK = Path(__file__).resolve().parent.parent / "benchmarks" / "soak.py"


def test_a_small_soak_leaves_the_client_as_it_found_it() -> None:
    """400 calls at concurrency 40 (time scale 0.01): every requirement of the soak holds."""
    done = subprocess.run(
        [sys.executable, str(SOAK), "--calls", "400", "--concurrency", "40", "--seed", "3"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout
    assert done.stdout.count("PASS") == 8
    assert "failures caused by the client's own state: 0" in done.stdout
