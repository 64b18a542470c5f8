"""The OpenTelemetry SDK's own settings that ``init()`` hands it — OTLP export's batching and
exporters' variables, the span limits of the provider it makes — are judged at ``init()``: one
the SDK would refuse is a ``ConfigurationError`` raised before anything is set up — not the
SDK's bare error from half-way through ``init()``, with tracing half wired and its threads
running."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from otel_llm import ConfigurationError, Telemetry, init
from tests.support.processes import run_python

HEADER_SECRET = "hdr-secret-77aa99"


def refused(tmp_path: Path) -> ConfigurationError:
    """The error init() raises, after checking it left no thread running (a handle it returns
    instead is shut down: the test failed)."""
    before = set(threading.enumerate())
    taken: list[Telemetry] = []
    try:
        with pytest.raises(ConfigurationError) as caught:
            taken.append(init(db_path=tmp_path / "store", set_global=False))
    finally:
        for telemetry in taken:
            telemetry.shutdown()
    started = [thread.name for thread in set(threading.enumerate()) - before]
    assert started == [], f"a refused init() left threads running: {started}"
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None
    return caught.value


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [
        ("OTEL_BSP_MAX_QUEUE_SIZE", "0", "above 0"),
        ("OTEL_BSP_SCHEDULE_DELAY", "-1", "above 0"),
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0", "above 0"),
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4096", "at most the queue's 2048"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "0", "above 0"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "-500", "above 0"),
    ],
)
def test_batching_the_sdk_refuses_is_a_configuration_error_naming_it(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch, variable: str, value: str, why: str
) -> None:
    """A batching setting the SDK's processor or reader refuses (with a bare ValueError, after
    the span batching's thread had started) is a ConfigurationError naming the variable."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    otlp_env.setenv(variable, value)
    error = refused(tmp_path)
    assert error.key == variable
    assert why in error.reason


def test_batching_of_a_signal_not_exported_is_not_judged(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch
) -> None:
    """The span batching's variables matter only when spans go over OTLP, the metric
    interval only when metrics do; values the SDK parses and takes are taken."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    otlp_env.setenv("OTEL_TRACES_EXPORTER", "none")
    otlp_env.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "0")
    otlp_env.setenv("OTEL_METRIC_EXPORT_INTERVAL", "60000")
    init(db_path=tmp_path / "store", set_global=False, duckdb=False).shutdown()
    otlp_env.setenv("OTEL_TRACES_EXPORTER", "otlp")
    otlp_env.setenv("OTEL_METRICS_EXPORTER", "none")
    otlp_env.setenv("OTEL_METRIC_EXPORT_INTERVAL", "0")
    otlp_env.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8192")
    otlp_env.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4096")
    init(db_path=tmp_path / "store", set_global=False, duckdb=False).shutdown()


@pytest.mark.parametrize(
    ("variables", "signal", "said"),
    [
        ({"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "spans", "zstd"),
        ({"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "ten"}, "metrics", "ValueError"),
        ({"OTEL_PYTHON_EXPORTER_OTLP_GRPC_RETRYABLE_ERROR_CODES": "BOGUS"}, "spans", "BOGUS"),
    ],
)
def test_an_exporter_the_sdk_cannot_make_is_a_configuration_error(
    tmp_path: Path,
    otlp_env: pytest.MonkeyPatch,
    variables: dict[str, str],
    signal: str,
    said: str,
) -> None:
    """gRPC exporter settings its constructor refuses (a compression it does not know, a timeout
    that is no number, a status code that is none) are a
    ConfigurationError naming the signal's exporter and what the SDK said, at init()."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"api-key={HEADER_SECRET}")
    for name, value in variables.items():
        otlp_env.setenv(name, value)
    error = refused(tmp_path)
    assert error.key == f"the OTLP {signal} exporter"
    assert said in error.reason
    assert HEADER_SECRET not in str(error)


