"""The Python ingest end to end, as collectors of earlier versions used it: the real Collector
writing OTLP protobuf files into the spool through its file exporter (rotated as it goes),
`otel-llm collector` ingesting them before the start, while it runs and at stop — and SIGKILLed
in the middle, then started again. Real SDK spans from three processes land once each, every
column equal to what the same processes wrote into their embedded store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from otel_llm import _env as env
from otel_llm._show._store._access import prepare_for_writing
from otel_llm.cli._collector import Ports, sending_to
from tests.show.ingest.test_collector import _SENDER, ROOT, _finish, _table, binary

__all__ = ["binary"]  # the fixture, shared with the Collector's other tests

PROCESSES = 3
CALLS = 150  # per process: 450 spans, files rotated at 1 MB while they flow

_CONFIG = """
extensions:
  health_check:
    endpoint: 127.0.0.1:${env:OTEL_LLM_COLLECTOR_HEALTH_PORT}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:${env:OTEL_LLM_COLLECTOR_GRPC_PORT}
      http:
        endpoint: 127.0.0.1:${env:OTEL_LLM_COLLECTOR_HTTP_PORT}
processors:
  batch:
    send_batch_size: 64
    timeout: 200ms
exporters:
  file:
    path: ${env:OTEL_LLM_COLLECTOR_SPOOL}/traces.binpb
    format: proto
    rotation:
      max_megabytes: 1
      max_backups: 0
service:
  extensions: [health_check]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [file]
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
"""
"""The file exporter as ``collector/duckdb.yaml`` of earlier versions configured it (rotated at
1 MB here, not 32, so that files rotate while the spans flow)."""


def _cli(store: Path, config: Path, ports: Ports, binary: Path) -> subprocess.Popen[str]:
    """`otel-llm collector --config CONFIG` into ``store``, once it says it is up (a collector
    killed a moment ago may still hold its ports: tried again, for a bounded time)."""
    deadline = time.monotonic() + 60
    while True:
        cli = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "otel_llm.cli",
                "collector",
                f"--db={store}",
                f"--config={config}",
                f"--grpc-port={ports.grpc}",
                f"--http-port={ports.http}",
                f"--health-port={ports.health}",
            ],
            env={**os.environ, env.OTEL_LLM_COLLECTOR_BIN: str(binary)},
            stderr=subprocess.PIPE,
            text=True,
        )
        assert cli.stderr is not None
        said = cli.stderr.readline()
        if "collector up" in said:
            return cli
        said += cli.stderr.read()
        cli.stderr.close()
        code = cli.wait(timeout=60)
        assert "in use" in said, (code, said)
        assert time.monotonic() < deadline, said
        time.sleep(0.2)


def test_spool_files_land_once_through_a_killed_and_restarted_cli(
    binary: Path, tmp_path: Path
) -> None:
    store, embedded = tmp_path / "via-files", tmp_path / "embedded"
    prepare_for_writing(embedded)
    config = tmp_path / "file-exporter.yaml"
    config.write_text(_CONFIG)
    ports = Ports.free()
    cli = _cli(store, config, ports, binary)
    with sending_to(ports):
        environment = dict(os.environ)
    script = _SENDER.format(root=str(ROOT), calls=CALLS)
    senders = [
        subprocess.Popen(
            [sys.executable, "-c", script, f"proc-{n}", str(embedded)],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(PROCESSES)
    ]
    try:
        assert cli.stderr is not None
        said = cli.stderr.readline()  # a rotated file ingested while the spans flow
        assert " spans from 1 file(s) into " in said, said
        cli.kill()  # its collector gets SIGTERM (the parent-death signal) and writes its batch
        cli.wait(timeout=60)
        assert cli.stderr is not None
        cli.stderr.close()
        cli = _cli(store, config, ports, binary)  # the senders retry meanwhile
        _finish(senders)
        cli.send_signal(signal.SIGTERM)
        assert cli.stderr is not None
        rest = cli.stderr.read()
        assert cli.wait(timeout=60) == 0, rest
    finally:
        for process in [cli, *senders]:
            if process.poll() is None:
                process.kill()
                process.wait()
        if cli.stderr is not None:
            cli.stderr.close()
    assert f"spans ingested into {store} from spool files" in rest
    assert "straight into" not in rest  # a config of an earlier version: through its files
    every = "SELECT * FROM otel_traces ORDER BY SpanId"
    landed = _table(store, every)
    assert len(landed) == PROCESSES * CALLS * 3
    assert landed == _table(embedded, every)
    assert _table(store, "SELECT count(DISTINCT SpanId) FROM otel_traces") == [(len(landed),)]
    folder = store.with_name(store.name + ".otlp")
    assert not list(folder.glob("traces*")), "every file ingested, none kept"
    assert not any(path.name.startswith("pending-") for path in (store / "segments").iterdir())
