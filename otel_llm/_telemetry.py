"""``otel_llm.init()``: one call that wires tracing, the deriving processor and the DuckDB store."""

from __future__ import annotations

import atexit
import functools
import importlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, ParamSpec, TypeVar

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from otel_llm import _env as env
from otel_llm._arguments import check_processor_host, takes_processors, type_name
from otel_llm._children import shut_down_in_children
from otel_llm._defaults import DEFAULTS
from otel_llm._errors import ConfigurationError
from otel_llm._measure._processor import DerivingSpanProcessor
from otel_llm._measure._stalls import resolve_threshold_ms
from otel_llm._otlp_endpoint import (
    HTTP_JSON,
    OTLP_EXPORTERS,
    OWN_ENDPOINT,
    OWN_EXPORTER,
    OtlpEndpoint,
    Protocol,
    Signal,
    check_endpoint,
    check_export_settings,
    check_headers,
    exported,
    exporter_names,
    headers_variable,
    requested_protocol,
)
from otel_llm._show._store._exporter import SegmentSpanExporter
from otel_llm._show._store._glob import glob_problem
from otel_llm._version import __version__
from otel_llm._wrap import _open_calls as open_calls

if TYPE_CHECKING:
    import requests

logger = logging.getLogger("otel_llm")

_MIN_EVENTS = DEFAULTS.chunk_event_budget + 8
_OTLP_EXPORTERS: Final = "opentelemetry.exporter.otlp."
"""The package of the OpenTelemetry OTLP exporters (HTTP and gRPC)."""


def store_path() -> Path:
    """The embedded store: ``$OTEL_LLM_DB``, else ``./otel-llm-store`` — or, where only an
    earlier version's default single-file store ``./otel-llm.duckdb`` exists, that one (its
    first writer migrates it in place), so no earlier span is left behind."""
    chosen = env.env_path(env.OTEL_LLM_DB)
    if chosen is not None:
        return chosen
    default, earlier = Path(DEFAULTS.db_path), Path(DEFAULTS.earlier_db_path)
    return earlier if earlier.exists() and not default.exists() else default


_SIGNAL_PATH: Final[dict[Signal, str]] = {"spans": "v1/traces", "metrics": "v1/metrics"}
"""Where OTLP/HTTP sends a signal under the base endpoint (as the SDK's exporters do)."""
_HEADERS: Final[dict[Signal, str]] = {
    "spans": env.OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    "metrics": env.OTEL_EXPORTER_OTLP_METRICS_HEADERS,
}
_SIGNALS: Final[tuple[Signal, ...]] = ("spans", "metrics")


def _otlp_collectors(store: Path | None) -> dict[Signal, OtlpEndpoint]:
    """One :class:`OtlpEndpoint` per signal the standard variables name an endpoint for (each its
    own, even when ``OTEL_EXPORTER_OTLP_ENDPOINT`` names one for both: a collector refusing
    metrics must cost the spans nothing), with the protocol they ask for it; none for a signal
    whose ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` is ``none``.

    Every endpoint and headers variable a signal would read is checked here, at ``init()``: one
    its exporter cannot send to, or whose headers it cannot parse, is a
    :class:`ConfigurationError` naming the variable."""
    base = env.env_text(env.OTEL_EXPORTER_OTLP_ENDPOINT)
    named = [
        signal
        for signal in _SIGNALS
        if exported(signal) and (base is not None or env.env_any(OWN_ENDPOINT[signal]))
    ]
    protocols = _otlp_protocols(named)
    found: dict[Signal, OtlpEndpoint] = {}
    for signal in named:
        protocol = protocols[signal]
        own = env.env_text(OWN_ENDPOINT[signal])
        # the endpoint the signal's exporter will use: the base one only where it has none of
        # its own (a base meant for another component is then none of this signal's business)
        if own is not None:
            check_endpoint(own, variable=OWN_ENDPOINT[signal], protocol=protocol)
        else:
            assert base is not None
            check_endpoint(base, variable=env.OTEL_EXPORTER_OTLP_ENDPOINT, protocol=protocol)
        check_headers(headers_variable(signal))
        if own is not None:
            url, via = own, OWN_ENDPOINT[signal]
        else:
            assert base is not None
            via = env.OTEL_EXPORTER_OTLP_ENDPOINT
            grpc = protocol == "grpc"  # gRPC sends every signal to the endpoint as it is
            url = base if grpc else f"{base.removesuffix('/')}/{_SIGNAL_PATH[signal]}"
        secrets = (
            *env.env_pair_values(env.OTEL_EXPORTER_OTLP_HEADERS),
            *env.env_pair_values(_HEADERS[signal]),
        )
        found[signal] = OtlpEndpoint(
            url,
            signal=signal,
            via=via,
            protocol=protocol,
            store=str(store) if store else None,
            secrets=secrets,
        )
    return found


