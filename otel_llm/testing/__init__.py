"""Test your own code against otel-llm: the doubles otel-llm's own suite uses.

- :class:`SimulatedProvider` (and :class:`Script`, :class:`Silence`): a real OpenAI-compatible
  server on 127.0.0.1 with scripted timing, silences, errors and faults (needs the ``testing``
  extra, for aiohttp).
- :class:`Scripted` with :func:`sse_answer`, :func:`json_answer`, :func:`error`: a scripted
  upstream in memory (``httpx2.MockTransport``) for stateful sequences, virtual time included.
- :func:`run_virtual`: run a coroutine on an event loop whose clock jumps to the next timer
  (an hour of retries in a millisecond); the metering clock follows the same virtual time.
- :class:`FakeClock` and :func:`use_clock`: a metering clock that moves only when told.
- :class:`Spans`: an in-memory span pipeline through the deriving processor, with a check that
  every started span ended exactly once; :func:`figures_of` reads the figures off a span.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from otel_llm._extras import install_hint
from otel_llm._measure._clock import use_clock
from otel_llm.testing._clocks import FakeClock
from otel_llm.testing._scripted import Scripted, error, json_answer, sse_answer
from otel_llm.testing._span_pipeline import Spans, SpanTracker, figures_of
from otel_llm.testing._virtual import VirtualTimeLoop, run_virtual

_SIMULATOR = {"SimulatedProvider", "ThreadedProvider", "Script", "Silence"}

__all__ = [
    "FakeClock",
    "Script",
    "Scripted",
    "Silence",
    "SimulatedProvider",
    "SpanTracker",
    "Spans",
    "ThreadedProvider",
    "VirtualTimeLoop",
    "error",
    "figures_of",
    "json_answer",
    "run_virtual",
    "sse_answer",
    "use_clock",
]
if importlib.util.find_spec("aiohttp") is None:  # a star import takes what imports without it
    __all__ = [name for name in __all__ if name not in _SIMULATOR]  # pragma: no cover


def __getattr__(name: str) -> Any:
    """The simulator is imported on first use: it needs aiohttp (the ``testing`` extra)."""
    if name in _SIMULATOR:
        try:
            from otel_llm import simulator
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                f"otel_llm.testing.{name} needs aiohttp: {install_hint('testing')}"
            ) from exc
        return getattr(simulator, name)
    raise AttributeError(f"module 'otel_llm.testing' has no attribute {name!r}")
