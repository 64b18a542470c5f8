"""The breaker and admission together: the breaker is asked first and what it let through is
given back on every path where admission then stops the leg — it refuses, its backend cannot be
asked, the call is cancelled while it answers, or another call's attempt opened the breaker
meanwhile — so a half-open probe is never held by a leg that did not start, and a hedge's
budget token goes back to its trigger's bucket. On virtual time over the scripted transport."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from otel_llm import BackendUnavailable, ChatResult, Client, Limits, LocalAdmission
from otel_llm._act._source_state import SourceState
from otel_llm.testing import Scripted, Spans, run_virtual, sse_answer
from tests.act.test_hedge_fallthrough import BOTH, spend_first_token_share, tokens
from tests.support.scripted_clients import MESSAGES, client, timed_stream

BREAKER = {
    "breaker_failure_threshold": 1,
    "breaker_first_cooldown_s": 60,
    "breaker_cooldown_s": 60,
}
"""One failure opens a breaker for a minute."""


def state_of(c: Client, name: str) -> SourceState:
    (state,) = [state for state in c._states if state.name == name]
    return state


def half_open(c: Client, name: str) -> SourceState:
    """``name``'s breaker opened an hour before the call: its cool-down is over, the next
    attempt there is its half-open probe."""
    state = state_of(c, name)
    state.breaker.record_failure(-3600.0)
    return state


def probe_free(state: SourceState) -> bool:
    """Whether the next attempt at ``state`` may probe (no probe held)."""
    return state.breaker.allows(asyncio.get_running_loop().time())


class OpensBDuringAdmission(LocalAdmission):
    """The in-process backend; while it admits a request for ``b``, b's breaker opens (as if
    another call's attempt at b failed meanwhile)."""

    def __init__(self) -> None:
        super().__init__()
        self.states: Sequence[SourceState] = ()
        self.asked_for_b = 0

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        if source == "b":
            self.asked_for_b += 1
            (b,) = [state for state in self.states if state.name == "b"]
            b.breaker.record_failure(asyncio.get_running_loop().time())
        return await super().acquire(source, limits, tokens)


def test_a_breaker_opened_while_admission_answers_stops_the_hedge(spans: Spans) -> None:
    """The first-token share spent; the stall trigger takes a stall token, its target's breaker
    lets the hedge through closed and opens while admission answers (another call's attempt
    failed): the hedge does not start and the token goes back to the stall bucket. (Asked
    before admission, the breaker no longer saw this: the hedge went to ``b``.)"""
    admission = OpensBDuringAdmission()
    script = Scripted({"a": [timed_stream(3.0, gap_after=2, gap_s=5.0)], "b": [sse_answer()]})

    async def main() -> tuple[ChatResult, tuple[float, float], str]:
        async with client(script, spans, admission=admission, **BREAKER, **BOTH) as c:
            spend_first_token_share(c)
            admission.states = c._states
            result = await c.chat(MESSAGES)
            return result, tokens(c), c.breaker_state("b")

    result, (stall, first), breaker = run_virtual(main())
    assert result.source == "a"
    assert result.stats.hedges == 0
    assert (admission.asked_for_b, breaker) == (1, "open")
    assert (stall, first) == (10.0, 0.25), "the stall token came back to the stall bucket"
    assert "b" not in script.seen


class Unreachable(LocalAdmission):
    """The in-process backend, unreachable for ``source`` (after ``after_s``)."""

    def __init__(self, source: str, after_s: float = 0.0) -> None:
        super().__init__()
        self.source = source
        self.after_s = after_s

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        if source == self.source:
            await asyncio.sleep(self.after_s)
            raise BackendUnavailable("admission backend unreachable")
        return await super().acquire(source, limits, tokens)


def test_a_hedge_whose_admission_cannot_be_asked_frees_the_half_open_probe(spans: Spans) -> None:
    """The stall hedge's target is half-open; its breaker lets the hedge through as the probe,
    then admission cannot be asked: the primary runs on, the probe is free for the next call
    and the stall token is back."""
    script = Scripted({"a": [timed_stream(3.0, gap_after=2, gap_s=5.0)], "b": [sse_answer()]})

    async def main() -> tuple[ChatResult, tuple[float, float], bool]:
        admission = Unreachable("b", after_s=0.01)
        async with client(script, spans, admission=admission, **BREAKER, **BOTH) as c:
            spend_first_token_share(c)
            b = half_open(c, "b")
            result = await c.chat(MESSAGES)
            return result, tokens(c), probe_free(b)

    result, (stall, first), free = run_virtual(main())
    assert result.source == "a"
    assert result.stats.hedges == 0
    assert free, "the probe was held by a hedge that never started"
    assert (stall, first) == (10.0, 0.25)


def test_a_call_whose_admission_cannot_be_asked_frees_the_half_open_probe(spans: Spans) -> None:
    """The primary's source is half-open and its admission cannot be asked: the call fails
    closed with BackendUnavailable, and the probe is free for the next call."""
    script = Scripted({"a": [sse_answer()], "b": [sse_answer()]})

    async def main() -> bool:
        async with client(script, spans, admission=Unreachable("a"), **BREAKER) as c:
            a = half_open(c, "a")
            with pytest.raises(BackendUnavailable):
                await c.chat(MESSAGES)
            return probe_free(a)

    assert run_virtual(main()), "the probe was held by a call that failed closed"


class Holds(LocalAdmission):
    """The in-process backend, answering for ``a`` only after an hour."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        if source == "a":
            self.asked.set()
            await asyncio.sleep(3600)
        return await super().acquire(source, limits, tokens)


def test_a_call_cancelled_while_admission_answers_frees_the_half_open_probe(spans: Spans) -> None:
    """The primary's source is half-open; the call is cancelled while its admission answers:
    the probe is free for the next call."""
    script = Scripted({"a": [sse_answer()], "b": [sse_answer()]})

    async def main() -> bool:
        admission = Holds()
        async with client(script, spans, admission=admission, **BREAKER) as c:
            a = half_open(c, "a")
            call = asyncio.create_task(c.chat(MESSAGES))
            await admission.asked.wait()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            return probe_free(a)

    assert run_virtual(main()), "the probe was held by a cancelled call"
    assert "a" not in script.seen
