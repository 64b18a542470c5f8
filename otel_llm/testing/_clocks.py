"""A metering clock that moves only when a test says so."""

from __future__ import annotations

from otel_llm._measure._stalls import NS_PER_MS


class FakeClock:
    """Monotonic nanoseconds that move only by :meth:`advance`; use it as the metering clock
    with ``with use_clock(clock):`` to feed a stream exact gaps."""

    def __init__(self) -> None:
        self.ns = 1_000 * NS_PER_MS

    def __call__(self) -> int:
        return self.ns

    def advance(self, ms: float) -> None:
        """Move the clock ``ms`` milliseconds on."""
        self.ns += int(ms * NS_PER_MS)
