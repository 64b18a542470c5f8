"""The real OpenTelemetry Collector (built by ``collector/build.sh``; ``./dev test`` passes its
path in ``OTEL_LLM_COLLECTOR_BIN``): its configs validate, ``otel-llm collector`` carries real
SDK spans from several processes into the store with the rows the embedded path writes, and a
ClickHouse that cannot be reached costs the application nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from otel_llm import _env as env
from otel_llm._errors import CollectorError
from otel_llm._show._store import open_store, prepare_for_writing
from otel_llm.cli._collector import CollectorRun, Ports, collector_dir, free_port, sending_to
from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]
PROCESSES = 3
CALLS = 4  # per process; 3 spans a call (the call, a cancelled hedge leg, the winner)


@pytest.fixture(scope="module")
def binary() -> Path:
    """The collector binary ./dev test built (a skip locally without it, a failure in CI)."""
    named = os.environ.get(env.OTEL_LLM_COLLECTOR_BIN, "")
    require(
        bool(named) and Path(named).is_file(),
        f"the collector binary (collector/build.sh, then {env.OTEL_LLM_COLLECTOR_BIN}=PATH; "
        "./dev test does both)",
    )
    return Path(named)


_SENDER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    import otel_llm
    from tests.duckdb_store import Store

    class Calls(Store):
        def __init__(self, provider):
            self.provider = provider
            self.tracer = provider.get_tracer("tests", "1.0")

    provider = TracerProvider(resource=Resource.create({{"service.name": sys.argv[1]}}))
    # The embedded store and OTLP (to the collector the environment names) get the same spans.
    telemetry = otel_llm.init(db_path=sys.argv[2], tracer_provider=provider, set_global=False)
    calls = Calls(provider)
    for _ in range({calls}):
        calls.call()
    # Every span handed over first (the OTLP exporter has its own 10 s per batch), so a busy
    # machine cannot push the last batch past shutdown's bound; then the bounded shutdown.
    assert telemetry.force_flush(60.0)
    started = time.monotonic()
    telemetry.shutdown()
    print(f"shutdown_s={{time.monotonic() - started:.3f}}")
    stats = telemetry.exporter.stats
    assert stats.dropped == 0, stats
    """
)