def _otlp_protocols(signals: list[Signal]) -> dict[Signal, Protocol]:
    """The protocol each signal is exported with: the one its variables ask for — gRPC only when
    its exporter is installed; http/json, which the Python exporters do not speak, never — else
    http/protobuf and one warning naming the variable."""
    chosen: dict[Signal, Protocol] = {}
    fallen_back: dict[tuple[str, str], list[Signal]] = {}
    for signal in signals:
        asked, variable = requested_protocol(signal)
        if asked == HTTP_JSON or (asked == "grpc" and not _grpc_installed()):
            assert variable is not None  # neither is ever the default
            fallen_back.setdefault((variable, asked), []).append(signal)
            chosen[signal] = "http/protobuf"
        else:
            chosen[signal] = asked
    for (variable, wanted), which in fallen_back.items():
        named = wanted if variable not in OWN_EXPORTER.values() else "otlp_proto_grpc"
        logger.warning(
            "otel-llm: %s=%s but %s; %s use http/protobuf",
            variable,
            named,
            "the OpenTelemetry Python exporters do not speak it"
            if wanted == HTTP_JSON
            else "the gRPC exporter is not installed "
            "(pip install opentelemetry-exporter-otlp-proto-grpc)",
            " and ".join(which),
        )
    return chosen


def _grpc_installed() -> bool:
    """Whether the OTLP/gRPC exporters can be imported."""
    try:
        for signal in ("trace", "metric"):
            importlib.import_module(f"opentelemetry.exporter.otlp.proto.grpc.{signal}_exporter")
    except ImportError:
        return False
    return True


def _span_exporter(collector: OtlpEndpoint) -> SpanExporter:
    """The SDK's OTLP span exporter for the collector's protocol, sending to its endpoint as
    ``init()`` judged it (without the whitespace around the variable's value, which the SDK
    would send with); the rest it reads from the standard variables."""
    if collector.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return GrpcSpanExporter(endpoint=collector.url)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=collector.url, session=_own_connections_session("traces"))


def _metric_exporter(collector: OtlpEndpoint) -> MetricExporter:
    """The SDK's OTLP metric exporter, as :func:`_span_exporter` makes the span exporter."""
    if collector.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetricExporter,
        )

        return GrpcMetricExporter(endpoint=collector.url)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter(endpoint=collector.url, session=_own_connections_session("metrics"))


_CREDENTIAL_PROVIDERS: Final = {
    "traces": (
        env.OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER,
        env.OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER,
    ),
    "metrics": (
        env.OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER,
        env.OTEL_PYTHON_EXPORTER_OTLP_HTTP_METRICS_CREDENTIAL_PROVIDER,
    ),
}
"""The variables that may name each signal's OTLP/HTTP session; the exporter loads it only
when it is given no session."""


def _own_connections_session(signal: Literal["traces", "metrics"]) -> requests.Session | None:
    """The HTTP session of one OTLP/HTTP exporter, whose connections stay with the process that
    opened them: the exporter keeps its connection to the collector open between exports, and a
    forked child that found it in its pool sent on the parent's socket — two processes
    exporting at once interleaved their requests. A child gets a pool of its own (the
    inherited one is dropped unclosed: closing it could take a lock a thread of the parent held
    at the fork, and the parent's socket is the parent's). ``None`` when the SDK's credential
    provider variables name the session: the exporter loads that one, as it always has."""
    if any(env.env_text(name) for name in _CREDENTIAL_PROVIDERS[signal]):
        return None
    import requests

    session = requests.Session()
    reference = weakref.ref(session)
    os.register_at_fork(after_in_child=lambda: _new_pools(reference))
    return session


