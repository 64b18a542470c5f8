"""``otel_llm.init()`` beside what the application set up itself, and across its lifetime: a
provider that already exports OTLP, a global meter provider, a second ``init()`` after
``shutdown()``, a stream left open at exit, store paths judged at ``init()``. Each case runs in
a fresh process (the OpenTelemetry globals are set once per process), over real HTTP on loopback,
and reads back what arrived: a real OTLP/HTTP receiver's spans, the store's rows, the log."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from otel_llm import init
from otel_llm._errors import ConfigurationError
from otel_llm._show._ingest._claim import announce, claim, spool_path
from otel_llm._show._store._access import open_store
from tests.package.test_telemetry import Receiver
from tests.support.processes import run_python

_SIMULATED = """
import logging, os, sys
import openai
import otel_llm
from otel_llm.simulator import SimulatedProvider, ThreadedProvider

logging.basicConfig(level=logging.WARNING, format="LOG %(name)s %(message)s")
sim = ThreadedProvider(SimulatedProvider(default="smooth", time_scale=0.01))
client = openai.OpenAI(base_url=sim.provider.base_url, api_key="sim", max_retries=0)
MESSAGES = [{"role": "user", "content": "hi"}]

def call():
    for _ in client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True):
        pass
"""
"""Each script's start: a simulated provider on loopback, an openai client to it, logging."""


def _run(body: str, tmp_path: Path, **env: str) -> tuple[str, str]:
    script = _SIMULATED + textwrap.dedent(body)
    variables = {
        k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LLM__", "EMBEDDING__"))
    }
    out = run_python(script, cwd=tmp_path, env={**variables, **env})
    assert out.returncode == 0, out.stderr
    return out.stdout, out.stderr


def _rows(store: Path, sql: str) -> list[tuple[object, ...]]:
    with open_store(store) as conn:
        return conn.execute(sql).fetchall()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def test_a_provider_that_exports_otlp_is_not_given_a_second_exporter(
    tmp_path: Path, receiver: Receiver
) -> None:
    """The application's provider already exports OTLP to the endpoint the variables name:
    ``init()`` adds its processor (the store) but not a second OTLP exporter, so every span
    reaches the collector once — the application's own spans and the LLM call's alike."""
    _, log = _run(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        app = TracerProvider()
        app.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(app)
        telemetry = otel_llm.init(db_path="store")
        otel_llm.instrument_openai()
        with trace.get_tracer("app").start_as_current_span("app-request"):
            call()
        telemetry.shutdown()
        app.shutdown()
        """,
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base,
        OTEL_METRICS_EXPORTER="none",
    )
    names = sorted(span["name"] for span in receiver.spans())
    assert names == ["app-request", "chat smooth", "chat smooth"], log
    assert _rows(tmp_path / "store", "SELECT count(*) FROM llm_attempts") == [(1,)]


def test_otlp_true_adds_the_exporter_all_the_same(tmp_path: Path, receiver: Receiver) -> None:
    """``otlp=True`` asks for otel-llm's own exporter whatever the provider has: it is added
    (and the spans then arrive twice, as asked)."""
    _run(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        app = TracerProvider()
        app.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(app)
        telemetry = otel_llm.init(db_path="store", otlp=True)
        otel_llm.instrument_openai()
        call()
        telemetry.shutdown()
        app.shutdown()
        """,
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base,
        OTEL_METRICS_EXPORTER="none",
    )
    assert sorted(span["name"] for span in receiver.spans()) == ["chat smooth"] * 4


