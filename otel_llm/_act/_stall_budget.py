"""The stall budget: how long a call may wait without making progress (pure).

Time splits by *which budget it consumes*: an attempt that burns ``max_attempts`` (a transient
failure) is productive waiting, already bounded by ``max_attempts``. Everything else — backoff
sleeps, rate-limit waits, 429 attempts themselves, waiting for a breaker or for admission — is
non-productive and counts against ``stall_window_s``. The budget is kept as the complement
(total elapsed minus time inside budget-burning attempts), so a new kind of waiting counts by
default instead of being a blind spot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

RESOLUTION_S: Final = 1e-6
"""How close waiting time must come to a bound to have reached it. It is a difference of clock
readings, so waiting that should reach a bound can fall a float step short of it
(29.999999999999996 s against 30 s), and a wait for the rest is shorter than the clock can move
at that time: a loop that waits for it and reads the clock again would wait for the same
instant for ever (on virtual time; on the real clock, spin until the clock moves)."""


@dataclass(slots=True)
class StallBudget:
    """Non-productive time of one call, as elapsed time minus budget-burning attempt time."""

    started_at: float
    window_s: float
    burning_s: float = 0.0

    def burn(self, duration_s: float) -> None:
        """Record an attempt that consumed ``max_attempts``; its time is not stall."""
        self.burning_s += max(0.0, duration_s)

    def waited_s(self, now: float) -> float:
        """Non-productive seconds so far."""
        return max(0.0, now - self.started_at - self.burning_s)

    def remaining_s(self, now: float) -> float:
        """Seconds of non-productive waiting left before the window is exhausted."""
        return self.window_s - self.waited_s(now)

    def exhausted(self, now: float) -> bool:
        """True once non-productive waiting reached the window (within :data:`RESOLUTION_S`)."""
        return self.remaining_s(now) <= RESOLUTION_S