def _new_pools(reference: weakref.ref[requests.Session]) -> None:
    from requests.adapters import HTTPAdapter

    session = reference()
    if session is not None:
        for prefix in ("https://", "http://"):
            session.mount(prefix, HTTPAdapter())


_Exporter = TypeVar("_Exporter", SpanExporter, MetricExporter)


def _otlp_pipeline(
    collectors: dict[Signal, OtlpEndpoint],
) -> tuple[SpanProcessor | None, MetricExporter | None]:
    """The batch span processor and the metric exporter of the signals exported over OTLP,
    each with the SDK's exporter the standard variables describe — made before anything is set
    up: settings the SDK refuses are a :class:`ConfigurationError`, and leave nothing running
    (the SDK raised its own errors half-way through ``init()``)."""
    for collector in collectors.values():
        check_export_settings(collector)
    spans, metrics_ = collectors.get("spans"), collectors.get("metrics")
    span_exporter = _made(spans, _span_exporter) if spans is not None else None
    try:
        metric_exporter = _made(metrics_, _metric_exporter) if metrics_ is not None else None
    except ConfigurationError:
        if span_exporter is not None:
            span_exporter.shutdown()
        raise
    processor = (
        spans.span_processor(span_exporter)
        if spans is not None and span_exporter is not None
        else None
    )
    exporter = (
        metrics_.metric_exporter(metric_exporter)
        if metrics_ is not None and metric_exporter is not None
        else None
    )
    return processor, exporter


class _SwitchedMetricExporter(MetricExporter):
    """The exporter of the global meter provider ``init()`` makes. OpenTelemetry lets a process
    set its global ``MeterProvider`` once, and every instrument made from it (a client's, the
    wrappers') stays with it: so ``shutdown()`` sends its last export and detaches the exporter
    — the provider is not shut down — and an ``init()`` after it attaches its own. Detached,
    its exports go nowhere."""

    def __init__(self, inner: MetricExporter) -> None:
        # The reader asks the exporter for these (the SDK reads them off any exporter).
        super().__init__(
            preferred_temporality=inner._preferred_temporality,
            preferred_aggregation=inner._preferred_aggregation,
        )
        self._inner: MetricExporter | None = inner

    @property
    def attached(self) -> MetricExporter | None:
        """The exporter exported through now, if any."""
        return self._inner

    def attach(self, inner: MetricExporter) -> None:
        """Export through ``inner`` from now on."""
        self._inner = inner

    def detach(self, inner: MetricExporter | None = None) -> None:
        """Export nowhere from now on, and shut the exporter attached down; given ``inner``,
        only if it is still the one attached (a shutdown's last export may end after the next
        ``init()`` attached its own, which stays) — ``inner`` is shut down either way."""
        attached = self._inner
        if inner is None or attached is inner:
            self._inner = None
        shut = attached if inner is None else inner
        if shut is not None:
            shut.shutdown()

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        inner = self._inner
        if inner is None:
            return MetricExportResult.SUCCESS
        return inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        inner = self._inner
        return True if inner is None else inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.detach()


_global_meters: tuple[MeterProvider, _SwitchedMetricExporter] | None = None
"""The meter provider an ``init()`` made global, and its exporter's switch."""


def _made(collector: OtlpEndpoint, make: Callable[[OtlpEndpoint], _Exporter]) -> _Exporter:
    """The signal's SDK exporter; one the SDK cannot make from the variables (a compression or
    a status code it does not know, a timeout that is no number, a credential provider not
    installed) is a :class:`ConfigurationError` saying what the SDK said, without the headers'
    values."""
    try:
        return make(collector)
    except Exception as exc:  # the SDK's own, of any type: not chained (it may quote secrets)
        said = f"{type(exc).__name__}: {collector.shown(str(exc))}"
    raise ConfigurationError(
        f"the OTLP {collector.signal} exporter",
        f"the OpenTelemetry SDK cannot make it from the variables set ({said}); correct the "
        f"variable it names, or set {OWN_EXPORTER[collector.signal]}=none to send no "
        f"{collector.signal} over OTLP",
    )


