"""A metering clock that moves only when a test says so."""

from __future__ import annotations

import math

from otel_llm._errors import ConfigurationError
from otel_llm._measure._stalls import NS_PER_MS


class FakeClock:
    """Monotonic nanoseconds that move only by :meth:`advance`; use it as the metering clock
    with ``with use_clock(clock):`` to feed a stream exact gaps."""

    def __init__(self) -> None:
        self.ns = 1_000 * NS_PER_MS

    def __call__(self) -> int:
        return self.ns

    def advance(self, ms: float) -> None:
        """Move the clock ``ms`` milliseconds on, to the nearest nanosecond (so
        ``1000 * (0.7 + 0.1)`` is 800 ms); a negative, NaN or infinite ``ms`` is a
        :class:`~otel_llm.ConfigurationError` (a monotonic clock never moves back)."""
        if not (math.isfinite(ms) and ms >= 0):
            raise ConfigurationError(
                "ms", f"must be a non-negative finite number of milliseconds, not {ms!r}"
            )
        self.ns += round(ms * NS_PER_MS)
