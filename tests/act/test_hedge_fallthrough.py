"""Per-trigger hedge budgets in the round and the client: a first-token hedge that
is refused has not hedged the round, so the hedge window goes on and the stall trigger may
still start the round's one hedge (one hedge per round, never a hedge of a hedge); each trigger
pays from, and is refunded to, its own bucket; a non-streamed call knows only the first-token
trigger.

The round tests run scripted legs on the real event loop (``tests/support/round_harness.py``: 50 ms
timers, 300 ms delays); the client tests run on virtual time over the scripted transport, so
their seconds are exact.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import httpx2
import pytest

from otel_llm import ChatResult, Client, Limits, LocalAdmission
from otel_llm import _semconv as sc
from otel_llm._act._hedge_budget import FIRST_TOKEN, STALL, Trigger
from otel_llm._act._source_state import SourceState
from otel_llm.testing import Scripted, Spans, error, json_answer, run_virtual, sse_answer
from otel_llm.testing._scripted import Handler
from tests.support.round_harness import SLOW, TIMER, Legs, blocked, streamed, unstreamed
from tests.support.scripted_clients import MESSAGES, client, source, timed_stream

SLOW_FIRST_AND_GAP = streamed(first_after=SLOW, gap_after=3, gap=SLOW)
"""The primary is late to its first chunk (both triggers' timers are 50 ms) and stalls later."""


@dataclass
class Refusing(Legs):
    """The round harness's ledger, refusing every hedge asked for by ``refuse``'s triggers (as
    an empty bucket, a source out of quota or an open breaker would)."""

    refuse: frozenset[Trigger] = frozenset()
    refused: asyncio.Event = field(default_factory=asyncio.Event)

    async def find_hedge(
        self, primary: SourceState, trigger: Trigger
    ) -> tuple[SourceState, int] | None:
        target = await super().find_hedge(primary, trigger)
        if trigger in self.refuse:
            self.refused.set()
            return None
        return target


# --- the round ---------------------------------------------------------------------------------


async def test_a_refused_first_token_hedge_leaves_the_hedge_to_the_stall_trigger() -> None:
    """Both triggers; the first-token hedge is refused: the round waits for the first chunk
    without a timer, then the stall phase starts the round's one hedge when the primary stalls
    (after its first chunk, never judged before it)."""
    legs = Refusing({"a": SLOW_FIRST_AND_GAP, "b": blocked()}, refuse=frozenset({FIRST_TOKEN}))
    result = await legs.run(TIMER, TIMER)
    assert legs.asked == [FIRST_TOKEN, STALL]
    hedge = legs.hedge
    assert hedge is not None
    assert hedge[4] == 3, "started in the stall after the primary's third chunk"
    assert (result.hedges, result.trigger) == (1, STALL)
    assert result.winner is not None
    assert result.winner.attempt.leg == sc.LEG_PRIMARY


async def test_a_started_first_token_hedge_is_the_rounds_only_hedge() -> None:
    """A first-token hedge that started is the round's one hedge: the primary's later stall
    asks for no other (one hedge per round), even with a third source free."""
    legs = Legs({"a": SLOW_FIRST_AND_GAP, "b": streamed(first_after=4 * SLOW), "c": blocked()})
    result = await legs.run(TIMER, TIMER)
    assert legs.asked == [FIRST_TOKEN]
    assert [name for name, *_ in legs.started] == ["a", "b"]
    assert (result.hedges, result.trigger) == (1, FIRST_TOKEN)
    assert legs.hedge is not None
    assert legs.hedge[4] == 0, "before the primary's first chunk"


async def test_a_refused_first_token_hedge_without_a_stall_trigger_ends_the_hedging() -> None:
    """Only AFTER_S set: a refused first-token hedge means the round does not hedge, as before;
    the primary's later stall is waited out."""
    legs = Refusing({"a": SLOW_FIRST_AND_GAP, "b": blocked()}, refuse=frozenset({FIRST_TOKEN}))
    result = await legs.run(TIMER, None)
    assert legs.asked == [FIRST_TOKEN]
    assert (result.hedges, result.trigger) == (0, None)
    assert result.winner is not None


async def test_after_a_refused_first_token_hedge_a_smooth_stream_is_not_hedged() -> None:
    """A refused first-token hedge, then a late first chunk and a smooth stream: the stall
    phase runs but finds no stall, so the round ends unhedged."""
    legs = Refusing(
        {"a": streamed(first_after=SLOW), "b": blocked()}, refuse=frozenset({FIRST_TOKEN})
    )
    result = await legs.run(TIMER, TIMER)
    assert legs.asked == [FIRST_TOKEN]
    assert (result.hedges, result.trigger) == (0, None)


async def test_a_non_streamed_round_with_both_triggers_asks_first_token_only() -> None:
    """Both triggers set, not streamed: only the first-token trigger applies — refused, the
    round does not hedge and waits for its answer (no stall phase without chunks)."""
    legs = Refusing(
        {"a": unstreamed(SLOW), "b": blocked()}, stream=False, refuse=frozenset({FIRST_TOKEN})
    )
    result = await legs.run(TIMER, TIMER)
    assert legs.asked == [FIRST_TOKEN]
    assert (result.hedges, result.trigger) == (0, None)
    assert result.winner is not None
    hedged = Legs({"a": unstreamed(SLOW), "b": blocked()}, stream=False)
    result = await hedged.run(TIMER, TIMER)
    assert hedged.asked == [FIRST_TOKEN]
    assert (result.hedges, result.trigger) == (1, FIRST_TOKEN)


async def test_cancelled_while_waiting_for_the_first_chunk_after_a_refusal() -> None:
    """Cancelled in the extended window (the first-token hedge refused, the round waiting for
    the first chunk without a timer): CancelledError propagates, the primary is cancelled and
    no task is left behind (the shared fixture checks)."""
    legs = Refusing({"a": blocked(), "b": blocked()}, refuse=frozenset({FIRST_TOKEN}))
    task = asyncio.create_task(legs.run(TIMER, TIMER))
    await legs.refused.wait()
    for _ in range(5):  # into the wait for the first chunk
        await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert legs.asked == [FIRST_TOKEN]
    (primary,) = legs.legs
    assert primary.task.cancelled()
    assert primary.attempt.cancel_outcome == sc.OUTCOME_CANCELLED, "with its round, not a loser"


# --- the client, on virtual time ---------------------------------------------------------------


BOTH = {"hedge_after_s": 1.0, "hedge_stall_after_s": 2.0}
"""Both triggers: a first chunk later than 1 s, a gap longer than 2 s (virtual)."""


async def quick_calls(c: Client, count: int, *, stream: bool = True) -> None:
    """``count`` calls the primary answers at once: rounds that earn the budget (the stall
    bucket is full, so each round's 0.25 spills into the first-token bucket)."""
    for _ in range(count):
        result = await c.chat(MESSAGES, stream=stream)
        assert result.stats.hedges == 0


def tokens(c: Client) -> tuple[float, float]:
    """(stall bucket, first-token bucket) of the client's hedge budget."""
    budgets = c._hedge_budgets
    return budgets.stall.tokens, budgets.first_token.tokens


def spend_first_token_share(c: Client) -> None:
    """Empty the first-token bucket (it starts full), as earlier first-token hedges would."""
    c._hedge_budgets.first_token.tokens = 0.0


def test_a_fresh_client_hedges_its_first_late_first_chunk_at_once(spans: Spans) -> None:
    """Both triggers, the first call of a new client, a primary that never sends a first chunk:
    the first-token bucket starts full, so the hedge starts at 1 s and the fallback answers —
    no waiting for the watchdog. The first-token bucket paid (5 - 1; the round's 0.25 did not
    fit into it), the stall bucket is untouched."""
    script = Scripted({"a": [timed_stream(500.0)], "b": [timed_stream(0.5)]})

    async def main() -> tuple[float, ChatResult, tuple[float, float]]:
        loop = asyncio.get_running_loop()
        async with client(script, spans, **BOTH) as c:
            started = loop.time()
            result = await c.chat(MESSAGES)
            return loop.time() - started, result, tokens(c)

    elapsed, result, (stall, first) = run_virtual(main())
    assert result.source == "b"
    assert (result.stats.hedges, result.stats.hedge_won) == (1, True)
    assert elapsed == pytest.approx(2.1), "hedged at 1 s; b's whole stream takes 1.1 s"
    assert (stall, first) == (10.0, 4.0)


def test_an_empty_first_token_bucket_leaves_the_hedge_to_the_stall_trigger(spans: Spans) -> None:
    """Both triggers, the first-token share spent: the late first chunk (5 s) is not hedged
    at 1 s; the primary then stalls and the stall trigger hedges
    at its 2 s window, from the stall bucket. The call shows one hedge, which won."""
    script = Scripted({"a": [timed_stream(5.0, gap_after=2, gap_s=30.0)], "b": [timed_stream(0.5)]})

    async def main() -> tuple[float, ChatResult, tuple[float, float]]:
        loop = asyncio.get_running_loop()
        async with client(script, spans, **BOTH) as c:
            spend_first_token_share(c)
            started = loop.time()
            result = await c.chat(MESSAGES)
            return loop.time() - started, result, tokens(c)

    elapsed, result, (stall, first) = run_virtual(main())
    assert result.source == "b"
    stats = result.stats
    assert (stats.hedges, stats.hedge_won, stats.attempts) == (1, True, 2)
    # the stall hedge: a's second chunk at 5.1 s, the window ends at 7.1 s, b answers ~1 s later
    assert 7.1 <= elapsed <= 8.5
    assert (stall, first) == (9.0, 0.25), "paid by the stall bucket; 0.25 spilled, not spent"
    assert script.seen == ["a", "b"]


def test_a_first_token_hedge_from_earned_overflow_is_the_calls_only_hedge(spans: Spans) -> None:
    """Four quick calls spill a whole token into the first-token bucket; the fifth call's late
    first chunk is hedged at 1 s from it. When that primary stalls later, no second hedge starts
    (one hedge per round), though a third source is free; the stall bucket is untouched."""
    late_then_stall = timed_stream(3.0, gap_after=2, gap_s=30.0)
    script = Scripted(
        {
            "a": [sse_answer()] * 4 + [late_then_stall],
            "b": [timed_stream(4.0, gap_after=2, gap_s=40.0)],
            "c": [sse_answer()],
        }
    )

    async def main() -> tuple[ChatResult, tuple[float, float], tuple[float, float]]:
        async with client(script, spans, source("a"), source("b"), source("c"), **BOTH) as c:
            spend_first_token_share(c)
            await quick_calls(c, 4)
            before = tokens(c)
            result = await c.chat(MESSAGES)
            return result, before, tokens(c)

    result, before, after = run_virtual(main())
    assert before == (10.0, 1.0)
    stats = result.stats
    assert (stats.hedges, stats.attempts) == (1, 2)
    assert result.source == "a", "the primary resumes first (at ~33 s; the hedge at ~47 s)"
    assert script.seen == ["a"] * 5 + ["b"]
    assert after == (10.0, 0.25), "the first-token bucket paid: 1 + 0.25 spilled - 1"


class RefusingB(LocalAdmission):
    """The in-process backend, with no quota for source ``b``."""

    def __init__(self) -> None:
        super().__init__()
        self.asked_for_b = 0

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        if source == "b":
            self.asked_for_b += 1
            return 30.0
        return await super().acquire(source, limits, tokens)


def test_a_first_token_hedge_admission_refuses_is_refunded_to_its_bucket(spans: Spans) -> None:
    """The first-token hedge's target has no quota: the token goes back to the first-token
    bucket; the primary's later stall, seconds on, asks admission again (an estimated wait is
    asked about again after a second), is refused again, and its stall token goes back too.
    The call is unhedged and answered by the primary."""
    admission = RefusingB()
    script = Scripted(
        {"a": [sse_answer()] * 4 + [timed_stream(3.0, gap_after=2, gap_s=5.0)], "b": [sse_answer()]}
    )

    async def main() -> tuple[ChatResult, tuple[float, float]]:
        async with client(script, spans, admission=admission, **BOTH) as c:
            spend_first_token_share(c)
            await quick_calls(c, 4)
            result = await c.chat(MESSAGES)
            return result, tokens(c)

    result, (stall, first) = run_virtual(main())
    assert result.source == "a"
    assert result.stats.hedges == 0
    assert admission.asked_for_b == 2, "asked at the first-token trigger and at the stall"
    assert (stall, first) == (10.0, 1.25), "both tokens came back (first-token: 1 + 0.25)"
    assert "b" not in script.seen


def test_a_stall_hedge_admission_refuses_frees_the_half_open_probe_and_its_stall_token(
    spans: Spans,
) -> None:
    """The first-token share spent: the first-token trigger is refused by the budget without
    spending. The stall trigger takes a stall token; its target ``b`` is half-open (its
    cool-down over), so its breaker lets the hedge through as the probe — the breaker is asked
    before admission — and then admission has no quota for it. The hedge does not start, the
    probe is freed for the next call at ``b`` and the token goes back to the stall bucket, not
    to the first-token one. The call is unhedged."""
    admission = RefusingB()
    script = Scripted({"a": [timed_stream(3.0, gap_after=2, gap_s=5.0)], "b": [sse_answer()]})

    async def main() -> tuple[ChatResult, tuple[float, float], str, bool]:
        async with client(
            script, spans, admission=admission, breaker_failure_threshold=1,
            breaker_first_cooldown_s=60, breaker_cooldown_s=60, **BOTH,
        ) as c:  # fmt: skip
            spend_first_token_share(c)
            (b,) = [state for state in c._states if state.name == "b"]
            b.breaker.record_failure(-3600.0)  # opened an hour before the call: cool-down over
            result = await c.chat(MESSAGES)
            now = asyncio.get_running_loop().time()
            return result, tokens(c), c.breaker_state("b"), b.breaker.allows(now)

    result, (stall, first), breaker, b_allows = run_virtual(main())
    assert result.source == "a"
    assert result.stats.hedges == 0
    assert admission.asked_for_b == 1
    assert (breaker, b_allows) == ("half_open", True), "the probe was given back"
    assert (stall, first) == (10.0, 0.25), "the stall token came back to the stall bucket"
    assert "b" not in script.seen


def test_non_streamed_calls_with_both_triggers_spend_the_first_token_bucket(
    spans: Spans,
) -> None:
    """Both triggers set, non-streamed calls: only the first-token trigger applies, paid from
    the first-token bucket. The first slow answer, with that bucket spent, is waited for; after
    quick calls have spilled a token into it, the next slow answer is hedged at 1 s, and the
    stall bucket is never touched."""

    async def slow(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(5.0)
        return json_answer()

    answers: list[Handler | httpx2.Response] = [slow, *[json_answer()] * 3, slow]
    script = Scripted({"a": answers, "b": [json_answer()]})

    async def main() -> tuple[int, int, str, tuple[float, float]]:
        async with client(script, spans, **BOTH) as c:
            spend_first_token_share(c)
            first = await c.chat(MESSAGES, stream=False)
            await quick_calls(c, 3, stream=False)
            last = await c.chat(MESSAGES, stream=False)
            return first.stats.hedges, last.stats.hedges, last.source, tokens(c)

    first, last, winner, (stall, bucket) = run_virtual(main())
    assert (first, last, winner) == (0, 1, "b")
    assert (stall, bucket) == (10.0, 0.25), "5 rounds spilled 1.25; one hedge spent 1"


def test_no_eligible_source_at_the_first_token_trigger_then_the_stall_hedge(spans: Spans) -> None:
    """Eight quick calls save two first-token tokens. The ninth call's first-token hedge goes to
    b, which answers 429 (Retry-After 4 s). In the tenth call, the first-token trigger finds no
    eligible source (b is still rate limited) and spends nothing; by the time its primary
    stalls, b is eligible again and the stall trigger hedges onto it, from the stall bucket."""
    late = timed_stream(3.0)
    late_then_stall = timed_stream(3.0, gap_after=2, gap_s=30.0)
    script = Scripted(
        {
            "a": [*[sse_answer()] * 8, late, late_then_stall],
            "b": [error(429, retry_after="4"), sse_answer()],
        }
    )

    async def main() -> tuple[ChatResult, ChatResult, tuple[float, float], tuple[float, float]]:
        async with client(script, spans, **BOTH) as c:
            spend_first_token_share(c)
            await quick_calls(c, 8)
            ninth = await c.chat(MESSAGES)
            before = tokens(c)
            tenth = await c.chat(MESSAGES)
            return ninth, tenth, before, tokens(c)

    ninth, tenth, before, after = run_virtual(main())
    assert (ninth.source, ninth.stats.hedges, ninth.stats.hedge_won) == ("a", 1, False)
    assert before == (10.0, 1.25), "2 + 0.25 spilled - 1 for the ninth call's hedge"
    assert (tenth.source, tenth.stats.hedges, tenth.stats.hedge_won) == ("b", 1, True)
    assert after == (9.0, 1.5), "the stall bucket paid; the first-token bucket only earned"
    assert script.seen == ["a"] * 9 + ["b", "a", "b"]
