"""The scripted ground truth of one answer: what an honest meter must measure for a script.

A meter that receives a scripted stream on time measures the gaps of :attr:`Script.gaps_s`
(each wait in real seconds is ``time_scale ×`` the scripted one, at most :data:`MAX_WAIT_S`),
so its stall figures at a threshold follow from the script alone (a stall is a gap strictly longer
than the threshold). A loaded machine
delivers late: a measured gap may differ from the scripted one by the scheduler's delay, so a
scripted gap within ``band_s`` of the threshold may be counted either way —
:class:`ScriptedFigures` says how many there are instead of pretending to a precision the
machine cannot give.
"""

from __future__ import annotations

from dataclasses import dataclass

from otel_llm.simulator._script import Script
from otel_llm.simulator._server import MAX_WAIT_S


@dataclass(frozen=True, slots=True)
class ScriptedFigures:
    """The figures a script dictates at one stall threshold, in real seconds."""

    wall_s: float
    """Request to the end of the stream: hold, first-chunk delay, every gap, a tail silence."""
    stall_s: float
    """Sum of the scripted gaps strictly longer than the threshold."""
    stall_count: int
    """Number of those gaps."""
    longest_gap_s: float
    """The longest scripted gap (0 for a stream of fewer than two chunks)."""
    near_count: int
    """Scripted gaps closer than ``band_s`` to the threshold: a meter may count these either
    way."""
    near_s: float
    """Sum of those gaps."""
    near_stall_count: int
    """How many of the near gaps are scripted stalls (longer than the threshold)."""
    near_stall_s: float
    """Sum of those."""

    @property
    def stall_count_range(self) -> tuple[int, int]:
        """Fewest and most stalls a meter within the band can count."""
        return self.stall_count - self.near_stall_count, (
            self.stall_count - self.near_stall_count + self.near_count
        )


def _real(scripted_s: float, time_scale: float) -> float:
    return min(MAX_WAIT_S, scripted_s * time_scale)


def scripted_figures(
    script: Script, *, threshold_s: float, time_scale: float = 1.0, band_s: float = 0.0
) -> ScriptedFigures:
    """The stall figures ``script`` dictates at ``threshold_s`` (real seconds) when served at
    ``time_scale``; gaps within ``band_s`` of the threshold are counted apart as *near*."""
    after: dict[int, list[float]] = {}
    for silence in script.silences:
        after.setdefault(silence.after_chunk, []).append(_real(silence.duration_s, time_scale))
    interval = _real(script.chunk_interval_s, time_scale)
    gaps = [interval + sum(after.get(index, ())) for index in range(max(0, script.chunk_count - 1))]
    tail = sum(after.get(script.chunk_count - 1, ())) if script.chunk_count else 0.0
    wall = (
        _real(script.hold_s, time_scale)
        + _real(script.first_chunk_delay_s, time_scale)
        + sum(gaps)
        + tail
    )
    stalls = [gap for gap in gaps if gap > threshold_s]
    near = [gap for gap in gaps if abs(gap - threshold_s) < band_s]
    near_stalls = [gap for gap in near if gap > threshold_s]
    return ScriptedFigures(
        wall_s=wall,
        stall_s=sum(stalls),
        stall_count=len(stalls),
        longest_gap_s=max(gaps, default=0.0),
        near_count=len(near),
        near_s=sum(near),
        near_stall_count=len(near_stalls),
        near_stall_s=sum(near_stalls),
    )
