"""OTLP endpoint variables are judged at ``init()``: one the exporter cannot send to is a
``ConfigurationError`` naming the variable, with the URL shown without its credentials — and an
endpoint is never shown as a bare ``[REDACTED]`` when it can be shown safely."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from otel_llm import ConfigurationError, Telemetry, init
from otel_llm._redact import redact_url, url_secrets

PASSWORD = "s3cret-pw-1234"


def refused(tmp_path: Path) -> ConfigurationError:
    """The error init() raises (a handle it returns instead is shut down: the test failed)."""
    taken: list[Telemetry] = []
    try:
        with pytest.raises(ConfigurationError) as caught:
            taken.append(init(db_path=tmp_path / "store", set_global=False, duckdb=False))
    finally:
        for telemetry in taken:
            telemetry.shutdown()
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None
    return caught.value


@pytest.mark.parametrize(
    ("variable", "url", "shown", "why"),
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1", "'http://[::1'", "no closing ]"),
        (
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "http://collector:43l8/v1/metrics",
            "'http://collector:43l8/v1/metrics'",
            "port",
        ),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:99999", None, "port"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:0", None, "port"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318", "'127.0.0.1:4318'", "no scheme"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318", "'localhost:4318'", "no scheme"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector:4318", None, "scheme 'ftp'"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://:4318", None, "names no host"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://::1:4318", None, "between [ and ]"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[zz::1]:4318", None, "no IPv6 address"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://coll ector:4318", None, "not a host name"),
    ],
)
def test_an_endpoint_the_exporter_cannot_use_is_refused_at_init(
    tmp_path: Path,
    otlp_env: pytest.MonkeyPatch,
    variable: str,
    url: str,
    shown: str | None,
    why: str,
) -> None:
    """A malformed endpoint (unparsable, a bad port, no http/https scheme, no host) is a
    ConfigurationError naming the variable and showing the URL — not urllib's bare ValueError,
    not a silent acceptance and a warning at the first export."""
    otlp_env.setenv(variable, url)
    error = refused(tmp_path)
    assert error.key == variable
    assert why in error.reason
    assert (shown or repr(url)) in error.reason
    assert "[REDACTED]" not in str(error)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"http://otel:{PASSWORD}@[::1", "'http://otel:[REDACTED]@[::1'"),
        (f"http://otel:{PASSWORD}@collector:43l8", "'http://otel:[REDACTED]@collector:43l8'"),
        (f"otel:{PASSWORD}@collector:4318", "'otel:[REDACTED]@collector:4318'"),
        (
            f"http://{PASSWORD}@collector:4318a?key=v",
            "'http://[REDACTED]@collector:4318a?[REDACTED]'",
        ),
        # a password holding what ends an authority (base64's /, a #): parsing finds no
        # user information, so all before the last @ is left out
        (f"http://otel:{PASSWORD}/x@collector:1", "'http://[REDACTED]@collector:1'"),
        (f"http://otel:{PASSWORD}#@collector:1", "'http://[REDACTED]@collector:1'"),
        (f"otel:{PASSWORD}/x@collector:4318", "'[REDACTED]@collector:4318'"),
    ],
)
def test_a_refused_endpoint_is_shown_without_its_credentials(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch, url: str, shown: str
) -> None:
    """The URL in the error keeps host, port and path readable and drops the password (or a
    token standing alone in the user information) and the query."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)
    error = refused(tmp_path)
    assert error.key == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    assert shown in str(error)
    assert PASSWORD not in str(error)


def test_the_base_endpoint_is_judged_where_a_signal_sends_to_it(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch
) -> None:
    """A malformed base endpoint is refused when a signal without an endpoint of its own would
    send to it (here the metrics)."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:43l8")
    assert refused(tmp_path).key == "OTEL_EXPORTER_OTLP_ENDPOINT"


def test_a_base_endpoint_no_signal_sends_to_is_not_judged(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch
) -> None:
    """Each signal names its own endpoint: the base one, which no exporter then reads (it may be
    meant for another component: a gRPC ``collector:4317``), does not stop ``init()``."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://127.0.0.1:4318/v1/metrics")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")
    telemetry = init(db_path=tmp_path / "store", set_global=False, duckdb=False)
    telemetry.shutdown()
    assert sorted(collector.endpoint for collector in telemetry.collectors) == [
        "http://127.0.0.1:4318/v1/metrics",
        "http://127.0.0.1:4318/v1/traces",
    ]


