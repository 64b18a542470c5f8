"""Failures of the application's telemetry pipeline, each kind logged once.

A span processor that raises in ``on_start`` or ``on_end``, a span that refuses an attribute, a
meter provider whose instruments or readers raise: none of them reaches the LLM call, and none
floods the log — the first failure of a kind (what otel-llm was doing, the exception's type) is
a warning with its traceback, which names what raised; later ones of that kind are debug lines.
"""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger("otel_llm")


def text_of(error: BaseException) -> str:
    """``str(error)``, or Python's own placeholder when the error cannot be printed."""
    try:
        return str(error)
    except Exception:
        return "<exception str() failed>"


class TelemetryFaults:
    """The kinds of telemetry failure already logged. Thread-safe."""

    max_kinds = 64
    """Kinds remembered; beyond them a new kind is a debug line too (bounded memory)."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, type[BaseException]]] = set()
        self._lock = threading.Lock()

    def report(self, doing: str, error: Exception) -> None:
        """``error`` was raised while otel-llm tried to ``doing``; the call goes on."""
        key = (doing, type(error))
        with self._lock:
            first = key not in self._seen and len(self._seen) < self.max_kinds
            if first:
                self._seen.add(key)
        if first:
            logger.warning(
                "otel-llm: could not %s (%s: %s); the LLM call goes on, its telemetry may "
                "miss this. The traceback shows what raised — usually a span processor of the "
                "tracer provider (on_start, on_end) or, for metrics, an instrument or reader of "
                "the meter provider. Later failures of this kind are logged at debug level only.",
                doing,
                type(error).__qualname__,
                text_of(error),
                exc_info=error,
            )
        else:
            logger.debug("otel-llm: could not %s (%s)", doing, type(error).__qualname__)


FAULTS = TelemetryFaults()
"""The process's one record of telemetry failures already logged."""
