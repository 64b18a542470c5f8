"""otel-llm's benchmarks, by topic; each runs as a module from the repository root::

    .venv/bin/python -m benchmarks.<topic>.<name> [options]

- ``overhead``: instructions per chunk of every wrapped SDK (openai's chat completions and
  Responses API, anthropic, google-genai, LiteLLM), the client's transport and the chunk events,
  against the bare SDK or loop and the peer instrumentations, and where the wrapper's
  instructions go; import time.
- ``store``: the embedded store's throughput and months-long run, the dashboard queries, the
  Collector's ingest, the report's size.
- ``hedging``: the hedging model, its frontier chart, tail latency through the real client.
- ``tune``: ``otel-llm tune`` against ground truth.
- ``client``: the soak and the breaker's recovery.
- ``support``: what they share (callgrind runs, CPU burners, simulated providers, the header
  every saved result starts with).

A benchmark that runs itself (or another tree's ``otel_llm``) in a child process builds the
command with :func:`child_command` and :func:`child_env`: the child finds ``benchmarks`` and
``otel_llm`` through ``PYTHONPATH`` alone, never through its working directory, so a child that
measures an older tree imports that tree's package.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
"""The repository's root: the benchmarks' package is ``ROOT / "benchmarks"``."""


def child_command(module: str, *args: str) -> list[str]:
    """``python -P -m module args…``: ``-P`` keeps the working directory off the import path."""
    return [sys.executable, "-P", "-m", module, *args]


def child_env(
    *paths: str | os.PathLike[str], base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``base`` (the environment by default) with ``PYTHONPATH`` = ``paths`` then :data:`ROOT`
    (where ``benchmarks`` is): a tree among ``paths`` that holds ``otel_llm`` comes first."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([*(os.fspath(path) for path in paths), str(ROOT)])
    return env