def test_the_applications_meter_provider_takes_the_metrics(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A global meter provider the application set: ``init()`` makes no second one (whose
    installation OpenTelemetry refuses with a warning) and otel-llm's metrics reach the
    application's reader."""
    out, log = _run(
        """
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        telemetry = otel_llm.init(db_path="store")
        otel_llm.instrument_openai()
        call()
        print("meter provider made:", telemetry.meter_provider is not None)
        data = reader.get_metrics_data()
        names = {
            m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
        }
        print("metrics:", sorted(n for n in names if n.startswith("gen_ai.")))
        telemetry.shutdown()
        """,
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base,
    )
    assert "meter provider made: False" in out
    assert "metrics: ['gen_ai.client.operation.duration'" in out, out
    assert "Overriding" not in log, log


def test_init_after_shutdown_records_again_without_a_warning_per_span(tmp_path: Path) -> None:
    """``shutdown()`` then ``init()``: the second store gets the spans, the first processor
    (still attached: the SDK cannot detach one) stays quiet, and a service name the kept
    provider cannot take is said once."""
    _, log = _run(
        """
        first = otel_llm.init(db_path="one", service_name="first")
        otel_llm.instrument_openai()
        call()
        first.shutdown()
        second = otel_llm.init(db_path="two", service_name="second")
        for _ in range(3):
            call()
        second.shutdown()
        """,
        tmp_path,
    )
    assert "already shutdown" not in log, log
    assert log.count("service.name=first, so spans are not recorded as second") == 1, log
    assert _rows(tmp_path / "one", "SELECT count(*) FROM llm_attempts") == [(1,)]
    assert _rows(tmp_path / "two", "SELECT count(*) FROM llm_attempts") == [(3,)]


def test_init_after_shutdown_exports_metrics_again(tmp_path: Path, receiver: Receiver) -> None:
    """``shutdown()`` then ``init()`` with OTLP metrics: the second session's metrics reach the
    collector too — from the wrapped calls instrumented in the first session and from a
    client made in the second. The second init() once took the first one's meter provider,
    global and shut down, for the application's, exported no metrics, and every instrument
    asked of it got OpenTelemetry's "A shutdown `MeterProvider` can not provide a `Meter`"."""
    out, log = _run(
        """
        import asyncio
        from otel_llm import Client, Source
        first = otel_llm.init(db_path="one")
        otel_llm.instrument_openai()
        call()
        first.shutdown()
        second = otel_llm.init(db_path="two")
        for _ in range(3):
            call()
        async def chat():
            source = Source(name="sim-1", provider="sim", base_url=sim.provider.base_url,
                            model="smooth")
            async with Client([source]) as llm:
                await llm.chat(MESSAGES)
        asyncio.run(chat())
        second.shutdown()
        print("same meter provider:", second.meter_provider is first.meter_provider)
        """,
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base,
    )
    assert "can not provide" not in log, log
    assert "same meter provider: True" in out, out
    assert receiver.duration_counts() == [1, 5], (receiver.paths, log)


def test_a_stream_left_open_at_exit_is_recorded_as_dropped(tmp_path: Path) -> None:
    """A script reads part of a stream, keeps it (a global), and exits without closing it:
    its spans end at exit, before the provider shuts down, as dropped — in the store, with the
    chunks read — and nothing is logged about a processor already shut down."""
    _, log = _run(
        """
        otel_llm.init(db_path="store")
        otel_llm.instrument_openai()
        stream = client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
        for number, chunk in enumerate(stream):
            if number == 3:
                break
        """,
        tmp_path,
    )
    assert "already shutdown" not in log, log
    rows = _rows(tmp_path / "store", "SELECT outcome, chunk_count FROM llm_attempts")
    assert rows == [("dropped", 3)], (rows, log)


@pytest.mark.parametrize(("via", "name"), [("argument", "spans[prod]"), ("environment", "a\\b")])
def test_a_store_path_readers_cannot_glob_is_refused_by_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, via: str, name: str
) -> None:
    """A store path with a glob character can never be read back: ``init()`` says so, naming
    where the path came from, before anything is written (it used to accept it and lose every
    span at the first write)."""
    path = tmp_path / name
    if via == "environment":
        monkeypatch.setenv("OTEL_LLM_DB", str(path))
    with pytest.raises(ConfigurationError) as caught:
        init(db_path=path if via == "argument" else None, set_global=False, otlp=False)
    assert caught.value.key == ("db_path" if via == "argument" else "OTEL_LLM_DB")
    assert ("[ ]" if "[" in name else "\\") + " in its path" in str(caught.value)
    assert not path.exists()


