"""Checks of the arguments that are objects rather than settings — the OpenTelemetry providers
above all — shared by ``Client(...)``, ``instrument…()`` and ``init()``: a wrong one is a
:class:`~otel_llm.ConfigurationError` naming the argument and the type given (never the
value, whose repr may hold anything), raised where it is given rather than as Python's own
``AttributeError`` at some later call. Light: the OpenTelemetry API only."""

from __future__ import annotations

from opentelemetry import metrics, trace

from otel_llm._errors import ConfigurationError


def type_name(value: object) -> str:
    """The type of ``value`` as an error names it: ``str``, ``package.module.Class``."""
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def check_providers(*, tracer_provider: object, meter_provider: object) -> None:
    """Any OpenTelemetry ``TracerProvider`` (the SDK's, the API's no-op, a vendor's) and any
    ``MeterProvider``, or ``None``."""
    if tracer_provider is not None and not isinstance(tracer_provider, trace.TracerProvider):
        raise ConfigurationError(
            "tracer_provider",
            f"must be an OpenTelemetry TracerProvider, got {type_name(tracer_provider)}",
        )
    if meter_provider is not None and not isinstance(meter_provider, metrics.MeterProvider):
        raise ConfigurationError(
            "meter_provider",
            f"must be an OpenTelemetry MeterProvider, got {type_name(meter_provider)}",
        )


def takes_processors(tracer_provider: object) -> bool:
    """Whether ``tracer_provider`` is an OpenTelemetry ``TracerProvider`` that takes span
    processors (the SDK's, or one standing in for it)."""
    return isinstance(tracer_provider, trace.TracerProvider) and callable(
        getattr(tracer_provider, "add_span_processor", None)
    )


def check_processor_host(tracer_provider: object) -> None:
    """``init()`` adds its processor to the provider it is given: an OpenTelemetry
    ``TracerProvider`` that takes span processors (``add_span_processor``) — the SDK's, or one
    standing in for it, as some vendors' proxies do; ``None`` is fine. The API's no-op provider
    takes none."""
    if tracer_provider is not None and not takes_processors(tracer_provider):
        raise ConfigurationError(
            "tracer_provider",
            "must be an OpenTelemetry TracerProvider that takes span processors (the SDK's "
            "opentelemetry.sdk.trace.TracerProvider), to which init() adds its processor; got "
            + type_name(tracer_provider),
        )