@dataclass
class Telemetry:
    """What :func:`init` set up. ``shutdown()`` flushes and stops everything it started."""

    tracer_provider: trace.TracerProvider
    processor: DerivingSpanProcessor | None
    exporter: SegmentSpanExporter | None
    db_path: Path | None
    stall_threshold_ms: int
    owns_provider: bool
    enabled: bool = True
    meter_provider: MeterProvider | None = None
    """The OTLP meter provider ``init()`` created, if it created one (or, after a
    ``shutdown()``, the one an earlier ``init()`` made global, which it exports through)."""
    meter_switch: _SwitchedMetricExporter | None = field(default=None, repr=False)
    """The global meter provider's exporter switch: ``shutdown()`` detaches it instead of
    shutting the provider down."""
    collectors: tuple[OtlpEndpoint, ...] = ()
    """One per exported signal (spans, metrics), when OTLP export is on: one warning per
    outage, a bounded shutdown, each signal on its own."""
    _shut: bool = field(default=False, repr=False)
    _children_export: bool = field(default=False, repr=False)
    """Set once multiprocessing's fork children are made to export before they exit."""

    @property
    def tracer(self) -> trace.Tracer:
        """The tracer otel-llm records its spans with."""
        return self.tracer_provider.get_tracer("otel_llm", __version__)

    def force_flush(self, timeout_s: float = DEFAULTS.shutdown_timeout_s) -> bool:
        """Write every finished span now — into the DuckDB store too — and export what the
        other processors hold; False if that did not finish in ``timeout_s``.

        The store's spans wait in its writer's queue, which the SDK's ``SimpleSpanProcessor``
        does not flush (its ``force_flush`` returns at once), so the store is flushed here."""
        if self.processor is None:
            return True
        deadline = time.monotonic() + timeout_s
        flushed = self.processor.force_flush(int(timeout_s * 1000))
        if self.exporter is not None:
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            flushed = self.exporter.force_flush(remaining_ms) and flushed
        return flushed

    @property
    def shut(self) -> bool:
        """True once :meth:`shutdown` ran."""
        return self._shut

    def shutdown(self) -> None:
        """Flush and stop what :func:`init` started (idempotent); OTLP exporters get at most
        ``DEFAULTS.otlp_shutdown_timeout_s``, none at all once their collector failed.

        The metrics are shut down on a thread of their own beside the spans, so a metrics
        endpoint that fails or hangs neither stops the spans' last export nor spends their
        bound; the spans are waited for first, then the metrics for at most the bound."""
        if self._shut:
            return
        self._shut = True
        if self.collectors:
            atexit.unregister(self.shutdown)
        shut_metrics = self._metrics_shutdown()
        metrics_done = _started(shut_metrics, "otel-llm metrics shutdown")
        for collector in self._collectors_of("spans"):
            collector.close()
        if self.owns_provider and isinstance(self.tracer_provider, TracerProvider):
            self.tracer_provider.shutdown()
        elif self.processor is not None:
            # its downstream's shutdown sends (and writes) what they hold, each within its
            # bound: a flush first would wait the exporter's whole timeout on a collector
            # that hangs
            self.processor.shutdown()
        for collector in self._collectors_of("spans"):
            collector.finish()
        if metrics_done is not None:
            metrics_done.join(DEFAULTS.otlp_shutdown_timeout_s)
        elif shut_metrics is not None:  # no thread could start: after the spans, here
            shut_metrics()

    def _collectors_of(self, signal: Signal) -> list[OtlpEndpoint]:
        return [collector for collector in self.collectors if collector.signal == signal]

    def _metrics_shutdown(self) -> Callable[[], None] | None:
        """The metrics' bounded shutdown (their last export), if init() exports metrics."""
        meters = self.meter_provider
        if meters is None:
            return None
        collectors = self._collectors_of("metrics")
        switch = self.meter_switch
        ours = switch.attached if switch is not None else None  # before a later init()'s
        bound_ms = DEFAULTS.otlp_shutdown_timeout_s * 1000

        def shut() -> None:
            for collector in collectors:
                collector.close()
            try:
                if switch is None:
                    meters.shutdown(timeout_millis=bound_ms)
                else:  # global: its last export, and it stays for the next init()
                    meters.force_flush(timeout_millis=bound_ms)
                    switch.detach(ours)
            except Exception as exc:  # a telemetry failure never reaches the application
                logger.debug("otel-llm: the meter provider's shutdown failed: %r", exc)
            finally:
                for collector in collectors:
                    collector.finish()

        return shut