def test_a_credential_provider_that_is_not_installed_is_a_configuration_error(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch
) -> None:
    """An OTLP/HTTP credential provider named but not installed (the exporter raises a bare
    RuntimeError when it is made) is a ConfigurationError at init()."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    otlp_env.setenv("OTEL_PYTHON_EXPORTER_OTLP_HTTP_METRICS_CREDENTIAL_PROVIDER", "not-installed")
    error = refused(tmp_path)
    assert error.key == "the OTLP metrics exporter"
    assert "not-installed" in error.reason


@pytest.mark.parametrize(
    ("variable", "value"),
    [("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "-3"), ("OTEL_SPAN_EVENT_COUNT_LIMIT", "many")],
)
def test_a_span_limit_the_sdk_refuses_is_a_configuration_error_naming_it(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    """A span limit of the provider init() makes that the SDK refuses is a ConfigurationError
    naming the variable, raised before the OTLP export's threads start."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    otlp_env.setenv(variable, value)
    error = refused(tmp_path)
    assert error.key == variable
    assert value in error.reason


@pytest.mark.parametrize(("asked", "kept"), [("1000", 1000), ("16", 128), ("", None)])
def test_the_span_event_limit_asked_for_is_kept_above_what_chunk_events_need(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch, asked: str, kept: int | None
) -> None:
    """OTEL_SPAN_EVENT_COUNT_LIMIT sets the event limit of the provider init() makes — raised
    to what an attempt's chunk events need when it is lower, never lowered to it; set empty,
    no limit, as the SDK reads it (it was 128 whatever the variable said)."""
    otlp_env.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", asked)
    telemetry = init(db_path=tmp_path / "store", set_global=False, duckdb=False)
    try:
        with telemetry.tracer.start_as_current_span("the application's own") as span:
            for number in range(1500):
                span.add_event(f"event {number}")
        kept_events = len(span.events)  # type: ignore[attr-defined]
    finally:
        telemetry.shutdown()
    assert kept_events == (1500 if kept is None else kept)


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "0"}, "OTEL_EXPORTER_OTLP_TIMEOUT"),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "-1"}, "OTEL_EXPORTER_OTLP_TIMEOUT"),
        ({"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "nan"}, "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"),
        (
            {"OTEL_EXPORTER_OTLP_TIMEOUT": "5", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "0"},
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        ),
    ],
)
def test_an_export_timeout_no_export_can_keep_is_a_configuration_error(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch, variables: dict[str, str], named: str
) -> None:
    """An export timeout of 0 or less (or NaN) — with which every export fails (requests
    refuses a timeout of 0), the warning coming at the first export — is a ConfigurationError
    naming the variable the exporter reads, at init()."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    for name, value in variables.items():
        otlp_env.setenv(name, value)
    error = refused(tmp_path)
    assert error.key == named
    assert "above 0" in error.reason


def test_a_signals_own_timeout_is_judged_instead_of_the_shared_one(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch
) -> None:
    """Each signal's exporter reads its own timeout variable when it is set, else the shared
    one: a shared 0 both signals override is no exporter's."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "5")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "2.5")
    init(db_path=tmp_path / "store", set_global=False, duckdb=False).shutdown()


_INIT_IN_A_CHILD = """
import sys
import otel_llm
try:
    otel_llm.init(db_path=sys.argv[1], set_global=False, duckdb=False).shutdown()
except otel_llm.ConfigurationError as error:
    print("REFUSED", error.key)
    print("REASON", error.reason)
else:
    print("STARTED")
"""
"""init() in a process of its own: the gRPC library aborts the process it runs in on some TLS
settings, which must never take the test run with it."""