def test_a_relative_store_path_is_where_it_was_at_init(tmp_path: Path) -> None:
    """The default ``./otel-llm-store`` is the working directory's as of ``init()``: an
    application that changes directory before its first call still writes there."""
    (tmp_path / "elsewhere").mkdir()
    _run(
        """
        telemetry = otel_llm.init()
        otel_llm.instrument_openai()
        os.chdir("elsewhere")
        call()
        telemetry.shutdown()
        print(telemetry.db_path)
        """,
        tmp_path,
    )
    assert _rows(tmp_path / "otel-llm-store", "SELECT count(*) FROM llm_attempts") == [(1,)]
    assert not (tmp_path / "elsewhere" / "otel-llm-store").exists()


@pytest.mark.parametrize(
    ("given", "named"),
    [("x", "str"), (object(), "object"), (trace.NoOpTracerProvider(), "NoOpTracerProvider")],
)
def test_a_tracer_provider_init_cannot_add_to_is_refused(
    tmp_path: Path, given: object, named: str
) -> None:
    """``init()`` adds its processor to the provider it is given: anything that takes no span
    processor (the API's no-op provider among them) is a ``ConfigurationError`` naming the
    argument and the type given (it was Python's ``AttributeError``), raised before the store is
    touched."""
    with pytest.raises(ConfigurationError) as caught:
        init(db_path=tmp_path / "store", tracer_provider=given)  # type: ignore[arg-type]
    assert caught.value.key == "tracer_provider"
    assert named in str(caught.value)
    assert "that takes span processors" in str(caught.value)
    assert not (tmp_path / "store").exists()


def test_a_forked_child_s_exit_ends_none_of_its_parent_s_calls(tmp_path: Path) -> None:
    """A child forked while the parent reads a stream exits normally (its exit handlers run):
    the parent's open call is the parent's to end — stored once, as ok, never also as a
    dropped copy written by the child."""
    _run(
        """
        from otel_llm import observe_stream
        telemetry = otel_llm.init(db_path="store", otlp=False)

        def chunks():
            for _ in range(5):
                yield {"choices": [{"delta": {"content": "x"}, "index": 0}]}
            yield {"choices": [{"delta": {}, "index": 0, "finish_reason": "stop"}]}

        stream = observe_stream(chunks(), provider="openai", model="m")
        next(stream)
        child = os.fork()
        if child == 0:
            sys.exit(0)  # the child's own work done: a normal exit
        os.waitpid(child, 0)
        for _ in stream:
            pass
        telemetry.shutdown()
        """,
        tmp_path,
    )
    rows = _rows(
        tmp_path / "store",
        "SELECT count(*), count(DISTINCT span_id), string_agg(DISTINCT outcome, ',') "
        "FROM llm_attempts",
    )
    assert rows == [(1, 1, "ok")]


class StandIn(trace.TracerProvider):
    """A provider standing in for the SDK's, as some vendors' proxies do: an OpenTelemetry
    TracerProvider (the API's class) that passes everything on to an SDK provider."""

    def __init__(self, real: TracerProvider) -> None:
        self.real = real

    def get_tracer(self, *args: object, **kwargs: object) -> trace.Tracer:
        return self.real.get_tracer(*args, **kwargs)  # type: ignore[arg-type]

    def add_span_processor(self, processor: SpanProcessor) -> None:
        self.real.add_span_processor(processor)

    def shutdown(self) -> None:
        self.real.shutdown()


