"""OTLP export that neither floods the log nor holds the process when the collector is away.

The OpenTelemetry exporters retry a batch for up to their timeout (10 s by default), log every
attempt, and the SDK waits for them at exit: with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at
nothing, a short script exited 13 s late with 8 error lines. ``init()`` puts one
:class:`OtlpEndpoint` in front of each signal's OTLP exporter — one for spans, one for metrics, even
when ``OTEL_EXPORTER_OTLP_ENDPOINT`` names one endpoint for both:

- while otel-llm's exporters run, the OpenTelemetry exporters' own log lines are held back; the
  first failed export of an outage is one warning naming the signal, the endpoint, the cause and
  what to do, and the first success after it one info line;
- :meth:`OtlpEndpoint.close` bounds shutdown: once an export has failed, or one fails while closing,
  that signal's exporter is stopped at once (its retries end); a collector that answers gets up
  to ``DEFAULTS.otlp_shutdown_timeout_s`` to take the last batches.

The two signals share nothing: no state, no warning, no stop. They once shared one
:class:`OtlpEndpoint` per endpoint, and a collector config without a metrics pipeline (HTTP 404 on
``/v1/metrics``) lost spans — the metrics' final export at shutdown failed, which stopped every
exporter of that endpoint, the span exporter too, with its last batches still queued — and every
span export that succeeded in between ended the "outage", so the metrics warning, which also said
spans were not exported, came back every interval.

Export to a collector that is up is unchanged: the same SDK exporters, the same batching.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Literal

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_llm import _env as env
from otel_llm._defaults import DEFAULTS
from otel_llm._encodable import encodable
from otel_llm._errors import ConfigurationError
from otel_llm._redact import redact, redact_url, url_secrets

logger = logging.getLogger("otel_llm")

_MAX_CAUSE_CHARS = 300
_RETRY_TAIL = re.compile(r" encountered while exporting.*$")
"""What follows the cause in the exporter's "Transient error <cause> encountered while
exporting spans batch, retrying in 1.02s." (the retry it announces is not going to happen)."""
_OS_ERROR = re.compile(r"\[Errno -?\d+\] [^\"')]+")
"""The operating system's reason inside urllib3's nested error text ("[Errno 111] Connection
refused"), which says it all."""

_HTTP_STATUS = re.compile(r"batch code: (\d{3}), reason: (.*)$")
"""The status and reason in the exporter's "Failed to export metrics batch code: 404, reason:
Not Found"."""

Signal = Literal["spans", "metrics"]
"""What a :class:`OtlpEndpoint` exports."""
OWN_ENDPOINT: Final[dict[Signal, str]] = {
    "spans": env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    "metrics": env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
}
"""The variable that names one signal's endpoint (the base endpoint names both)."""
_PIPELINE: Final[dict[Signal, str]] = {"spans": "traces", "metrics": "metrics"}
"""A collector config's pipeline for the signal."""
OWN_EXPORTER: Final[dict[Signal, str]] = {
    "spans": env.OTEL_TRACES_EXPORTER,
    "metrics": env.OTEL_METRICS_EXPORTER,
}
"""The variable whose ``none`` turns one signal's OTLP export off."""

Protocol = Literal["http/protobuf", "grpc"]
"""An OTLP protocol the OpenTelemetry Python exporters speak (``http/json``, which OTLP also
defines, they do not)."""
PROTOCOLS: Final[tuple[Protocol, ...]] = ("http/protobuf", "grpc")
"""Every :data:`Protocol`; the first is OTLP's default."""
OWN_PROTOCOL: Final[dict[Signal, str]] = {
    "spans": env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
    "metrics": env.OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
}
"""The variable that names one signal's protocol (``OTEL_EXPORTER_OTLP_PROTOCOL`` names both)."""
_GRPC_TARGETS: Final = ("dns", "unix", "unix-abstract", "ipv4", "ipv6", "vsock")
"""gRPC's own target forms (``dns:///host:port``, ``unix:/path`` …), which its exporter passes
to gRPC as they are."""
_HOST_NAME = re.compile(r"[A-Za-z0-9\-._~%!$&'()*+,;=]+")
"""A host name or IPv4 address as RFC 3986 writes one (``reg-name``)."""


