"""How the suite judges a measurement (``otel_llm/conformance/_figures.py``): exact, wrong by
how much, or not measured — by table, and through the real suite with a deliberately wrong
adapter, which must be reported wrong by exactly its error."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_llm.conformance import ADAPTERS, Case, Expected, Measured, Recorded, StallPair, judge
from otel_llm.conformance._adapters import _otel_llm_stalls
from otel_llm.conformance._cli import command, parse

TRUTH = Expected(10, 0.4, (StallPair(2, 8.6), StallPair(1, 6.05)), ("end_turn",), "ok", True)
REASONS = (frozenset({"stop"}),)
EVERYTHING = frozenset({"chunks", "ttft", "stalls", "stall_s", "finish", "outcome"})
RIGHT = Measured(10, 0.4, (StallPair(2, 8.6), StallPair(1, 6.05)), ("stop",), "ok", True)


def statuses(measured: Measured, measures: frozenset[str] = EVERYTHING) -> dict[str, str]:
    return {v.figure: v.status for v in judge(TRUTH, REASONS, measured, measures)}


def test_a_right_measurement_is_exact_on_every_figure() -> None:
    """Every figure right (end_turn recorded as stop is the same reason): nine exact."""
    assert set(statuses(RIGHT).values()) == {"exact"}
    assert len(statuses(RIGHT)) == 9


def test_times_within_a_millisecond_counts_exact() -> None:
    """A time 1 ms off is exact, 2 ms off is wrong by +0.002 s; a count one off is wrong by +1."""
    near = Measured(10, 0.401, RIGHT.stalls, ("stop",), "ok", True)
    assert statuses(near)["ttft"] == "exact"
    far = Measured(11, 0.402, (StallPair(2, 8.6), StallPair(1, 6.05)), ("stop",), "ok", True)
    verdicts = {v.figure: v for v in judge(TRUTH, REASONS, far, EVERYTHING)}
    assert (verdicts["ttft"].status, verdicts["ttft"].difference) == ("wrong", "+0.002 s")
    assert (verdicts["chunks"].status, verdicts["chunks"].difference) == ("wrong", "+1")


def test_a_figure_it_does_not_record_is_not_measured() -> None:
    """Figures outside what the instrumentation records are 'not measured', never wrong."""
    got = statuses(Measured(finish_reasons=("stop",), outcome="ok", span_ends=True),
                   frozenset({"finish", "outcome"}))  # fmt: skip
    assert got["chunks"] == got["ttft"] == got["stalls@1s"] == "not measured"
    assert got["finish"] == got["outcome"] == got["span ends"] == "exact"


def test_a_missing_figure_of_a_measured_kind_is_wrong() -> None:
    """An instrumentation that measures stalls but records none where they exist is wrong."""
    got = statuses(Measured(10, 0.4, (None, None), ("stop",), "ok", True))
    assert got["stalls@1s"] == got["stall_s@4s"] == "wrong"


def test_no_span_means_every_measured_figure_is_wrong() -> None:
    """A call whose span never ended recorded nothing: its measured figures are wrong."""
    verdicts = judge(TRUTH, REASONS, Measured(span_ends=False), frozenset({"ttft", "outcome"}))
    by = {v.figure: v for v in verdicts}
    assert by["ttft"].difference == by["outcome"].difference == "no span ended"
    assert by["span ends"].status == "wrong"
    assert by["chunks"].status == "not measured"


@pytest.mark.parametrize(
    ("recorded", "status"),
    [(None, "exact"), (("error",), "exact"), (("stop",), "wrong")],
)
def test_where_no_finish_reason_was_sent(recorded: tuple[str, ...] | None, status: str) -> None:
    """Where the provider sent none, none or the conventions' 'error' is right, 'stop' wrong."""
    truth = Expected(4, 0.4, (None, None), None, "error", True)
    measured = Measured(4, 0.4, (None, None), recorded, "error", True)
    by = {v.figure: v.status for v in judge(truth, None, measured, EVERYTHING)}
    assert by["finish"] == status