def test_a_provider_standing_in_for_the_sdk_s_takes_the_processor(tmp_path: Path) -> None:
    """``init(tracer_provider=)`` takes any OpenTelemetry provider that takes span processors,
    not only the SDK's class: the spans recorded through it reach the store."""
    real = TracerProvider()
    telemetry = init(db_path=tmp_path / "store", tracer_provider=StandIn(real), otlp=False)  # type: ignore[arg-type]
    real.get_tracer("app").start_span("through the stand-in").end()
    assert telemetry.force_flush(30)
    telemetry.shutdown()
    assert _rows(
        tmp_path / "store", 'SELECT "SpanName" FROM otel_traces WHERE "SpanName" <> \'\''
    ) == [("through the stand-in",)]


@pytest.mark.parametrize(
    ("claimed", "host", "same_port", "store_written"),
    [
        (True, "127.0.0.1", True, False),
        (True, "localhost", True, False),
        (True, "127.0.0.1", False, True),
        (False, "127.0.0.1", True, True),
    ],
)
def test_an_app_sending_to_its_stores_collector_leaves_the_store_to_it(
    tmp_path: Path,
    receiver: Receiver,
    claimed: bool,
    host: str,
    same_port: bool,
    store_written: bool,
) -> None:
    """``otel-llm collector`` claims the store it writes, saying where it listens; an
    application whose spans go over OTLP to that collector and whose embedded store is the same
    one (both default to ``./otel-llm-store``) writes no span there itself — each span is stored
    once — and says so in one warning. Another endpoint, or no collector: the store is written."""
    store = tmp_path / "store"
    spool_path(store).mkdir()
    handle = claim(store)
    port = int(receiver.base.rsplit(":", 1)[1])
    announce(handle, (port - 1 if port > 1 else port + 2, port if same_port else port + 1))
    if not claimed:
        handle.close()
    try:
        _, log = _run(
            """
            telemetry = otel_llm.init(db_path="store")
            print("exporter", telemetry.exporter is not None, file=sys.stderr)
            otel_llm.instrument_openai()
            call()
            telemetry.shutdown()
            """,
            tmp_path,
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"http://{host}:{port}/v1/traces",
            OTEL_METRICS_EXPORTER="none",
        )
    finally:
        handle.close()
    assert sorted(span["name"] for span in receiver.spans()) == ["chat smooth"] * 2
    assert f"exporter {store_written}" in log
    warned = log.count("the otel-llm collector that writes")
    assert warned == (0 if store_written else 1), log
    written = _rows(store, "SELECT count(*) FROM otel_traces") if store.exists() else [(0,)]
    assert written == [(2 if store_written else 0,)]


@pytest.mark.parametrize(
    ("protocol", "at", "insecure", "store_written"),
    [
        ("http/protobuf", "http/protobuf", None, False),
        ("http/protobuf", "grpc", None, True),  # OTLP/HTTP to the gRPC port: every export fails
        ("grpc", "grpc", "true", False),
        ("grpc", "grpc", "false", True),  # TLS, which the collector does not speak
    ],
)
def test_an_app_sending_on_another_protocol_than_the_port_s_keeps_its_store(
    tmp_path: Path, protocol: str, at: str, insecure: str | None, store_written: bool
) -> None:
    """The claim says which of the collector's ports speaks gRPC and which OTLP/HTTP. An
    application whose OTLP/HTTP exporter points at the gRPC port (the port most guides name),
    or whose gRPC exporter speaks TLS to it, reaches no collector: its embedded store stays on
    (it was left off, and every span was lost). Only the protocol's own port, spoken as the
    collector speaks it, leaves the store to the collector."""
    import socket

    store = tmp_path / "store"
    spool_path(store).mkdir()
    handle = claim(store)
    with socket.socket() as grpc_port, socket.socket() as http_port:  # ports nothing answers on
        grpc_port.bind(("127.0.0.1", 0))
        http_port.bind(("127.0.0.1", 0))
        ports = {"grpc": grpc_port.getsockname()[1], "http/protobuf": http_port.getsockname()[1]}
        announce(handle, tuple(ports.values()), protocols=ports)
        path = "/v1/traces" if protocol == "http/protobuf" else ""
        insecure_env = {} if insecure is None else {"OTEL_EXPORTER_OTLP_INSECURE": insecure}
        try:
            _, log = _run(
                """
                telemetry = otel_llm.init(db_path="store")
                print("exporter", telemetry.exporter is not None, file=sys.stderr)
                otel_llm.instrument_openai()
                call()
                telemetry.shutdown()
                """,
                tmp_path,
                OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"http://127.0.0.1:{ports[at]}{path}",
                OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=protocol,
                OTEL_METRICS_EXPORTER="none",
                **insecure_env,
            )
        finally:
            handle.close()
    assert f"exporter {store_written}" in log
    assert log.count("the otel-llm collector that writes") == (0 if store_written else 1), log
    written = _rows(store, "SELECT count(*) FROM otel_traces") if store.exists() else [(0,)]
    assert written == [(2 if store_written else 0,)]