def _senders(ports: Ports, embedded: Path, count: int) -> list[subprocess.Popen[str]]:
    with sending_to(ports):
        environment = dict(os.environ)
    script = _SENDER.format(root=str(ROOT), calls=CALLS)
    return [
        subprocess.Popen(
            [sys.executable, "-c", script, f"proc-{n}", str(embedded)],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(count)
    ]


def _finish(processes: list[subprocess.Popen[str]]) -> list[float]:
    """Wait for the senders; each must exit 0. Their shutdown times."""
    outputs = [process.communicate(timeout=120) for process in processes]  # all, then check
    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err
    return [float(out.strip().rsplit("shutdown_s=", 1)[1]) for out, _ in outputs]


def _table(store: Path, sql: str) -> list[tuple[object, ...]]:
    with open_store(store) as conn:
        return [tuple(row) for row in conn.execute(sql).fetchall()]


def test_the_shipped_configs_validate(binary: Path, tmp_path: Path) -> None:
    """`otelcol validate` accepts duckdb.yaml and clickhouse.yaml, and refuses a config with a
    misspelt key (so the check can fail)."""
    for name in ("duckdb", "clickhouse"):
        done = subprocess.run(
            [str(binary), "validate", f"--config={collector_dir() / f'{name}.yaml'}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, (name, done.stderr)
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        (collector_dir() / "duckdb.yaml").read_text().replace("send_batch_size", "send_batch_sise")
    )
    done = subprocess.run(
        [str(binary), "validate", f"--config={broken}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "send_batch_sise" in done.stderr


def _collector_cli(store: Path, ports: Ports, binary: Path) -> subprocess.Popen[str]:
    """`otel-llm collector` on ``ports`` into ``store``, once it says the collector is up."""
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "otel_llm.cli",
            "collector",
            "--db",
            str(store),
            f"--grpc-port={ports.grpc}",
            f"--http-port={ports.http}",
            f"--health-port={ports.health}",
        ],
        env={**os.environ, env.OTEL_LLM_COLLECTOR_BIN: str(binary)},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert cli.stderr is not None
    for line in cli.stderr:
        if "collector up" in line:
            return cli
    pytest.fail(f"otel-llm collector did not come up (exit code {cli.wait()})")


def test_spans_of_three_processes_land_as_the_embedded_path_writes_them(
    binary: Path, tmp_path: Path
) -> None:
    """`otel-llm collector` (the CLI, stopped with SIGTERM) carries the spans of three
    processes into its store; the rows equal those the same processes wrote into an embedded
    store: every column, the views' derived figures and the re-threshold macro."""
    store, embedded = tmp_path / "via-collector", tmp_path / "embedded"
    prepare_for_writing(embedded)  # (processes making one store at once: tests/test_store.py)
    ports = Ports.free()
    cli = _collector_cli(store, ports, binary)
    try:
        assert cli.stderr is not None
        _finish(_senders(ports, embedded, PROCESSES))
        cli.send_signal(signal.SIGTERM)
        rest = cli.stderr.read()
        assert cli.wait(timeout=60) == 0, rest
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        if cli.stderr is not None:
            cli.stderr.close()
    assert f"{PROCESSES * CALLS * 3} spans ingested in total" in rest
    every = "SELECT * FROM otel_traces ORDER BY SpanId"
    landed = _table(store, every)
    assert len(landed) == PROCESSES * CALLS * 3
    assert landed == _table(embedded, every)
    services = _table(store, "SELECT DISTINCT ServiceName FROM otel_traces ORDER BY 1")
    assert services == [(f"proc-{n}",) for n in range(PROCESSES)]
    for sql in (
        "SELECT * FROM llm_attempts ORDER BY span_id",
        "SELECT * FROM llm_calls ORDER BY trace_id",
        "SELECT * FROM llm_attempts_at(500) ORDER BY span_id",
        "SELECT * FROM llm_attempts_at(3000) ORDER BY span_id",
    ):
        rows = _table(store, sql)
        assert rows, sql
        assert rows == _table(embedded, sql), sql
    assert not list(store.with_name(store.name + ".otlp").glob("traces*"))  # all ingested


def test_an_unreachable_clickhouse_costs_the_application_nothing(
    binary: Path, tmp_path: Path
) -> None:
    """clickhouse.yaml pointed at a closed port: the application's calls finish, its spans
    land in its embedded store, its shutdown is quick, and the collector stops when told."""
    ports = Ports.free()
    closed = free_port()
    run = CollectorRun(
        binary,
        collector_dir() / "clickhouse.yaml",
        store=None,
        ports=ports,
        log=subprocess.DEVNULL,
        extra_env={env.OTEL_LLM_CLICKHOUSE_ENDPOINT: f"tcp://127.0.0.1:{closed}"},
    )
    with run:
        embedded = tmp_path / "embedded"
        [shutdown_s] = _finish(_senders(ports, embedded, 1))
        assert shutdown_s < 10.0  # bounded: the collector took the spans at once
        assert run.running
        started = time.monotonic()
    assert time.monotonic() - started < 30.0
    assert not run.running
    assert _table(embedded, "SELECT count(*) FROM otel_traces") == [(CALLS * 3,)]


def test_demo_via_collector_reads_what_the_collector_landed(binary: Path, tmp_path: Path) -> None:
    """`otel-llm demo --via-collector`: the spans reach the store only through the collector
    (its segments carry the ingest's names) and the demo's checks pass on them."""
    store = tmp_path / "demo"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "otel_llm.cli",
            "demo",
            "--db",
            str(store),
            "--calls",
            "8",
            "--concurrency",
            "8",
            "--time-scale",
            "0.1",
            "--via-collector",
            "--format",
            "csv",
        ],
        env={**os.environ, env.OTEL_LLM_COLLECTOR_BIN: str(binary)},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode in (0, 3), done.stderr  # 3: too busy to measure honestly
    names = [path.name for path in (store / "segments").glob("*.parquet")]
    assert names
    assert all(name.startswith(("collector-", "0000")) for name in names), names
    calls = _table(store, "SELECT count(*) FROM llm_calls")
    assert calls == [(8,)]
    if done.returncode == 0:
        assert "sim-a/measured" in done.stdout


def test_build_says_what_is_missing_without_go(tmp_path: Path) -> None:
    """build.sh with no Go toolchain: a clear message and a failing exit, no binary path."""
    done = subprocess.run(
        ["bash", str(collector_dir() / "build.sh")],
        env={**os.environ, "GO": str(tmp_path / "no-go-here"), "XDG_CACHE_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert done.stdout == ""
    assert "no-go-here is not an executable" in done.stderr


def test_one_collector_per_store(binary: Path, tmp_path: Path) -> None:
    """A second collector on the same store is refused (it would write the same files) while
    the first runs, and allowed once it has stopped."""
    store = tmp_path / "store"
    config = collector_dir() / "duckdb.yaml"
    first = CollectorRun(binary, config, store=store, ports=Ports.free(), log=subprocess.DEVNULL)
    with first:
        second = CollectorRun(
            binary, config, store=store, ports=Ports.free(), log=subprocess.DEVNULL
        )
        with pytest.raises(CollectorError, match="another otel-llm collector"):
            second.start()
    with second:
        assert second.running


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_a_killed_cli_leaves_no_collector_running(binary: Path, tmp_path: Path) -> None:
    """`otel-llm collector` killed outright (SIGKILL: it cannot stop anything itself): the
    collector it started ends too instead of running on unowned."""
    ports = Ports.free()
    cli = _collector_cli(tmp_path / "store", ports, binary)
    try:
        children = Path(f"/proc/{cli.pid}/task/{cli.pid}/children").read_text().split()
        [child] = [int(pid) for pid in children]
        assert Path(f"/proc/{child}/exe").resolve() == binary.resolve()
    finally:
        cli.kill()
        cli.wait()
        if cli.stderr is not None:
            cli.stderr.close()
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            break  # ended and reaped
        if state in ("Z", "X"):
            break  # ended (a zombie until its new parent reaps it)
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the collector kept running after otel-llm collector was killed")
