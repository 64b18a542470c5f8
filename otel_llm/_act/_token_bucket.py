"""A token bucket (pure: every operation takes ``now``)."""

from __future__ import annotations

from dataclasses import dataclass

ROUNDING = 1e-9
"""A shortfall of at most this fraction of a bucket's capacity is the float rounding of its
refill, not a wait: a bucket refilled for exactly the wait it named may hold 0.9999999999999998
of the one request asked for. Named as a wait, that residue (2e-15 s) is no time at all on a
clock that reads 40.0 — an event loop on virtual time never got past it, a real one asked again
for nothing. So a positive wait is at least 60 ns (``ROUNDING`` of a minute)."""


@dataclass(slots=True)
class TokenBucket:
    """``capacity`` tokens, refilled at ``per_s`` tokens a second. The level may go negative
    when a settlement charges more than was reserved; the debt is repaid by refill."""

    capacity: float
    per_s: float
    level: float
    updated_at: float

    @classmethod
    def full(cls, capacity: float, per_s: float, now: float) -> TokenBucket:
        """A bucket that starts full."""
        return cls(capacity, per_s, capacity, now)

    def resized(self, capacity: float, per_s: float, now: float) -> TokenBucket:
        """This bucket under another capacity and rate: refilled at the old rate until ``now``,
        its level (a debt included) kept, capped at the new capacity."""
        self._refill(now)
        return TokenBucket(capacity, per_s, min(capacity, self.level), max(now, self.updated_at))

    def _refill(self, now: float) -> None:
        if now > self.updated_at:
            self.level = min(self.capacity, self.level + (now - self.updated_at) * self.per_s)
            self.updated_at = now

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` tokens are there (0 if they are now)."""
        self._refill(now)
        missing = min(amount, self.capacity) - self.level
        if missing <= self.capacity * ROUNDING:
            return 0.0
        return missing / self.per_s if self.per_s > 0 else float("inf")

    def take(self, amount: float, now: float) -> None:
        """Take ``amount`` tokens (the caller checked :meth:`wait_for`)."""
        self._refill(now)
        self.level -= min(amount, self.capacity)

    def adjust(self, amount: float, now: float) -> None:
        """Give back (positive) or charge (negative) tokens after the fact."""
        self._refill(now)
        self.level = min(self.capacity, self.level + amount)