def exporter_names(signal: Signal) -> list[str]:
    """The exporters the signal's variable names, lower-case, in order — ``OTEL_TRACES_EXPORTER``
    and ``OTEL_METRICS_EXPORTER`` are comma-separated lists, as the OpenTelemetry SDK reads
    them — and ``otlp``, the default, when it names none."""
    text = env.env_text(OWN_EXPORTER[signal]) or ""
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    return list(dict.fromkeys(names)) or ["otlp"]


OTLP_EXPORTERS: Final[dict[str, Protocol | None]] = {
    "otlp": None,
    "otlp_proto_http": "http/protobuf",
    "otlp_proto_grpc": "grpc",
}
"""The exporter names that mean OTLP, as the OpenTelemetry SDK registers them: ``otlp`` over
the protocol the variables ask for, the other two over their own."""


def exported(signal: Signal) -> bool:
    """Whether the signal goes over OTLP: its exporter variable is unset or names ``otlp``,
    ``otlp_proto_http`` or ``otlp_proto_grpc`` (``none``, ``prometheus``, ``console`` …
    alone: not)."""
    return any(name in OTLP_EXPORTERS for name in exporter_names(signal))


def _exporter_protocol(signal: Signal) -> Protocol | None:
    """The protocol the signal's exporter variable names by naming one OTLP exporter of its
    own protocol (``otlp_proto_grpc``: gRPC), as the SDK would make that exporter whatever the
    protocol variables say; ``None`` when it names ``otlp``, neither, or both."""
    named = {OTLP_EXPORTERS[n] for n in exporter_names(signal) if n in OTLP_EXPORTERS}
    if len(named) == 1:
        (protocol,) = named
        return protocol
    return None


HTTP_JSON: Final = "http/json"
"""The OTLP protocol the OpenTelemetry Python exporters do not speak: asked for, the signal goes
over http/protobuf (the same collector endpoint takes both), and a warning says so."""


def requested_protocol(signal: Signal) -> tuple[Protocol | Literal["http/json"], str | None]:
    """The protocol the variables ask for the signal — its own variable, else
    ``OTEL_EXPORTER_OTLP_PROTOCOL``, else OTLP's default — and the variable that asked (None for
    the default) — unless the exporter variable names the protocol by its exporter
    (``otlp_proto_http``, ``otlp_proto_grpc``). A value that is no OTLP protocol is a
    :class:`ConfigurationError` naming the variable."""
    by_exporter = _exporter_protocol(signal)
    if by_exporter is not None:
        return by_exporter, OWN_EXPORTER[signal]
    for variable in (OWN_PROTOCOL[signal], env.OTEL_EXPORTER_OTLP_PROTOCOL):
        value = env.env_text(variable)
        if value is None:
            continue
        for protocol in PROTOCOLS:
            if value.lower() == protocol:
                return protocol, variable
        if value.lower() == HTTP_JSON:
            return HTTP_JSON, variable
        known = " or ".join(PROTOCOLS)
        raise ConfigurationError(
            variable, f"{redact(value)!r} is not an OTLP protocol; set {known}"
        )
    return PROTOCOLS[0], None


OWN_HEADERS: Final[dict[Signal, str]] = {
    "spans": env.OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    "metrics": env.OTEL_EXPORTER_OTLP_METRICS_HEADERS,
}
"""The variable that names one signal's headers (``OTEL_EXPORTER_OTLP_HEADERS`` names both)."""
_HEADER_SEPARATOR = re.compile(r"[ \t]*,[ \t]*")
_HEADER_NAME = re.compile(r"[\x21\x23-\x27\x2a\x2b\x2d\x2e\x30-\x39\x41-\x5a\x5e-\x7a\x7c\x7e]+")
"""A header's name as the exporters parse one (an HTTP token)."""
_HEADER_VALUE = re.compile(r"[\x20\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*")
"""A header's value as the exporters take one: URL-encoded, or printable ASCII without ``"``,
``,``, ``;`` or ``\\`` (spaces allowed)."""


