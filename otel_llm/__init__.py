"""otel-llm: where the time of every streamed LLM call goes, and a client that acts on it.

Measure: chunk arrivals, stalls and net generation time on OpenTelemetry spans.
Act: a resilient async client that hedges a late or stalled stream onto another source.
Show: an embedded DuckDB store, a CLI and dashboards.
"""

from otel_llm._act._admission import Admission, Limits, LocalAdmission
from otel_llm._act._client import Client
from otel_llm._act._completion import Completion, Embeddings, ToolCall
from otel_llm._act._groups import (
    AdmissionSettings,
    BreakerSettings,
    HedgeSettings,
    RetrySettings,
    StreamSettings,
)
from otel_llm._act._result import ChatResult, EmbeddingsResult
from otel_llm._act._settings import ClientSettings, ConfigWarning, EmbeddingSettings
from otel_llm._act._source import Source
from otel_llm._act._stats import CallStats
from otel_llm._errors import (
    AllSourcesExhausted,
    AuthenticationError,
    BackendUnavailable,
    BadRequest,
    ConfigurationError,
    ContentFiltered,
    ContextLengthExceeded,
    InvalidRequest,
    MalformedResponse,
    MalformedStream,
    NotAStore,
    NotFound,
    OtelLLMError,
    PermanentError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    ServerError,
    TransientError,
    TruncatedStream,
    WatchdogTimeout,
)
from otel_llm._measure._processor import DerivingSpanProcessor
from otel_llm._measure._response import Usage
from otel_llm._measure._stalls import StallFigures
from otel_llm._show._duckdb_exporter import DuckDBSpanExporter, ExportStats
from otel_llm._telemetry import Telemetry, init
from otel_llm._version import __version__
from otel_llm._wrap._chunk_view import openai_classifier
from otel_llm._wrap._observe import AsyncObservedStream, ObservedStream, observe_stream
from otel_llm._wrap._openai import instrument_openai, uninstrument_openai

__all__ = [
    "Admission",
    "AdmissionSettings",
    "AllSourcesExhausted",
    "AsyncObservedStream",
    "AuthenticationError",
    "BackendUnavailable",
    "BadRequest",
    "BreakerSettings",
    "CallStats",
    "ChatResult",
    "Client",
    "ClientSettings",
    "Completion",
    "ConfigWarning",
    "ConfigurationError",
    "ContentFiltered",
    "ContextLengthExceeded",
    "DerivingSpanProcessor",
    "DuckDBSpanExporter",
    "EmbeddingSettings",
    "Embeddings",
    "EmbeddingsResult",
    "ExportStats",
    "HedgeSettings",
    "InvalidRequest",
    "Limits",
    "LocalAdmission",
    "MalformedResponse",
    "MalformedStream",
    "NotAStore",
    "NotFound",
    "ObservedStream",
    "OtelLLMError",
    "PermanentError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimited",
    "RedisAdmission",
    "RetrySettings",
    "ServerError",
    "Source",
    "StallFigures",
    "StreamSettings",
    "Telemetry",
    "ToolCall",
    "TransientError",
    "TruncatedStream",
    "Usage",
    "WatchdogTimeout",
    "__version__",
    "init",
    "instrument_openai",
    "observe_stream",
    "openai_classifier",
    "uninstrument_openai",
]


def __getattr__(name: str) -> object:
    """``RedisAdmission`` is imported on first use: it needs the ``redis`` extra."""
    if name == "RedisAdmission":
        from otel_llm._act._redis_admission import RedisAdmission

        return RedisAdmission
    raise AttributeError(f"module 'otel_llm' has no attribute {name!r}")
