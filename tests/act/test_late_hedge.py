"""A hedge whose admission is still answering when its primary finishes is not started, and
the call does not wait for that answer: the search for the hedge is cancelled, which gives back
what it took — its source's breaker permit (a half-open probe stays free), its budget token (to
its trigger's bucket) and its estimated tokens — and the round counts no hedge. On virtual time
over the scripted transport."""

from __future__ import annotations

import asyncio

import pytest

from otel_llm import ChatResult, Limits, LocalAdmission
from otel_llm.testing import Scripted, Spans, run_virtual, sse_answer
from tests.act.test_breaker_admission import BREAKER, half_open, probe_free
from tests.act.test_hedge_fallthrough import BOTH, tokens
from tests.support.scripted_clients import MESSAGES, client, source, timed_stream

B_LIMITS = {"requests_per_minute": 600.0, "tokens_per_minute": 1_000_000.0}
"""Limits of ``b``, so admission books what its hedge takes."""


class SlowForB(LocalAdmission):
    """The in-process backend, answering for ``b`` after ``answer_s`` (virtual) seconds."""

    def __init__(self, answer_s: float) -> None:
        super().__init__()
        self.answer_s = answer_s
        self.asked_for_b = 0

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        if source == "b":
            self.asked_for_b += 1
            await asyncio.sleep(self.answer_s)
        return await super().acquire(source, limits, tokens)

    def tokens_left(self, source: str, limit: float) -> float:
        """What ``source``'s token bucket holds (a bucket never asked is full)."""
        bucket = self._buckets.get((source, "tpm"))
        return limit if bucket is None else bucket.level


def test_a_hedge_still_being_admitted_when_its_primary_finishes_is_not_started(
    spans: Spans,
) -> None:
    """Both triggers; the primary's first chunk is late (1.5 s against ``hedge_after_s=1``),
    then it streams without a gap; the first-token hedge's admission would answer at 6 s,
    after the primary finished (2.1 s): the call answers at 2.1 s, no hedge is counted, the
    first-token bucket is full again (5.0 at a fresh client), b's tokens are untouched, its
    half-open probe is free, and b never saw a request. (The call waited for admission's
    answer and returned at 6 s; before that, the hedge started after its primary ended.)"""
    script = Scripted({"a": [timed_stream(1.5)], "b": [sse_answer()]})
    admission = SlowForB(answer_s=5.0)

    async def main() -> tuple[ChatResult, tuple[float, float], bool, float]:
        sources = (source("a"), source("b", **B_LIMITS))
        options = {**BOTH, **BREAKER}
        async with client(script, spans, *sources, admission=admission, **options) as c:
            b = half_open(c, "b")
            loop = asyncio.get_running_loop()
            started = loop.time()
            result = await c.chat(MESSAGES)
            return result, tokens(c), probe_free(b), loop.time() - started

    result, (stall, first), free, elapsed = run_virtual(main())
    assert abs(elapsed - 2.1) < 1e-6, "answered when the primary finished"
    assert result.source == "a"
    assert admission.asked_for_b == 1
    assert result.stats.hedges == 0
    assert (stall, first) == (10.0, 5.0), "the first-token token came back to its bucket"
    limit = B_LIMITS["tokens_per_minute"]
    assert admission.tokens_left("b", limit) == limit
    assert free, "the probe was held by a hedge that never started"
    assert "b" not in script.seen


class CancelsTheCallAsItAnswers(SlowForB):
    """The in-process backend; as it admits ``b``'s hedge, the call's caller gives up (its
    task is cancelled in the same instant the search completes)."""

    def __init__(self) -> None:
        super().__init__(answer_s=0.5)
        self.call: asyncio.Future[ChatResult] | None = None

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        wait = await super().acquire(source, limits, tokens)
        if source == "b" and self.call is not None:
            self.call.cancel()
        return wait


def test_a_call_cancelled_as_its_hedge_is_admitted_gives_the_hedge_back(spans: Spans) -> None:
    """The first-token hedge is admitted at ``b`` (half-open: the hedge is its probe) in the
    instant the call is cancelled: the search's find is given back — b's probe is free, its
    tokens and the first-token bucket's token are back. They were kept, and the half-open probe
    held for good kept ``b`` refused by this client until the process ended."""
    script = Scripted({"a": [timed_stream(5.0)], "b": [sse_answer()]})
    admission = CancelsTheCallAsItAnswers()

    async def main() -> tuple[tuple[float, float], bool]:
        sources = (source("a"), source("b", **B_LIMITS))
        options = {**BOTH, **BREAKER}
        async with client(script, spans, *sources, admission=admission, **options) as c:
            b = half_open(c, "b")
            call = asyncio.ensure_future(c.chat(MESSAGES))
            admission.call = call
            with pytest.raises(asyncio.CancelledError):
                await call
            return tokens(c), probe_free(b)

    (stall, first), free = run_virtual(main())
    assert admission.asked_for_b == 1
    assert free, "the probe was held by a hedge that never started"
    assert (stall, first) == (10.0, 5.0), "the first-token token came back to its bucket"
    limit = B_LIMITS["tokens_per_minute"]
    assert admission.tokens_left("b", limit) == limit
    assert "b" not in script.seen