def _started(work: Callable[[], None] | None, name: str) -> threading.Thread | None:
    """``work`` running on a daemon thread; None when there is no work or no thread can start
    (at interpreter shutdown)."""
    if work is None:
        return None
    thread = threading.Thread(target=work, name=name, daemon=True)
    try:
        thread.start()
    except RuntimeError:
        return None
    return thread


_active: Telemetry | None = None
"""The handle of the current :func:`init`, so a second call does not wire everything twice."""


def _before_fork() -> None:
    """The OTLP exporters' last batches in a ``multiprocessing`` fork child go out as it exits
    (:mod:`otel_llm._children`); registered once, when a process that has them first forks."""
    telemetry = _active
    if telemetry is None or not telemetry.collectors:
        return  # no OTLP export (the store sees to its own writer)
    if telemetry.shut or telemetry._children_export:
        return
    telemetry._children_export = shut_down_in_children(telemetry)


os.register_at_fork(before=_before_fork)

_init_lock = threading.RLock()
"""Held while :func:`init` runs: threads calling it at once wire once (the first sets up, the
others get its handle). A child process gets a new one: a thread of the parent may have held it
at the fork."""


def _new_init_lock() -> None:
    global _init_lock
    _init_lock = threading.RLock()


os.register_at_fork(after_in_child=_new_init_lock)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _one_at_a_time(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` run under :data:`_init_lock`."""

    @functools.wraps(function)
    def one_at_a_time(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with _init_lock:
            return function(*args, **kwargs)

    return one_at_a_time


@_one_at_a_time
def init(
    *,
    db_path: str | os.PathLike[str] | None = None,
    service_name: str | None = None,
    stall_threshold_ms: int | None = None,
    duckdb: bool = True,
    otlp: bool | None = None,
    tracer_provider: TracerProvider | None = None,
    set_global: bool = True,
) -> Telemetry:
    """Wire tracing for otel-llm and return a :class:`Telemetry` handle.

    - ``db_path`` (or ``OTEL_LLM_DB``, default ``./otel-llm-store``): the embedded store, a
      directory of Parquet segments that DuckDB reads (a single-file store of an earlier
      version at that path is migrated).
    - OTLP export is added when ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``..._TRACES_ENDPOINT`` is set
      (``otlp=False``, or ``OTEL_TRACES_EXPORTER`` naming no ``otlp``, turns it off), metrics too
      with ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``..._METRICS_ENDPOINT`` (``OTEL_METRICS_EXPORTER``
      naming no ``otlp``: not; an exporter named that init() does not make is a warning), each
      over its protocol (``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_PROTOCOL``, else
      ``OTEL_EXPORTER_OTLP_PROTOCOL``: ``http/protobuf`` or ``grpc``); a protocol, endpoint or
      headers entry the exporters cannot use is a ``ConfigurationError`` naming the variable;
      each signal on its own — a failing metrics export never stops or delays a span's — a
      collector that cannot be reached is one warning per signal and outage, and shutdown
      (registered to run at exit) does not wait on it (:mod:`._show._otlp`).
    - ``OTEL_SDK_DISABLED=true`` turns everything off: calls still work, nothing is recorded.
    - ``OTEL_SERVICE_NAME`` (or ``service_name``) names the service.
    - ``stall_threshold_ms`` (default: ``LLM__STREAM__STALL_THRESHOLD_MS``, else 1000) is what
      the processor derives with for spans that did not record their own threshold.
    - If the application already installed an SDK ``TracerProvider`` (or passes one), otel-llm
      adds its processor to it instead of replacing it; that provider's other processors see the
      spans without the derived figures, and a warning says so when its event limit is too low.
      A provider that already exports OTLP gets no second OTLP exporter (``otlp=True``: it
      does), and a global ``MeterProvider`` the application set takes the metrics.
    - The store's path is resolved now (a relative one is the working directory's); one DuckDB
      would read as a pattern is refused, as is a ``tracer_provider`` that takes no processor.
    - Spans that go over OTLP to the ``otel-llm collector`` writing this same store (it claims
      the store while it runs, under its real path), on the port of the exporter's protocol and
      without TLS, are left to it: the embedded writer stays off, with a warning.
    """
    global _active
    if _active is not None and not _active.shut:
        logger.warning(
            "otel-llm: init() was already called; returning the same handle (call "
            "shutdown() first to set up again)"
        )
        return _active
    _check_arguments(
        db_path=db_path, service_name=service_name, duckdb=duckdb, otlp=otlp, set_global=set_global
    )
    threshold = resolve_threshold_ms(stall_threshold_ms)
    check_processor_host(tracer_provider)
    if env.env_flag(env.OTEL_SDK_DISABLED):
        return Telemetry(trace.NoOpTracerProvider(), None, None, None, threshold, False, False)

    path = (Path(db_path) if db_path else store_path()).absolute()  # as of init(), not later
    if duckdb and (problem := glob_problem(path)) is not None:
        raise ConfigurationError(_store_path_key(db_path), f"{path} {problem}")
    app_provider = tracer_provider
    if app_provider is None:
        current = trace.get_tracer_provider()
        app_provider = current if takes_processors(current) else None  # type: ignore[assignment]
    limits = _span_limits() if app_provider is None else None  # init() makes the provider
    want_otlp = otlp if otlp is not None else True
    collectors = _otlp_collectors(path if duckdb else None) if want_otlp else {}
    if otlp is None and app_provider is not None and _exports_otlp(app_provider):
        collectors.pop("spans", None)  # the application's own exporter sends them
    if duckdb and "spans" in collectors and _collector_stores(path, collectors["spans"]):
        duckdb = False
        for endpoint in collectors.values():
            endpoint.store = None
    exporter = SegmentSpanExporter(path) if duckdb else None
    downstream: list[SpanProcessor] = []
    if exporter is not None:
        downstream.append(SimpleSpanProcessor(exporter))
    if "metrics" in collectors and set_global and _global_meter_provider() is not None:
        collectors.pop("metrics")  # the application's meter provider takes otel-llm's metrics
    _warn_of_exporters_not_made(
        spans_elsewhere=app_provider is not None,
        metrics_elsewhere=set_global and _global_meter_provider() is not None,
    )
    otlp_processor, metric_exporter = _otlp_pipeline(collectors)
    if otlp_processor is not None:
        downstream.append(otlp_processor)
    processor = DerivingSpanProcessor(downstream, default_threshold_ms=threshold)

    provider = app_provider
    owns = provider is None
    if provider is None:
        resource = Resource.create({"service.name": service_name} if service_name else {})
        provider = TracerProvider(resource=resource, span_limits=limits)
        if set_global:
            trace.set_tracer_provider(provider)
    else:
        _warn_if_limits_bite(provider)
        _warn_if_resource_kept(provider, service_name)
    provider.add_span_processor(processor)
    meters, switch = _meter_provider(metric_exporter, _resource_of(provider), set_global)
    _active = Telemetry(
        provider,
        processor,
        exporter,
        path if exporter else None,
        threshold,
        owns_provider=owns,
        meter_provider=meters,
        meter_switch=switch,
        collectors=tuple(dict.fromkeys(collectors.values())),
    )
    if collectors:
        atexit.register(_active.shutdown)  # before the SDK's own handlers: they wait 30 s
    if exporter is not None:
        exporter.start()  # its libraries load while the application goes on starting
    open_calls.hook()  # wrapped calls left open end at exit before the provider shuts down
    return _active


def _check_arguments(
    *, db_path: object, service_name: object, duckdb: object, otlp: object, set_global: object
) -> None:
    """Each argument of :func:`init` is of its type — a switch a ``bool`` (``"no"`` reads as
    true), ``otlp`` also ``None``; ``db_path`` a path or text; ``service_name`` text — else a
    :class:`ConfigurationError` naming it and the type given (never the value)."""
    checks: tuple[tuple[str, object, tuple[type, ...], str], ...] = (
        ("duckdb", duckdb, (bool,), "True or False"),
        ("set_global", set_global, (bool,), "True or False"),
        ("otlp", otlp, (bool, type(None)), "True, False or None"),
        ("db_path", db_path, (str, os.PathLike, type(None)), "a path (str or os.PathLike)"),
        ("service_name", service_name, (str, type(None)), "text"),
    )
    for name, value, types, wanted in checks:
        if not isinstance(value, types):
            raise ConfigurationError(name, f"must be {wanted}, got {type_name(value)}")


def _span_limits() -> SpanLimits:
    """The limits of the provider init() makes: the SDK's, as the standard variables set them
    (``OTEL_SPAN_EVENT_COUNT_LIMIT`` …), with room for an attempt's chunk events. A limit the SDK
    refuses is a :class:`ConfigurationError` naming its variable, raised before anything is set
    up."""
    try:
        limits = SpanLimits()
        if limits.max_events is not None and limits.max_events < _MIN_EVENTS:
            limits = SpanLimits(max_events=_MIN_EVENTS)
    except ValueError as exc:  # "OTEL_…_LIMIT must be a non-negative integer but got …"
        variable, _, rule = str(exc).partition(" ")
    else:
        return limits
    raise ConfigurationError(variable, rule)


def _meter_provider(
    exporter: MetricExporter | None, resource: Resource, set_global: bool
) -> tuple[MeterProvider | None, _SwitchedMetricExporter | None]:
    """The meter provider exporting through ``exporter`` (none without one), and its switch
    when it is the global one. Shut down by :meth:`Telemetry.shutdown` (at exit too), within
    the collector's bound, beside the spans and never before them — the global one only
    detached from its exporter: OpenTelemetry sets a process's global ``MeterProvider`` once, so
    an ``init()`` after ``shutdown()`` attaches its exporter to the first one's."""
    global _global_meters
    if exporter is None:
        return None, None
    if set_global and _global_meters is not None:
        _global_meters[1].attach(exporter)
        return _global_meters
    switch = _SwitchedMetricExporter(exporter)
    reader = PeriodicExportingMetricReader(switch if set_global else exporter)
    meters = MeterProvider(metric_readers=[reader], resource=resource, shutdown_on_exit=False)
    if not set_global:
        return meters, None
    metrics.set_meter_provider(meters)
    _global_meters = (meters, switch)
    return _global_meters


def _collector_stores(store: Path, spans: OtlpEndpoint) -> bool:
    """Whether the spans' OTLP endpoint is the ``otel-llm collector`` that writes ``store``,
    on the port of the protocol the exporter speaks and as that port speaks it (said in a
    warning: the embedded writer then stays off, each span stored once). OTLP/HTTP sent to its
    gRPC port reaches no collector: the store stays on."""
    from otel_llm._show._ingest._claim import live_collector

    collector = live_collector(store)
    if collector is None or not collector.receives(spans.endpoint, spans.protocol):
        return False
    logger.warning(
        "otel-llm: the spans go over OTLP to %s, the otel-llm collector that writes %s: the "
        "embedded store is left to it, so each span is stored once (init(duckdb=False) says "
        "so without this warning)",
        spans.endpoint,
        store,
    )
    return True


_NOT_MADE_CURE: Final[dict[Signal, str]] = {
    "spans": "add that exporter to a TracerProvider made global (or passed as tracer_provider=) "
    "before init(), and otel-llm adds its processor to it",
    "metrics": "make a MeterProvider with that exporter the global one before init(), and "
    "otel-llm's metrics go to it",
}


def _warn_of_exporters_not_made(*, spans_elsewhere: bool, metrics_elsewhere: bool) -> None:
    """One warning per signal whose exporter variable names exporters init() does not make
    (``prometheus``, ``console``, ``zipkin`` …) — unless the application's own provider, which
    may have them, takes the signal."""
    elsewhere = {"spans": spans_elsewhere, "metrics": metrics_elsewhere}
    for signal in _SIGNALS:
        names = exporter_names(signal)
        unmade = [name for name in names if name not in OTLP_EXPORTERS and name != "none"]
        if not unmade or elsewhere[signal]:
            continue
        over_otlp = "they still go over OTLP" if exported(signal) else "nor over OTLP"
        if signal == "spans":
            over_otlp += "; the DuckDB store, if on, still gets every span"
        logger.warning(
            "otel-llm: %s=%s, but init() makes OTLP exporters only: %s are not sent to %s (%s); %s",
            OWN_EXPORTER[signal],
            ",".join(names),
            signal,
            " or ".join(unmade),
            over_otlp,
            _NOT_MADE_CURE[signal],
        )


def _resource_of(provider: TracerProvider) -> Resource:
    """The provider's resource (a provider standing in for the SDK's may lack one: the
    default resource then)."""
    resource = getattr(provider, "resource", None)
    return resource if isinstance(resource, Resource) else Resource.create({})


def _store_path_key(db_path: object) -> str:
    """The name of whatever chose the store's path, for an error about it."""
    if db_path:
        return "db_path"
    return env.OTEL_LLM_DB if env.env_path(env.OTEL_LLM_DB) is not None else "the default store"


def _exports_otlp(provider: TracerProvider) -> bool:
    """Whether the application's provider already has an OTLP span exporter, which sends
    otel-llm's spans too (the SDK keeps its processors private: a provider whose processors
    cannot be listed counts as not exporting)."""
    processors = getattr(getattr(provider, "_active_span_processor", None), "_span_processors", ())
    return any(
        type(getattr(processor, "span_exporter", None)).__module__.startswith(_OTLP_EXPORTERS)
        for processor in processors
    )


def _global_meter_provider() -> MeterProvider | None:
    """The SDK meter provider the application made global, if it did (OpenTelemetry lets a
    process set one once: otel-llm's metrics go to it) — not one an earlier ``init()`` made."""
    current = metrics.get_meter_provider()
    if not isinstance(current, MeterProvider):
        return None
    return None if _global_meters is not None and current is _global_meters[0] else current


def _warn_if_resource_kept(provider: TracerProvider, service_name: str | None) -> None:
    """A provider already in place keeps its resource — the application's, or the one an
    ``init()`` before ``shutdown()`` made global (OpenTelemetry sets a process's global provider
    once): say so when this ``init()`` asks for another service name."""
    asked = service_name or env.env_text(env.OTEL_SERVICE_NAME)
    kept = _resource_of(provider).attributes.get("service.name")
    if asked and kept != asked:
        logger.warning(
            "otel-llm: init() adds to the TracerProvider already in place, whose resource "
            "says service.name=%s, so spans are not recorded as %s (a process's global provider "
            "is set once: pass tracer_provider= a provider of your own to record another)",
            kept,
            asked,
        )


def _warn_if_limits_bite(provider: TracerProvider) -> None:
    limits = getattr(provider, "_span_limits", None)
    max_events = getattr(limits, "max_events", None)
    if isinstance(max_events, int) and max_events < _MIN_EVENTS:
        logger.warning(
            "otel-llm: the application's TracerProvider keeps only %d events per span; long "
            "streams with many gaps will record fewer chunk events and their stall figures may "
            "be flagged incomplete (set %s >= %d)",
            max_events,
            env.OTEL_SPAN_EVENT_COUNT_LIMIT,
            _MIN_EVENTS,
        )
