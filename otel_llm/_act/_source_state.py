"""What a client knows about each source between calls, and which source a call tries next."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from otel_llm._act._breaker import Breaker
from otel_llm._act._source import Source
from otel_llm._defaults import DEFAULTS


def for_another(seconds: float) -> str:
    """How much longer a source stays unavailable, in tenths of a second: never "for another
    0.0 s" for a wait that has not ended."""
    if seconds < 0.05:
        return "for less than 0.1 s more"
    return f"for another {seconds:.1f} s"


@dataclass(slots=True)
class SourceState:
    """Health of one source, shared by every call of its client: its breaker and until when it
    is rate limited. (Admission is asked by each call for its own request: see
    :attr:`Candidates.quota_until`.)"""

    source: Source
    breaker: Breaker
    rate_limited_until: float = 0.0

    @property
    def name(self) -> str:
        """The source's name."""
        return self.source.name

    def why_unavailable(self, now: float) -> str:
        """Why no attempt starts at this source now, for a call that never got to try it."""
        if self.rate_limited_until > now:
            return f"rate limited {for_another(self.rate_limited_until - now)}"
        open_until = self.breaker.open_until()
        if open_until is not None:
            return f"circuit breaker open {for_another(open_until - now)}"
        if not self.breaker.allows(now):
            return "circuit breaker half-open, its probe in flight"
        return "not tried"

    def available_at(self, now: float) -> float:
        """Earliest time an attempt at this source could start."""
        when = max(now, self.rate_limited_until)
        open_until = self.breaker.open_until()
        if open_until is not None:
            when = max(when, open_until)
        elif not self.breaker.allows(now):  # half-open with its probe in flight
            when = max(when, now + DEFAULTS.probe_recheck_s)
        return when


@dataclass(slots=True)
class Pick:
    """The source to try next, and how long to wait before it is available (0: now)."""

    state: SourceState
    wait_s: float


@dataclass(frozen=True, slots=True)
class Stay:
    """The next round should stay on ``source`` (a same-source retry) if it is available within
    ``max_wait_s`` (0 after a transient failure; the 429's wait after a short rate limit)."""

    source: str
    max_wait_s: float


@dataclass(slots=True)
class Candidates:
    """Sources of one call in priority order, minus those the call has excluded."""

    states: Sequence[SourceState]
    excluded: set[str] = field(default_factory=set)
    quota_until: dict[str, float] = field(default_factory=dict)
    """Until when admission said this call's request cannot be admitted at each source. Kept
    per call, not on the shared :class:`SourceState`: how long a request waits for tokens
    depends on its own need, so one call's large request never keeps another call's small one
    away from a source — each call asks admission for itself."""
    quota_estimate: dict[str, float] = field(default_factory=dict)
    """When admission estimated, at its last answer, that this call's request could be admitted
    at each source it refused (``quota_until`` asks again sooner: the estimate is an upper
    bound)."""

    def remaining(self) -> list[SourceState]:
        """Sources the call may still use."""
        return [state for state in self.states if state.name not in self.excluded]

    def available_at(self, state: SourceState, now: float) -> float:
        """Earliest time an attempt of this call at ``state`` could start."""
        return max(state.available_at(now), self.quota_until.get(state.name, 0.0))

    def why_unavailable(self, state: SourceState, now: float) -> str:
        """Why no attempt of this call starts at ``state`` now."""
        estimate = self.quota_estimate.get(state.name)
        if estimate is not None and estimate > now and state.rate_limited_until <= now:
            # what admission estimated, though it is asked again sooner (maybe now)
            left = for_another(estimate - now)
            return f"out of admission quota for this request, estimated {left}"
        return state.why_unavailable(now)

    def pick(
        self, now: float, *, avoid: str | None = None, stay: Stay | None = None
    ) -> Pick | None:
        """The best source now: ``stay``'s source if it is available within its wait; else
        healthy and free, by priority, ``avoid`` (the source that just failed) last; else the
        one available soonest. ``None`` when every source is excluded."""
        remaining = self.remaining()
        if not remaining:
            return None
        if stay is not None:
            for state in remaining:
                if state.name == stay.source:
                    wait = self.available_at(state, now) - now
                    if wait <= stay.max_wait_s:
                        return Pick(state, max(0.0, wait))
                    avoid = stay.source
        ordered = sorted(remaining, key=lambda state: state.name == avoid)
        for state in ordered:
            if self.available_at(state, now) <= now:
                return Pick(state, 0.0)
        soonest = min(ordered, key=lambda state: self.available_at(state, now))
        return Pick(soonest, self.available_at(soonest, now) - now)

    def hedge_targets(self, now: float, primary: str) -> list[SourceState]:
        """The different sources a hedge leg may go to now, by priority: the breaker allows
        each, and none is answering 429 (``rate_limited_until``) nor out of quota for this
        call — :meth:`available_at` covers all three."""
        return [
            state
            for state in self.remaining()
            if state.name != primary and self.available_at(state, now) <= now
        ]