@pytest.mark.parametrize(
    ("url", "spans_at"),
    [
        ("http://[::1]:4318", "http://[::1]:4318/v1/traces"),
        ("https://collector.example/otlp/", "https://collector.example/otlp/v1/traces"),
        ("HTTP://collector:4318", "http://collector:4318/v1/traces"),
        ("http://collector:", "http://collector:/v1/traces"),
    ],
)
def test_a_well_formed_http_endpoint_is_taken(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch, url: str, spans_at: str
) -> None:
    """IPv6 in brackets, https with a path, an upper-case scheme, an empty port (the scheme's
    default) are endpoints the exporter takes."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    telemetry = init(db_path=tmp_path / "store", set_global=False, duckdb=False)
    try:
        assert [c.endpoint for c in telemetry.collectors if c.signal == "spans"] == [spans_at]
    finally:
        telemetry.shutdown()


@pytest.mark.parametrize(
    "url",
    ["127.0.0.1:4317", "localhost:4317", "collector", "[::1]:4317", "dns:///collector:4317"],
)
def test_grpc_takes_what_its_exporter_takes(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch, url: str
) -> None:
    """OTLP/gRPC takes host:port without a scheme (TLS unless OTEL_EXPORTER_OTLP_INSECURE=true,
    as its exporter does) and gRPC's own target forms; a warning names such an endpoint as it
    is, never as [REDACTED]."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    telemetry = init(db_path=tmp_path / "store", set_global=False, duckdb=False)
    try:
        assert [(c.endpoint, c.protocol) for c in telemetry.collectors] == [(url, "grpc")] * 2
    finally:
        telemetry.shutdown()


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("127.0.0.1:43l7", "port"),
        ("http://[::1:4317", "no closing ]"),
        ("ftp://collector:4317", "scheme 'ftp'"),
        ("collector:70000", "port"),
    ],
)
def test_grpc_refuses_what_its_exporter_cannot_use(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch, url: str, why: str
) -> None:
    """OTLP/gRPC endpoints are judged too: a bad port, an unclosed IPv6 address, a scheme that is
    neither http(s) nor gRPC's own."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)
    error = refused(tmp_path)
    assert error.key == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    assert why in error.reason


def test_an_endpoint_nothing_exports_to_is_not_judged(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch
) -> None:
    """otlp=False: init() exports nothing over OTLP, so it reads no endpoint."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1")
    telemetry = init(db_path=tmp_path / "store", set_global=False, duckdb=False, otlp=False)
    telemetry.shutdown()
    assert telemetry.collectors == ()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://[::1", "http://[::1"),
        ("http://u:pw-123456@[::1", "http://u:[REDACTED]@[::1"),
        ("http://collector:43l8/v1/metrics", "http://collector:43l8/v1/metrics"),
        ("127.0.0.1:4318", "127.0.0.1:4318"),
        ("localhost:4317", "localhost:4317"),
        ("u:pw-123456@collector:4317", "u:[REDACTED]@collector:4317"),
        ("https://h.test/v1?token=abc#part", "https://h.test/v1?[REDACTED]"),
        ("sk-abcdefghijklmnop", "[REDACTED]"),
        ("redis://:pw@host:6379/0", "redis://:[REDACTED]@host:6379/0"),
    ],
)
def test_redact_url_shows_what_it_safely_can_and_never_raises(url: str, shown: str) -> None:
    """A URL urllib cannot parse, or one without a scheme, is shown with its secrets out — not
    an exception, and not "[REDACTED]" for the whole of it (unless it is key-like text)."""
    assert redact_url(url) == shown


def test_url_secrets_are_found_in_a_url_urllib_refuses() -> None:
    """The password of an unparsable URL is still known, so no message repeats it."""
    assert url_secrets("http://otel:pw%2F123@[::1") == ("pw%2F123", "pw/123")


class _PathsReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1 that answers 200 to every export and keeps the paths
    it was sent to."""

    def __init__(self) -> None:
        paths: list[str] = []
        self.paths = paths

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                paths.append(self.path)
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.mark.parametrize(
    ("variable", "written"),
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "{url}\n"),  # a value read from a file, line break kept
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "  {url}/  "),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "{url}/v1/traces\r\n"),
    ],
)
def test_an_endpoint_with_whitespace_around_it_is_sent_to_as_it_is_judged(
    tmp_path: Path,
    otlp_env: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    variable: str,
    written: str,
) -> None:
    """An endpoint with whitespace around it — a line break at its end, as a value read from
    a file or a secret keeps it — is judged without it at init(), and the exporter sends to it
    without it too: the spans reach the collector at /v1/traces (the exporter used to send to
    the URL as written: a host with a line break in it, failing every export, or a path of
    %20/v1/traces)."""
    receiver = _PathsReceiver()
    try:
        otlp_env.setenv(variable, written.format(url=receiver.url))
        otlp_env.setenv("OTEL_METRICS_EXPORTER", "none")
        telemetry = init(db_path=tmp_path / "store", set_global=False, duckdb=False)
        try:
            with telemetry.tracer.start_as_current_span("the application's own"):
                pass
            assert telemetry.force_flush()
        finally:
            telemetry.shutdown()
    finally:
        receiver.close()
    assert receiver.paths == ["/v1/traces"]
    assert "cannot export" not in caplog.text
