"""One conformance case: a scripted stream, what the consumer does with it, and the figures an
honest instrumentation must record for it.

The expected figures have one owner: the script's schedule, read through
:func:`~otel_llm.simulator.scripted_figures` (the simulator's own ground truth) at the suite's
two stall thresholds, on the case's wire format. What the consumer does decides which part of
the stream it received: a consumer that stops at ``stop_at_s`` received the chunks scheduled
up to then, so the truth is that of the script cut after its last received chunk (a consumer
cancelled while it waits for a chunk leaves a gap unfinished: its stall figures are not
observable, see ``_figures``). A consumer's
pause between reads changes nothing: the provider's schedule is the truth, and a pause is not
the provider's silence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from otel_llm._errors import ConfigurationError
from otel_llm.conformance._figures import (
    THRESHOLDS_S,
    Expected,
    Outcome,
    StallPair,
    reason_class,
)
from otel_llm.simulator import Script, scripted_figures
from otel_llm.simulator._anthropic import stop_reason
from otel_llm.simulator._gemini import finish_reason as gemini_finish_reason
from otel_llm.simulator._responses import INCOMPLETE_REASONS
from otel_llm.simulator._truth import sent_chunks
from otel_llm.simulator._wire import WireName

_WIRES: Final = get_args(WireName)

Stop = Literal["break", "close", "cancel"]
"""How a consumer stops early: ``break`` leaves the loop and drops the stream without closing
it (the stream is garbage-collected); ``close`` leaves the loop and closes the stream;
``cancel`` cancels the consuming task while it waits for the next item (a timeout)."""

Kind = Literal[
    "plain",
    "keepalive-first",
    "keepalive-mid",
    "role-only",
    "empty-delta",
    "usage-only",
    "reasoning-first",
    "tool-call",
    "refusal",
    "choices",
    "done-without-finish",
    "error-event",
    "truncated",
    "consumer-pause",
    "abandoned",
    "silence",
    "burst",
    "finish-length",
]
"""What a case is about (the scorecard groups by it)."""


@dataclass(frozen=True, slots=True)
class Pause:
    """The consumer, after reading the first item that arrives after ``at_s`` (seconds from
    the request), holds the stream ``for_s`` seconds before its next read."""

    at_s: float
    for_s: float

    def __post_init__(self) -> None:
        _seconds("Pause.at_s", self.at_s, positive=False)
        _seconds("Pause.for_s", self.for_s, positive=True)


@dataclass(frozen=True, slots=True)
class Consumer:
    """What the application does with the stream."""

    pauses: tuple[Pause, ...] = ()
    stop: Stop | None = None
    """How it stops early (``None``: it reads to the end)."""
    stop_at_s: float = 0.0
    """``break``/``close``: after reading the first item that arrives after this time;
    ``cancel``: the consuming task is cancelled at this time."""

    def __post_init__(self) -> None:
        if self.stop not in (None, "break", "close", "cancel"):
            raise ConfigurationError(
                "Consumer.stop", f"must be break, close, cancel or None, not {self.stop!r}"
            )
        _seconds("Consumer.stop_at_s", self.stop_at_s, positive=self.stop is not None)


@dataclass(frozen=True, slots=True)
class Case:
    """A scripted stream on one wire format, its consumer, and what it is about."""

    name: str
    wire: WireName
    kind: Kind
    script: Script
    what: str
    """One line: what is sent, in the provider's terms."""
    consumer: Consumer = field(default_factory=Consumer)

    def __post_init__(self) -> None:
        if self.wire not in _WIRES:
            raise ConfigurationError(
                "Case.wire", f"must be one of {', '.join(_WIRES)}, not {self.wire!r}"
            )
        if not self.name:
            raise ConfigurationError("Case.name", "must not be empty")

    def expected(self) -> Expected:
        """The figures an honest instrumentation records for this case (see the module)."""
        return expected_figures(self)

    def accepted_reasons(self) -> tuple[frozenset[str], ...] | None:
        """Per choice, the finish-reason classes that are right: the wire's word, or the
        script's reason in the chat vocabulary (Gemini says ``STOP`` for a tool call; the
        Responses API ``completed``)."""
        reasons = _finish_reasons(self)
        if reasons is None:
            return None
        script_class = reason_class(self.script.final_reason)
        return tuple(frozenset({reason_class(word), script_class}) for word in reasons)