def headers_variable(signal: Signal) -> str:
    """The variable the signal's exporter reads its headers from: its own when that is set to
    anything, else ``OTEL_EXPORTER_OTLP_HEADERS`` (the exporters read no more than one)."""
    own = OWN_HEADERS[signal]
    return own if os.environ.get(own) else env.OTEL_EXPORTER_OTLP_HEADERS


def check_headers(variable: str) -> None:
    """Raise a :class:`ConfigurationError` naming ``variable`` when an entry of it is no
    ``name=value`` the exporters can parse — they would drop it, and log it whole first, the
    credential it usually is included. The entry's text is never shown."""
    entries = _HEADER_SEPARATOR.split(os.environ.get(variable, ""))
    for position, entry in enumerate(entries, 1):
        problem = _header_problem(entry.strip())
        if problem is not None:
            raise ConfigurationError(
                variable,
                f"header {position} of {len(entries)} {problem} (its text is not shown: it may "
                "be a credential); OTLP writes headers as name=value, separated by commas, "
                "with the value URL-encoded where it holds a comma, a quote, a semicolon, a "
                "backslash or anything but printable ASCII (api-key=abc%2C123)",
            )


_BATCHING: Final[dict[Signal, tuple[tuple[str, float], ...]]] = {
    "spans": (
        (env.OTEL_BSP_MAX_QUEUE_SIZE, 2048),
        (env.OTEL_BSP_SCHEDULE_DELAY, 5000),
        (env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, 512),
    ),
    "metrics": ((env.OTEL_METRIC_EXPORT_INTERVAL, 60_000),),
}
"""The variables the SDK's batching of a signal reads (its batch span processor, its periodic
metric reader), with OpenTelemetry's defaults; each must be above 0."""


_OWN_TIMEOUT: Final[dict[Signal, str]] = {
    "spans": env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,
    "metrics": env.OTEL_EXPORTER_OTLP_METRICS_TIMEOUT,
}
"""The variable that names one signal's export timeout (``OTEL_EXPORTER_OTLP_TIMEOUT`` names
both)."""


_TLS_FILES: Final[dict[Signal | None, tuple[str, str, str]]] = {
    None: (
        env.OTEL_EXPORTER_OTLP_CERTIFICATE,
        env.OTEL_EXPORTER_OTLP_CLIENT_KEY,
        env.OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE,
    ),
    "spans": (
        env.OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE,
        env.OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY,
        env.OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE,
    ),
    "metrics": (
        env.OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE,
        env.OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY,
        env.OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE,
    ),
}
"""The variables naming the TLS files — the CA certificate, the client's key and certificate —
shared (``None``) and of each signal."""
_GRPC_CREDENTIALS: Final[dict[Signal | None, str]] = {
    None: env.OTEL_PYTHON_EXPORTER_OTLP_GRPC_CREDENTIAL_PROVIDER,
    "spans": env.OTEL_PYTHON_EXPORTER_OTLP_GRPC_TRACES_CREDENTIAL_PROVIDER,
    "metrics": env.OTEL_PYTHON_EXPORTER_OTLP_GRPC_METRICS_CREDENTIAL_PROVIDER,
}
"""The variables naming a credential provider that takes the TLS files' place over gRPC."""
_INSECURE: Final[dict[Signal, str]] = {
    "spans": env.OTEL_EXPORTER_OTLP_TRACES_INSECURE,
    "metrics": env.OTEL_EXPORTER_OTLP_METRICS_INSECURE,
}


def _tls_files_read(signal: Signal, url: str, protocol: Protocol) -> tuple[str, ...]:
    """The variables whose files the signal's exporter reads to speak to ``url`` over TLS, as
    the SDK's exporters pick them; none without TLS.

    OTLP/HTTP (TLS for ``https://``) takes each file from the signal's variable, else the
    shared one, and the key only beside a client certificate. gRPC (TLS unless the endpoint is
    ``http://`` or ``*_INSECURE=true`` says so, and always for ``https://``) takes the three
    from the signal's variables when its CA certificate variable is set (even empty), else
    from the shared ones, and none when no CA certificate is named (the system's roots) or a
    credential provider of the same level is (it gives the credentials instead)."""
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if protocol == "http/protobuf":
        if scheme != "https":
            return ()
        ca, key, certificate = (
            own if os.environ.get(own) else shared
            for own, shared in zip(_TLS_FILES[signal], _TLS_FILES[None], strict=True)
        )
        return (ca, certificate, key) if os.environ.get(certificate) else (ca, certificate)
    if not _grpc_tls(signal, scheme):
        return ()
    level: Signal | None = signal if os.environ.get(_TLS_FILES[signal][0]) is not None else None
    if os.environ.get(_GRPC_CREDENTIALS[level]):
        return ()
    files = _TLS_FILES[level]
    return files if os.environ.get(files[0]) else ()


