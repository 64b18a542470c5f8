"""The common figures of one streamed call, and how a measurement is judged against the truth.

Nine figures per case, each judged **exact**, **wrong** (with the difference) or **not
measured** (the instrumentation records nothing for it):

============== ===============================================================================
``chunks``     incremental chunks received (events that carry output: text, reasoning, a
               refusal, tool-call arguments; not role-only or empty deltas, usage-only frames,
               keepalives, ``[DONE]`` or lifecycle events). Exact count.
``ttft``       request → first incremental chunk, seconds. Within :data:`TIME_TOLERANCE_S`.
``stalls@T``   gaps between consecutive incremental chunks strictly longer than ``T``, at each
               threshold of :data:`THRESHOLDS_S`. Exact count.
``stall_s@T``  the sum of those gaps, seconds. Within :data:`TIME_TOLERANCE_S`.
``finish``     the finish reason of each choice, in the provider's words or the chat
               vocabulary (``end_turn`` and ``stop`` are the same reason). Exact (as a set).
               Where the provider sent none, none or the conventions' ``error`` is right.
``outcome``    ``ok``, ``truncated`` (ended without a finish reason), ``error`` (a mid-stream
               error event or a broken connection) or ``cancelled`` (the consumer stopped
               early). Exact.
``span ends``  the call's span ended by the time the case is over (an abandoned stream's
               span must end too). Exact.
============== ===============================================================================

Stall figures of a stream with fewer than two chunks, and the time to first chunk of a stream
without one, do not exist: the truth is "none", and an instrumentation that measures the figure
is exact when it records none. The same holds for the stall figures of a stream whose consumer
was cancelled while it waited for the next chunk: the gap in progress never finished, so how
many stalls the stream had, and how long they were, cannot be observed (a stream the consumer
left right after a chunk has no such gap, and its figures are those of the chunks it read).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

THRESHOLDS_S: Final = (1.0, 4.0)
"""The two stall thresholds every case is judged at (1 s is otel-llm's default)."""

TIME_TOLERANCE_S: Final = 0.001
"""Tolerance of every time figure. The suite runs on virtual time, so a chunk arrives at
exactly its scheduled moment; 1 ms covers float rounding and instrumentations that record whole
milliseconds."""

NO_FINISH: Final = "error"
"""The finish reason the GenAI conventions give a generation that ended without one (an
error, a cut, a cancellation): recorded where the provider sent none, it is right."""

_FLOAT_SLACK_S: Final = 1e-6
"""Float rounding of the virtual clock (a 0.65 s arrival may read 0.6499999 s, which whole
milliseconds make 649 ms): never more than this on top of the tolerance."""

Outcome = Literal["ok", "truncated", "error", "cancelled"]
Status = Literal["exact", "wrong", "not measured"]


@dataclass(frozen=True, slots=True)
class StallPair:
    """Stalls at one threshold: how many, and their seconds."""

    count: int
    seconds: float


@dataclass(frozen=True, slots=True)
class Expected:
    """What an honest instrumentation records for a case."""

    chunk_count: int
    ttft_s: float | None
    stalls: tuple[StallPair | None, ...]
    """At each threshold of :data:`THRESHOLDS_S`; ``None`` with fewer than two chunks."""
    finish_reasons: tuple[str, ...] | None
    """Each choice's finish reason in the wire's words; ``None`` when the answer has none."""
    outcome: Outcome
    span_ends: bool


@dataclass(frozen=True, slots=True)
class Measured:
    """What an adapter read back from an instrumentation's telemetry; a figure the
    instrumentation did not record is ``None``."""

    chunk_count: int | None = None
    ttft_s: float | None = None
    stalls: tuple[StallPair | None, ...] = (None, None)
    finish_reasons: tuple[str, ...] | None = None
    outcome: Outcome | None = None
    span_ends: bool = False
    notes: tuple[str, ...] = ()
    """What the adapter read, for the scorecard's details (attribute and metric names)."""


MEASURABLE: Final = frozenset({"chunks", "ttft", "stalls", "stall_s", "finish", "outcome"})
"""What an adapter may say an instrumentation records (:attr:`Adapter.measures`): ``stalls``
and ``stall_s`` stand for their figures at every threshold; ``span ends`` is judged always."""

FIGURES: Final = (
    "chunks",
    "ttft",
    *(f"{kind}@{threshold:g}s" for threshold in THRESHOLDS_S for kind in ("stalls", "stall_s")),
    "finish",
    "outcome",
    "span ends",
)
"""The judged figures, in scorecard order."""

_SAME_REASON: Final = {
    "stop": "stop",
    "end_turn": "stop",
    "completed": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "max_tokens": "length",
    "max_output_tokens": "length",
    "tool_calls": "tool_calls",
    "tool_call": "tool_calls",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "safety": "content_filter",
}
"""Finish reasons that say the same thing in different APIs' words (compared lower-case)."""


def reason_class(reason: str) -> str:
    """The chat-vocabulary class of a finish reason (an unknown one stands for itself)."""
    lowered = reason.lower()
    return _SAME_REASON.get(lowered, lowered)


@dataclass(frozen=True, slots=True)
class Verdict:
    """One figure of one case, judged."""

    figure: str
    status: Status
    expected: str
    measured: str
    difference: str = ""
    """For ``wrong``: measured − expected (times and counts), or what differs."""


def _seconds(value: float | None) -> str:
    return "none" if value is None else f"{value:.3f} s"


def _number(measured: float, expected: float, *, time: bool) -> str:
    delta = measured - expected
    return f"{delta:+.3f} s" if time else f"{delta:+g}"


def _judge_value(
    figure: str,
    expected: float | None,
    measured: float | None,
    *,
    measures: bool,
    time: bool,
) -> Verdict:
    show = _seconds if time else (lambda v: "none" if v is None else f"{v:g}")
    if not measures:
        return Verdict(figure, "not measured", show(expected), "-")
    if measured is None or expected is None:
        if measured is None and expected is None:
            return Verdict(figure, "exact", "none", "none")
        difference = "records none" if measured is None else "records a figure that does not exist"
        return Verdict(figure, "wrong", show(expected), show(measured), difference)
    tolerance = TIME_TOLERANCE_S + _FLOAT_SLACK_S if time else 0.0
    if abs(measured - expected) <= tolerance:
        return Verdict(figure, "exact", show(expected), show(measured))
    return Verdict(
        figure, "wrong", show(expected), show(measured), _number(measured, expected, time=time)
    )


def _reasons(value: Sequence[str] | None) -> str:
    return "none" if not value else ",".join(value)


def _judge_finish(
    expected: tuple[str, ...] | None,
    accepted: Sequence[frozenset[str]] | None,
    measured: tuple[str, ...] | None,
    *,
    measures: bool,
) -> Verdict:
    shown = _reasons(expected)
    if not measures:
        return Verdict("finish", "not measured", shown, "-")
    if not accepted:
        if not measured or all(reason.lower() == NO_FINISH for reason in measured):
            return Verdict("finish", "exact", shown, _reasons(measured))
        return Verdict("finish", "wrong", shown, _reasons(measured), "records a finish reason")
    if not measured:
        return Verdict("finish", "wrong", shown, "none", "records none")
    left = list(accepted)
    for reason in measured:
        match = next((k for k, allowed in enumerate(left) if reason_class(reason) in allowed), None)
        if match is None:
            return Verdict("finish", "wrong", shown, _reasons(measured), f"{reason!r} not sent")
        left.pop(match)
    if left:
        return Verdict(
            "finish", "wrong", shown, _reasons(measured), f"{len(left)} choice(s) missing"
        )
    return Verdict("finish", "exact", shown, _reasons(measured))


def judge(
    expected: Expected,
    accepted_reasons: Sequence[frozenset[str]] | None,
    measured: Measured,
    measures: frozenset[str],
) -> tuple[Verdict, ...]:
    """Every figure of a case, judged; ``measures`` names the figures the instrumentation
    records at all (any other is *not measured*); ``accepted_reasons`` gives, per choice, the
    reason classes that are right (see :func:`reason_class`). When no span of the call ended,
    every figure it measures is wrong (nothing was recorded), but for those whose truth is
    "none"."""
    verdicts = list(_judge_figures(expected, accepted_reasons, measured, measures))
    if not measured.span_ends:
        verdicts = [
            Verdict(v.figure, "wrong", v.expected, "none", "no span ended")
            if v.status != "not measured" and v.figure != "span ends" and v.expected != "none"
            else v
            for v in verdicts
        ]
    return tuple(verdicts)


def _judge_figures(
    expected: Expected,
    accepted_reasons: Sequence[frozenset[str]] | None,
    measured: Measured,
    measures: frozenset[str],
) -> list[Verdict]:
    verdicts = [
        _judge_value(
            "chunks",
            expected.chunk_count,
            measured.chunk_count,
            measures="chunks" in measures,
            time=False,
        ),
        _judge_value(
            "ttft", expected.ttft_s, measured.ttft_s, measures="ttft" in measures, time=True
        ),
    ]
    for index, threshold in enumerate(THRESHOLDS_S):
        truth, seen = expected.stalls[index], measured.stalls[index]
        verdicts.append(
            _judge_value(
                f"stalls@{threshold:g}s",
                None if truth is None else truth.count,
                None if seen is None else seen.count,
                measures="stalls" in measures,
                time=False,
            )
        )
        verdicts.append(
            _judge_value(
                f"stall_s@{threshold:g}s",
                None if truth is None else truth.seconds,
                None if seen is None else seen.seconds,
                measures="stall_s" in measures,
                time=True,
            )
        )
    verdicts.append(
        _judge_finish(
            expected.finish_reasons,
            accepted_reasons,
            measured.finish_reasons,
            measures="finish" in measures,
        )
    )
    if "outcome" not in measures:
        verdicts.append(Verdict("outcome", "not measured", expected.outcome, "-"))
    elif measured.outcome == expected.outcome:
        verdicts.append(Verdict("outcome", "exact", expected.outcome, expected.outcome))
    else:
        seen_outcome = measured.outcome or "none"
        verdicts.append(
            Verdict("outcome", "wrong", expected.outcome, seen_outcome, f"records {seen_outcome}")
        )
    ends = "yes" if expected.span_ends else "no"
    seen_ends = "yes" if measured.span_ends else "no"
    verdicts.append(
        Verdict(
            "span ends",
            "exact" if measured.span_ends == expected.span_ends else "wrong",
            ends,
            seen_ends,
            "" if measured.span_ends == expected.span_ends else "the span never ends",
        )
    )
    return verdicts
