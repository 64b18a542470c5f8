"""``otel_llm.init()``: DuckDB by default, OTLP from the standard variables, existing providers."""

from __future__ import annotations

import json
import logging
import os
import socket
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from otel_llm import Client, ConfigurationError, Source, Telemetry, init
from otel_llm import _semconv as sc
from otel_llm._otlp_endpoint import OtlpEndpoint
from otel_llm._show._sql._schema import migrate
from otel_llm._show._store._access import connect, open_store
from otel_llm.simulator import SimulatedProvider
from tests.support import REPOSITORY
from tests.support.processes import run_cli, run_python

ROOT = REPOSITORY
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider(default="smooth", time_scale=0.01) as running:
        yield running


def sources(provider: SimulatedProvider) -> list[Source]:
    return [Source(name="sim-1", provider="sim", base_url=provider.base_url, model="smooth")]


class Receiver:
    """A real OTLP/HTTP endpoint on loopback that keeps what it receives: trace requests parsed,
    every request's path counted. ``status`` is what it answers (``metrics_status`` on
    ``/v1/metrics``); with ``hold`` set it never answers until ``release`` is set (a collector
    that accepts and then hangs). ``keep_alive``: HTTP/1.1, connections kept open between
    requests, as a collector keeps them; ``connection_of`` names each span's connection (its
    client port)."""

    def __init__(self, *, keep_alive: bool = False) -> None:
        received: list[ExportTraceServiceRequest] = []
        self.received = received
        self.connection_of: dict[str, int] = {}
        self.paths: list[str] = []
        self.metric_requests: list[ExportMetricsServiceRequest] = []
        self.signed: list[tuple[str, str | None]] = []
        """Each request's path and its ``X-Signed`` header (what a credential provider's
        session adds)."""
        self.arrived = threading.Event()
        self.status = 200
        self.metrics_status = 200
        self.metrics_refused = threading.Semaphore(0)
        """Released once for each metrics request answered with an error."""
        self.hold = False
        self.hold_first = False
        """Hold only the first spans request (until ``release``); answer the rest at once."""
        self.release = threading.Event()
        self._first = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if outer.hold or (
                    outer.hold_first
                    and self.path == "/v1/traces"
                    and outer._first.acquire(blocking=False)
                ):
                    outer.release.wait(30)
                outer.paths.append(self.path)
                outer.signed.append((self.path, self.headers.get("X-Signed")))
                status = outer.metrics_status if self.path == "/v1/metrics" else outer.status
                if self.path == "/v1/metrics" and status == 200:
                    taken = ExportMetricsServiceRequest()
                    taken.ParseFromString(body)
                    outer.metric_requests.append(taken)
                if self.path == "/v1/traces" and status == 200:
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    received.append(request)
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            for span in scope.spans:
                                outer.connection_of[span.name] = self.client_address[1]
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()
                if status == 200:
                    outer.arrived.set()
                elif self.path == "/v1/metrics":
                    outer.metrics_refused.release()

            def log_message(self, *args: object) -> None:
                pass

        outer = self
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def endpoint(self) -> str:
        return f"{self.base}/v1/traces"

    def spans(self) -> list[dict[str, object]]:
        out = []
        for request in self.received:
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attrs = {a.key: a.value for a in span.attributes}
                        out.append({"name": span.name, "attributes": attrs})
        return out

    def duration_counts(self) -> list[int]:
        """Each metrics request's count of ``gen_ai.client.operation.duration`` points (the
        calls it counts), for the requests that carry it."""
        counts = []
        for request in self.metric_requests:
            found = [
                sum(point.count for point in metric.histogram.data_points)
                for resource in request.resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
                if metric.name == "gen_ai.client.operation.duration"
            ]
            counts.extend(found)
        return counts

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


