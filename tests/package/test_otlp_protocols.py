"""``init()``'s OTLP export by protocol and by signal: each signal's protocol from its own
variable, metrics over gRPC beside the spans, ``OTEL_TRACES_EXPORTER=none`` — against real
receivers on loopback (a gRPC server of the OTLP services, an OTLP/HTTP one)."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc
import pytest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from otel_llm import Client, ConfigurationError, Source, Telemetry, init
from otel_llm._show._store._access import open_store
from otel_llm.simulator import SimulatedProvider

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider(default="smooth", time_scale=0.01) as running:
        yield running


def sources(provider: SimulatedProvider) -> list[Source]:
    return [Source(name="sim-1", provider="sim", base_url=provider.base_url, model="smooth")]


class GrpcReceiver:
    """An OTLP/gRPC receiver on 127.0.0.1 (the collector's trace and metrics services) that
    keeps what it is sent: the spans' names and the metrics' names."""

    def __init__(self) -> None:
        self.span_names: list[str] = []
        self.metric_names: list[str] = []
        outer = self

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(
                self, request: trace_service_pb2.ExportTraceServiceRequest, context: object
            ) -> trace_service_pb2.ExportTraceServiceResponse:
                outer.span_names.extend(
                    span.name
                    for resource in request.resource_spans
                    for scope in resource.scope_spans
                    for span in scope.spans
                )
                return trace_service_pb2.ExportTraceServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(
                self, request: metrics_service_pb2.ExportMetricsServiceRequest, context: object
            ) -> metrics_service_pb2.ExportMetricsServiceResponse:
                outer.metric_names.extend(
                    metric.name
                    for resource in request.resource_metrics
                    for scope in resource.scope_metrics
                    for metric in scope.metrics
                )
                return metrics_service_pb2.ExportMetricsServiceResponse()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self.server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def grpc_receiver() -> Iterator[GrpcReceiver]:
    receiver = GrpcReceiver()
    yield receiver
    receiver.server.stop(grace=None).wait(5)


class HttpReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1 that answers 200 and keeps the paths posted to."""

    def __init__(self) -> None:
        paths: list[str] = []
        self.paths = paths

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def http_receiver() -> Iterator[HttpReceiver]:
    receiver = HttpReceiver()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


async def one_call(provider: SimulatedProvider, db: Path) -> Telemetry:
    """init(), one client call, shutdown; the handle, to read what was exported how."""
    telemetry = init(db_path=db, set_global=False)
    try:
        async with Client(
            sources(provider),
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
        ) as client:
            await client.chat(MESSAGES)
    finally:
        telemetry.shutdown()
    return telemetry


def protocols(telemetry: Telemetry) -> dict[str, str]:
    """The protocol each signal was exported with."""
    return {collector.signal: collector.protocol for collector in telemetry.collectors}


async def test_grpc_sends_metrics_over_grpc_beside_the_spans(
    tmp_path: Path,
    provider: SimulatedProvider,
    grpc_receiver: GrpcReceiver,
    otlp_env: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """OTEL_EXPORTER_OTLP_PROTOCOL=grpc with the base endpoint: a gRPC receiver gets the spans
    and the metrics, and nothing is logged (metrics once went over HTTP to the gRPC port)."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", grpc_receiver.endpoint)
    with caplog.at_level(logging.INFO):
        telemetry = await one_call(provider, tmp_path / "store")
    assert len(grpc_receiver.span_names) == 2
    assert "gen_ai.client.operation.duration" in grpc_receiver.metric_names
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert protocols(telemetry) == {"spans": "grpc", "metrics": "grpc"}


async def test_each_signal_takes_its_own_protocol(
    tmp_path: Path,
    provider: SimulatedProvider,
    grpc_receiver: GrpcReceiver,
    http_receiver: HttpReceiver,
    otlp_env: pytest.MonkeyPatch,
) -> None:
    """OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=grpc beside OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf:
    metrics over gRPC to their endpoint, spans over HTTP to theirs."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", grpc_receiver.endpoint)
    otlp_env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{http_receiver.base}/v1/traces")
    telemetry = await one_call(provider, tmp_path / "store")
    assert set(http_receiver.paths) == {"/v1/traces"}
    assert grpc_receiver.span_names == []
    assert "gen_ai.client.operation.duration" in grpc_receiver.metric_names
    assert protocols(telemetry) == {"spans": "http/protobuf", "metrics": "grpc"}


@pytest.mark.parametrize(
    ("variables", "spans", "metrics"),
    [
        ({}, "http/protobuf", "http/protobuf"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "grpc", "grpc"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": " GRPC "}, "grpc", "grpc"),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "grpc", "http/protobuf"),
        ({"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"}, "http/protobuf", "grpc"),
        (
            {
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
            },
            "grpc",
            "http/protobuf",
        ),
        # the SDK's exporter names of one protocol: that protocol, whatever the variables say
        ({"OTEL_TRACES_EXPORTER": "otlp_proto_grpc"}, "grpc", "http/protobuf"),
        (
            {
                "OTEL_TRACES_EXPORTER": "otlp_proto_http",
                "OTEL_METRICS_EXPORTER": "OTLP_PROTO_GRPC",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            },
            "http/protobuf",
            "grpc",
        ),
        ({"OTEL_METRICS_EXPORTER": "otlp_proto_http,console"}, "http/protobuf", "http/protobuf"),
    ],
)
def test_a_signals_protocol_is_its_own_variable_else_the_shared_one(
    tmp_path: Path,
    otlp_env: pytest.MonkeyPatch,
    variables: dict[str, str],
    spans: str,
    metrics: str,
) -> None:
    """A signal's own protocol variable wins over OTEL_EXPORTER_OTLP_PROTOCOL; with neither,
    http/protobuf (OTLP's default). An exporter variable naming the SDK's exporter of one
    protocol (``otlp_proto_http``, ``otlp_proto_grpc``) chooses that protocol, as the SDK
    makes that exporter whatever the protocol variables say."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    for name, value in variables.items():
        otlp_env.setenv(name, value)
    telemetry = init(db_path=tmp_path / "store", set_global=False, duckdb=False)
    telemetry.shutdown()
    assert protocols(telemetry) == {"spans": spans, "metrics": metrics}


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grcp"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http"),
        ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "json"),
    ],
)
def test_a_value_that_is_no_otlp_protocol_is_refused_at_init(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    """A value that is no OTLP protocol: init() raises a ConfigurationError naming the variable,
    instead of sending with another protocol."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    otlp_env.setenv(variable, value)
    taken: list[Telemetry] = []
    try:
        with pytest.raises(ConfigurationError) as refused:
            taken.append(init(db_path=tmp_path / "store", set_global=False, duckdb=False))
    finally:
        for telemetry in taken:  # init() took it: the test failed, the handle is shut down
            telemetry.shutdown()
    assert refused.value.key == variable
    assert "http/protobuf or grpc" in str(refused.value)


@pytest.mark.parametrize(
    ("variables", "signals"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "spans and metrics"),
        ({"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "HTTP/JSON"}, "metrics"),
    ],
)
def test_http_json_goes_over_http_protobuf_with_one_warning(
    tmp_path: Path,
    otlp_env: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    variables: dict[str, str],
    signals: str,
) -> None:
    """http/json, which OTLP defines but the Python exporters do not speak: the signal goes over
    http/protobuf to the same endpoint (a collector takes both) and one warning names the
    variable and the signals — an application that set it still starts."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    for name, value in variables.items():
        otlp_env.setenv(name, value)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        telemetry = init(db_path=tmp_path / "store", set_global=False, duckdb=False)
    telemetry.shutdown()
    assert protocols(telemetry) == {"spans": "http/protobuf", "metrics": "http/protobuf"}
    (variable,) = variables
    warned = [r.getMessage() for r in caplog.records if "do not speak it" in r.getMessage()]
    assert len(warned) == 1, warned
    assert warned[0].startswith(f"otel-llm: {variable}=http/json but ")
    assert warned[0].endswith(f"; {signals} use http/protobuf")


async def test_grpc_not_installed_falls_back_to_http_for_both_signals(
    tmp_path: Path,
    provider: SimulatedProvider,
    http_receiver: HttpReceiver,
    otlp_env: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without the gRPC exporter, OTEL_EXPORTER_OTLP_PROTOCOL=grpc sends spans and metrics over
    http/protobuf, and one warning says so, naming the variable and both signals."""
    otlp_env.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc.metric_exporter", None)
    otlp_env.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.grpc.trace_exporter", None)
    otlp_env.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", http_receiver.base)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        telemetry = await one_call(provider, tmp_path / "store")
    assert set(http_receiver.paths) == {"/v1/traces", "/v1/metrics"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=grpc" in warnings[0]
    assert "spans and metrics use http/protobuf" in warnings[0]
    assert protocols(telemetry) == {"spans": "http/protobuf", "metrics": "http/protobuf"}


async def test_traces_exporter_none_sends_no_span_over_otlp(
    tmp_path: Path,
    provider: SimulatedProvider,
    http_receiver: HttpReceiver,
    otlp_env: pytest.MonkeyPatch,
) -> None:
    """OTEL_TRACES_EXPORTER=none beside OTEL_EXPORTER_OTLP_ENDPOINT: no span goes over OTLP,
    metrics still do, and the DuckDB store (no OTLP exporter) still gets every span."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", http_receiver.base)
    otlp_env.setenv("OTEL_TRACES_EXPORTER", "none")
    db = tmp_path / "store"
    telemetry = await one_call(provider, db)
    assert set(http_receiver.paths) == {"/v1/metrics"}
    assert [collector.signal for collector in telemetry.collectors] == ["metrics"]
    with open_store(db) as conn:
        assert conn.execute("SELECT count(*) FROM llm_calls").fetchone() == (1,)


def test_both_exporters_none_export_nothing_and_check_no_endpoint(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch
) -> None:
    """OTEL_TRACES_EXPORTER=none and OTEL_METRICS_EXPORTER=none: nothing is exported over OTLP,
    so an endpoint nothing reads is not judged."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318")
    otlp_env.setenv("OTEL_TRACES_EXPORTER", "None")
    otlp_env.setenv("OTEL_METRICS_EXPORTER", "none")
    telemetry = init(db_path=tmp_path / "store", set_global=False, duckdb=False)
    telemetry.shutdown()
    assert telemetry.collectors == ()
    assert telemetry.meter_provider is None


@pytest.mark.parametrize(
    ("traces", "metrics", "signals", "said"),
    [
        ("console", "prometheus", [], ["OTEL_TRACES_EXPORTER=console", "OTEL_METRICS_EXPORTER="]),
        ("otlp", "prometheus", ["spans"], ["OTEL_METRICS_EXPORTER=prometheus"]),
        ("zipkin", " OTLP ", ["metrics"], ["OTEL_TRACES_EXPORTER=zipkin"]),
        ("otlp,console", "otlp", ["spans", "metrics"], ["OTEL_TRACES_EXPORTER=otlp,console"]),
        ("otlp_proto_http", "otlp_proto_grpc", ["spans", "metrics"], []),  # the SDK's names
        ("otlp_proto_grpc,zipkin", "none", ["spans"], ["OTEL_TRACES_EXPORTER=otlp_proto_grpc"]),
        ("", " ", ["spans", "metrics"], []),
    ],
)
def test_an_exporter_list_without_otlp_sends_nothing_over_otlp(
    tmp_path: Path,
    otlp_env: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    traces: str,
    metrics: str,
    signals: list[str],
    said: list[str],
) -> None:
    """OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER name the exporters a signal goes to (``otlp``
    by default): ``prometheus`` asks for none over OTLP, yet the metrics went there — to a
    collector that may take none, whose 404 warning then said to set the variable to none. A
    signal is exported over OTLP only when its list is unset or names otlp; an exporter otel-llm
    does not make is one warning naming the variable."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    otlp_env.setenv("OTEL_TRACES_EXPORTER", traces)
    otlp_env.setenv("OTEL_METRICS_EXPORTER", metrics)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        telemetry = init(db_path=tmp_path / "store", set_global=False, duckdb=False)
    telemetry.shutdown()
    assert [collector.signal for collector in telemetry.collectors] == signals
    assert (telemetry.meter_provider is not None) == ("metrics" in signals)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    warnings = [w for w in warnings if "cannot export" not in w]
    assert len(warnings) == len(said), warnings
    for warning, variable in zip(warnings, said, strict=True):
        assert variable in warning
