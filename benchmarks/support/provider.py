"""Simulated providers for the benchmarks: ``otel-llm provider`` processes on 127.0.0.1."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

_URL = re.compile(r"http://[^\s()]+/v1")


def launch(*args: str) -> subprocess.Popen[str]:
    """Start ``otel-llm provider --port 0 ARGS`` (does not wait for it to listen)."""
    return subprocess.Popen(
        [sys.executable, "-m", "otel_llm.cli", "provider", "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},  # one unwrapped announcement line
    )


def read_url(proc: subprocess.Popen[str]) -> str:
    """The base URL the process announces (kills a process that says nothing for 30 s)."""
    assert proc.stdout is not None
    killer = threading.Timer(30.0, proc.kill)
    killer.start()
    try:
        line = proc.stdout.readline()
    finally:
        killer.cancel()
    match = _URL.search(line)
    if match is None:
        raise RuntimeError(f"the simulated provider did not announce its URL: {line!r}")
    return match.group(0)


def start_provider(*args: str) -> tuple[subprocess.Popen[str], str]:
    """Start a provider and wait for its base URL."""
    proc = launch(*args)
    return proc, read_url(proc)