async def test_default_writes_duckdb(tmp_path: Path, provider: SimulatedProvider) -> None:
    """init() on its own provider writes the call and attempt spans with figures to DuckDB."""
    telemetry = init(db_path=tmp_path / "t.duckdb", set_global=False, otlp=False)
    async with Client(sources(provider), tracer_provider=telemetry.tracer_provider) as client:
        result = await client.chat(MESSAGES)
    telemetry.shutdown()
    with open_store(Path(str(tmp_path / "t.duckdb"))) as conn:
        rows = conn.execute("SELECT attempts, stall_count, chunk_count FROM llm_calls").fetchall()
    assert rows == [(1, result.stats.stall_count, result.stats.chunk_count)]


async def test_db_path_from_environment(
    tmp_path: Path, provider: SimulatedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTEL_LLM_DB names the file when no path is given; OTEL_SERVICE_NAME names the service."""
    monkeypatch.setenv("OTEL_LLM_DB", str(tmp_path / "env.duckdb"))
    monkeypatch.setenv("OTEL_SERVICE_NAME", "checkout-bot")
    telemetry = init(set_global=False, otlp=False)
    assert telemetry.db_path == tmp_path / "env.duckdb"
    async with Client(sources(provider), tracer_provider=telemetry.tracer_provider) as client:
        await client.chat(MESSAGES)
    telemetry.shutdown()
    with open_store(Path(str(tmp_path / "env.duckdb"))) as conn:
        services = conn.execute("SELECT DISTINCT service FROM llm_calls").fetchall()
    assert services == [("checkout-bot",)]


async def test_sdk_disabled_records_nothing_and_calls_work(
    tmp_path: Path, provider: SimulatedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTEL_SDK_DISABLED=true: no file, no spans, and the LLM call still works."""
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    telemetry = init(db_path=tmp_path / "off.duckdb", set_global=False)
    assert telemetry.enabled is False
    async with Client(sources(provider), tracer_provider=telemetry.tracer_provider) as client:
        result = await client.chat(MESSAGES)
    telemetry.shutdown()
    assert result.text
    assert result.stats.chunk_count
    assert not (tmp_path / "off.duckdb").exists()


async def test_otlp_exported_when_variables_set(
    tmp_path: Path,
    provider: SimulatedProvider,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, enriched spans also go out over OTLP."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint)
    telemetry = init(db_path=tmp_path / "both.duckdb", set_global=False)
    async with Client(sources(provider), tracer_provider=telemetry.tracer_provider) as client:
        await client.chat(MESSAGES)
    # flushed first: shutdown gives an answering collector only a bounded wait, which a loaded
    # machine can exceed (that bound has tests of its own)
    assert telemetry.tracer_provider.force_flush(30_000)
    telemetry.shutdown()
    assert receiver.arrived.is_set()
    exported = receiver.spans()
    roles = sorted(str(s["attributes"][sc.SPAN_ROLE].string_value) for s in exported)  # type: ignore[index]
    assert roles == ["attempt", "call"]
    attempt = next(s for s in exported if "attempt" in str(s["attributes"][sc.SPAN_ROLE]))  # type: ignore[index]
    assert sc.STALL_MS in attempt["attributes"]  # type: ignore[operator]
    with open_store(Path(str(tmp_path / "both.duckdb"))) as conn:
        assert conn.execute("SELECT count(*) FROM otel_traces").fetchone() == (2,)


async def test_unreachable_collector_never_breaks_the_call(
    tmp_path: Path, provider: SimulatedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OTLP endpoint nobody listens on costs the app nothing but a logged export failure."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    telemetry = init(db_path=tmp_path / "x.duckdb", set_global=False)
    async with Client(sources(provider), tracer_provider=telemetry.tracer_provider) as client:
        result = await client.chat(MESSAGES)
    telemetry.shutdown()
    assert result.text
    with open_store(Path(str(tmp_path / "x.duckdb"))) as conn:
        assert conn.execute("SELECT count(*) FROM otel_traces").fetchone() == (2,)


async def test_existing_provider_is_extended_not_replaced(
    tmp_path: Path, provider: SimulatedProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """An application's own provider gets otel-llm's processor added; its own processors stay,
    and a warning says when its event limit is too low for chunk events."""
    theirs = InMemorySpanExporter()
    app_provider = TracerProvider(span_limits=SpanLimits(max_events=32))
    app_provider.add_span_processor(SimpleSpanProcessor(theirs))
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        telemetry = init(db_path=tmp_path / "x.duckdb", tracer_provider=app_provider, otlp=False)
    assert "keeps only 32 events per span" in caplog.text
    assert telemetry.tracer_provider is app_provider
    async with Client(sources(provider), tracer_provider=app_provider) as client:
        await client.chat(MESSAGES)
    telemetry.shutdown()
    assert len(theirs.get_finished_spans()) == 2, "the application's processor still gets spans"
    with open_store(Path(str(tmp_path / "x.duckdb"))) as conn:
        assert conn.execute("SELECT count(*) FROM llm_attempts").fetchone() == (1,)
    app_provider.shutdown()


def test_force_flush_writes_the_store(tmp_path: Path) -> None:
    """`Telemetry.force_flush()` returns once every finished span is in the DuckDB file (the
    SDK's SimpleSpanProcessor alone returns at once, with the writer's queue still full)."""
    telemetry = init(db_path=tmp_path / "flush.duckdb", set_global=False, otlp=False)
    try:
        tracer = telemetry.tracer_provider.get_tracer("tests")
        for number in range(3000):
            tracer.start_span(f"span {number}").end()
        assert telemetry.force_flush(120)
        assert telemetry.exporter is not None
        assert telemetry.exporter.stats.pending == 0
        with open_store(Path(str(tmp_path / "flush.duckdb"))) as conn:
            assert conn.execute("SELECT count(*) FROM otel_traces").fetchone() == (3000,)
    finally:
        telemetry.shutdown()


def test_threshold_is_validated() -> None:
    """init() rejects a stall threshold that is not a positive integer."""
    with pytest.raises(ValueError, match="positive integer"):
        init(stall_threshold_ms=0, set_global=False)


def test_global_default_in_a_fresh_process(tmp_path: Path) -> None:
    """In a fresh process, init() with no arguments installs the global provider and writes
    ./otel-llm-store; a client without an explicit provider uses it."""
    script = textwrap.dedent(
        """
        import asyncio
        import otel_llm
        from otel_llm.simulator import SimulatedProvider

        async def main():
            telemetry = otel_llm.init()
            async with SimulatedProvider(default="smooth", time_scale=0.01) as sim:
                source = otel_llm.Source(
                    name="s", provider="sim", base_url=sim.base_url, model="smooth"
                )
                async with otel_llm.Client([source]) as client:
                    await client.chat([{"role": "user", "content": "x"}])
            telemetry.shutdown()

        asyncio.run(main())
        """
    )
    out = run_python(script, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    with open_store(Path(str(tmp_path / "otel-llm-store"))) as conn:
        assert conn.execute("SELECT count(*) FROM llm_calls").fetchone() == (1,)


def test_an_earlier_default_store_is_kept_in_use(tmp_path: Path) -> None:
    """Where an earlier version left its default single-file store ./otel-llm.duckdb (and no
    ./otel-llm-store exists), init() with no arguments keeps using it — migrated in place —
    and `otel-llm query` without --db reads it: no earlier span is left behind."""
    legacy = tmp_path / "otel-llm.duckdb"
    with connect(legacy) as conn:
        migrate(conn)
        conn.execute(
            'INSERT INTO otel_traces ("Timestamp", "TraceId", "SpanId", "LlmRole") '
            "VALUES (make_timestamp_ns(1), 'a', 'b', 'call')"
        )
    script = textwrap.dedent(
        """
        import otel_llm
        telemetry = otel_llm.init()
        tracer = telemetry.tracer_provider.get_tracer("t")
        tracer.start_span("after").end()
        telemetry.shutdown()
        """
    )
    out = run_python(script, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert legacy.is_dir()
    assert not (tmp_path / "otel-llm-store").exists()
    with open_store(legacy) as conn:
        assert conn.execute("SELECT count(*) FROM otel_traces").fetchone() == (2,)
    query = run_cli("query", "SELECT count(*) AS n FROM otel_traces", cwd=tmp_path)
    assert query.returncode == 0, query.stderr
    assert "2" in query.stdout


async def test_init_twice_wires_once(
    tmp_path: Path, provider: SimulatedProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """A second init() returns the same handle instead of writing every span twice."""
    first = init(db_path=tmp_path / "once.duckdb", set_global=False, otlp=False)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        second = init(db_path=tmp_path / "other.duckdb", set_global=False, otlp=False)
    assert second is first
    assert "already called" in caplog.text
    async with Client(sources(provider), tracer_provider=first.tracer_provider) as client:
        await client.chat(MESSAGES)
    first.shutdown()
    with open_store(Path(str(tmp_path / "once.duckdb"))) as conn:
        assert conn.execute("SELECT count(*) FROM otel_traces").fetchone() == (2,)
    assert not (tmp_path / "other.duckdb").exists()
    third = init(db_path=tmp_path / "again.duckdb", set_global=False, otlp=False)
    assert third is not first
    third.shutdown()


def test_init_from_threads_at_once_wires_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """init() called by several threads at once (an application initialising lazily on its
    first requests) wires once: every thread gets the one handle, one store writer."""
    threads_count = 8
    barrier = threading.Barrier(threads_count)
    handles: list[Telemetry] = []

    def start() -> None:
        barrier.wait(timeout=30)
        handles.append(init(db_path=tmp_path / "store", set_global=False, otlp=False))

    threads = [threading.Thread(target=start) for _ in range(threads_count)]
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    distinct = {id(handle): handle for handle in handles}
    for handle in distinct.values():
        handle.shutdown()
    assert len(handles) == threads_count
    assert len(distinct) == 1
    assert caplog.text.count("already called") == threads_count - 1


@pytest.mark.parametrize(
    ("given", "key"),
    [
        ({"duckdb": "no"}, "duckdb"),
        ({"otlp": "false"}, "otlp"),
        ({"set_global": 0}, "set_global"),
        ({"db_path": 123}, "db_path"),
        ({"service_name": 123}, "service_name"),
    ],
)
def test_an_init_argument_of_the_wrong_type_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: dict[str, object], key: str
) -> None:
    """An init() argument of the wrong type — "no" for duckdb, which Python reads as true, so
    the store was written; an int for db_path (Python's own TypeError) or service_name (taken
    silently) — is a ConfigurationError naming it and the type given, before anything is set
    up."""
    monkeypatch.chdir(tmp_path)
    taken: list[Telemetry] = []
    try:
        with pytest.raises(ConfigurationError) as refused:
            taken.append(init(**{"set_global": False, "otlp": False, **given}))  # type: ignore[arg-type]
    finally:
        for telemetry in taken:  # the test failed: no handle stays active for the next ones
            telemetry.shutdown()
    assert refused.value.key == key
    assert type(next(iter(given.values()))).__name__ in refused.value.reason
    assert list(tmp_path.iterdir()) == []


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


OTLP_EXIT_SCRIPT = """
import asyncio, atexit, sys, time
marks = {}
# Registered first, so it runs last: after init()'s and the SDK's own exit handlers.
atexit.register(lambda: print(f"exit_s={time.monotonic() - marks['end']:.3f}", file=sys.stderr))
import otel_llm
from otel_llm.testing import Scripted, sse_answer

telemetry = otel_llm.init(db_path=sys.argv[1])

async def main():
    script = Scripted({"a": [sse_answer()]})
    source = otel_llm.Source(name="a", provider="openai", base_url="http://a.test/v1", model="m")
    async with otel_llm.Client([source], http_client=script.client()) as client:
        await client.chat([{"role": "user", "content": "hi"}], stream=True)

asyncio.run(main())
marks["end"] = time.monotonic()
if sys.argv[2] == "shutdown":
    telemetry.shutdown()
"""


@pytest.mark.parametrize("ending", ["exit", "shutdown"])
def test_collector_that_is_not_there_costs_one_warning_and_no_wait(
    tmp_path: Path, ending: str
) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT on a closed port: the process prints one warning a signal
    (endpoint and cause), not a line per batch and retry, and exits at once — whether it calls
    shutdown() or just ends (it used to take 13 s and print 8 lines); DuckDB still gets every
    span."""
    port = closed_port()
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}
    env.pop("OTEL_SDK_DISABLED", None)
    db = tmp_path / "t.duckdb"
    out = run_python(OTLP_EXIT_SCRIPT, str(db), ending, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    *lines, last = out.stderr.strip().splitlines()
    assert len(lines) == 2, out.stderr
    for signal, path in (("spans", "/v1/traces"), ("metrics", "/v1/metrics")):
        [line] = [line for line in lines if f"cannot export {signal} " in line]
        assert f"127.0.0.1:{port}{path} ([Errno 111] Connection refused)" in line
    exit_s = float(last.removeprefix("exit_s="))
    assert exit_s < 6.0, f"exit took {exit_s} s (expected well under a second)"
    with open_store(Path(str(db))) as conn:
        assert conn.execute("SELECT count(*) FROM otel_traces").fetchone() == (2,)


async def test_collector_that_is_up_gets_spans_and_metrics_quietly(
    tmp_path: Path,
    provider: SimulatedProvider,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With OTEL_EXPORTER_OTLP_ENDPOINT on a collector that answers, spans go to /v1/traces
    and metrics to /v1/metrics, and nothing is logged."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base)
    with caplog.at_level(logging.INFO):
        telemetry = init(db_path=tmp_path / "up.duckdb", set_global=False)
        async with Client(
            sources(provider),
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
        ) as client:
            await client.chat(MESSAGES)
        telemetry.shutdown()
    assert sorted(set(receiver.paths)) == ["/v1/metrics", "/v1/traces"]
    assert len(receiver.spans()) == 2
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def finished_span(tracer_provider: TracerProvider) -> list[ReadableSpan]:
    """A batch of one ended span."""
    span = tracer_provider.get_tracer("test").start_span("x")
    span.end()
    assert isinstance(span, ReadableSpan)
    return [span]


def test_one_warning_per_outage_and_a_line_when_it_ends(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    """A collector refusing batches (400) is one warning with its reason however many batches
    fail; the first success after it says so; a new outage warns again. The exporter's own
    lines never reach the log."""
    collector = OtlpEndpoint(receiver.endpoint, signal="spans")
    exporter = collector.span_exporter(OTLPSpanExporter(endpoint=receiver.endpoint))
    tracer_provider = TracerProvider()
    with caplog.at_level(logging.INFO):
        receiver.status = 400
        assert exporter.export(finished_span(tracer_provider)) is SpanExportResult.FAILURE
        assert exporter.export(finished_span(tracer_provider)) is SpanExportResult.FAILURE
        receiver.status = 200
        assert exporter.export(finished_span(tracer_provider)) is SpanExportResult.SUCCESS
        receiver.status = 400
        assert exporter.export(finished_span(tracer_provider)) is SpanExportResult.FAILURE
    exporter.shutdown()
    tracer_provider.shutdown()
    assert {r.name for r in caplog.records} == {"otel_llm"}, "the exporter's lines are held back"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert all("HTTP 400" in w and receiver.endpoint in w for w in warnings)
    assert any("works again" in r.getMessage() for r in caplog.records)
    assert collector.failed_exports == 3
    assert exporter.export(finished_span(tracer_provider)) is SpanExportResult.FAILURE


def test_a_string_utf8_cannot_encode_costs_the_otlp_batch_nothing(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    """The OTLP exporter encodes a batch whole, and one lone surrogate (``json.loads`` makes
    them) in a span's name failed it all, told as an outage of the collector. The batch goes out
    with U+FFFD in the surrogate's place (a pair as its character), every span and attribute of
    it, and no outage is warned of."""
    collector = OtlpEndpoint(receiver.endpoint, signal="spans")
    exporter = collector.span_exporter(OTLPSpanExporter(endpoint=receiver.endpoint))
    tracer_provider = TracerProvider()
    lone = json.loads('"\\ud800"')
    tracer = tracer_provider.get_tracer("test")
    bad = tracer.start_span("chat " + lone, attributes={"k" + lone: ["v" + lone, "ok"]})
    bad.add_event("e" + lone, {"pair": "\ud83d\ude00"})
    bad.set_status(Status(StatusCode.ERROR, "boom" + lone))
    bad.end()
    good = tracer.start_span("innocent")
    good.end()
    batch = [bad, good]
    assert all(isinstance(span, ReadableSpan) for span in batch)
    with caplog.at_level(logging.INFO):
        result = exporter.export(batch)  # type: ignore[arg-type]
    exporter.shutdown()
    tracer_provider.shutdown()
    assert result is SpanExportResult.SUCCESS
    assert not [r for r in caplog.records if r.name == "otel_llm" and r.levelno >= logging.WARNING]
    assert collector.failed_exports == 0
    (request,) = receiver.received
    (sent_bad, sent_good) = request.resource_spans[0].scope_spans[0].spans
    assert sent_bad.name == "chat \ufffd"
    assert sent_good.name == "innocent"
    (attribute,) = sent_bad.attributes
    assert attribute.key == "k\ufffd"
    assert [v.string_value for v in attribute.value.array_value.values] == ["v\ufffd", "ok"]
    assert sent_bad.events[0].name == "e\ufffd"
    assert sent_bad.events[0].attributes[0].value.string_value == "\U0001f600"
    assert sent_bad.status.message == "boom\ufffd"


def test_a_batch_is_repaired_with_pure_python_protobuf_too(
    receiver: Receiver, tmp_path: Path
) -> None:
    """Where protobuf is pure Python, its encoder raises a ValueError holding the string itself
    (a span's name: perhaps a prompt's words) out of the exporter: the batch is repaired and
    sent all the same, and no warning repeats the string."""
    script = textwrap.dedent(
        f"""
        import json, logging, sys
        sys.path.insert(0, {str(REPOSITORY)!r})
        logging.basicConfig(level=logging.INFO)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from otel_llm._otlp_endpoint import OtlpEndpoint
        collector = OtlpEndpoint({receiver.endpoint!r}, signal="spans")
        exporter = collector.span_exporter(OTLPSpanExporter(endpoint={receiver.endpoint!r}))
        span = TracerProvider().get_tracer("t").start_span("secret words " + chr(0xD800))
        span.end()
        print(exporter.export([span]).name)
        """
    )
    environment = {**os.environ, "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"}
    out = run_python(script, cwd=tmp_path, env=environment)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "SUCCESS", out.stderr
    assert [span["name"] for span in receiver.spans()] == ["secret words \ufffd"]
    assert "secret" not in out.stderr


def _shuts_down_within_the_bound(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture, store: Path
) -> None:
    """``shutdown()`` beside a collector that never answers ends within its bound (2 s, with
    room for a busy machine), says the lost export once, and the store has the call's two
    spans."""
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        telemetry.shutdown()
    took = time.monotonic() - started
    assert took < 8.0, f"shutdown took {took} s"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "gave up waiting for the OTLP collector" in warnings[0]
    with open_store(store) as conn:
        assert conn.execute("SELECT count(*) FROM otel_traces").fetchone() == (2,)


async def test_shutdown_is_bounded_when_the_collector_hangs(
    tmp_path: Path,
    provider: SimulatedProvider,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A collector that accepts the connection and never answers holds shutdown() for the
    bound (2 s), not the exporter's 10 s timeout and the SDK's 30 s wait, and the lost export
    is said once."""
    receiver.hold = True
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint)
    telemetry = init(db_path=tmp_path / "hang.duckdb", set_global=False)
    async with Client(sources(provider), tracer_provider=telemetry.tracer_provider) as client:
        await client.chat(MESSAGES)
    _shuts_down_within_the_bound(telemetry, caplog, tmp_path / "hang.duckdb")


async def test_shutdown_beside_the_applications_provider_is_bounded_when_the_collector_hangs(
    tmp_path: Path,
    provider: SimulatedProvider,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """init() added to the application's own TracerProvider: a collector that never answers
    holds shutdown() for the bound (2 s) too — not the exporter's timeout (20 s here), which
    an unbounded flush before the bounded shutdown used to wait for — and the store still gets
    every span."""
    receiver.hold = True
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "20")
    application_provider = TracerProvider()
    telemetry = init(db_path=tmp_path / "store", tracer_provider=application_provider)
    assert not telemetry.owns_provider
    async with Client(sources(provider), tracer_provider=application_provider) as client:
        await client.chat(MESSAGES)
    _shuts_down_within_the_bound(telemetry, caplog, tmp_path / "store")


async def test_a_metrics_endpoint_that_is_down_does_not_cost_the_spans(
    tmp_path: Path,
    provider: SimulatedProvider,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Traces and metrics on different endpoints are judged apart: metrics on a closed port
    warn once naming that endpoint, and the spans still reach the traces collector."""
    down = f"http://127.0.0.1:{closed_port()}/v1/metrics"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", down)
    with caplog.at_level(logging.WARNING):
        telemetry = init(db_path=tmp_path / "split.duckdb", set_global=False)
        assert len(telemetry.collectors) == 2
        async with Client(
            sources(provider),
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
        ) as client:
            await client.chat(MESSAGES)
        telemetry.shutdown()
    assert len(receiver.spans()) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "metrics" in warnings[0]
    assert down in warnings[0]


async def test_metrics_refused_by_the_spans_endpoint_cost_no_span(
    tmp_path: Path,
    provider: SimulatedProvider,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT on a collector that takes spans and answers 404 for
    metrics (a config without a metrics pipeline): the spans still queued at shutdown are all
    exported, and the one warning is about metrics, says what a 404 means and what to set.
    Both signals once shared one state per endpoint: the metrics' failure at shutdown stopped
    the span exporter too, and every span export that succeeded ended the "outage"."""
    receiver.metrics_status = 404
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base)
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "100")
    with caplog.at_level(logging.INFO):
        telemetry = init(db_path=tmp_path / "shared.duckdb", set_global=False)
        async with Client(
            sources(provider),
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
        ) as client:
            for _ in range(3):
                await client.chat(MESSAGES)
            for _ in range(3):  # refused again and again (the spans wait in their 5 s batch)
                assert receiver.metrics_refused.acquire(timeout=30)
        assert receiver.spans() == []
        telemetry.shutdown()
    assert len(receiver.spans()) == 6
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    [warning] = warnings
    assert warning.startswith(
        f"otel-llm: cannot export metrics to the OTLP collector at "
        f"{receiver.base}/v1/metrics (HTTP 404 Not Found: it takes no "
        "metrics"
    )
    assert "spans are not affected" in warning
    assert "OTEL_METRICS_EXPORTER=none" in warning
    assert not any("works again" in r.getMessage() for r in caplog.records)


async def test_metrics_exporter_none_sends_no_metrics(
    tmp_path: Path,
    provider: SimulatedProvider,
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OTEL_METRICS_EXPORTER=none beside OTEL_EXPORTER_OTLP_ENDPOINT: spans only."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.base)
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    telemetry = init(db_path=tmp_path / "spans-only.duckdb", set_global=False)
    assert telemetry.meter_provider is None
    assert [collector.signal for collector in telemetry.collectors] == ["spans"]
    async with Client(sources(provider), tracer_provider=telemetry.tracer_provider) as client:
        await client.chat(MESSAGES)
    telemetry.shutdown()
    assert set(receiver.paths) == {"/v1/traces"}
    assert len(receiver.spans()) == 2
