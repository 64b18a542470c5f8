"""Circuit breaker per source (pure: every decision takes ``now``).

Consecutive failures open the breaker; after a cool-down one half-open probe is let through;
its success closes the breaker, its failure re-opens it for a longer cool-down. Cool-downs start
short (``first_cooldown_s``), grow by ``growth`` with every failed probe up to ``max_cooldown_s``,
and are shortened by up to ``jitter`` at random (never lengthened, so ``max_cooldown_s`` bounds
how long a recovered source waits for its probe). So a blip costs a second, a long outage costs
about one probe every ``max_cooldown_s``, and a source that recovered gets its traffic back
within ``max_cooldown_s`` plus the time to the next call. Watchdog kills count as failures; a
cancelled hedge loser does not (it releases a probe it held without a verdict).

Each attempt let through holds a :class:`Permit` that says whether it is the half-open probe.
Only the probe's own end decides the probe: an attempt let through earlier, while the breaker
was closed, that fails or is cancelled while another call's probe is in flight neither frees
that probe nor counts as a failed probe (its failure is counted, and the probe's verdict
stands).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from otel_llm._defaults import DEFAULTS
from otel_llm._measure._faults import FAULTS


class BreakerState(Enum):
    """Where a breaker stands."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


_MAX_GROWTH_STEPS = 64


@dataclass(frozen=True, slots=True)
class Permit:
    """Leave for one attempt: ``probe`` is the number of the half-open probe it is, ``None``
    when the breaker let it through closed."""

    probe: int | None = None


_CLOSED = Permit()


@dataclass(slots=True, kw_only=True)
class Breaker:
    """The breaker of one source."""

    failure_threshold: int
    max_cooldown_s: float
    first_cooldown_s: float
    growth: float = DEFAULTS.breaker_cooldown_growth
    jitter: float = DEFAULTS.breaker_cooldown_jitter
    state: BreakerState = BreakerState.CLOSED
    failures: int = 0
    opened_at: float = 0.0
    cooldown_s: float = 0.0
    """The current cool-down (while open)."""
    reopened: int = 0
    """Failed probes since the breaker last closed."""
    probing: bool = False
    probes: int = 0
    """Probes let through so far (the latest is the one in flight while ``probing``)."""
    on_change: Callable[[BreakerState], None] | None = None
    """Called with the new state whenever the state changes (the client's metrics)."""

    def _move(self, state: BreakerState) -> None:
        if state is not self.state:
            self.state = state
            if self.on_change is not None:
                try:
                    self.on_change(state)
                except Exception as exc:  # telemetry never breaks the call
                    FAULTS.report("record a breaker's change", exc)

    def allows(self, now: float) -> bool:
        """Would an attempt be let through now (without taking the probe)?"""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN:
            return now >= self.opened_at + self.cooldown_s
        return not self.probing

    def acquire(self, now: float) -> Permit | None:
        """Let an attempt through if allowed (its permit; ``None``: refused); in half-open state
        it becomes the one probe."""
        if not self.allows(now):
            return None
        if self.state is BreakerState.OPEN:
            self._move(BreakerState.HALF_OPEN)
        if self.state is BreakerState.CLOSED:
            return _CLOSED
        self.probing = True
        self.probes += 1
        return Permit(self.probes)

    def _is_probe(self, permit: Permit | None) -> bool:
        """Whether the attempt holding ``permit`` is the probe in flight. Without a permit (a
        caller that keeps none) any attempt ending while a probe is in flight is taken for it."""
        if self.state is not BreakerState.HALF_OPEN or not self.probing:
            return False
        return permit is None or permit.probe == self.probes

    def still_lets_through(self, permit: Permit | None) -> bool:
        """Whether an attempt let through with ``permit``, not started yet, may still start:
        the probe's while it is the probe in flight (only the probe decides), a closed
        breaker's while the breaker is closed (another attempt's failure may have opened it
        since)."""
        if permit is None or permit.probe is None:
            return self.state is BreakerState.CLOSED
        return self._is_probe(permit)

    def open_until(self) -> float | None:
        """When an open breaker will allow a probe; ``None`` if it is not open."""
        return self.opened_at + self.cooldown_s if self.state is BreakerState.OPEN else None

    def record_success(self) -> None:
        """An attempt succeeded: close the breaker."""
        self._move(BreakerState.CLOSED)
        self.failures = 0
        self.reopened = 0
        self.probing = False

    def record_failure(
        self, now: float, *, unit: float = 0.0, permit: Permit | None = None
    ) -> None:
        """An attempt (let through with ``permit``) failed: count it; open the breaker at the
        threshold, re-open it (longer) when it was the probe. ``unit`` in [0, 1) draws the
        jitter. Half-open, any other attempt's failure is only counted: the probe decides."""
        self.failures += 1
        if self._is_probe(permit):
            self.reopened += 1
            self._open(now, unit)
        elif self.state is BreakerState.CLOSED and self.failures >= self.failure_threshold:
            self._open(now, unit)

    def _open(self, now: float, unit: float) -> None:
        # the exponent stops where the cool-down has long reached its maximum: an outage of
        # days (thousands of failed probes) must not overflow the float
        exponent = min(self.reopened, _MAX_GROWTH_STEPS)
        base = min(self.max_cooldown_s, self.first_cooldown_s * self.growth**exponent)
        self.cooldown_s = base * (1.0 - self.jitter * max(0.0, min(1.0, unit)))
        self.opened_at = now
        self.probing = False
        self._move(BreakerState.OPEN)

    def release(self, permit: Permit | None = None) -> None:
        """An attempt (let through with ``permit``) ended without a verdict (cancelled, a 429,
        a permanent error): if it was the probe in flight, the next attempt may probe."""
        if self._is_probe(permit):
            self.probing = False
