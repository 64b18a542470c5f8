"""``instrument()``: every supported SDK that is installed, wrapped with one call.

One table (:data:`SDKS`) names each SDK the package can wrap: the import name that tells whether
it is installed, and the module holding its ``instrument_<sdk>()`` / ``uninstrument_<sdk>()``.
An SDK that is not installed is skipped without importing anything of it; one that is installed
but cannot be instrumented (a version too old, a broken install) is skipped with a warning that
names it, and the others are still instrumented — telemetry never stops the application.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from dataclasses import dataclass
from typing import Final

from opentelemetry import metrics, trace

from otel_llm._wrap._post_import import forget, when_imported

logger = logging.getLogger("otel_llm")


@dataclass(frozen=True, slots=True)
class Sdk:
    """One SDK :func:`instrument` knows."""

    name: str
    """How :func:`instrument` reports it (``openai``, ``anthropic`` …)."""
    package: str
    """Its import name: installed when this can be found."""
    module: str
    """The otel-llm module with ``instrument_<name>()`` and ``uninstrument_<name>()``."""


SDKS: Final = (
    Sdk("openai", "openai", "otel_llm._wrap._openai"),
    Sdk("anthropic", "anthropic", "otel_llm._wrap._anthropic"),
    Sdk("google_genai", "google.genai", "otel_llm._wrap._google_genai"),
    Sdk("litellm", "litellm", "otel_llm._wrap._litellm"),
)
"""Every SDK ``instrument()`` wraps, in the order it wraps them (LiteLLM after the SDKs it
may call, which then pass through inside its calls)."""


def installed(sdk: Sdk) -> bool:
    """Whether ``sdk`` can be imported here (looked up without importing it)."""
    try:
        return importlib.util.find_spec(sdk.package) is not None
    except (ImportError, ValueError):
        return False


def instrument(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    stall_threshold_ms: int | None = None,
) -> tuple[str, ...]:
    """Instrument every installed SDK otel-llm can wrap; returns the names of those it covers.

    An SDK the application has imported is wrapped now; one it has not is wrapped when it is
    imported (so an SDK the application never uses is never imported). Idempotent, like each
    ``instrument_<sdk>()``; a bad ``stall_threshold_ms``, or a provider that is not
    OpenTelemetry's, raises :class:`~otel_llm.ConfigurationError` before any SDK is touched or
    left waiting for its import."""
    from otel_llm._arguments import check_providers
    from otel_llm._measure._stalls import resolve_threshold_ms

    check_providers(tracer_provider=tracer_provider, meter_provider=meter_provider)
    threshold = resolve_threshold_ms(stall_threshold_ms)
    covered: list[str] = []
    for sdk in SDKS:
        if not installed(sdk):
            continue

        def wrap(sdk: Sdk = sdk) -> None:
            try:
                function = getattr(importlib.import_module(sdk.module), f"instrument_{sdk.name}")
                function(
                    tracer_provider=tracer_provider,
                    meter_provider=meter_provider,
                    stall_threshold_ms=threshold,
                )
            except Exception as exc:
                logger.warning(
                    "otel-llm: the %s SDK is installed but was not instrumented: %r", sdk.name, exc
                )
                raise

        try:
            when_imported(sdk.package, _hook_key(sdk), wrap)
        except Exception:
            continue
        covered.append(sdk.name)
    return tuple(covered)


def uninstrument() -> None:
    """Undo :func:`instrument` for every SDK it wrapped (each as its ``uninstrument_<sdk>()``
    does: another instrumentation that wrapped ours since keeps working), and drop the wrapping
    of those not imported yet."""
    for sdk in SDKS:
        forget(_hook_key(sdk))
        if sdk.package in sys.modules:
            module = importlib.import_module(sdk.module)
            getattr(module, f"uninstrument_{sdk.name}")()


def forget_pending(name: str) -> None:
    """Drop :func:`instrument`'s wrapping of the SDK ``name`` (as :data:`SDKS` names it) that
    waits for its import: ``uninstrument_<name>()`` before the application imported it leaves
    it unwrapped."""
    (sdk,) = [sdk for sdk in SDKS if sdk.name == name]
    forget(_hook_key(sdk))


def _hook_key(sdk: Sdk) -> str:
    return f"otel_llm.instrument:{sdk.name}"
