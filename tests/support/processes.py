"""Running Python and the ``otel-llm`` command in fresh processes, output in pipes — the
helper of the tests that need a process of their own (start-up, exit, imports, the CLI)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

UNHURRIED = ("--time-scale", "0.8")
"""``otel-llm demo`` arguments for tests about what the demo prints, counts and writes, not how
exactly it measures: the pace the demo itself advises on a busy machine (its default pace, 0.2,
is refused with exit code 3 beside two CPU burners)."""


def run_python(
    script: str, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -c SCRIPT ARGS`` in ``cwd``; the test reads its exit code and output."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    columns: int | None = None,
    timeout_s: float = 120,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``otel-llm ARGS`` with text output; ``columns`` sets ``COLUMNS`` (unset by default)."""
    return subprocess.run(
        [sys.executable, "-m", "otel_llm.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env=_env(env, columns),
        cwd=cwd,
    )


def run_cli_bytes(*args: str) -> subprocess.CompletedProcess[bytes]:
    """``otel-llm ARGS`` with the output's bytes as written (CRLF kept)."""
    return subprocess.run(
        [sys.executable, "-m", "otel_llm.cli", *args],
        capture_output=True,
        timeout=120,
        check=False,
        env=_env(None, None),
    )


def _env(env: dict[str, str] | None, columns: int | None) -> dict[str, str]:
    base = {k: v for k, v in (os.environ if env is None else env).items() if k != "COLUMNS"}
    return base if columns is None else {**base, "COLUMNS": str(columns)}
