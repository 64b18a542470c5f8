"""The suite's cases and their expected figures (``otel_llm/conformance/_case.py``,
``_corpus.py``): every figure follows from the script, worked out by hand for a table of
cases, and the corpus covers what it promises."""

from __future__ import annotations

import itertools

import pytest

from otel_llm.conformance import CASES, THRESHOLDS_S, Case, Consumer, Expected, Pause, StallPair
from otel_llm.conformance._case import _arrival_s
from otel_llm.simulator import Script, Silence, scripted_figures

STEADY = {"first_chunk_delay_s": 0.4, "chunk_interval_s": 0.05, "chunk_count": 10}


def case(script: Script, consumer: Consumer | None = None, wire: str = "chat") -> Expected:
    made = Case("t", wire, "plain", script, "t", consumer or Consumer())  # type: ignore[arg-type]
    return made.expected()


def test_thresholds_are_one_and_four_seconds() -> None:
    """The suite judges stalls at 1 s (otel-llm's default) and 4 s."""
    assert THRESHOLDS_S == (1.0, 4.0)


@pytest.mark.parametrize(
    ("script", "consumer", "wire", "expected"),
    [
        (  # two silences: 2.55 s and 6.05 s gaps; only the second is longer than 4 s
            Script(
                **STEADY,
                silences=(
                    Silence(after_chunk=2, duration_s=2.5),
                    Silence(after_chunk=5, duration_s=6.0),
                ),
            ),
            None,
            "chat",
            Expected(10, 0.4, (StallPair(2, 8.6), StallPair(1, 6.05)), ("stop",), "ok", True),
        ),
        (  # hold + first-chunk delay is the time to first chunk; a tail silence is no gap
            Script(
                **{**STEADY, "first_chunk_delay_s": 2.0},
                hold_s=0.5,
                silences=(Silence(after_chunk=9, duration_s=3.0),),
            ),
            None,
            "anthropic",
            Expected(10, 2.5, (StallPair(0, 0.0), StallPair(0, 0.0)), ("end_turn",), "ok", True),
        ),
        (  # the error event after chunk 3: four chunks, no finish reason
            Script(
                **STEADY,
                silences=(Silence(after_chunk=1, duration_s=2.0),),
                fault="error",
                fault_after_chunk=3,
            ),
            None,
            "gemini",
            Expected(4, 0.4, (StallPair(1, 2.05), StallPair(0, 0.0)), None, "error", True),
        ),
        (  # the consumer leaves after the chunk that follows 0.625 s: chunks 0..5
            Script(**STEADY),
            Consumer(stop="break", stop_at_s=0.625),
            "responses",
            Expected(6, 0.4, (StallPair(0, 0.0), StallPair(0, 0.0)), None, "cancelled", True),
        ),
        (  # cancelled inside a 5 s silence: 4 chunks, the unfinished gap leaves no stall figure
            Script(**STEADY, silences=(Silence(after_chunk=3, duration_s=5.0),)),
            Consumer(stop="cancel", stop_at_s=3.0),
            "chat",
            Expected(4, 0.4, (None, None), None, "cancelled", True),
        ),
        (  # two choices: a chunk per choice, a finish per choice, the stalls of one choice
            Script(**STEADY, choices=2, silences=(Silence(after_chunk=3, duration_s=1.5),)),
            None,
            "chat",
            Expected(
                20, 0.4, (StallPair(1, 1.55), StallPair(0, 0.0)), ("stop", "stop"), "ok", True
            ),
        ),
        (  # no finish chunk: [DONE] alone does not complete the answer
            Script(**STEADY, finish_chunk=False),
            None,
            "chat",
            Expected(10, 0.4, (StallPair(0, 0.0), StallPair(0, 0.0)), None, "truncated", True),
        ),
        (  # a consumer's pause changes nothing: the provider's schedule is the truth
            Script(**STEADY),
            Consumer(pauses=(Pause(0.525, 3.0),)),
            "anthropic",
            Expected(10, 0.4, (StallPair(0, 0.0), StallPair(0, 0.0)), ("end_turn",), "ok", True),
        ),
        (  # Gemini sends a tool call whole: one chunk, at the time of the phase's last piece
            Script(**{**STEADY, "chunk_count": 6}, tool_call=True),
            None,
            "gemini",
            Expected(1, 0.65, (None, None), ("STOP",), "ok", True),
        ),
    ],
    ids=[
        "silences",
        "hold-tail",
        "error",
        "break",
        "cancel",
        "choices",
        "no-finish",
        "pause",
        "gemini-tool",
    ],
)
def test_expected_figures_follow_from_the_script(
    script: Script, consumer: Consumer | None, wire: str, expected: Expected
) -> None:
    """A case's expected figures, worked out by hand from its script and consumer."""
    got = case(script, consumer, wire)
    assert got.chunk_count == expected.chunk_count
    assert got.ttft_s == pytest.approx(expected.ttft_s)
    assert got.finish_reasons == expected.finish_reasons
    assert (got.outcome, got.span_ends) == (expected.outcome, expected.span_ends)
    for mine, theirs in zip(got.stalls, expected.stalls, strict=True):
        if theirs is None:
            assert mine is None
        else:
            assert mine is not None
            assert mine.count == theirs.count
            assert mine.seconds == pytest.approx(theirs.seconds)


