"""The real OpenTelemetry Collector (built by ``collector/build.sh``; ``./dev test`` passes its
path in ``OTEL_LLM_COLLECTOR_BIN``): its configs validate, ``otel-llm collector`` carries real
SDK spans from several processes into the store with the rows the embedded path writes, and a
ClickHouse that cannot be reached costs the application nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from otel_llm import CollectorError
from otel_llm import _env as env
from otel_llm._defaults import DEFAULTS
from otel_llm._otlp_endpoint import exported
from otel_llm._show._store._access import open_store, prepare_for_writing
from otel_llm.cli._collector import (
    CollectorRun,
    Ports,
    collector_dir,
    free_port,
    sending_to,
    spool_path,
)
from tests.conftest import require
from tests.support import REPOSITORY

ROOT = REPOSITORY
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


_CALLS = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    import otel_llm
    from tests.support.duckdb_store import Store

    class Calls(Store):
        def __init__(self, provider):
            self.provider = provider
            self.tracer = provider.get_tracer("tests", "1.0")
    """
)
"""The start of a process making simulated calls (``Calls(provider).call()``)."""

_SENDER = _CALLS + textwrap.dedent(
    """
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

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
    prepare_for_writing(
        embedded
    )  # (processes making one store at once: tests/show/store/test_store.py)
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
    assert f"spans went straight into {store}" in rest
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
    (its segments carry another process's pid than the demo's) and the demo's checks pass on
    them."""
    store = tmp_path / "demo"
    demo = subprocess.Popen(
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
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = demo.communicate(timeout=180)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.communicate()
    assert demo.returncode in (0, 3), stderr  # 3: too busy to measure honestly
    names = [path.name for path in (store / "segments").glob("*.parquet")]
    written = [name.split("-") for name in names if not name.startswith("0000")]
    assert written, names  # <ns>-<pid>-<token>-<n>.parquet, or <ns>-m-<ns>-<token> once merged
    assert all(parts[1] != str(demo.pid) for parts in written), names
    calls = _table(store, "SELECT count(*) FROM llm_calls")
    assert calls == [(8,)]
    if demo.returncode == 0:
        assert "sim-a/measured" in stdout


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


def test_build_says_when_it_waits_for_another_build(tmp_path: Path) -> None:
    """build.sh while another run holds the build lock: it says it waits (the first build
    takes minutes, so a silent wait looks like a hang), and it does wait."""
    import fcntl

    root = tmp_path / "otel-llm" / "collector"
    root.mkdir(parents=True)
    with (root / ".lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        build = subprocess.Popen(
            ["bash", str(collector_dir() / "build.sh")],
            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its flock child goes with it
        )
        try:
            assert build.stderr is not None
            line = build.stderr.readline()  # blocks until build.sh says something
            assert "another run is building the collector" in line, line
            assert "waiting for it" in line
            assert build.poll() is None  # still waiting on the lock
        finally:
            os.killpg(build.pid, signal.SIGKILL)
            build.communicate(timeout=30)


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


def test_a_port_in_use_is_refused_before_the_collector_starts(binary: Path, tmp_path: Path) -> None:
    """A collector already answers on the health port (its HTTP and gRPC ports free): the
    new one is refused before it starts, naming the port — its "up" was the other collector's
    answer, and an application then sent its spans to the other store."""
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        ports = Ports(grpc=free_port(), http=free_port(), health=other.getsockname()[1])
        run = CollectorRun(
            binary,
            collector_dir() / "duckdb.yaml",
            store=tmp_path / "store",
            ports=ports,
            log=subprocess.DEVNULL,
        )
        with pytest.raises(CollectorError, match=f"port health {ports.health} on 127.0.0.1"):
            run.start()
    assert not run.running


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


# --- the docs' own path: OTEL_EXPORTER_OTLP_ENDPOINT names one collector for spans and metrics

APP_CALLS = 10
_APP = textwrap.dedent(
    """
    import asyncio, atexit, sys, time
    marks = {{}}
    if sys.argv[1] == "exit":  # registered first, so it runs last: after init()'s own handler
        atexit.register(lambda: print(f"shutdown_s={{time.monotonic() - marks['end']:.3f}}"))
    import otel_llm
    from otel_llm.simulator import SimulatedProvider

    telemetry = otel_llm.init()  # spans -> ./otel-llm-store, and OTLP as the environment says

    async def main() -> None:
        async with SimulatedProvider(default="smooth", time_scale=0.01) as provider:
            source = otel_llm.Source(
                name="sim-1", provider="sim", base_url=provider.base_url, model="smooth"
            )
            async with otel_llm.Client([source]) as client:
                for n in range({calls}):
                    await client.chat([{{"role": "user", "content": "hi"}}], stream=True)
                    if n == {calls} // 2 and sys.argv[2] == "pause":
                        # Half-way, once told to: the spans so far exported now.
                        print("paused", flush=True)
                        sys.stdin.readline()
                        started = time.monotonic()
                        flushed = telemetry.force_flush(30.0)
                        print(f"flushed={{flushed}} flush_s={{time.monotonic() - started:.3f}}")

    asyncio.run(main())
    marks["end"] = time.monotonic()  # the last calls' spans are still queued
    print(f"shutdown_at={{marks['end']}}", flush=True)
    if sys.argv[1] == "shutdown":  # else init() registered the bounded shutdown to run at exit
        telemetry.shutdown()
        print(f"shutdown_s={{time.monotonic() - marks['end']:.3f}}")
    """
)


def _app_environment(endpoint: str, **more: str) -> dict[str, str]:
    """Ours without any OTel variable, then the base endpoint as the docs' init() section
    gives it; metrics every 200 ms, so a failing metrics export fails many times in a run;
    spans in batches of a minute, so they go out only when flushed and at shutdown (the SDK's
    5 s could fall anywhere in a run on a busy machine)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {
        **base,
        "PYTHONPATH": str(ROOT),
        env.OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
        "OTEL_METRIC_EXPORT_INTERVAL": "200",
        "OTEL_BSP_SCHEDULE_DELAY": "60000",
        **more,
    }


@dataclass(frozen=True)
class _AppRun:
    marks: dict[str, str]
    """What it printed: ``shutdown_at`` (when its shutdown began, on ``time.monotonic()``, one
    clock for every process here), ``shutdown_s``, and ``flushed``/``flush_s`` if it paused."""
    err: str

    def at(self, name: str) -> float:
        return float(self.marks[name])


def _run_app(
    cwd: Path, environment: dict[str, str], ending: str, go: threading.Event | None = None
) -> _AppRun:
    """The app in a process of its own (its embedded store in ``cwd``); with ``go``, it pauses
    half-way until ``go`` is set, then flushes its spans."""
    cwd.mkdir()
    app = subprocess.Popen(
        [sys.executable, "-c", _APP.format(calls=APP_CALLS), ending, "pause" if go else "-"],
        cwd=cwd,
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert app.stdin is not None
        assert app.stdout is not None
        printed = []
        if go is not None:
            first = app.stdout.readline()
            assert first == "paused\n", first + app.communicate(timeout=60)[1]
            assert go.wait(60), "the app's metrics never reached the endpoint"
            app.stdin.write("go\n")
            app.stdin.flush()
        out, err = app.communicate(timeout=120)
        printed.append(out)
    finally:
        if app.poll() is None:
            app.kill()
            app.communicate()
    assert app.returncode == 0, err
    marks = dict(word.split("=", 1) for word in "".join(printed).split())
    return _AppRun(marks, err)


def _stop_cli(cli: subprocess.Popen[str]) -> str:
    """SIGTERM to `otel-llm collector`; what it said after coming up."""
    try:
        assert cli.stderr is not None
        cli.send_signal(signal.SIGTERM)
        rest = cli.stderr.read()
        assert cli.wait(timeout=60) == 0, rest
        return rest
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        if cli.stderr is not None:
            cli.stderr.close()


def _span_ids(store: Path) -> list[str]:
    return [str(row[0]) for row in _table(store, "SELECT SpanId FROM otel_traces ORDER BY 1")]


def _every_span_landed_once(store: Path, embedded: Path) -> None:
    """The collector's store holds each span the app recorded (its own embedded store has
    them all) exactly once."""
    recorded = _span_ids(embedded)
    assert len(recorded) == APP_CALLS * 2  # a call span and its attempt span per call
    landed = _span_ids(store)
    assert len(landed) == len(set(landed)), "a span landed twice"
    assert landed == recorded


def _operation_counts(store: Path) -> list[int]:
    """The counts of ``gen_ai.client.operation.duration`` in the collector's metrics files
    (cumulative: the last export's is the total)."""
    counts = []
    for path in sorted((spool_path(store) / "metrics").glob("metrics*.json")):
        for line in path.read_text().splitlines():
            for resource in json.loads(line)["resourceMetrics"]:
                for scope in resource["scopeMetrics"]:
                    for metric in scope["metrics"]:
                        if metric["name"] == "gen_ai.client.operation.duration":
                            points = metric["histogram"]["dataPoints"]
                            counts.extend(int(point["count"]) for point in points)
    return counts


@pytest.mark.parametrize("ending", ["shutdown", "exit"])
def test_the_readme_endpoint_lands_every_span_and_its_metrics(
    binary: Path, tmp_path: Path, ending: str
) -> None:
    """An app with OTEL_EXPORTER_OTLP_ENDPOINT (spans and metrics to one endpoint, as the
    docs' init() section gives it) against `otel-llm collector`, calling shutdown() or just
    ending: every span lands exactly once, the collector takes the metrics (no 404: its config
    has a metrics pipeline, kept in the spool's metrics folder) and the app says nothing. It
    used to get 404 for its metrics, warn every interval that spans and metrics were not
    exported, and lose the spans still queued at shutdown."""
    store = tmp_path / "via-collector"
    ports = Ports.free()
    cli = _collector_cli(store, ports, binary)
    try:
        environment = _app_environment(f"http://127.0.0.1:{ports.http}")
        app = _run_app(tmp_path / "app", environment, ending)
    finally:
        rest = _stop_cli(cli)
    assert "otel-llm:" not in app.err, app.err
    assert "Failed to export" not in app.err, app.err
    assert app.at("shutdown_s") < 10.0  # bounded (2 s for an endpoint that answers)
    assert f"spans went straight into {store}" in rest
    _every_span_landed_once(store, tmp_path / "app" / "otel-llm-store")
    counts = _operation_counts(store)
    assert counts, "no metrics reached the collector's metrics files"
    assert max(counts) == APP_CALLS


class _MetricsRefused:
    """A real OTLP/HTTP endpoint on loopback in front of the collector: ``/v1/traces`` is
    passed to the collector as it comes, ``/v1/metrics`` fails — ``404`` (its reason phrase
    echoing the request's ``x-api-key``, as a careless server might) or ``hang`` (the
    connection taken, no answer until :meth:`close`)."""

    def __init__(self, traces_url: str, mode: str) -> None:
        self.mode = mode
        self.metrics_requests = 0
        self.metrics_seen = threading.Event()
        """Set once three metrics requests have failed (``404``), or one is being held
        (``hang``)."""
        self.holding = 0
        """Metrics requests held now (``hang``)."""
        self.span_posts: list[tuple[float, bool]] = []
        """Each span batch passed on: when it came (``time.monotonic()``), and whether a
        metrics request was being held then."""
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    outer.span_posts.append((time.monotonic(), outer.holding > 0))
                    request = urllib.request.Request(
                        traces_url,
                        data=body,
                        headers={"Content-Type": self.headers["Content-Type"]},
                    )
                    with urllib.request.urlopen(request, timeout=60) as answer:
                        status, answered = answer.status, answer.read()
                    self._answer(status, answered)
                    return
                outer.metrics_requests += 1
                if outer.mode == "hang":
                    outer.holding += 1
                    outer.metrics_seen.set()
                    outer.release.wait(120)
                    self._answer(503, b"")
                    return
                self.send_response(404, f"Not Found (key {self.headers.get('x-api-key')})")
                self.send_header("Content-Length", "0")
                self.end_headers()
                if outer.metrics_requests >= REFUSED_BEFORE_FLUSH:
                    outer.metrics_seen.set()

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


SECRET = "metrics-token-4411-b7"
REFUSED_BEFORE_FLUSH = 3


@pytest.mark.parametrize("mode", ["404", "hang"])
def test_a_failing_metrics_endpoint_costs_the_spans_nothing(
    binary: Path, tmp_path: Path, mode: str
) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT on an endpoint whose /v1/traces is the real collector and
    whose /v1/metrics answers 404 or never answers: every span still lands exactly once; span
    export waits on nothing of the metrics' — a flush half-way, while metrics fail or a metrics
    request is held, exports the spans so far, and the spans still queued at shutdown go out
    at once, not after the metrics' bounded shutdown; and the warning says once (however many
    metrics exports fail, with span exports succeeding in between) what failed, why and what
    to set, never that spans failed, and without the header's secret."""
    store = tmp_path / "via-collector"
    ports = Ports.free()
    cli = _collector_cli(store, ports, binary)
    endpoint = _MetricsRefused(ports.traces_url, mode)
    try:
        environment = _app_environment(
            endpoint.base, **{env.OTEL_EXPORTER_OTLP_HEADERS: f"x-api-key={SECRET}"}
        )
        app = _run_app(tmp_path / "app", environment, "shutdown", go=endpoint.metrics_seen)
        if mode == "hang":
            assert endpoint.holding > 0  # a metrics request is still unanswered
    finally:
        endpoint.close()
        rest = _stop_cli(cli)
    assert f"spans went straight into {store}" in rest
    _every_span_landed_once(store, tmp_path / "app" / "otel-llm-store")
    # Half-way: the flush exported the spans so far (a held metrics request costs it nothing;
    # waiting on it would take the exporter's 10 s timeout or longer).
    assert app.marks["flushed"] == "True"
    assert app.at("flush_s") < 10.0
    before = [held for at, held in endpoint.span_posts if at < app.at("shutdown_at")]
    assert before, "the flush exported nothing"
    if mode == "hang":
        assert all(before)  # while a metrics request was held
    # At shutdown: the spans' last batch does not wait for the metrics' shutdown, which a
    # held or failing metrics export must not spend (spans after it come at least its bound
    # late; a bounded shutdown drops what it has not sent by then anyway).
    after = [at - app.at("shutdown_at") for at, _ in endpoint.span_posts]
    assert max(after) > 0, "nothing was left for the shutdown to export"
    assert max(after) < DEFAULTS.otlp_shutdown_timeout_s
    assert app.at("shutdown_s") < 10.0, app.marks
    err = app.err
    assert SECRET not in err
    assert "cannot export spans" not in err
    assert "Failed to export" not in err  # the exporter's own lines are held back
    warnings = [line for line in err.splitlines() if line.startswith("otel-llm:")]
    assert len(warnings) == 1, err
    [warning] = warnings
    assert f"{endpoint.base}/v1/metrics" in warning
    assert "spans are not affected" in warning
    assert (
        f"point {env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT} at a collector that takes metrics, "
        f"or set {env.OTEL_METRICS_EXPORTER}=none" in warning
    )
    if mode == "404":
        assert endpoint.metrics_requests >= REFUSED_BEFORE_FLUSH  # failed again and again
        assert "HTTP 404" in warning
        assert "it takes no metrics" in warning
        assert "[REDACTED]" in warning
    else:
        assert "did not answer" in warning or "cannot export metrics" in warning


def test_the_metrics_files_stay_bounded(binary: Path, tmp_path: Path) -> None:
    """duckdb.yaml's metrics files rotate and keep only the newest two rotated files — shown
    with the rotation size scaled down from 8 MB to 1 MB and ~9 MB of metrics sent: three files,
    none past the size, the oldest gone."""
    shipped = (collector_dir() / "duckdb.yaml").read_text()
    metrics_rotation = "format: json\n    rotation:\n      max_megabytes: 8\n      max_backups: 2"
    assert shipped.count(metrics_rotation) == 1
    config = tmp_path / "small-rotation.yaml"
    config.write_text(shipped.replace(metrics_rotation, metrics_rotation.replace(": 8", ": 1")))
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult

    reader = InMemoryMetricReader()
    histogram = MeterProvider(metric_readers=[reader]).get_meter("t").create_histogram("h")
    for n in range(1500):
        histogram.record(1.0, {"n": str(n), "pad": "x" * 100})
    data = reader.get_metrics_data()
    assert data is not None
    store = tmp_path / "store"
    ports = Ports.free()
    with CollectorRun(binary, config, store=store, ports=ports, log=subprocess.DEVNULL):
        exporter = OTLPMetricExporter(endpoint=f"http://127.0.0.1:{ports.http}/v1/metrics")
        for _ in range(40):  # ~230 KB of JSON each
            assert exporter.export(data) is MetricExportResult.SUCCESS
        exporter.shutdown()
    files = sorted((spool_path(store) / "metrics").iterdir())
    assert [path.name for path in files][-1] == "metrics.json"
    assert len(files) == 3, files
    assert all(path.stat().st_size <= 1 << 20 for path in files)
    assert sum(path.stat().st_size for path in files) < 3 << 20


@pytest.mark.parametrize("setting", ["none", "console"])
def test_the_demo_sends_spans_to_its_collector_whatever_traces_exporter_says(
    monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    """``OTEL_TRACES_EXPORTER=none`` in the user's environment would stop the demo's spans from
    reaching its own collector: while the demo sends, it names OTLP, and the user's value is
    back afterwards."""
    monkeypatch.setenv(env.OTEL_TRACES_EXPORTER, setting)
    with sending_to(Ports.free()):
        assert exported("spans")
    assert os.environ[env.OTEL_TRACES_EXPORTER] == setting


_BESIDE = _CALLS + textwrap.dedent(
    """
    from opentelemetry import trace

    telemetry = otel_llm.init(service_name="beside")  # the default store: ./otel-llm-store
    assert telemetry.exporter is None, "the embedded writer should have stayed off"
    calls = Calls(trace.get_tracer_provider())
    for _ in range({calls}):
        calls.call()
    assert telemetry.force_flush(60.0)
    telemetry.shutdown()
    """
)


def test_an_app_run_beside_the_collector_stores_each_span_once(
    binary: Path, tmp_path: Path
) -> None:
    """`otel-llm collector` and an application sending to it, run from one directory: both
    default to ./otel-llm-store. The application leaves the store to the collector (one
    warning says so), and every span is in it once."""
    store = tmp_path / "otel-llm-store"
    ports = Ports.free()
    cli = _collector_cli(store, ports, binary)
    try:
        with sending_to(ports):
            environment = dict(os.environ)
        app = subprocess.run(
            [sys.executable, "-c", _BESIDE.format(root=str(ROOT), calls=CALLS)],
            env=environment,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert app.returncode == 0, app.stderr
        assert app.stderr.count("the otel-llm collector that writes") == 1, app.stderr
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(timeout=60) == 0
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        if cli.stderr is not None:
            cli.stderr.close()
    assert _table(store, "SELECT count(*), count(DISTINCT SpanId) FROM otel_traces") == [
        (CALLS * 3, CALLS * 3)
    ]


_TO_THE_GRPC_PORT = _CALLS + textwrap.dedent(
    """
    from opentelemetry import trace

    telemetry = otel_llm.init(service_name="beside")  # the default store: ./otel-llm-store
    assert telemetry.exporter is not None, "the embedded writer should have stayed on"
    calls = Calls(trace.get_tracer_provider())
    for _ in range({calls}):
        calls.call()
    telemetry.shutdown()
    """
)


def test_an_app_sending_otlp_http_to_the_grpc_port_keeps_its_store(
    binary: Path, tmp_path: Path
) -> None:
    """An application whose OTLP/HTTP exporter names the collector's gRPC port (the port most
    guides name) reaches no collector: each export fails. It keeps its embedded store on — it
    was told the collector stored its spans, and every span was lost — and every span is in
    the store once."""
    store = tmp_path / "otel-llm-store"
    ports = Ports.free()
    cli = _collector_cli(store, ports, binary)
    try:
        with sending_to(ports):
            environment = dict(os.environ)
        environment[env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT] = (
            f"http://127.0.0.1:{ports.grpc}/v1/traces"
        )
        app = subprocess.run(
            [sys.executable, "-c", _TO_THE_GRPC_PORT.format(root=str(ROOT), calls=CALLS)],
            env=environment,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert app.returncode == 0, app.stderr
        assert "the otel-llm collector that writes" not in app.stderr
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(timeout=60) == 0
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        if cli.stderr is not None:
            cli.stderr.close()
    assert _table(store, "SELECT count(*), count(DISTINCT SpanId) FROM otel_traces") == [
        (CALLS * 3, CALLS * 3)
    ]
