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


_STAND_IN = """#!{python}
# Stands in for the Collector: answers its health check on the port otel-llm collector gave
# it, ends with code 0 on SIGTERM, or with code {code} on its own after {life} s.
import http.server, os, signal, sys, threading
port = int(os.environ["OTEL_LLM_COLLECTOR_HEALTH_PORT"])
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), http.server.BaseHTTPRequestHandler)
server.RequestHandlerClass.do_GET = lambda self: (self.send_response(200), self.end_headers())
server.RequestHandlerClass.log_message = lambda *_: None
threading.Thread(target=server.serve_forever, daemon=True).start()
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
threading.Event().wait({life})
os._exit({code})
"""


def _stand_in(tmp_path: Path, *, code: int = 0, life: float = 600.0) -> str:
    script = tmp_path / "collector"
    script.write_text(_STAND_IN.format(python=sys.executable, code=code, life=life))
    script.chmod(0o755)
    return str(script)


def _until_stopped(
    *arguments: str, cwd: Path, binary: str, interrupt: bool = True
) -> tuple[int, str]:
    """`otel-llm collector` with ``binary`` as its collector, stopped with SIGINT (Ctrl-C) once
    it says it is up (``interrupt``): its exit code and standard error."""
    import signal

    ports = Ports.free()
    cli = subprocess.Popen(
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
        stderr=subprocess.PIPE,
        text=True,
    )
    assert cli.stderr is not None
    try:
        first = cli.stderr.readline()
        if "collector up" in first and interrupt:
            cli.send_signal(signal.SIGINT)
        rest = cli.stderr.read()
        return cli.wait(timeout=60), first + rest
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        cli.stderr.close()


def test_stopped_by_ctrl_c_it_exits_0(tmp_path: Path) -> None:
    code, said = _until_stopped("--db", "store", cwd=tmp_path, binary=_stand_in(tmp_path))
    assert code == 0, said
    assert "collector stopped (exit code 0); spans went straight into store" in said


def test_a_collector_that_exits_on_its_own_is_exit_code_1(tmp_path: Path) -> None:
    code, said = _until_stopped(
        "--db", "store", cwd=tmp_path, binary=_stand_in(tmp_path, code=3, life=1.0), interrupt=False
    )
    assert code == 1, said
    assert "the collector exited on its own" in said
    assert "collector stopped (exit code 3)" in said
    assert "Traceback" not in said


def test_a_kept_spool_file_is_exit_code_1_and_named(tmp_path: Path) -> None:
    from otel_llm._show._ingest._claim import spool_path

    store = tmp_path / "store"
    spool_path(store).mkdir(parents=True)
    damaged = spool_path(store) / "traces-2026-01-01T00-00-00.000-size.binpb"
    damaged.write_bytes(b"\xff\xff\xff\xffnot a message")
    code, said = _until_stopped("--db", "store", cwd=tmp_path, binary=_stand_in(tmp_path))
    assert code == 1, said
    assert f"kept: {damaged}: a length of 4294967295 bytes" in said
    assert "at byte 0 of 17" in said
    again, said = _until_stopped("--db", "store", cwd=tmp_path, binary=_stand_in(tmp_path))
    assert again == 1, said
    assert f"kept: {damaged}.corrupt: kept by an earlier ingest" in said


