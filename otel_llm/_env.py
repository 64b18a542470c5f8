"""Every environment variable otel-llm reads, each a documented constant, and one parser per
type (the OpenTelemetry SDK's ``environment_variables`` module is the model).

Client configuration keys are ``{SCOPE}__{GROUP}__{FIELD}`` and ``{SCOPE}__{PROVIDER}__{N}__
{FIELD}``; their grammar is :data:`SEPARATOR` and :func:`scope_key` here, the groups and fields
are the settings model's (:mod:`otel_llm._act._settings`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final
from urllib.parse import unquote

# --- OpenTelemetry's standard variables, honoured by init() and the wrappers --------------------
OTEL_SDK_DISABLED: Final = "OTEL_SDK_DISABLED"
"""``true``: nothing is recorded; calls still work and ``CallStats`` is still filled."""
OTEL_SERVICE_NAME: Final = "OTEL_SERVICE_NAME"
"""Names the service (read by the SDK's ``Resource``)."""
OTEL_EXPORTER_OTLP_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_ENDPOINT"
"""Set: spans (and metrics) are also exported over OTLP, to its ``/v1/traces`` and
``/v1/metrics`` (each signal judged on its own: a collector refusing one costs the other
nothing); over gRPC, to it as it is. An ``http://`` or ``https://`` URL (gRPC also takes
``host:port``); one that cannot be used is a ``ConfigurationError`` at ``init()``."""
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
"""Set: spans are also exported over OTLP, to this URL as it is (wins over the base
endpoint)."""
OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: Final = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
"""Set: metrics are exported over OTLP, to this URL as it is (wins over the base
endpoint)."""
OTEL_TRACES_EXPORTER: Final = "OTEL_TRACES_EXPORTER"
"""A comma-separated list of exporters, ``otlp`` by default: one without ``otlp`` (``none``,
``console`` …) and ``init()`` exports no spans over OTLP, whatever the endpoints say (the DuckDB
store, which is no OTLP exporter, still gets every span; metrics are unchanged); an exporter
``init()`` does not make is named in a warning."""
OTEL_METRICS_EXPORTER: Final = "OTEL_METRICS_EXPORTER"
"""A comma-separated list of exporters, ``otlp`` by default: one without ``otlp`` (``none``,
``prometheus`` …) and ``init()`` exports no metrics, whatever the endpoints say (spans are
unchanged); an exporter ``init()`` does not make is named in a warning."""
OTEL_EXPORTER_OTLP_HEADERS: Final = "OTEL_EXPORTER_OTLP_HEADERS"
"""``key=value,…`` sent with every OTLP export (read by the SDK's exporters); otel-llm reads the
values only to keep them out of its warnings, as it does ``OTEL_EXPORTER_OTLP_TRACES_HEADERS``
and ``OTEL_EXPORTER_OTLP_METRICS_HEADERS``. An entry the exporters cannot parse (``api-key:…``,
a value with a comma or quote not URL-encoded) is a ``ConfigurationError`` at ``init()`` naming
the variable, never the entry's text."""
OTEL_EXPORTER_OTLP_TRACES_HEADERS: Final = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
"""As ``OTEL_EXPORTER_OTLP_HEADERS``, for spans only."""
OTEL_EXPORTER_OTLP_METRICS_HEADERS: Final = "OTEL_EXPORTER_OTLP_METRICS_HEADERS"
"""As ``OTEL_EXPORTER_OTLP_HEADERS``, for metrics only."""
OTEL_EXPORTER_OTLP_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_PROTOCOL"
"""``http/protobuf`` (the default) or ``grpc`` (spans and metrics over gRPC, when
``opentelemetry-exporter-otlp-proto-grpc`` is installed; else http/protobuf, with a warning);
``http/json``, which the OpenTelemetry Python exporters do not speak, or any other value is a
``ConfigurationError`` at ``init()``."""
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
"""As ``OTEL_EXPORTER_OTLP_PROTOCOL``, for spans only (wins over it)."""
OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: Final = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
"""As ``OTEL_EXPORTER_OTLP_PROTOCOL``, for metrics only (wins over it)."""
OTEL_EXPORTER_OTLP_TIMEOUT: Final = "OTEL_EXPORTER_OTLP_TIMEOUT"
"""Seconds an OTLP export may take (10), read by the SDK's exporters; 0 or less is a
``ConfigurationError`` at ``init()`` (every export would fail)."""
OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: Final = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
"""As ``OTEL_EXPORTER_OTLP_TIMEOUT``, for spans only (wins over it)."""
OTEL_EXPORTER_OTLP_METRICS_TIMEOUT: Final = "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"
"""As ``OTEL_EXPORTER_OTLP_TIMEOUT``, for metrics only (wins over it)."""
OTEL_EXPORTER_OTLP_CERTIFICATE: Final = "OTEL_EXPORTER_OTLP_CERTIFICATE"
"""The CA certificate file the SDK's exporters trust over TLS; with
``OTEL_EXPORTER_OTLP_CLIENT_KEY`` and ``OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE``, the client's
key and certificate (``…_TRACES_…`` / ``…_METRICS_…`` for one signal). Read by the exporters;
judged by ``init()`` for an endpoint spoken to over TLS: a file it cannot read, or (gRPC) a
client key without its certificate or the other way round, is a ``ConfigurationError``."""
OTEL_EXPORTER_OTLP_CLIENT_KEY: Final = "OTEL_EXPORTER_OTLP_CLIENT_KEY"
OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: Final = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"
OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: Final = "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"
OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY: Final = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"
OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE: Final = "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE"
OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE: Final = "OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE"
OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY: Final = "OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY"
OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE: Final = (
    "OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE"
)
OTEL_EXPORTER_OTLP_INSECURE: Final = "OTEL_EXPORTER_OTLP_INSECURE"
"""gRPC: ``true`` speaks to an endpoint without a scheme, or an ``http://`` one, without TLS
(``…_TRACES_INSECURE`` / ``…_METRICS_INSECURE`` for one signal); read by the SDK's exporters,
and by ``init()`` to know whether the TLS files are read."""
OTEL_EXPORTER_OTLP_TRACES_INSECURE: Final = "OTEL_EXPORTER_OTLP_TRACES_INSECURE"
OTEL_EXPORTER_OTLP_METRICS_INSECURE: Final = "OTEL_EXPORTER_OTLP_METRICS_INSECURE"
OTEL_BSP_MAX_QUEUE_SIZE: Final = "OTEL_BSP_MAX_QUEUE_SIZE"
"""The SDK's batching of OTLP spans: the most spans it queues (2048); read by the SDK, judged
by ``init()``: one the SDK would refuse (0 or less) is a ``ConfigurationError``."""
OTEL_BSP_SCHEDULE_DELAY: Final = "OTEL_BSP_SCHEDULE_DELAY"
"""The SDK's batching of OTLP spans: ms between exports (5000); 0 or less is a
``ConfigurationError`` at ``init()``."""
OTEL_BSP_MAX_EXPORT_BATCH_SIZE: Final = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
"""The SDK's batching of OTLP spans: the most spans an export sends (512); 0 or less, or more
than ``OTEL_BSP_MAX_QUEUE_SIZE``, is a ``ConfigurationError`` at ``init()``."""
OTEL_METRIC_EXPORT_INTERVAL: Final = "OTEL_METRIC_EXPORT_INTERVAL"
"""ms between OTLP metric exports (60000), read by the SDK; 0 or less is a
``ConfigurationError`` at ``init()``."""
OTEL_SPAN_EVENT_COUNT_LIMIT: Final = "OTEL_SPAN_EVENT_COUNT_LIMIT"
"""The SDK's per-span event limit (named in init()'s warning when it is too low)."""
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: Final = (
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
)
"""``true`` — or ``SPAN_ONLY`` / ``SPAN_AND_EVENT``, the capturing modes of OpenTelemetry's
GenAI utilities, any case: prompts and outputs are recorded on call spans (off by default;
``EVENT_ONLY``, ``NO_CONTENT`` or anything else: not)."""
OTEL_SEMCONV_STABILITY_OPT_IN: Final = "OTEL_SEMCONV_STABILITY_OPT_IN"
"""Comma-separated opt-ins to newer convention names (``gen_ai_client_inference``, ``…/dup``:
the metrics' new names, or both)."""

# --- the terminal's, honoured by the otel-llm command --------------------------------------------
COLUMNS: Final = "COLUMNS"
"""The width tables fit in a pipe (on a terminal its own width, which ``COLUMNS`` overrides)."""
NO_COLOR: Final = "NO_COLOR"
"""Set to anything: no colour on the terminal (https://no-color.org)."""

# --- otel-llm's own ---------------------------------------------------------------------------
OTEL_LLM_METRICS_CHUNK_GAPS: Final = "OTEL_LLM_METRICS_CHUNK_GAPS"
"""``true``: record the per-gap chunk histogram (one point per gap between chunks; off by
default, for its cost on long streams)."""
OTEL_LLM_DB: Final = "OTEL_LLM_DB"
"""The embedded store directory (default ``./otel-llm-store``)."""

OTEL_LLM_COLLECTOR_BIN: Final = "OTEL_LLM_COLLECTOR_BIN"
"""The collector binary ``otel-llm collector`` runs (default: what ``collector/build.sh``
builds); ``./dev test`` sets it for the tests."""
OTEL_LLM_COLLECTOR_SPOOL: Final = "OTEL_LLM_COLLECTOR_SPOOL"
"""Read by ``collector/duckdb.yaml``: the spool folder (``otel-llm collector`` sets it to
``<store>.otlp``): metrics in its ``metrics/`` folder; span files there are what collectors of
earlier versions wrote (``otel-llm collector`` ingests them)."""
OTEL_LLM_COLLECTOR_STORE: Final = "OTEL_LLM_COLLECTOR_STORE"
"""Read by ``collector/duckdb.yaml``: the store directory its ``otelllm_store`` exporter writes
segments into (``otel-llm collector`` sets it to the store it was given)."""
OTEL_LLM_COLLECTOR_GRPC_PORT: Final = "OTEL_LLM_COLLECTOR_GRPC_PORT"
"""Read by ``collector/*.yaml``: the OTLP/gRPC port (``otel-llm collector`` sets it)."""
OTEL_LLM_COLLECTOR_HTTP_PORT: Final = "OTEL_LLM_COLLECTOR_HTTP_PORT"
"""Read by ``collector/*.yaml``: the OTLP/HTTP port (``otel-llm collector`` sets it)."""
OTEL_LLM_COLLECTOR_HEALTH_PORT: Final = "OTEL_LLM_COLLECTOR_HEALTH_PORT"
"""Read by ``collector/*.yaml``: the health check's port (``otel-llm collector`` sets it)."""
OTEL_LLM_COLLECTOR_METRICS_EXPORTERS: Final = "OTEL_LLM_COLLECTOR_METRICS_EXPORTERS"
"""Read by ``collector/*.yaml``: the metrics pipeline's exporters, a YAML list (unset:
``[file/metrics]`` in the DuckDB config, ``[debug]``, taken and dropped, in the ClickHouse one);
``[prometheus_remote_write]`` sends them to Prometheus instead, ``[file/metrics,
prometheus_remote_write]`` both."""
OTEL_LLM_PROMETHEUS_REMOTE_WRITE_URL: Final = "OTEL_LLM_PROMETHEUS_REMOTE_WRITE_URL"
"""Read by ``collector/*.yaml``: where the ``prometheus_remote_write`` exporter sends metrics
(Prometheus' ``/api/v1/write``, Mimir's ``/api/v1/push``; default
``http://127.0.0.1:9090/api/v1/write``)."""
OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER: Final = (
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER"
)
"""The OpenTelemetry SDK's: the entry point (group ``opentelemetry_otlp_credential_provider``)
that gives every OTLP/HTTP exporter its ``requests.Session`` (request signing, an
authenticated proxy); ``…_HTTP_TRACES_CREDENTIAL_PROVIDER`` / ``…_HTTP_METRICS_…`` for one
signal. Named, ``init()``'s exporters load that session, as the SDK's do."""
OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER: Final = (
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER"
)
OTEL_PYTHON_EXPORTER_OTLP_HTTP_METRICS_CREDENTIAL_PROVIDER: Final = (
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_METRICS_CREDENTIAL_PROVIDER"
)
OTEL_PYTHON_EXPORTER_OTLP_GRPC_CREDENTIAL_PROVIDER: Final = (
    "OTEL_PYTHON_EXPORTER_OTLP_GRPC_CREDENTIAL_PROVIDER"
)
"""The OpenTelemetry SDK's: the entry point (group ``opentelemetry_otlp_credential_provider``)
that gives the OTLP gRPC exporters their channel credentials, in place of the TLS files;
``…_GRPC_TRACES_CREDENTIAL_PROVIDER`` / ``…_GRPC_METRICS_…`` for one signal."""
OTEL_PYTHON_EXPORTER_OTLP_GRPC_TRACES_CREDENTIAL_PROVIDER: Final = (
    "OTEL_PYTHON_EXPORTER_OTLP_GRPC_TRACES_CREDENTIAL_PROVIDER"
)
OTEL_PYTHON_EXPORTER_OTLP_GRPC_METRICS_CREDENTIAL_PROVIDER: Final = (
    "OTEL_PYTHON_EXPORTER_OTLP_GRPC_METRICS_CREDENTIAL_PROVIDER"
)
OTEL_LLM_CLICKHOUSE_ENDPOINT: Final = "OTEL_LLM_CLICKHOUSE_ENDPOINT"
"""Read by ``collector/clickhouse.yaml``: the ClickHouse server (``tcp://127.0.0.1:9000``);
``OTEL_LLM_CLICKHOUSE_USERNAME`` / ``OTEL_LLM_CLICKHOUSE_PASSWORD`` beside it."""

SEPARATOR: Final = "__"
"""Between the segments of a client configuration key."""


def scope_key(scope: str, group: str, field: str) -> str:
    """``{SCOPE}__{GROUP}__{FIELD}``, e.g. ``LLM__STREAM__STALL_THRESHOLD_MS``."""
    return SEPARATOR.join((scope, group, field)).upper()


def stall_threshold_key(scope: str) -> str:
    """``{SCOPE}__STREAM__STALL_THRESHOLD_MS``: read by the client's settings (group ``stream``,
    field ``stall_threshold_ms``) and by the wrappers and ``init()`` alike."""
    return scope_key(scope, "STREAM", "STALL_THRESHOLD_MS")


# --- one parser per type ---------------------------------------------------------------------


def env_text(name: str) -> str | None:
    """The variable's value, stripped; ``None`` when unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or None


def env_flag(name: str) -> bool:
    """A boolean variable: true only for ``true`` (any case), as the OpenTelemetry SDK reads
    ``OTEL_SDK_DISABLED``."""
    return (env_text(name) or "").lower() == "true"


def env_path(name: str) -> Path | None:
    """A path variable (``None`` when unset or blank). A leading ``~`` or ``~user`` is expanded
    as a shell would, for the value may come from where no shell ran (systemd, Docker, a
    ``.env`` file); left as it is when that home directory is unknown."""
    value = env_text(name)
    if not value:
        return None
    path = Path(value)
    try:
        return path.expanduser()
    except RuntimeError:  # no such user, or no home directory to be found
        return path


def env_count(name: str) -> int | None:
    """A positive whole-number variable (``None`` when unset, blank, or not one)."""
    value = env_text(name)
    return int(value) if value and value.isascii() and value.isdecimal() and int(value) else None


def env_pair_values(name: str) -> tuple[str, ...]:
    """The values of a ``key=value,key=value`` variable (the OTLP headers' form), raw and
    percent-decoded, in order; empty when unset."""
    values: list[str] = []
    for pair in (env_text(name) or "").split(","):
        _, equals, value = pair.partition("=")
        value = value.strip()
        if equals and value:
            values.extend((value, unquote(value)))
    return tuple(dict.fromkeys(values))


def env_any(*names: str) -> bool:
    """True when any of the variables is set to something."""
    return any(env_text(name) for name in names)
