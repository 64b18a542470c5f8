"""``otel_llm.init()``: DuckDB by default, OTLP from the standard variables, existing providers."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import duckdb
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_llm import Client, Source, init
from otel_llm import _semconv as sc
from otel_llm.simulator import SimulatedProvider

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider(default="smooth", time_scale=0.01) as running:
        yield running


def sources(provider: SimulatedProvider) -> list[Source]:
    return [Source(name="sim-1", provider="sim", base_url=provider.base_url, model="smooth")]


class Receiver:
    """A real OTLP/HTTP endpoint on loopback that keeps what it receives."""

    def __init__(self) -> None:
        received: list[ExportTraceServiceRequest] = []
        self.received = received
        self.arrived = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                received.append(request)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()
                self.wfile.write(b"")
                outer.arrived.set()

            def log_message(self, *args: object) -> None:
                pass

        outer = self
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def spans(self) -> list[dict[str, object]]:
        out = []
        for request in self.received:
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        attrs = {a.key: a.value for a in span.attributes}
                        out.append({"name": span.name, "attributes": attrs})
        return out

    def close(self) -> None:
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
    with duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True) as conn:
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
    with duckdb.connect(str(tmp_path / "env.duckdb"), read_only=True) as conn:
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
    telemetry.shutdown()
    assert receiver.arrived.is_set()
    exported = receiver.spans()
    roles = sorted(str(s["attributes"][sc.SPAN_ROLE].string_value) for s in exported)  # type: ignore[index]
    assert roles == ["attempt", "call"]
    attempt = next(s for s in exported if "attempt" in str(s["attributes"][sc.SPAN_ROLE]))  # type: ignore[index]
    assert sc.STALL_MS in attempt["attributes"]  # type: ignore[operator]
    with duckdb.connect(str(tmp_path / "both.duckdb"), read_only=True) as conn:
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
    with duckdb.connect(str(tmp_path / "x.duckdb"), read_only=True) as conn:
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
    with duckdb.connect(str(tmp_path / "x.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM llm_attempts").fetchone() == (1,)
    app_provider.shutdown()


def test_threshold_is_validated() -> None:
    """init() rejects a stall threshold that is not a positive integer."""
    with pytest.raises(ValueError, match="positive integer"):
        init(stall_threshold_ms=0, set_global=False)


def test_global_default_in_a_fresh_process(tmp_path: Path) -> None:
    """In a fresh process, init() with no arguments installs the global provider and writes
    ./otel-llm.duckdb; a client without an explicit provider uses it."""
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
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    with duckdb.connect(str(tmp_path / "otel-llm.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM llm_calls").fetchone() == (1,)


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
    with duckdb.connect(str(tmp_path / "once.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM otel_traces").fetchone() == (2,)
    assert not (tmp_path / "other.duckdb").exists()
    third = init(db_path=tmp_path / "again.duckdb", set_global=False, otlp=False)
    assert third is not first
    third.shutdown()