def test_a_port_in_use_is_exit_code_2(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, said = _until_stopped(
            "--db", "store", f"--health-port={port}", cwd=tmp_path, binary=_stand_in(tmp_path)
        )
    assert code == 2, said
    assert f"error: port health {port} on 127.0.0.1 is in use" in said


def test_a_merge_meeting_a_damaged_footer_leaves_the_collector_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command merges the store's small segments while the collector runs, and "merging is
    an optimisation: the collector runs on" — but only an OSError was let pass: a segment
    whose footer names a column in bytes that are not UTF-8 made the merge raise
    UnicodeDecodeError, which stopped the collector and ended the command with a traceback.
    Such a segment is now set aside in quarantine by the merge, the rest merged, and the loop
    goes on merging."""
    import dataclasses
    import struct
    import threading

    from opentelemetry.sdk.resources import Resource

    from otel_llm._defaults import DEFAULTS
    from otel_llm._show._store._access import prepare_for_writing
    from otel_llm._show._store._rows import span_row
    from otel_llm.cli import _collector
    from otel_llm.cli._collector import CollectorRun, collector_dir, run_until_stopped
    from tests.support.duckdb_store import MemoryCalls

    store = tmp_path / "store"
    segments = prepare_for_writing(store)
    calls = MemoryCalls(Resource.create({"service.name": "merged"}))
    for _ in range(20):  # more than a merge of small segments waits for
        calls.exporter.clear()
        calls.call()
        segments.write([span_row(span) for span in calls.exporter.get_finished_spans()])
    victim = sorted((store / "segments").glob("0*.parquet"))[5].resolve()
    data = bytearray(victim.read_bytes())
    footer = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]
    data[data.index(b"SpanName", footer)] = 0xFF  # a column's name in the footer's schema
    victim.write_bytes(bytes(data))
    monkeypatch.setattr(_collector, "DEFAULTS", dataclasses.replace(DEFAULTS, compact_every_s=0.0))
    run = CollectorRun(
        Path(_stand_in(tmp_path)), collector_dir() / "duckdb.yaml", store=store, ports=Ports.free()
    )
    run.start()
    stop = threading.Event()
    said: list[str] = []
    merges: list[int] = []
    compact = run.compact

    def counted() -> int:
        merges.append(compact())
        if len(merges) >= 2:
            stop.set()  # merged twice: the loop went on after the first
        return merges[-1]

    monkeypatch.setattr(run, "compact", counted)
    bound = threading.Timer(30.0, stop.set)
    bound.start()
    try:
        code = run_until_stopped(run, stop, said.append, poll_s=0.05)
    finally:
        bound.cancel()
        if run.running:
            run.stop()
    assert code == 0
    assert said == []
    assert len(merges) >= 2, merges
    assert merges[0] == 19, merges
    assert run.store is not None
    assert [path.name for path in run.store.quarantined()] == [victim.name]


def test_the_claim_says_which_port_speaks_which_protocol(tmp_path: Path) -> None:
    """While it runs, the claim names its gRPC and OTLP/HTTP ports apart, so an application
    sending OTLP/HTTP to the gRPC port is not taken for one of its senders."""
    from otel_llm._show._ingest._claim import live_collector
    from otel_llm.cli._collector import CollectorRun, collector_dir

    ports = Ports.free()
    store = tmp_path / "store"
    run = CollectorRun(
        Path(_stand_in(tmp_path)), collector_dir() / "duckdb.yaml", store=store, ports=ports
    )
    with run:
        collector = live_collector(store)
        assert collector is not None
        assert collector.receives(f"http://127.0.0.1:{ports.http}/v1/traces", "http/protobuf")
        assert not collector.receives(f"http://127.0.0.1:{ports.grpc}/v1/traces", "http/protobuf")
        assert collector.receives(f"http://127.0.0.1:{ports.grpc}", "grpc")
    assert live_collector(store) is None


def test_the_claim_names_its_ports_only_once_the_collector_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim named the ports before the spool files of earlier versions were ingested and
    before the collector was started: an application started meanwhile (a backlog takes
    minutes) left its store to a collector that was not listening, and lost what its exporter's
    retries outlasted; so did one started while the last files were ingested at stop. Only while
    the collector answers does an application leave its store to it."""
    from otel_llm._show._ingest._claim import live_collector
    from otel_llm._show._ingest._otlp_files import IngestReport, Spool
    from otel_llm.cli._collector import CollectorRun, collector_dir

    ports = Ports.free()
    store = tmp_path / "store"
    url = f"http://127.0.0.1:{ports.http}/v1/traces"
    seen: list[bool] = []
    ingest = Spool.ingest

    def looking(self: Spool) -> IngestReport:
        collector = live_collector(store)
        seen.append(collector is not None and collector.receives(url, "http/protobuf"))
        return ingest(self)

    monkeypatch.setattr(Spool, "ingest", looking)
    run = CollectorRun(
        Path(_stand_in(tmp_path)), collector_dir() / "duckdb.yaml", store=store, ports=ports
    )
    with run:
        assert seen == [False]  # the ingest before the start
        collector = live_collector(store)
        assert collector is not None
        assert collector.receives(url, "http/protobuf")
    assert seen == [False, False]  # the ingest at stop, the collector stopped


def test_a_read_only_spool_folder_is_said_plainly(tmp_path: Path) -> None:
    """A spool folder this user cannot write (its mode; for root, whom modes do not stop, a
    read-only bind mount in a private mount namespace) was a bare ``[Errno 13]``: it is named,
    with what to do, exit code 2."""
    import shutil

    from otel_llm._show._ingest._claim import spool_path
    from otel_llm._show._store._access import prepare_for_writing
    from tests.conftest import require

    store = tmp_path / "store"
    prepare_for_writing(store)
    spool = spool_path(store)
    spool.mkdir()
    ports = Ports.free()
    command = [
        sys.executable,
        "-m",
        "otel_llm.cli",
        "collector",
        "--db",
        str(store),
        f"--grpc-port={ports.grpc}",
        f"--http-port={ports.http}",
        f"--health-port={ports.health}",
    ]
    if os.geteuid() == 0:
        unshare = shutil.which("unshare")
        probe = subprocess.run([unshare or "unshare", "-m", "true"], capture_output=True)
        require(unshare is not None and probe.returncode == 0, "unshare -m (mount namespaces)")
        mount_then_run = 'mount --bind -o ro "$0" "$0" && exec "$@"'
        command = [unshare or "", "-m", "sh", "-c", mount_then_run, str(spool), *command]
    else:
        spool.chmod(0o555)
    try:
        done = subprocess.run(
            command,
            env={**os.environ, env.OTEL_LLM_COLLECTOR_BIN: _stand_in(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        spool.chmod(0o755)
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert f"error: cannot write the spool folder {spool} (" in said
    assert "make it writable by this user" in said
    assert "Errno" not in said
    assert "Traceback" not in said
    assert list(spool.iterdir()) == []