def _grpc_tls(signal: Signal, scheme: str) -> bool:
    """Whether the signal's gRPC exporter speaks TLS: always to ``https://``, else as the
    signal's ``*_INSECURE`` variable or the shared one says (set to anything but ``true``:
    TLS), else for anything but ``http://``."""
    if scheme == "https":
        return True
    for variable in (_INSECURE[signal], env.OTEL_EXPORTER_OTLP_INSECURE):
        value = os.environ.get(variable)
        if value is not None:
            return value.lower() != "true"
    return scheme != "http"


def _check_tls_files(signal: Signal, url: str, protocol: Protocol) -> None:
    """Every TLS file the exporter reads can be read — over OTLP/HTTP one that cannot fails
    every export; over gRPC the SDK logs a traceback and goes on without it — and, over gRPC,
    a client key comes with its certificate: the gRPC library aborts the process on one
    without the other."""
    read = _tls_files_read(signal, url, protocol)
    for variable in read:
        path = os.environ.get(variable)
        if not path:
            continue
        usable = os.path.isfile(path) or (protocol == "http/protobuf" and os.path.isdir(path))
        if not usable or not os.access(path, os.R_OK):
            raise ConfigurationError(
                variable, f"{path!r} is no file that can be read (the OTLP exporter reads it)"
            )
    if protocol == "grpc" and read:
        _, key, certificate = read
        if bool(os.environ.get(key)) != bool(os.environ.get(certificate)):
            given, missing = (key, certificate) if os.environ.get(key) else (certificate, key)
            raise ConfigurationError(
                given,
                f"is set but {missing} is not: gRPC takes the client's key and certificate "
                "together (its library aborts the process given one alone); set both, or "
                "neither",
            )


def check_export_settings(collector: OtlpEndpoint) -> None:
    """Raise a :class:`ConfigurationError` naming the variable when the SDK's export to
    ``collector`` cannot work with its settings: a batching count or interval of 0 or less, a
    batch larger than the queue — which the SDK raises as a bare ``ValueError`` naming neither
    the variable nor otel-llm, once tracing is half set up — an export timeout of 0 or less,
    with which every export fails, or a TLS file it cannot read (:func:`_check_tls_files`).
    Values the SDK cannot parse are left to it (it uses its default and says so, or cannot make
    the exporter)."""
    signal = collector.signal
    _check_tls_files(signal, collector.url, collector.protocol)
    own = _OWN_TIMEOUT[signal]
    variable = own if os.environ.get(own) else env.OTEL_EXPORTER_OTLP_TIMEOUT
    value = os.environ.get(variable)
    try:
        seconds = float(value) if value else None
    except ValueError:
        seconds = None
    if seconds is not None and not 0 < seconds < math.inf:
        raise ConfigurationError(
            variable, f"{value!r} must be a number of seconds above 0 (the default: 10)"
        )
    read: dict[str, float] = {}
    for variable, default in _BATCHING[signal]:
        value = os.environ.get(variable)
        try:  # as the SDK reads it: whole numbers for the span batching, any for metrics
            number = default if value is None else (float if signal == "metrics" else int)(value)
        except ValueError:
            number = default
        if number <= 0:
            raise ConfigurationError(
                variable, f"{value!r} must be above 0 (OpenTelemetry's default: {default:g})"
            )
        read[variable] = number
    if signal == "spans":
        queue, batch = read[env.OTEL_BSP_MAX_QUEUE_SIZE], read[env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE]
        if batch > queue:
            raise ConfigurationError(
                env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
                f"{batch:g} must be at most the queue's {queue:g} "
                f"({env.OTEL_BSP_MAX_QUEUE_SIZE}): a batch is taken from the queue",
            )


