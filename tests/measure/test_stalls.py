"""Pure stall metering (the figures, not observable vs zero, the clamp, the threshold): table
tests for every branch, properties for the rest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_llm import ConfigurationError
from otel_llm._measure._stalls import (
    NS_PER_MS,
    StallFigures,
    Timeline,
    meter,
    stall_sum,
    threshold_ms_from_env,
    to_ms,
    validate_threshold_ms,
)

MS = NS_PER_MS


def streamed(ttft_ms: float, gaps_ms: list[float], tail_ms: float = 0.0) -> Timeline:
    ttft = int(ttft_ms * MS)
    gaps = [int(g * MS) for g in gaps_ms]
    wall = ttft + sum(gaps) + int(tail_ms * MS)
    return Timeline.from_gaps(wall_ns=wall, ttft_ns=ttft, gaps_ns=gaps)


@pytest.mark.parametrize(
    ("timeline", "threshold", "expected"),
    [
        pytest.param(
            Timeline(wall_ns=2500 * MS, streamed=False),
            1000,
            StallFigures(2500, 2500, None, None, None, None, None),
            id="not-streamed-none",
        ),
        pytest.param(
            Timeline(wall_ns=900 * MS, streamed=True),
            1000,
            StallFigures(900, 900, None, None, None, None, 0),
            id="no-chunks-none",
        ),
        pytest.param(
            streamed(300, [], tail_ms=50),
            1000,
            StallFigures(350, 350, None, None, 300, None, 1),
            id="one-chunk-none",
        ),
        pytest.param(
            streamed(100, [10, 20, 30]),
            1000,
            StallFigures(160, 160, 0, 0, 100, 30, 4),
            id="no-stall-zero-not-none",
        ),
        pytest.param(
            streamed(100, [1000, 10]),
            1000,
            StallFigures(1110, 1110, 0, 0, 100, 1000, 3),
            id="gap-equal-threshold-is-not-stall",
        ),
        pytest.param(
            streamed(100, [1000.000001, 10]),
            1000,
            StallFigures(1110, 110, 1000, 1, 100, 1000, 3),
            id="gap-one-ns-over-is-stall",
        ),
        pytest.param(
            streamed(1630, [20, 54900, 20, 3000, 20], tail_ms=5),
            1000,
            StallFigures(59595, 1695, 57900, 2, 1630, 54900, 6),
            id="consecutive-stalls-not-merged-ttft-and-tail-in-net",
        ),
        pytest.param(
            streamed(0, [1500, 1500]),
            1000,
            StallFigures(3000, 0, 3000, 2, 0, 1500, 3),
            id="all-stall-net-zero",
        ),
    ],
)
def test_meter_table(timeline: Timeline, threshold: int, expected: StallFigures) -> None:
    """Every branch of metering gives the figures docs/figures.md defines."""
    assert meter(timeline, threshold) == expected


def test_generation_is_clamped_at_zero() -> None:
    """generation_ms never goes negative even if stalls exceed the wall time (the clamp at zero)."""
    timeline = Timeline(
        wall_ns=1000 * MS,
        streamed=True,
        chunk_count=2,
        ttft_ns=0,
        gaps_ns=[5000 * MS],
        max_gap_ns=5000 * MS,
    )
    figures = meter(timeline, 1000)
    assert figures.generation_ms == 0
    assert figures.stall_ms == 5000


def test_rounding_happens_once_on_the_sum() -> None:
    """stall_ms rounds the summed nanoseconds once, not each gap (one rounding place)."""
    gaps = [1000 * MS + 600_000, 1000 * MS + 600_000]
    assert stall_sum(gaps, 1000) == (2001 * MS + 200_000, 2)
    figures = meter(Timeline.from_gaps(wall_ns=3000 * MS, ttft_ns=0, gaps_ns=gaps), 1000)
    assert figures.stall_ms == 2001


def test_threshold_below_known_floor_is_refused() -> None:
    """Metering below the floor of recorded gaps raises instead of under-counting."""
    timeline = Timeline(wall_ns=1, streamed=True, complete_above_ms=100)
    with pytest.raises(ValueError, match="below the floor"):
        meter(timeline, 50)


@pytest.mark.parametrize("bad", [0, -1, True, False, 1.5, "1000", None])
def test_threshold_must_be_positive_integer(bad: object) -> None:
    """0, negatives, booleans and non-integers are rejected with a clear error."""
    with pytest.raises(ConfigurationError, match="positive integer"):
        validate_threshold_ms(bad)


def test_to_ms_floors() -> None:
    """to_ms floors nanoseconds to whole milliseconds."""
    assert [to_ms(0), to_ms(999_999), to_ms(1_000_000), to_ms(1_999_999)] == [0, 0, 1, 1]


gaps_strategy = st.lists(st.integers(min_value=0, max_value=120_000 * MS), max_size=60)


@given(
    ttft=st.integers(min_value=0, max_value=60_000 * MS),
    gaps=gaps_strategy,
    tail=st.integers(min_value=0, max_value=5_000 * MS),
    threshold=st.integers(min_value=1, max_value=100_000),
)
def test_wall_is_net_plus_stall(ttft: int, gaps: list[int], tail: int, threshold: int) -> None:
    """When stalls are observable, wall_ms = generation_ms + stall_ms exactly."""
    timeline = Timeline.from_gaps(wall_ns=ttft + sum(gaps) + tail, ttft_ns=ttft, gaps_ns=gaps)
    figures = meter(timeline, threshold)
    if figures.stall_ms is None:
        assert figures.generation_ms == figures.wall_ms
        assert figures.stall_count is None
    else:
        assert figures.wall_ms == figures.generation_ms + figures.stall_ms
        assert figures.stall_count is not None


@given(
    gaps=gaps_strategy,
    low=st.integers(min_value=1, max_value=100_000),
    delta=st.integers(min_value=0, max_value=100_000),
)
def test_stall_never_grows_with_threshold(gaps: list[int], low: int, delta: int) -> None:
    """Raising the threshold never increases stall_ms or stall_count."""
    timeline = Timeline.from_gaps(wall_ns=sum(gaps), ttft_ns=0, gaps_ns=gaps)
    at_low, at_high = meter(timeline, low), meter(timeline, low + delta)
    if at_low.stall_ms is None:
        assert at_high.stall_ms is None
        return
    assert at_high.stall_ms is not None
    assert at_high.stall_count is not None
    assert at_low.stall_count is not None
    assert at_high.stall_ms <= at_low.stall_ms
    assert at_high.stall_count <= at_low.stall_count


@given(gaps=gaps_strategy, threshold=st.integers(min_value=1, max_value=100_000))
def test_none_exactly_when_fewer_than_two_chunks(gaps: list[int], threshold: int) -> None:
    """stall figures are None iff fewer than two chunks; otherwise they are integers ≥ 0."""
    figures = meter(Timeline.from_gaps(wall_ns=sum(gaps), ttft_ns=0, gaps_ns=gaps), threshold)
    if len(gaps) + 1 < 2:
        assert (figures.stall_ms, figures.stall_count) == (None, None)
    else:
        assert figures.stall_ms is not None
        assert figures.stall_ms >= 0
        assert figures.stall_count == sum(1 for g in gaps if g > threshold * MS)


@pytest.mark.parametrize("text", ["\u00b2", "\uff11\uff12", "\u0661", "1_000", "+500", "1e3"])
def test_threshold_text_is_ascii_digits_only(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """The environment's threshold is decimal ASCII digits: a superscript two, full-width or
    Arabic-Indic digits (``str.isdigit`` says yes to all) are a ConfigurationError naming the
    key, never a raw ValueError out of ``observe_stream()`` and never a silent 12."""
    monkeypatch.setenv("LLM__STREAM__STALL_THRESHOLD_MS", text)
    with pytest.raises(ConfigurationError, match="LLM__STREAM__STALL_THRESHOLD_MS"):
        threshold_ms_from_env()
    monkeypatch.setenv("LLM__STREAM__STALL_THRESHOLD_MS", " 250 ")
    assert threshold_ms_from_env() == 250
