"""``otel-llm collector`` as a user runs it, in a fresh process: what it says and its exit codes
when it cannot start, without the Collector binary (a stand-in that exits at once)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_a_failed_ingest_at_start_gives_the_claim_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ingest of old spool files that fails before the collector starts (a full disk, a
    file it may not read) raises, and the claim on the store is given back with its file: it
    was kept open, so the next start in the same process (the demo, a test) was refused with
    "another otel-llm collector is running", and the open file warned when collected."""
    from otel_llm import CollectorError
    from otel_llm._show._ingest._claim import claim, spool_path
    from otel_llm._show._ingest._otlp_files import Spool
    from otel_llm.cli._collector import CollectorRun, collector_dir

    store = tmp_path / "store"
    spool_path(store).mkdir()
    (spool_path(store) / "traces-2026-01-01T00-00-00.000-size.binpb").write_bytes(b"")

    def fail(self: Spool, path: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Spool, "ingest_file", fail)
    run = CollectorRun(
        Path("/bin/false"), collector_dir() / "duckdb.yaml", store=store, ports=Ports.free()
    )
    with pytest.raises(OSError, match="No space"):
        run.start()
    claim(store).close()  # free again
    monkeypatch.undo()
    again = CollectorRun(
        Path("/bin/false"), collector_dir() / "duckdb.yaml", store=store, ports=Ports.free()
    )
    with pytest.raises(CollectorError, match="exited with code 1 before its health check"):
        again.start()
    claim(store).close()
