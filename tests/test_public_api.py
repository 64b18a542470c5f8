"""The public surface does not drift by accident."""

from __future__ import annotations

import otel_llm

EXPECTED = {
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
}


PUBLIC_SUBPACKAGES = {"testing", "simulator", "cli"}
"""Public on purpose: test doubles, the simulated provider, the command line (present in the
namespace once imported)."""


def test_public_names_are_exactly_the_curated_set() -> None:
    """__all__ is the curated surface, and every name in it resolves."""
    assert set(otel_llm.__all__) == EXPECTED
    for name in otel_llm.__all__:
        assert getattr(otel_llm, name) is not None


def test_nothing_else_is_public() -> None:
    """As httpx checks: every public name in the package's namespace is in __all__ — no
    subpackage or helper leaks as public (the layers are private: ``_act``, ``_measure`` …)."""
    public = {name for name in vars(otel_llm) if not name.startswith("_")}
    assert public <= set(otel_llm.__all__) | PUBLIC_SUBPACKAGES


def test_errors_form_one_tree() -> None:
    """Every error the library raises derives from OtelLLMError."""
    for name in otel_llm.__all__:
        value = getattr(otel_llm, name)
        if (
            isinstance(value, type)
            and issubclass(value, Exception)
            and not issubclass(value, Warning)
        ):
            assert issubclass(value, otel_llm.OtelLLMError), name