def _seconds(key: str, value: float, *, positive: bool) -> None:
    """A time of a consumer: a finite number of seconds, positive where it must be."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigurationError(key, f"must be a finite number of seconds, not {value!r}")
    if value < 0 or (positive and value == 0):
        rule = "positive" if positive else "zero or more"
        raise ConfigurationError(key, f"must be {rule}, not {value!r}")


def _received(case: Case) -> int:
    """How many of the scripted chunks the consumer received: all that went out, or, for a
    consumer that stops, those scheduled before ``stop_at_s`` — and for ``break`` and
    ``close`` the one after (read, then the loop is left; cases stop mid-phase, where the next
    item is a chunk)."""
    script, consumer = case.script, case.consumer
    sent = _sent_chunks(script)
    if consumer.stop is None:
        return sent
    before = sum(
        1 for count in range(1, sent + 1) if _arrival_s(script, count) < consumer.stop_at_s
    )
    return before if consumer.stop == "cancel" else min(before + 1, sent)


def _sent_chunks(script: Script) -> int:
    """Scripted chunks that go out before a fault ends the stream (all without one)."""
    return sent_chunks(script)[0]


def prefix(script: Script, count: int) -> Script:
    """``script`` cut after its chunk ``count - 1``: the chunks and silences before it, no
    fault, no tail."""
    silences = tuple(s for s in script.silences if s.after_chunk < count - 1)
    return script.model_copy(
        update={
            "chunk_count": count,
            "silences": silences,
            "fault": None,
            "fault_after_chunk": 0,
            "reasoning_chunks": min(script.reasoning_chunks, count),
            "tool_call": script.tool_call and count > script.reasoning_chunks,
        }
    )


def _arrival_s(script: Script, count: int) -> float:
    """When chunk ``count - 1`` is scheduled (seconds from the request): the wall time of the
    script cut after it."""
    return scripted_figures(prefix(script, count), threshold_s=THRESHOLDS_S[0]).wall_s


def _finish_reasons(case: Case) -> tuple[str, ...] | None:
    """The finish reasons the answer reports, in the wire's own words (``None``: none)."""
    script = case.script
    if script.fault in ("truncate", "error", "reset") or case.consumer.stop is not None:
        return None
    if case.wire == "chat":
        return (script.final_reason,) * script.choices if script.finish_chunk else None
    if case.wire == "anthropic":
        return (stop_reason(script),)
    if case.wire == "gemini":
        return (gemini_finish_reason(script),)
    incomplete = INCOMPLETE_REASONS.get(script.final_reason)
    return (incomplete,) if incomplete is not None else ("completed",)


def _outcome(case: Case) -> Outcome:
    script = case.script
    if case.consumer.stop is not None:
        return "cancelled"
    if script.fault in ("error", "reset"):
        return "error"
    if script.fault == "truncate" or _finish_reasons(case) is None:
        return "truncated"
    return "ok"


def expected_figures(case: Case) -> Expected:
    """See :meth:`Case.expected`."""
    script = case.script
    received = _received(case)
    cut = script if received == script.chunk_count else prefix(script, max(received, 1))
    stalls: list[StallPair | None] = []
    ttft: float | None = None
    chunks = 0
    for threshold in THRESHOLDS_S:
        truth = scripted_figures(cut, threshold_s=threshold, wire=case.wire)
        if received == 0:
            stalls.append(None)
            continue
        chunks, ttft = truth.chunk_count, truth.ttft_s
        observable = chunks >= 2 and case.consumer.stop != "cancel"
        stalls.append(StallPair(truth.stall_count, truth.stall_s) if observable else None)
    return Expected(
        chunk_count=chunks,
        ttft_s=ttft,
        stalls=tuple(stalls),
        finish_reasons=_finish_reasons(case),
        outcome=_outcome(case),
        span_ends=True,
    )