def test_a_deliberately_wrong_adapter_is_reported_wrong_by_its_error() -> None:
    """Through the real suite (its own process, two cases per wire): an adapter that adds one
    chunk, 250 ms to the first chunk and says 'length' is wrong by +1, +0.250 s and the
    reason, on every case, and exact on every other figure."""
    adapter = "tests.support.conformance_adapters:WRONG"
    done = subprocess.run(
        command(adapter, case_filter="/silences"), capture_output=True, text=True, timeout=55
    )
    results = parse(adapter, done.returncode, done.stdout, done.stderr)
    assert sorted(r["case"] for r in results) == [
        "anthropic/silences", "chat/silences", "gemini/silences", "responses/silences",
    ]  # fmt: skip
    for result in results:
        by = {v["figure"]: v for v in result["verdicts"]}
        assert (by["chunks"]["status"], by["chunks"]["difference"]) == ("wrong", "+1")
        assert (by["ttft"]["status"], by["ttft"]["difference"]) == ("wrong", "+0.250 s")
        assert by["finish"]["status"] == "wrong"
        assert "'length' not sent" in by["finish"]["difference"]
        others = {name for name, v in by.items() if v["status"] != "exact"}
        assert others == {"chunks", "ttft", "finish"}


def _read_at_or_over(recorded: Recorded, case: Case) -> Measured:
    """otel-llm read back, its stalls re-derived 1 ms under each threshold: gaps *at least*
    as long as the threshold, the off-by-one of ``>=`` for ``>``."""
    right = ADAPTERS["otel-llm"].read(recorded, case)
    attempts = [s for s in recorded.spans if (s.attributes or {}).get("otel_llm.span") == "attempt"]
    if not attempts or right.stalls[0] is None:
        return right
    under = tuple(_otel_llm_stalls(attempts[0], threshold - 0.001) for threshold in (1.0, 4.0))
    return dataclasses.replace(right, stalls=under)


AT_OR_OVER = dataclasses.replace(ADAPTERS["otel-llm"], name="at-or-over", read=_read_at_or_over)
"""An instrumentation that counts a gap equal to the threshold as a stall."""


def test_a_gap_at_the_threshold_counted_as_a_stall_is_reported_wrong() -> None:
    """Through the real suite: counting gaps at least as long as the threshold (not strictly
    longer) is wrong by one stall and its seconds at each threshold on the case whose gaps
    are exactly 1 s and 4 s, on every wire."""
    adapter = f"{__name__}:AT_OR_OVER"
    done = subprocess.run(
        command(adapter, case_filter="/gaps-at-the-thresholds"),
        capture_output=True,
        text=True,
        timeout=55,
    )
    results = parse(adapter, done.returncode, done.stdout, done.stderr)
    assert len(results) == 4
    for result in results:
        by = {v["figure"]: v for v in result["verdicts"]}
        assert (by["stalls@1s"]["status"], by["stalls@1s"]["difference"]) == ("wrong", "+1")
        assert by["stall_s@1s"]["difference"] == "+1.000 s"
        assert (by["stalls@4s"]["status"], by["stalls@4s"]["difference"]) == ("wrong", "+1")
        assert by["stall_s@4s"]["difference"] == "+4.000 s"


counts = st.integers(min_value=0, max_value=10_000)
seconds = st.floats(min_value=0.0, max_value=3_600.0, allow_nan=False)
pairs = st.builds(StallPair, counts, seconds)


@given(
    chunks=counts,
    ttft=seconds,
    stalls=st.tuples(pairs, pairs),
    shift=st.integers(min_value=-50, max_value=50).filter(bool),
)
def test_judging_is_exact_on_the_truth_and_wrong_by_any_shift(
    chunks: int, ttft: float, stalls: tuple[StallPair, StallPair], shift: int
) -> None:
    """Any truth read back unchanged is exact on all nine figures; a chunk count off by any
    amount is wrong by exactly that amount, and nothing else changes."""
    truth = Expected(chunks, ttft, stalls, ("stop",), "ok", True)
    same = Measured(chunks, ttft, stalls, ("stop",), "ok", True)
    assert {v.status for v in judge(truth, REASONS, same, EVERYTHING)} == {"exact"}
    off = Measured(chunks + shift, ttft, stalls, ("stop",), "ok", True)
    verdicts = {v.figure: v for v in judge(truth, REASONS, off, EVERYTHING)}
    assert (verdicts["chunks"].status, verdicts["chunks"].difference) == ("wrong", f"{shift:+d}")
    assert [v.status for k, v in verdicts.items() if k != "chunks"] == ["exact"] * 8
