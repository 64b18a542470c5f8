"""otel-llm: where the time of every streamed LLM call goes, and a client that acts on it.

Measure: chunk arrivals, stalls and net generation time on OpenTelemetry spans.
Act: a resilient async client that hedges a late or stalled stream onto another source.
Show: an embedded DuckDB store, a CLI and dashboards.

Each name is imported on first use (PEP 562), so ``import otel_llm`` costs little: an application
that only calls ``instrument_openai()`` loads neither DuckDB nor the OpenTelemetry SDK nor the
client's settings models; ``init()`` loads what it wires, ``Client`` what the client needs.
"""

import typing as _typing
from importlib import import_module as _import_module

from otel_llm._errors import (
    AllSourcesExhausted,
    AuthenticationError,
    BackendUnavailable,
    BadRequest,
    CollectorError,
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
    UnsupportedSchema,
    WatchdogTimeout,
)
from otel_llm._version import __version__

if _typing.TYPE_CHECKING:  # what _LAZY imports on first use, spelled out for type checkers and IDEs
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
    from otel_llm._act._redis_admission import RedisAdmission
    from otel_llm._act._result import ChatResult, EmbeddingsResult
    from otel_llm._act._settings import ClientSettings, ConfigWarning, EmbeddingSettings
    from otel_llm._act._source import Source
    from otel_llm._act._stats import CallStats
    from otel_llm._measure._processor import DerivingSpanProcessor
    from otel_llm._measure._response import Usage
    from otel_llm._measure._stalls import StallFigures
    from otel_llm._show._store._access import open_store
    from otel_llm._show._store._exporter import ExportStats, SegmentSpanExporter
    from otel_llm._show._store._exporter import (  # deprecated name (warns at run time)
        SegmentSpanExporter as DuckDBSpanExporter,  # noqa: F401
    )
    from otel_llm._telemetry import Telemetry, init
    from otel_llm._wrap._anthropic import instrument_anthropic, uninstrument_anthropic
    from otel_llm._wrap._chunk_view import openai_classifier
    from otel_llm._wrap._every_sdk import instrument, uninstrument
    from otel_llm._wrap._google_genai import instrument_google_genai, uninstrument_google_genai
    from otel_llm._wrap._litellm import instrument_litellm, uninstrument_litellm
    from otel_llm._wrap._observe import AsyncObservedStream, ObservedStream, observe_stream
    from otel_llm._wrap._openai import instrument_openai, uninstrument_openai

_LAZY: dict[str, tuple[str, ...]] = {
    "otel_llm._act._admission": ("Admission", "Limits", "LocalAdmission"),
    "otel_llm._act._client": ("Client",),
    "otel_llm._act._completion": ("Completion", "Embeddings", "ToolCall"),
    "otel_llm._act._groups": (
        "AdmissionSettings",
        "BreakerSettings",
        "HedgeSettings",
        "RetrySettings",
        "StreamSettings",
    ),
    "otel_llm._act._redis_admission": ("RedisAdmission",),  # needs the ``redis`` extra
    "otel_llm._act._result": ("ChatResult", "EmbeddingsResult"),
    "otel_llm._act._settings": ("ClientSettings", "ConfigWarning", "EmbeddingSettings"),
    "otel_llm._act._source": ("Source",),
    "otel_llm._act._stats": ("CallStats",),
    "otel_llm._measure._processor": ("DerivingSpanProcessor",),
    "otel_llm._measure._response": ("Usage",),
    "otel_llm._measure._stalls": ("StallFigures",),
    "otel_llm._show._store._access": ("open_store",),
    "otel_llm._show._store._exporter": ("SegmentSpanExporter", "ExportStats"),
    "otel_llm._telemetry": ("Telemetry", "init"),
    "otel_llm._wrap._chunk_view": ("openai_classifier",),
    "otel_llm._wrap._every_sdk": ("instrument", "uninstrument"),
    "otel_llm._wrap._observe": ("AsyncObservedStream", "ObservedStream", "observe_stream"),
    "otel_llm._wrap._openai": ("instrument_openai", "uninstrument_openai"),
    "otel_llm._wrap._anthropic": ("instrument_anthropic", "uninstrument_anthropic"),
    "otel_llm._wrap._google_genai": ("instrument_google_genai", "uninstrument_google_genai"),
    "otel_llm._wrap._litellm": ("instrument_litellm", "uninstrument_litellm"),
}
"""Module → the public names it defines, imported when one of them is first used."""

_HOME = {name: module for module, names in _LAZY.items() for name in names}

_DEPRECATED: dict[str, str] = {"DuckDBSpanExporter": "SegmentSpanExporter"}
"""Old public names → the names that replaced them (each use warns)."""

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
    "CollectorError",
    "Completion",
    "ConfigWarning",
    "ConfigurationError",
    "ContentFiltered",
    "ContextLengthExceeded",
    "DerivingSpanProcessor",
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
    "SegmentSpanExporter",
    "ServerError",
    "Source",
    "StallFigures",
    "StreamSettings",
    "Telemetry",
    "ToolCall",
    "TransientError",
    "TruncatedStream",
    "UnsupportedSchema",
    "Usage",
    "WatchdogTimeout",
    "__version__",
    "init",
    "instrument",
    "instrument_anthropic",
    "instrument_google_genai",
    "instrument_litellm",
    "instrument_openai",
    "observe_stream",
    "open_store",
    "openai_classifier",
    "uninstrument",
    "uninstrument_anthropic",
    "uninstrument_google_genai",
    "uninstrument_litellm",
    "uninstrument_openai",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (then an ordinary attribute)."""
    if name in _DEPRECATED:
        import warnings

        new = _DEPRECATED[name]
        warnings.warn(
            f"otel_llm.{name} is deprecated: it writes Parquet segments, not DuckDB; use "
            f"otel_llm.{new} (the same class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return __getattr__(new)
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'otel_llm' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """Every public name, imported or not yet."""
    return sorted(set(globals()) | set(__all__))