def init_in_a_child(tmp_path: Path, variables: dict[str, str]) -> list[str]:
    """The lines init() in a fresh process printed: ``STARTED``, or ``REFUSED <key>`` and
    ``REASON <reason>``; a process that died otherwise fails the test."""
    names = ("OTEL_", "LLM__")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(names)}
    ran = run_python(
        _INIT_IN_A_CHILD, str(tmp_path / "store"), cwd=tmp_path, env={**environment, **variables}
    )
    assert ran.returncode == 0, f"init() ended its process ({ran.returncode}): {ran.stderr}"
    return ran.stdout.splitlines()


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
@pytest.mark.parametrize(
    ("variable", "beside"),
    [
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", ()),
        (
            "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
            (
                "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
                "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
            ),
        ),
        (
            "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE",
            ("OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE", "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY"),
        ),
    ],
)
def test_a_tls_file_that_cannot_be_read_is_a_configuration_error_over_tls(
    tmp_path: Path, protocol: str, variable: str, beside: tuple[str, ...]
) -> None:
    """A certificate or key file the exporter of an https:// endpoint reads (``beside`` the
    files that make both exporters read it) that is not there is a ConfigurationError naming
    the variable at init() — over OTLP/HTTP every export failed ("Could not find a suitable
    TLS CA certificate bundle"); over gRPC the SDK logged a traceback and went on without it,
    and a client key it could not read aborted the process. For an http:// endpoint no file
    is read, and none is judged."""
    missing = str(tmp_path / "not-there.pem")
    present = tmp_path / "present.pem"
    present.write_text("-----BEGIN CERTIFICATE-----\n")
    variables = {name: str(present) for name in beside}
    variables |= {variable: missing, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}
    plain = {**variables, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    assert init_in_a_child(tmp_path, plain) == ["STARTED"]
    over_tls = {**variables, "OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:9"}
    refused_key, reason = init_in_a_child(tmp_path, over_tls)
    assert refused_key == f"REFUSED {variable}"
    assert missing in reason


@pytest.mark.parametrize(
    ("given", "without"),
    [
        ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_KEY"),
        ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"),
    ],
)
def test_a_grpc_client_certificate_without_its_key_is_a_configuration_error(
    tmp_path: Path, given: str, without: str
) -> None:
    """Over gRPC with TLS, a client certificate without its key (or a key without its
    certificate) beside a CA certificate is a ConfigurationError naming both variables — the
    gRPC library used to abort the whole process at init() ("Check failed: private_key !=
    nullptr", exit 134)."""
    present = tmp_path / "present.pem"
    present.write_text("-----BEGIN CERTIFICATE-----\n")
    variables = {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:9",
        "OTEL_EXPORTER_OTLP_CERTIFICATE": str(present),
        given: str(present),
    }
    refused_key, reason = init_in_a_child(tmp_path, variables)
    assert refused_key == f"REFUSED {given}"
    assert without in reason


def _credential_provider(where: Path) -> str:
    """A gRPC credential provider installed at ``where`` (an entry point of the group the SDK
    loads from, on the child's path): the system's roots, as channel credentials."""
    (where / "probe_credentials.py").write_text(
        "import grpc\n\ndef credentials():\n    return grpc.ssl_channel_credentials()\n"
    )
    info = where / "probe_credentials-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-credentials\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[opentelemetry_otlp_credential_provider]\nprobe = probe_credentials:credentials\n"
    )
    return str(where)


@pytest.mark.parametrize("level", ["shared", "spans"])
def test_grpc_tls_files_a_credential_provider_replaces_are_not_judged(
    tmp_path: Path, level: str
) -> None:
    """Over gRPC, a credential provider named for the shared variables (or a signal's, where
    that signal's own certificate variable is set) gives the channel its credentials and the
    SDK reads no TLS file: a certificate variable left naming a file that is gone, or a key
    without its certificate, does not stop init() — they were refused."""
    gone = str(tmp_path / "gone.pem")
    variables = {
        "PYTHONPATH": os.pathsep.join((_credential_provider(tmp_path), os.getcwd())),
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:9",
        "OTEL_METRICS_EXPORTER": "none",
    }
    if level == "shared":
        variables |= {
            "OTEL_PYTHON_EXPORTER_OTLP_GRPC_CREDENTIAL_PROVIDER": "probe",
            "OTEL_EXPORTER_OTLP_CERTIFICATE": gone,
            "OTEL_EXPORTER_OTLP_CLIENT_KEY": gone,
        }
    else:
        variables |= {
            "OTEL_PYTHON_EXPORTER_OTLP_GRPC_TRACES_CREDENTIAL_PROVIDER": "probe",
            "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": gone,
        }
    assert init_in_a_child(tmp_path, variables) == ["STARTED"]


def test_a_signals_empty_certificate_variable_is_the_one_grpc_reads(tmp_path: Path) -> None:
    """Over gRPC a signal's certificate variable set, even empty, is the one its exporter
    reads (the system's roots), never the shared one: a shared one left naming a file that is
    gone does not stop init() when both signals set theirs empty — it was judged instead."""
    variables = {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://127.0.0.1:9",
        "OTEL_EXPORTER_OTLP_CERTIFICATE": str(tmp_path / "gone.pem"),
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "",
        "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE": "",
    }
    assert init_in_a_child(tmp_path, variables) == ["STARTED"]
