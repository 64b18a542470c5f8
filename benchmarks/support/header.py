"""The header every saved benchmark result starts with: what ran, when, on what, how to rerun.

A figure without its machine and commit cannot be compared with the next run, so every
benchmark prints this first (the saved results are its output, ``| tee``'d)."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
import sys

from benchmarks import ROOT

PACKAGES = (
    "otel-llm",
    "opentelemetry-sdk",
    "openai",
    "anthropic",
    "google-genai",
    "litellm",
    "duckdb",
)
"""Versions worth knowing beside any figure (those not installed are left out)."""


def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=10"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def _versions() -> str:
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ", ".join(found)


def header(module: str, argv: list[str] | None = None) -> str:
    """The header lines of one run of ``python -m module argv…`` (``argv`` defaults to this
    process's arguments)."""
    args = sys.argv[1:] if argv is None else argv
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lines = [
        f"# {module}: recorded {now} at commit {_commit()}",
        f"# machine: {platform.machine()}, {cpus} CPUs, load average {load}; "
        f"Python {platform.python_version()}",
        f"# versions: {_versions()}",
        f"# rerun: python -m {module} {' '.join(args)}".rstrip(),
    ]
    return "\n".join(lines)


def print_header(module: str) -> None:
    """Print :func:`header` (to standard output, where the saved result is taken from)."""
    print(header(module), flush=True)
