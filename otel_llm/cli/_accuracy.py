"""How close the demo's measured figures are to the simulator's script: pure arithmetic.

The simulated providers know every gap they scripted, so each source's stall count, stall
seconds and stall share have a ground truth. A loaded machine delivers chunks late, so a measured
gap may differ from its scripted one by up to ``Tolerance.gap_s``; the comparison allows exactly
that, and no more:

* stall count: between the scripted count without the stalls within ``gap_s`` of the threshold
  and the scripted count with every gap within ``gap_s`` of it;
* stall seconds: within ``gap_s`` per stall plus the gaps near the threshold;
* stall share: within ``Tolerance.share_points`` percentage points plus what the stall-seconds
  allowance and a first chunk late by ``gap_s`` per call (which lengthens the wall time) amount
  to.

When a source falls outside, when more than ``disagreeing_share`` of the calls count stalls
outside their own scripted range, or when the event loop was woken late by more than ``gap_s``
(p99), the machine was too busy to measure honestly and the verdict says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from otel_llm._quantile import quantile
from otel_llm.simulator import ScriptedFigures


@dataclass(frozen=True, slots=True)
class Tolerance:
    """What the comparison allows."""

    gap_s: float
    """A measured gap may differ from its scripted one by this much (real seconds)."""
    share_points: float
    """Stall share (percent of wall time) may differ by this many percentage points."""
    disagreeing_share: float
    """Share of calls that may count stalls outside their own scripted range."""

    @property
    def lag_p99_s(self) -> float:
        """The event loop may wake a sleeper this late (p99) before timing is not trusted: a
        gap is the difference of two arrivals, each late by about that much."""
        return self.gap_s


@dataclass(frozen=True, slots=True)
class Totals:
    """One source's measured figures over the winning attempts of a run."""

    calls: int
    stalls: int
    stalled: int
    stall_s: float
    wall_s: float

    @property
    def share(self) -> float:
        """Stall seconds as a percentage of wall seconds (0 without wall time)."""
        return 100.0 * self.stall_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Scripted:
    """One source's scripted figures over the same winning attempts."""

    calls: int
    stalls: int
    stalls_min: int
    stalls_max: int
    stall_s: float
    stall_slack_s: float
    wall_s: float

    @classmethod
    def of(cls, figures: Iterable[ScriptedFigures], gap_s: float) -> Scripted:
        """Totals of the scripted figures of the winning attempts (``band_s`` = ``gap_s``)."""
        items = list(figures)
        ranges = [item.stall_count_range for item in items]
        most = sum(high for _, high in ranges)
        return cls(
            calls=len(items),
            stalls=sum(item.stall_count for item in items),
            stalls_min=sum(low for low, _ in ranges),
            stalls_max=most,
            stall_s=sum(item.stall_s for item in items),
            stall_slack_s=most * gap_s + sum(item.near_s for item in items),
            wall_s=sum(item.wall_s for item in items),
        )

    @property
    def share(self) -> float:
        """Scripted stall seconds as a percentage of scripted wall seconds."""
        return 100.0 * self.stall_s / self.wall_s if self.wall_s > 0 else 0.0

    def share_slack(self, tolerance: Tolerance) -> float:
        """Allowed difference of the stall share, in percentage points: ``share_points`` plus
        what the stall-seconds slack and a first chunk late by ``gap_s`` per call amount to."""
        if self.wall_s <= 0:
            return tolerance.share_points
        late_first_chunks_s = self.calls * tolerance.gap_s
        derived = (100.0 * self.stall_slack_s + self.share * late_first_chunks_s) / self.wall_s
        return tolerance.share_points + derived


@dataclass(frozen=True, slots=True)
class SourceCheck:
    """The comparison of one source."""

    label: str
    measured: Totals
    scripted: Scripted
    problems: tuple[str, ...]


def check_source(
    label: str, measured: Totals, scripted: Scripted, tolerance: Tolerance
) -> SourceCheck:
    """Compare one source's measured figures with its scripted ones."""
    problems: list[str] = []
    if measured.calls != scripted.calls:
        problems.append(f"{measured.calls} calls measured, {scripted.calls} scripted")
    if not scripted.stalls_min <= measured.stalls <= scripted.stalls_max:
        problems.append(
            f"{measured.stalls} stalls, scripted {scripted.stalls_min}-{scripted.stalls_max}"
        )
    if abs(measured.stall_s - scripted.stall_s) > scripted.stall_slack_s:
        problems.append(
            f"{measured.stall_s:.2f} s of stalls, scripted {scripted.stall_s:.2f} "
            f"± {scripted.stall_slack_s:.2f} s"
        )
    slack = scripted.share_slack(tolerance)
    if abs(measured.share - scripted.share) > slack:
        problems.append(
            f"stall share {measured.share:.1f} %, scripted {scripted.share:.1f} ± {slack:.1f}"
        )
    return SourceCheck(label, measured, scripted, tuple(problems))


def disagreeing_calls(pairs: Iterable[tuple[int | None, ScriptedFigures]]) -> int:
    """How many calls counted a number of stalls outside their own scripted range (``None``,
    not observable, disagrees with any script that has a gap)."""
    disagreeing = 0
    for measured, scripted in pairs:
        low, high = scripted.stall_count_range
        if measured is None:
            disagreeing += scripted.longest_gap_s > 0
        elif not low <= measured <= high:
            disagreeing += 1
    return disagreeing


def p99(samples: Sequence[float]) -> float:
    """The 99th percentile of ``samples`` (:func:`otel_llm._quantile.quantile`); 0 for none."""
    return quantile(samples, 0.99)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the run measured honestly, and if not, why."""

    checks: tuple[SourceCheck, ...]
    disagreeing: int
    calls: int
    """Calls answered."""
    failed: int
    """Calls that failed (nothing of theirs is compared)."""
    gap_error_p99_s: float
    lag_p99_s: float
    lag_max_s: float
    tolerance: Tolerance

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the figures cannot be trusted (empty when they can)."""
        reasons = [f"{check.label}: {p}" for check in self.checks for p in check.problems]
        if not self.calls:
            reasons.append("no call was answered, so nothing could be compared")
        elif self.failed > math.floor(
            self.tolerance.disagreeing_share * (self.calls + self.failed)
        ):
            reasons.append(
                f"{self.failed} of {self.calls + self.failed} calls failed: the figures of the "
                "rest may not describe the providers"
            )
        allowed = math.floor(self.tolerance.disagreeing_share * self.calls)
        if self.disagreeing > allowed:
            reasons.append(
                f"{self.disagreeing} of {self.calls} calls counted stalls the script does not "
                f"have (or missed some)"
            )
        if self.lag_p99_s > self.tolerance.lag_p99_s:
            reasons.append(
                f"the event loop woke {self.lag_p99_s * 1000:.0f} ms late (p99; max "
                f"{self.lag_max_s * 1000:.0f} ms), more than the "
                f"{self.tolerance.lag_p99_s * 1000:.0f} ms a gap may be off"
            )
        return tuple(reasons)

    @property
    def honest(self) -> bool:
        """True when every figure is within tolerance of the script."""
        return not self.reasons
