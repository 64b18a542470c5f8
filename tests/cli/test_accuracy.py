"""The demo's comparison of measured figures with the script (``otel_llm/cli/_accuracy.py``)."""

from __future__ import annotations

import pytest

from otel_llm.cli._accuracy import (
    Scripted,
    SourceCheck,
    Tolerance,
    Totals,
    Verdict,
    check_source,
    disagreeing_calls,
    p99,
)
from otel_llm.simulator import Script, Silence, scripted_figures

TOLERANCE = Tolerance(gap_s=0.04, share_points=2.0, disagreeing_share=0.02)


def _stalled(*silences_s: float) -> Script:
    """Ten chunks 0.1 s apart with the given silences after chunks 1, 2, …"""
    return Script(
        first_chunk_delay_s=0.5,
        chunk_count=10,
        chunk_interval_s=0.1,
        silences=tuple(
            Silence(after_chunk=index + 1, duration_s=seconds)
            for index, seconds in enumerate(silences_s)
        ),
    )


SCRIPTS = [_stalled(2.0), _stalled(0.91, 3.0), _stalled()]
"""Gaps over a 1 s threshold: 2.1; 1.01 (near) and 3.1; none."""


def _scripted() -> Scripted:
    return Scripted.of(
        (scripted_figures(s, threshold_s=1.0, band_s=TOLERANCE.gap_s) for s in SCRIPTS),
        TOLERANCE.gap_s,
    )


def test_scripted_totals_carry_the_band() -> None:
    """Three stalls are scripted, one of them within the band: 2 to 3 may be counted."""
    scripted = _scripted()
    assert (scripted.calls, scripted.stalls) == (3, 3)
    assert (scripted.stalls_min, scripted.stalls_max) == (2, 3)
    assert scripted.stall_s == pytest.approx(2.1 + 1.01 + 3.1)
    assert scripted.stall_slack_s == pytest.approx(3 * 0.04 + 1.01)


@pytest.mark.parametrize(
    ("measured", "problems"),
    [
        (Totals(3, 3, 2, 6.25, 15.0), 0),
        (Totals(3, 2, 2, 5.2, 15.0), 0),  # the near gap measured just under the threshold
        (Totals(3, 5, 3, 6.6, 15.0), 1),  # two stalls the script does not have
        (Totals(3, 3, 2, 9.0, 15.0), 2),  # stall seconds and share far off
        (Totals(2, 3, 2, 6.25, 15.0), 1),  # a call missing
    ],
)
def test_check_source_allows_the_band_and_no_more(measured: Totals, problems: int) -> None:
    """Counts inside the scripted range and seconds within the slack pass; the rest is named."""
    scripted = _scripted()
    scaled = Scripted(
        scripted.calls,
        scripted.stalls,
        scripted.stalls_min,
        scripted.stalls_max,
        scripted.stall_s,
        scripted.stall_slack_s,
        15.0,
    )
    check = check_source("sim-a/measured", measured, scaled, TOLERANCE)
    assert len(check.problems) == problems


def test_disagreeing_calls_compare_each_call_with_its_own_range() -> None:
    """A call disagrees when its stall count is outside its scripted range or unobservable."""
    figures = [scripted_figures(s, threshold_s=1.0, band_s=TOLERANCE.gap_s) for s in SCRIPTS]
    assert disagreeing_calls(zip([1, 1, 0], figures, strict=True)) == 0
    assert disagreeing_calls(zip([1, 2, 0], figures, strict=True)) == 0
    assert disagreeing_calls(zip([0, 3, 1], figures, strict=True)) == 3
    assert disagreeing_calls(zip([None, 2, 0], figures, strict=True)) == 1


def test_verdict_names_every_reason() -> None:
    """A run is honest only with every source in tolerance, few disagreeing calls and a
    punctual event loop; otherwise each reason is said."""
    scripted = _scripted()
    wall = scripted.wall_s
    good = check_source("a", Totals(3, 3, 2, 6.21, wall), scripted, TOLERANCE)
    bad = check_source("b", Totals(3, 9, 3, 6.21, wall), scripted, TOLERANCE)

    def verdict(checks: tuple[SourceCheck, ...], disagreeing: int, lag_p99_s: float) -> Verdict:
        return Verdict(checks, disagreeing, 100, 0, 0.01, lag_p99_s, 0.05, TOLERANCE)

    assert verdict((good,), 2, 0.01).honest
    busy = verdict((good, bad), 3, 0.05)
    assert not busy.honest
    assert len(busy.reasons) == 3
    assert "b: 9 stalls" in busy.reasons[0]
    assert "3 of 100 calls" in busy.reasons[1]
    assert "woke 50 ms late" in busy.reasons[2]


def test_failed_or_missing_calls_are_no_honest_run() -> None:
    """Failures beyond the allowed share, or no answered call at all, are reasons too: an
    empty comparison proves nothing."""
    good = check_source("a", Totals(3, 3, 2, 6.21, _scripted().wall_s), _scripted(), TOLERANCE)
    assert Verdict((good,), 0, 98, 2, 0.01, 0.001, 0.002, TOLERANCE).honest
    failing = Verdict((good,), 0, 90, 10, 0.01, 0.001, 0.002, TOLERANCE)
    assert failing.reasons == (
        "10 of 100 calls failed: the figures of the rest may not describe the providers",
    )
    empty = Verdict((), 0, 0, 5, 0.0, 0.001, 0.002, TOLERANCE)
    assert empty.reasons == ("no call was answered, so nothing could be compared",)


def test_p99_is_the_one_percentile_definition() -> None:
    """p99 of 1..100 is 99.01 (linear between ranks, as the dashboards' quantile_cont); of
    nothing, 0."""
    assert p99([float(n) for n in range(100, 0, -1)]) == pytest.approx(99.01)
    assert p99([]) == 0.0