def test_a_multiprocessing_child_s_spans_and_metrics_go_over_otlp(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A child that multiprocessing made by fork (a Process that returns, a Pool closed and
    joined) ends with os._exit, where no exit handler runs: its OTLP exporters' last batches
    were lost — every span of a short task — while the store, which multiprocessing's exit
    finalizers shut down, had them. They now leave with the child, metrics too; the parent's
    spans are exported once."""
    _, err = _run(
        """
        import multiprocessing
        from opentelemetry import metrics
        telemetry = otel_llm.init(db_path="store")
        otel_llm.instrument_openai()

        def work(i):
            call()
            return i

        call()
        context = multiprocessing.get_context("fork")
        child = context.Process(target=work, args=(0,))
        child.start()
        child.join(60)
        assert child.exitcode == 0, child.exitcode
        pool = context.Pool(2)
        assert pool.map(work, range(1, 3)) == [1, 2]
        pool.close()
        pool.join()
        telemetry.shutdown()
        """,
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base,
    )
    assert "LOG" not in err, err
    stored = _rows(tmp_path / "store", "SELECT count(*) FROM llm_calls")
    assert stored == [(4,)], "the store has every process's call"
    calls = [s for s in receiver.spans() if s["attributes"]["otel_llm.span"].string_value == "call"]
    assert len(calls) == 4, "OTLP has every process's call, once"
    assert receiver.paths.count("/v1/metrics") >= 4, receiver.paths


def test_a_child_forked_while_the_parent_exports_ends_without_a_false_warning(
    tmp_path: Path, receiver: Receiver
) -> None:
    """A child forked while the parent's export waited on the collector inherited that export
    as its own, one the child does not run: at its exit it warned that the collector "took the
    connection and did not answer" — though every export of its own had gone out. A child's
    exports are its own now; the parent's wait is the parent's to tell."""
    receiver.hold_first = True
    out, err = _run(
        """
        import multiprocessing, threading, time
        logging.getLogger().handlers[0].setFormatter(
            logging.Formatter("LOG %(process)d %(name)s %(message)s"))
        telemetry = otel_llm.init(db_path="store")
        with telemetry.tracer.start_as_current_span("before the fork"):
            pass
        [spans] = [c for c in telemetry.collectors if c.signal == "spans"]
        deadline = time.monotonic() + 60
        while spans._in_flight == 0 and time.monotonic() < deadline:
            threading.Event().wait(0.01)  # the batch is sent within 50 ms
        assert spans._in_flight == 1

        def work():
            with telemetry.tracer.start_as_current_span("in the child"):
                pass

        child = multiprocessing.get_context("fork").Process(target=work)
        child.start()
        child.join(60)
        assert child.exitcode == 0, child.exitcode
        print("child", child.pid)
        """,
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base,
        OTEL_METRICS_EXPORTER="none",
        OTEL_BSP_SCHEDULE_DELAY="50",
    )
    assert "in the child" in [span["name"] for span in receiver.spans()]
    child = out.split()[-1]
    assert f"LOG {child} " not in err, err


def test_a_forked_child_exports_on_a_connection_of_its_own(tmp_path: Path) -> None:
    """The HTTP exporter keeps its connection to the collector open between exports; a child
    forked after an export found that connection in its pool and sent on it — the same socket
    as the parent's, so two processes exporting at once interleaved their requests (a batch the
    collector could not parse: spans lost, answers read by the wrong process). A child now
    opens connections of its own."""
    receiver = Receiver(keep_alive=True)
    try:
        _run(
            """
            import multiprocessing
            telemetry = otel_llm.init(db_path="store")
            with telemetry.tracer.start_as_current_span("parent"):
                pass
            assert telemetry.force_flush()  # exported: the connection stays open, in the pool

            def work():
                with telemetry.tracer.start_as_current_span("child"):
                    pass

            child = multiprocessing.get_context("fork").Process(target=work)
            child.start()
            child.join(60)
            assert child.exitcode == 0, child.exitcode
            telemetry.shutdown()
            """,
            tmp_path,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base,
            OTEL_METRICS_EXPORTER="none",
        )
    finally:
        receiver.close()
    connections = receiver.connection_of
    assert set(connections) == {"parent", "child"}
    assert connections["child"] != connections["parent"]


def test_a_credential_provider_named_in_the_environment_gives_the_exporters_their_session(
    tmp_path: Path,
) -> None:
    """``OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER`` names an entry point whose
    ``requests.Session`` signs every export (or goes through an authenticated proxy): the
    exporters ``init()`` makes use that session for spans and metrics, as the SDK's own do —
    the session ``init()`` gives an exporter to keep a forked child off the parent's
    connection stood in its place, and every export went out unsigned."""
    (tmp_path / "signing_session.py").write_text(
        textwrap.dedent(
            """
            import requests

            class Signing(requests.Session):
                def __init__(self):
                    super().__init__()
                    self.headers["X-Signed"] = "yes"
            """
        )
    )
    info = tmp_path / "signing_session-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: signing-session\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[opentelemetry_otlp_credential_provider]\nsigning = signing_session:Signing\n"
    )
    receiver = Receiver()
    try:
        _run(
            """
            telemetry = otel_llm.init(db_path="store")
            with telemetry.tracer.start_as_current_span("signed"):
                pass
            telemetry.shutdown()
            """,
            tmp_path,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.base,
            OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER="signing",
            OTEL_METRICS_EXPORTER="none",
            PYTHONPATH=str(tmp_path),
        )
    finally:
        receiver.close()
    assert [path for path, _ in receiver.signed] == ["/v1/traces"]
    assert [signed for _, signed in receiver.signed] == ["yes"]


@pytest.mark.parametrize("claimed_through_link", [True, False])
def test_a_store_reached_through_a_symlink_is_left_to_its_collector(
    tmp_path: Path, receiver: Receiver, claimed_through_link: bool
) -> None:
    """`otel-llm collector --db /link` (a symbolic link to the store) and
    `init(db_path="/real/store")` (or the other way round) write one store: init() finds the
    claim under the store's real path and leaves the store to the collector. Named from the
    path as written, neither saw the other's claim and every span was stored twice."""
    real = tmp_path / "real" / "store"
    real.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    claimed, named = (link, real) if claimed_through_link else (real, link)
    spool_path(claimed).mkdir()
    handle = claim(claimed)
    port = int(receiver.base.rsplit(":", 1)[1])
    announce(handle, (port,))
    try:
        _, log = _run(
            f"""
            telemetry = otel_llm.init(db_path={str(named)!r})
            print("exporter", telemetry.exporter is not None, file=sys.stderr)
            otel_llm.instrument_openai()
            call()
            telemetry.shutdown()
            """,
            tmp_path,
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"http://127.0.0.1:{port}/v1/traces",
            OTEL_METRICS_EXPORTER="none",
        )
    finally:
        handle.close()
    assert "exporter False" in log
    assert log.count("the otel-llm collector that writes") == 1, log
    assert sorted(span["name"] for span in receiver.spans()) == ["chat smooth"] * 2
    assert list(real.iterdir()) == []  # nothing written into the store