def test_uncut_cases_have_the_simulators_truth() -> None:
    """For every case read to its end, the expected figures are the simulator's own ground
    truth of the script (one owner): chunks, time to first chunk, stalls at both thresholds."""
    for made in CASES:
        if made.consumer.stop is not None or made.script.fault is not None:
            continue
        expected = made.expected()
        for index, threshold in enumerate(THRESHOLDS_S):
            truth = scripted_figures(made.script, threshold_s=threshold, wire=made.wire)
            assert expected.chunk_count == truth.chunk_count, made.name
            assert expected.ttft_s == truth.ttft_s, made.name
            stalls = expected.stalls[index]
            if truth.chunk_count < 2:
                assert stalls is None, made.name
            else:
                assert stalls == StallPair(truth.stall_count, truth.stall_s), made.name


def test_the_corpus_covers_every_kind_on_four_wires() -> None:
    """At least 60 cases with unique names, on all four wire formats, every kind the issue
    lists present, keepalive kinds on every format that has keepalives."""
    assert len(CASES) >= 60
    assert len({made.name for made in CASES}) == len(CASES)
    assert {made.wire for made in CASES} == {"chat", "responses", "anthropic", "gemini"}
    kinds = {made.kind for made in CASES}
    assert kinds >= {
        "keepalive-first", "keepalive-mid", "role-only", "empty-delta", "usage-only",
        "reasoning-first", "tool-call", "refusal", "choices", "done-without-finish",
        "error-event", "truncated", "consumer-pause", "abandoned", "silence", "burst",
    }  # fmt: skip
    for wire in ("chat", "responses", "anthropic"):
        assert {"keepalive-first", "keepalive-mid"} <= {m.kind for m in CASES if m.wire == wire}
    stops = {made.consumer.stop for made in CASES}
    assert stops == {None, "break", "close", "cancel"}


def test_every_wire_has_gaps_exactly_at_both_thresholds() -> None:
    """A stall is a gap strictly longer than the threshold: every wire has a case with a gap
    of exactly 1 s and one of exactly 4 s (on a cadence float arithmetic keeps exact), so an
    instrumentation that counts a gap at the threshold is caught."""
    for wire in ("chat", "responses", "anthropic", "gemini"):
        found = set()
        for made in CASES:
            if made.wire != wire or made.consumer.stop is not None:
                continue
            script = made.script
            arrivals = [_arrival_s(script, count) for count in range(1, script.chunk_count + 1)]
            found |= {later - earlier for earlier, later in itertools.pairwise(arrivals)}
        assert set(THRESHOLDS_S) <= found, wire


@pytest.mark.parametrize(
    ("make", "key"),
    [
        (lambda: Pause(-0.5, 1.0), "Pause.at_s"),
        (lambda: Pause(1.0, 0.0), "Pause.for_s"),
        (lambda: Pause(float("inf"), 1.0), "Pause.at_s"),
        (lambda: Consumer(stop="cancel"), "Consumer.stop_at_s"),
        (lambda: Consumer(stop="abort", stop_at_s=1.0), "Consumer.stop"),  # type: ignore[arg-type]
        (lambda: Case("x", "grpc", "plain", Script(), "w"), "Case.wire"),  # type: ignore[arg-type]
        (lambda: Case("", "chat", "plain", Script(), "w"), "Case.name"),
    ],
)
def test_a_bad_case_is_refused_when_made(make: object, key: str) -> None:
    """A case, consumer or pause that cannot be played is a ConfigurationError naming the
    field, at construction."""
    from otel_llm import ConfigurationError

    with pytest.raises(ConfigurationError) as caught:
        make()  # type: ignore[operator]
    assert caught.value.key == key