def _header_problem(entry: str) -> str | None:
    if not entry:
        return None
    name, equals, value = entry.partition("=")
    if not equals:
        return "has no = (name: value is how HTTP writes a header, not OTLP)"
    if not _HEADER_NAME.fullmatch(name.strip(" \t")):
        return "does not start with a header name"
    if not _HEADER_VALUE.fullmatch(value.strip(" \t")):
        return f"has a value for {name.strip()!r} that must be URL-encoded"
    return None


def check_endpoint(url: str, *, variable: str, protocol: Protocol) -> None:
    """Raise a :class:`ConfigurationError` naming ``variable`` when ``url`` is no endpoint the
    ``protocol``'s exporter can send to — one that does not parse, has a port that is not one,
    or (OTLP/HTTP) no ``http``/``https`` scheme; OTLP/gRPC also takes ``host:port`` and gRPC's
    own target forms, as its exporter does. The URL is shown without its credentials."""
    problem = _endpoint_problem(url, protocol)
    if problem is not None:
        raise ConfigurationError(variable, f"{_shown(url)!r} {problem}")


def _shown(url: str) -> str:
    """A malformed endpoint as its error shows it: without credentials, even where parsing would
    miss them — a base64 password may hold the ``/``, ``?`` or ``#`` that ends an authority, so
    then everything between ``://`` and the last ``@`` is left out."""
    scheme, has_scheme, rest = url.partition("://")
    if not has_scheme:
        scheme, rest = "", url
    before, at, after = rest.rpartition("@")
    if at and any(mark in before for mark in "/?#"):
        return f"{scheme}{has_scheme}[REDACTED]@{after}"
    return redact_url(url)


def _endpoint_problem(url: str, protocol: Protocol) -> str | None:
    scheme, has_scheme, rest = url.partition("://")
    scheme = scheme.lower()
    if not has_scheme:
        if protocol == "http/protobuf":
            return (
                "has no scheme: OTLP/HTTP sends to a URL, such as "
                f"http://{_shown(url)} (https:// for TLS)"
            )
        if url.partition(":")[0].lower() in _GRPC_TARGETS:
            return None
        return _authority_problem(url.partition("/")[0])
    if scheme in ("http", "https"):
        return _authority_problem(re.split(r"[/?#]", rest, maxsplit=1)[0])
    if protocol == "grpc" and scheme in _GRPC_TARGETS:
        return None
    accepted = "http:// or https://" + (", host:port" if protocol == "grpc" else "")
    return f"has the scheme {scheme!r}: OTLP ({protocol}) takes {accepted}"


def _authority_problem(authority: str) -> str | None:
    """What is wrong with ``[user@]host[:port]``, if anything."""
    host_port = authority.rpartition("@")[2]
    if host_port.startswith("["):
        address, closed, after = host_port[1:].partition("]")
        if not closed:
            return "does not parse: its IPv6 address has no closing ]"
        try:
            ipaddress.IPv6Address(address.split("%", 1)[0])
        except ValueError:
            return "does not parse: what is between [ and ] is no IPv6 address"
        if after and not after.startswith(":"):
            return "does not parse: only :port may follow the IPv6 address"
        port = after[1:]
    else:
        if host_port.count(":") > 1:
            return "does not parse: an IPv6 address in a URL goes between [ and ]"
        host, _, port = host_port.partition(":")
        if not host:
            return "names no host"
        if not _HOST_NAME.fullmatch(host):
            return "does not parse: its host is not a host name"
    if port and not (port.isascii() and port.isdecimal() and 0 < int(port) < 65536):
        return "has a port that is not a number from 1 to 65535"
    return None


_exporting = threading.local()
"""``collector``: the :class:`OtlpEndpoint` whose export is running on this thread, if any."""


