"""Circuit breaker per source (SPEC R4, pure: every decision takes ``now``).

Consecutive failures open the breaker; after a cool-down one half-open probe is let through;
its success closes the breaker, its failure re-opens it. Watchdog kills count as failures; a
cancelled hedge loser does not (it releases a probe it held without a verdict).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class BreakerState(Enum):
    """Where a breaker stands."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(slots=True)
class Breaker:
    """The breaker of one source."""

    failure_threshold: int
    cooldown_s: float
    state: BreakerState = BreakerState.CLOSED
    failures: int = 0
    opened_at: float = 0.0
    probing: bool = False

    def allows(self, now: float) -> bool:
        """Would an attempt be let through now (without taking the probe)?"""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN:
            return now >= self.opened_at + self.cooldown_s
        return not self.probing

    def acquire(self, now: float) -> bool:
        """Let an attempt through if allowed; in half-open state it becomes the one probe."""
        if not self.allows(now):
            return False
        if self.state is BreakerState.OPEN:
            self.state = BreakerState.HALF_OPEN
        if self.state is BreakerState.HALF_OPEN:
            self.probing = True
        return True

    def open_until(self) -> float | None:
        """When an open breaker will allow a probe; ``None`` if it is not open."""
        return self.opened_at + self.cooldown_s if self.state is BreakerState.OPEN else None

    def record_success(self) -> None:
        """An attempt succeeded: close the breaker."""
        self.state = BreakerState.CLOSED
        self.failures = 0
        self.probing = False

    def record_failure(self, now: float) -> None:
        """An attempt failed: count it, and open the breaker at the threshold or on a probe."""
        self.failures += 1
        if self.state is BreakerState.HALF_OPEN or self.failures >= self.failure_threshold:
            self.state = BreakerState.OPEN
            self.opened_at = now
        self.probing = False

    def release(self) -> None:
        """An attempt ended without a verdict (cancelled): free the probe it may have held."""
        self.probing = False
