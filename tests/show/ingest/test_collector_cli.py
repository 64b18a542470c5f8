"""``otel-llm collector`` as a user runs it, in a fresh process: what it says and its exit codes
when it cannot start, without the Collector binary (a stand-in that exits at once)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from otel_llm import _env as env
from otel_llm.cli._collector import Ports


def _collector(
    *arguments: str, cwd: Path, binary: str = "/bin/false"
) -> subprocess.CompletedProcess[str]:
    ports = Ports.free()
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "otel_llm.cli",
            "collector",
            f"--grpc-port={ports.grpc}",
            f"--http-port={ports.http}",
            f"--health-port={ports.health}",
            *arguments,
        ],
        cwd=cwd,
        env={**os.environ, env.OTEL_LLM_COLLECTOR_BIN: binary},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_working_directory_as_the_store(tmp_path: Path) -> None:
    """`--db .` once died with a ValueError traceback (exit code 1, the code of a kept file);
    its spool folder is beside the directory, and a collector that exits at once is said
    plainly, exit code 2."""
    store = tmp_path / "store"
    store.mkdir()
    done = _collector("--db", ".", cwd=store)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "error: the collector exited with code 1 before its health check" in done.stderr
    assert (tmp_path / "store.otlp").is_dir()
    assert not (store / "..otlp").exists()