class _HoldBack(logging.Filter):
    """On the OpenTelemetry exporters' loggers: a record logged while one of otel-llm's exports
    runs on this thread goes to that export's :class:`OtlpEndpoint` instead of the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        collector: OtlpEndpoint | None = getattr(_exporting, "collector", None)
        if collector is None:
            return True
        collector.held(record)
        return False


_HOLD_BACK = _HoldBack()


def _hold_back_logs_of(exporter: object) -> None:
    """Install the filter on the loggers of the exporter's modules (and of the OTLP HTTP
    client, which logs on the exporter's logger or its own)."""
    names = {cls.__module__ for cls in type(exporter).__mro__}
    names.add("opentelemetry.exporter.otlp.common.http")
    for name in names:
        if name.startswith("opentelemetry.exporter"):
            target = logging.getLogger(name)
            if _HOLD_BACK not in target.filters:
                target.addFilter(_HOLD_BACK)


class _Stoppable:
    """An inner exporter that is shut down once, whoever asks first."""

    def __init__(self, inner: SpanExporter | MetricExporter) -> None:
        self.inner = inner
        self.stopped = False
        self._lock = threading.Lock()

    def stop(self) -> None:
        with self._lock:
            if self.stopped:
                return
            self.stopped = True
        try:
            self.inner.shutdown()
        except Exception as exc:  # a telemetry failure never reaches the application
            logger.debug("otel-llm: OTLP exporter shutdown failed: %r", exc)


class OtlpEndpoint:
    """One signal's OTLP endpoint as ``init()``'s exporter sees it: one warning per outage, a
    bounded shutdown. ``failed_exports`` counts the batches that did not go out.

    ``endpoint`` is the URL the exporter posts to (named in warnings without its secrets);
    ``via`` the variable that named it (the cure a warning gives depends on it); ``protocol``
    the one its exporter speaks; ``secrets`` more text never to repeat (the OTLP headers'
    values)."""

    def __init__(
        self,
        endpoint: str,
        *,
        signal: Signal,
        via: str | None = None,
        protocol: Protocol = PROTOCOLS[0],
        store: str | None = None,
        secrets: Iterable[str] = (),
    ) -> None:
        self.signal: Signal = signal
        self.protocol: Protocol = protocol
        self.url = endpoint
        """The endpoint the exporter is given, as judged (credentials and all: never shown)."""
        self.endpoint = redact_url(endpoint)
        self.via = via or OWN_ENDPOINT[signal]
        self._secrets = (*url_secrets(endpoint), *secrets)
        self.store = store
        """The embedded store that still gets the spans while this endpoint fails."""
        self._lock = threading.Lock()
        self._exporters: list[_Stoppable] = []
        self._failing = False
        self._closing = False
        self._cause: str | None = None
        self._timer: threading.Timer | None = None
        self._bound_s = DEFAULTS.otlp_shutdown_timeout_s
        self._in_flight = 0
        """Exports running now (a collector that never answers keeps one running)."""
        self.failed_exports = 0
        reference = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forked(reference))

    def _forked(self) -> None:
        """In a child process: the exports the parent was running are the parent's (no thread
        of the child runs them), and so is a shutdown it had begun; what it learnt of the
        collector (failing or not) holds for the child too."""
        self._lock = threading.Lock()
        self._in_flight = 0
        self._closing = False
        self._cause = None
        self._timer = None
        for exporter in self._exporters:
            exporter._lock = threading.Lock()

    def shown(self, text: str) -> str:
        """``text`` fit for a message about this endpoint: without its secrets (the URL's
        password, the headers' values) or key-like tokens."""
        return redact(text, self._secrets)

    def span_exporter(self, inner: SpanExporter) -> SpanExporter:
        """``inner`` with its log lines held back and its outcome reported here."""
        assert self.signal == "spans", "a span exporter needs a collector of spans"
        return _SpanExporter(self, self._adopt(inner))

    def metric_exporter(self, inner: MetricExporter) -> MetricExporter:
        """``inner`` with its log lines held back and its outcome reported here."""
        assert self.signal == "metrics", "a metric exporter needs a collector of metrics"
        return _MetricExporter(self, self._adopt(inner), inner)

    def span_processor(self, inner: SpanExporter) -> BatchSpanProcessor:
        """A batch processor exporting through ``inner`` whose shutdown is bounded."""
        return _BoundedBatchSpanProcessor(self, self.span_exporter(inner))

    def _adopt(self, inner: SpanExporter | MetricExporter) -> _Stoppable:
        _hold_back_logs_of(inner)
        stoppable = _Stoppable(inner)
        with self._lock:
            self._exporters.append(stoppable)
        return stoppable

    def export(self, exporter: _Stoppable, attempt: Callable[[], bool]) -> bool:
        """Run one export; never raises."""
        if exporter.stopped:
            self._failed("the exporter was stopped at shutdown")
            return False
        _exporting.collector = self
        with self._lock:
            self._in_flight += 1
        try:
            ok = attempt()
        except Exception as exc:
            ok = False
            self._note(type(exc).__name__)  # its text may hold what a span held
        finally:
            _exporting.collector = None
            with self._lock:
                self._in_flight -= 1
        if ok:
            self._succeeded()
        else:
            self._failed(self._take_cause())
        return ok

    def held(self, record: logging.LogRecord) -> None:
        """A log line of the exporter during an export: its first one is the outage's cause;
        while closing it means the collector is not taking the last batch — stop waiting."""
        try:
            text = record.getMessage()
        except Exception:
            text = str(record.msg)
        self._note(text)
        if self._closing and record.levelno >= logging.WARNING:
            self.stop()

    def _note(self, text: str) -> None:
        cause = _RETRY_TAIL.sub("", text).removeprefix("Transient error ").strip()
        os_error = _OS_ERROR.search(cause)
        status = _HTTP_STATUS.search(cause)
        if os_error is not None:
            cause = os_error.group(0).strip()
        elif status is not None:
            cause = f"HTTP {status.group(1)} {status.group(2).strip()}".strip()
        with self._lock:
            if self._cause is None:
                self._cause = redact(cause, self._secrets)[:_MAX_CAUSE_CHARS]

    def _take_cause(self) -> str | None:
        with self._lock:
            cause, self._cause = self._cause, None
        return cause

    def _succeeded(self) -> None:
        with self._lock:
            recovered, self._failing = self._failing, False
            self._cause = None  # what the exporter said on the way was no outage
        if recovered:
            logger.info("otel-llm: OTLP export of %s to %s works again", self.signal, self.endpoint)

    def _failed(self, cause: str | None) -> None:
        with self._lock:
            self.failed_exports += 1
            announce, self._failing = not self._failing, True
            closing = self._closing
        if announce:
            cause = cause or "no reason given"
            logger.warning(
                "otel-llm: cannot export %s to the OTLP collector at %s (%s%s); %s; %s; not "
                "logged again until an export of %s succeeds",
                self.signal,
                self.endpoint,
                cause,
                self._diagnosis(cause),
                self._effect(),
                self._cure(),
                self.signal,
            )
        if closing:
            self.stop()

    def _diagnosis(self, cause: str) -> str:
        """What the cause means, when it says more than itself: a 404 is a collector (or a
        server) with no pipeline for this signal."""
        if not cause.startswith("HTTP 404"):
            return ""
        return (
            f": it takes no {self.signal}, as a collector config without a "
            f"{_PIPELINE[self.signal]} pipeline answers"
        )

    def _effect(self) -> str:
        """What the failure costs — this signal only."""
        if self.signal == "spans":
            kept = f" (the DuckDB store {self.store} still gets every span)" if self.store else ""
            return f"spans are not exported over OTLP while it fails{kept}"
        return "metrics are not exported while it fails; spans are not affected"

    def _cure(self) -> str:
        """What to set instead."""
        if self.signal == "spans":
            return (
                "to fix it, start that collector or point "
                f"{env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT} at one that takes spans"
            )
        shared = (
            f" ({self.via} sends spans and metrics to one collector)"
            if self.via == env.OTEL_EXPORTER_OTLP_ENDPOINT
            else ""
        )
        return (
            f"to fix it, point {env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT} at a collector that "
            f"takes metrics, or set {env.OTEL_METRICS_EXPORTER}=none to send none{shared}"
        )

    def close(self, timeout_s: float = DEFAULTS.otlp_shutdown_timeout_s) -> None:
        """Shutdown begins: a collector that is failing gets no wait; otherwise the exporters
        are stopped after ``timeout_s`` at the latest (idempotent)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            failing = self._failing
        if failing:
            self.stop()
            return
        self._bound_s = timeout_s
        self._timer = threading.Timer(timeout_s, self._give_up, args=(timeout_s,))
        self._timer.daemon = True
        self._timer.name = "otel-llm OTLP shutdown bound"
        self._timer.start()

    def _give_up(self, waited_s: float) -> None:
        """The shutdown bound is reached: stop, and say so if an export is still waiting on a
        collector that took the connection and never answered (nothing else would)."""
        with self._lock:
            hanging = self._in_flight > 0 and not self._failing
            self._failing = self._failing or hanging
        if hanging:
            if self.signal == "spans":
                kept = f" (the DuckDB store {self.store} has every span)" if self.store else ""
            else:
                kept = f"; spans are not affected; {self._cure()}"
            logger.warning(
                "otel-llm: gave up waiting for the OTLP collector at %s after %g s at shutdown: "
                "it took the connection and did not answer, so the %s it had not taken are not "
                "exported%s",
                self.endpoint,
                waited_s,
                self.signal,
                kept,
            )
        self.stop()

    def stop(self) -> None:
        """Stop every exporter now: a retry that is waiting ends, later batches are dropped."""
        with self._lock:
            exporters = list(self._exporters)
        for exporter in exporters:
            exporter.stop()

    def finish(self) -> None:
        """Shutdown is over: the bound's timer is not needed any more — and an export still
        waiting now is given up on (and said, once) as the timer would have."""
        timer = self._timer
        if timer is None:
            return
        timer.cancel()
        with self._lock:
            waiting = self._in_flight > 0
        if waiting:
            self._give_up(self._bound_s)


def _forked(reference: weakref.ref[OtlpEndpoint]) -> None:
    endpoint = reference()
    if endpoint is not None:
        endpoint._forked()


class _SpanExporter(SpanExporter):
    def __init__(self, collector: OtlpEndpoint, exporter: _Stoppable) -> None:
        self._collector = collector
        self._exporter = exporter

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        inner = self._exporter.inner
        assert isinstance(inner, SpanExporter)

        def attempt() -> bool:
            try:
                if inner.export(spans) is SpanExportResult.SUCCESS:
                    return True
            except Exception:  # an exporter's encoder may raise (pure-Python protobuf does)
                if (repaired := encodable(spans)) is None:
                    raise
            else:
                repaired = encodable(spans)
            # The exporter encodes a batch whole: one string UTF-8 cannot encode (a lone
            # surrogate) failed every span in it. Looked for only once an export failed: the
            # look costs about as much as the encoding.
            return repaired is not None and inner.export(repaired) is SpanExportResult.SUCCESS

        ok = self._collector.export(self._exporter, attempt)
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self._exporter.stop()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class _MetricExporter(MetricExporter):
    def __init__(
        self, collector: OtlpEndpoint, exporter: _Stoppable, inner: MetricExporter
    ) -> None:
        # The reader asks the exporter for these (the SDK reads them off any exporter).
        super().__init__(
            preferred_temporality=inner._preferred_temporality,
            preferred_aggregation=inner._preferred_aggregation,
        )
        self._collector = collector
        self._exporter = exporter
        self._inner = inner

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        def attempt() -> bool:
            result = self._inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
            return result is MetricExportResult.SUCCESS

        ok = self._collector.export(self._exporter, attempt)
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._exporter.stop()


class _BoundedBatchSpanProcessor(BatchSpanProcessor):
    """The SDK's batch processor, whose shutdown never waits longer than the collector's bound
    (the SDK's own waits up to 30 s for an export in flight)."""

    def __init__(self, collector: OtlpEndpoint, exporter: SpanExporter) -> None:
        super().__init__(exporter)
        self._collector = collector

    def shutdown(self) -> None:
        self._collector.close()
        closing = threading.Thread(
            target=super().shutdown, name="otel-llm OTLP span shutdown", daemon=True
        )
        closing.start()
        closing.join(DEFAULTS.otlp_shutdown_timeout_s)
        self._collector.finish()
