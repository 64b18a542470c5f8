"""Hedged rounds on the real event loop (triggers, one hedge per round, the first success wins,
watchdog kills, cancellation), with scripted legs.

Timers are 50 ms; scripted delays are 300 ms or more (≥ 6× margins). Tests assert outcomes —
whether and when (before or after the first chunk) a hedge started, who won, what was
cancelled — never exact timings.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys

import pytest

from otel_llm import _errors as e
from otel_llm import _semconv as sc
from otel_llm._act import _round
from otel_llm._act._attempt import Attempt
from otel_llm._measure import _clock
from otel_llm._measure._chunks import ChunkClock
from otel_llm.testing import Spans
from tests.support import REPOSITORY
from tests.support.round_harness import (
    SLOW,
    TIMER,
    Behaviour,
    Legs,
    blocked,
    chunks,
    fails,
    streamed,
    unstreamed,
)

SLOW_FIRST_AND_GAP = streamed(first_after=SLOW, gap_after=3, gap=SLOW)


@pytest.mark.parametrize(
    ("after_s", "stall_after_s", "stream", "expected"),
    [
        pytest.param(None, None, True, "none", id="neither-stream"),
        pytest.param(None, None, False, "none", id="neither-nonstream"),
        pytest.param(TIMER, None, True, "before-first-chunk", id="after-stream"),
        pytest.param(TIMER, None, False, "before-done", id="after-nonstream"),
        pytest.param(None, TIMER, True, "after-first-chunk", id="stall-stream"),
        pytest.param(None, TIMER, False, "none", id="stall-nonstream"),
        pytest.param(TIMER, TIMER, True, "before-first-chunk", id="both-stream"),
        pytest.param(TIMER, TIMER, False, "before-done", id="both-nonstream"),
    ],
)
async def test_trigger_matrix(
    after_s: float | None, stall_after_s: float | None, stream: bool, expected: str
) -> None:
    """AFTER_S only / STALL_AFTER_S only / both / neither × streaming / non-streaming: the
    primary is late to its first chunk and stalls later; the hedge starts exactly when due."""
    primary = SLOW_FIRST_AND_GAP if stream else unstreamed(2 * SLOW)
    legs = Legs({"a": primary, "b": blocked()}, stream=stream)
    result = await legs.run(after_s, stall_after_s)
    hedge = legs.hedge
    if expected == "none":
        assert hedge is None
        assert result.hedges == 0
        assert legs.round(after_s, stall_after_s).hedging is (after_s is not None)
        return
    assert hedge is not None
    assert result.hedges == 1
    if expected == "before-first-chunk":
        assert hedge[4] == 0, "the first-token hedge fires before the primary's first chunk"
    elif expected == "after-first-chunk":
        assert hedge[4] >= 1, "pre-first-chunk silence is never judged by the stall timer"
    assert result.winner is not None
    assert result.winner.attempt.leg == sc.LEG_PRIMARY
    assert legs.legs[1].task.cancelled(), "the losing hedge leg was cancelled"
    assert legs.legs[1].attempt.cancel_outcome == sc.OUTCOME_HEDGE_CANCELLED


async def test_no_hedge_when_stream_is_smooth() -> None:
    """A primary that streams steadily never triggers either hedge."""
    legs = Legs({"a": streamed(first_after=0.0), "b": blocked()})
    result = await legs.run(SLOW, SLOW)
    assert legs.hedge is None
    assert result.winner is not None


async def test_long_steady_stream_never_stall_hedges() -> None:
    """A stream whose chunks keep coming for many windows, each gap well inside the window,
    never triggers the stall hedge: each window is re-armed from the latest chunk."""

    async def steady(attempt: Attempt) -> str:
        await chunks(attempt, 60, every=TIMER / 5)  # 12 windows long, gaps of 1/5 window
        return "a"

    legs = Legs({"a": steady, "b": blocked()})
    result = await legs.run(None, TIMER)
    assert legs.hedge is None
    assert result.winner is not None


async def test_stall_hedge_wins_and_primary_is_cancelled_promptly() -> None:
    """Mid-stream stall: the hedge leg answers first, the stalled primary is cancelled."""
    legs = Legs({"a": streamed(0.0, gap_after=2, gap=60.0), "b": streamed(0.0)})
    result = await legs.run(None, TIMER)
    assert result.winner is not None
    assert result.winner.attempt.leg == sc.LEG_HEDGE
    primary = legs.legs[0]
    assert primary.task.cancelled()
    assert primary.attempt.cancel_outcome == sc.OUTCOME_HEDGE_CANCELLED
    assert result.losers == [primary]


async def test_hedge_leg_gets_no_chunk_signal() -> None:
    """Only the primary leg gets a chunk signal: no hedge of a hedge."""
    legs = Legs(
        {"a": streamed(0.0, gap_after=2, gap=60.0), "b": streamed(0.0, gap_after=2, gap=2 * SLOW)}
    )
    await legs.run(TIMER, TIMER)
    roles = [(name, role, signal is not None) for name, role, signal, _, _ in legs.started]
    assert roles == [("a", sc.LEG_PRIMARY, True), ("b", sc.LEG_HEDGE, False)]
    assert len(legs.started) == 2, "at most one hedge per round"


class ChunkAtTimeout(asyncio.Event):
    """A chunk signal whose chunk lands exactly when the stall window ends: whenever the round
    looks at the signal after a full window of silence, a chunk has just arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.clock: ChunkClock | None = None
        self.landed = 0

    def is_set(self) -> bool:
        clock = self.clock
        if not super().is_set() and clock is not None and clock.count:
            silent_ns = _clock.now_ns() - clock.arrivals_ns[-1]
            if silent_ns >= TIMER * 1e9:
                clock.mark()  # the chunk of the timeout's own loop iteration
                self.landed += 1
        return super().is_set()


async def test_chunk_in_same_iteration_as_timeout_does_not_hedge() -> None:
    """A trigger re-checks before it hedges: a chunk that arrives together with the timeout
    prevents the hedge."""
    made: list[ChunkAtTimeout] = []

    def event() -> ChunkAtTimeout:
        made.append(ChunkAtTimeout())
        return made[-1]

    async def first_chunk_then_silence(attempt: Attempt) -> str:
        made[0].clock = attempt.span.clock
        attempt.span.clock.mark()
        await asyncio.sleep(12 * TIMER)  # silent: only the chunks landing at each timeout
        return "a"

    legs = Legs({"a": first_chunk_then_silence, "b": blocked()}, make_signal=event)
    result = await legs.run(None, TIMER)
    assert legs.hedge is None, "every timeout came with a chunk: no hedge"
    assert made[0].landed >= 3, "several windows ended and were re-checked"
    assert result.winner is not None


async def test_first_finisher_failed_waits_for_the_other() -> None:
    """If the leg that finishes first failed, the round waits for the other leg."""
    legs = Legs({"a": fails(SLOW, e.ServerError("boom")), "b": streamed(2 * SLOW)})
    result = await legs.run(TIMER, None)
    assert result.winner is not None
    assert result.winner.attempt.leg == sc.LEG_HEDGE
    assert [leg.attempt.leg for leg in result.failed] == [sc.LEG_PRIMARY]


async def test_watchdog_kill_of_primary_waits_for_the_hedge() -> None:
    """A primary killed by the watchdog while the hedge runs does not fail the round."""
    kill = e.WatchdogTimeout("a watchdog: no chunk", source="a")
    legs = Legs({"a": fails(SLOW, kill), "b": streamed(2 * SLOW)})
    result = await legs.run(TIMER, TIMER)
    assert result.winner is not None
    assert result.winner.state.name == "b"
    assert result.failed[0].error is kill


async def test_both_legs_failing_reports_both() -> None:
    """Both legs failing ends the round with no winner and both failures."""
    legs = Legs({"a": fails(SLOW, e.ServerError("a down")), "b": fails(SLOW, e.ServerError("b"))})
    result = await legs.run(TIMER, None)
    assert result.winner is None
    assert len(result.failed) == 2


async def test_no_eligible_hedge_target_means_no_hedge() -> None:
    """When no other source is eligible the round silently goes on unhedged."""
    legs = Legs({"a": streamed(SLOW)}, hedge_target=None)
    result = await legs.run(TIMER, TIMER)
    assert legs.hedge is None
    assert result.hedges == 0
    assert result.winner is not None


async def test_caller_cancellation_cancels_every_leg() -> None:
    """Cancelling the caller during the stall wait cancels both legs and propagates."""
    legs = Legs({"a": streamed(0.0, gap_after=2, gap=60.0), "b": blocked()})
    task = asyncio.create_task(legs.run(None, TIMER))
    await legs.hedge_started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all(leg.task.done() for leg in legs.legs)
    assert all(leg.task.cancelled() for leg in legs.legs)
    assert [leg.attempt.cancel_outcome for leg in legs.legs] == [sc.OUTCOME_CANCELLED] * 2


async def test_cancellation_during_first_wait_leaves_nothing() -> None:
    """Cancelling while the primary is still before its first chunk leaves no task."""
    legs = Legs({"a": blocked(), "b": blocked()})
    task = asyncio.create_task(legs.run(None, TIMER))
    await legs.primary_started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert legs.legs[0].task.cancelled()
    assert legs.hedge is None


CANCELLED_AS_IT_FAILS = """
import asyncio, sys
sys.path.insert(0, {root!r})
from tests.support.round_harness import Legs, blocked
from otel_llm import _errors as e

async def main():
    tasks = []

    async def fail_as_cancelled(attempt):
        await asyncio.sleep(0.01)
        tasks[0].cancel()
        raise e.ServerError("failed just as the caller gave up")

    legs = Legs({{"a": fail_as_cancelled, "b": blocked()}})
    tasks.append(asyncio.create_task(legs.run(None, None)))
    try:
        await tasks[0]
    except asyncio.CancelledError:
        print("cancelled", legs.legs[0].task.done())

asyncio.run(main())
"""


def test_a_leg_failing_as_the_round_is_cancelled_logs_nothing() -> None:
    """A leg that fails in the same moment the caller cancels the round: the round never
    looked at that failure, yet asyncio logs no "Task exception was never retrieved" (run in a
    process of its own, which reports it when the task is collected at exit)."""
    script = CANCELLED_AS_IT_FAILS.format(root=str(REPOSITORY))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split() == ["cancelled", "True"]
    assert "never retrieved" not in done.stderr


async def test_external_cancel_during_stall_wait_penetrates() -> None:
    """Cancelling the caller after the primary's first chunk and before any hedge (the phase-2
    stall wait): the primary is cancelled (recorded as cancelled, not as a hedge loser), no hedge
    starts, CancelledError propagates, nothing is left running."""
    streaming = asyncio.Event()

    async def chunks_then_silence(attempt: Attempt) -> str:
        await chunks(attempt, 3)
        streaming.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    legs = Legs({"a": chunks_then_silence, "b": blocked()})
    task = asyncio.create_task(legs.run(None, 30.0))
    await streaming.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (primary,) = legs.legs
    assert primary.attempt.chunks == 3
    assert primary.task.cancelled()
    assert primary.attempt.cancel_outcome == sc.OUTCOME_CANCELLED
    assert legs.hedge is None


async def test_a_loser_that_completed_keeps_its_own_stall_figures(spans: Spans) -> None:
    """Both legs complete in the same instant: the first finisher wins; the other — which also
    completed — is a loser whose span keeps its own figures (its stall included), outcome ok,
    never re-recorded as hedge_cancelled; none of its stall enters the winner's."""
    together = asyncio.get_running_loop().create_future()
    hedged = asyncio.Event()

    def finishing_together(gap_ns: int) -> Behaviour:
        async def run(attempt: Attempt) -> str:
            if attempt.leg == sc.LEG_PRIMARY:
                await hedged.wait()  # no chunk before the first-token hedge starts
            else:
                hedged.set()
            clock = attempt.span.clock
            base = clock.start_ns
            for offset in (10_000_000, 20_000_000, 20_000_000 + gap_ns, 30_000_000 + gap_ns):
                clock.mark_at(base + offset)
            if attempt.leg == sc.LEG_HEDGE:  # both wake in one loop iteration, hedge first
                asyncio.get_running_loop().call_soon(together.set_result, None)
            await together
            attempt.figures = attempt.span.finish(sc.OUTCOME_OK)
            return attempt.source.name

        return run

    legs = Legs({"a": finishing_together(1_500_000_000), "b": finishing_together(0)})
    legs.tracer = spans.tracer
    result = await legs.run(TIMER, None)
    primary, hedge = legs.legs
    assert result.winner is hedge
    assert result.losers == [primary]
    assert not primary.task.cancelled()
    by_leg = {s.attributes[sc.ATTEMPT_LEG]: dict(s.attributes or {}) for s in spans.attempts()}  # type: ignore[index]
    assert by_leg[sc.LEG_PRIMARY][sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert (by_leg[sc.LEG_PRIMARY][sc.STALL_COUNT], by_leg[sc.LEG_PRIMARY][sc.STALL_MS]) == (
        1,
        1500,
    )
    assert (by_leg[sc.LEG_HEDGE][sc.STALL_COUNT], by_leg[sc.LEG_HEDGE][sc.STALL_MS]) == (0, 0)


async def test_a_leg_that_will_not_end_is_logged_and_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A losing leg that swallows its cancellation outlives the round's cleanup bound: it is
    logged, kept referenced (never dropped unseen) and reported again when it does end."""
    release = asyncio.Event()

    async def stubborn(attempt: Attempt) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # cleans up slowly, past the round's bound
        return "late"

    legs = Legs({"a": unstreamed(SLOW), "b": stubborn}, stream=False)
    legs.cleanup_s = 0.05
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        result = await legs.run(TIMER, None)
        assert result.winner is legs.legs[0]
        hedge = legs.legs[1]
        assert not hedge.task.done()
        assert hedge.task in _round._UNENDED
        assert "did not end within 0.05 s" in caplog.text
        release.set()
        await hedge.task
        await asyncio.sleep(0)
    assert hedge.task not in _round._UNENDED
    assert "ended at last" in caplog.text


async def test_a_round_cancelled_while_reaping_its_loser_waits_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The round has its winner and is reaping the loser when the caller cancels it — the
    first cancellation, as a caller's timeout may land there: the round reaps the loser as a
    round cancelled earlier does (bounded) and then propagates the cancellation; the loser
    does not outlive the call and nothing is logged as kept."""
    release = asyncio.Event()
    cleaning = asyncio.Event()

    async def slow_to_clean_up(attempt: Attempt) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cleaning.set()
            await release.wait()  # closing its connection takes a moment
            raise
        return "never"

    legs = Legs({"a": slow_to_clean_up, "b": unstreamed(0.0)}, stream=False)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        task = asyncio.ensure_future(legs.run(TIMER, None))
        await cleaning.wait()  # the hedge won; the round is reaping the primary
        task.cancel()
        asyncio.get_running_loop().call_later(TIMER, release.set)
        with pytest.raises(asyncio.CancelledError):
            await task
        primary = legs.legs[0]
        assert primary.task.done()
        assert primary.task not in _round._UNENDED
    assert "kept" not in caplog.text


async def test_a_round_cancelled_again_while_reaping_keeps_its_legs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The caller cancels the round, then cancels it again while it waits for its legs to clean
    up: the second cancellation propagates at once, and the legs still cleaning up are kept
    referenced and logged (the loop holds tasks weakly), never dropped unseen."""
    release = asyncio.Event()
    cleaning = asyncio.Event()

    async def stubborn(attempt: Attempt) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cleaning.set()
            await release.wait()
        return "late"

    legs = Legs({"a": stubborn}, hedge_target=None)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        task = asyncio.ensure_future(legs.run(TIMER, None))
        await legs.primary_started.wait()
        task.cancel()
        await cleaning.wait()  # the round is reaping: its leg is cleaning up
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        primary = legs.legs[0]
        assert not primary.task.done()
        assert primary.task in _round._UNENDED
        assert "its round was cancelled" in caplog.text
        release.set()
        await primary.task
        await asyncio.sleep(0)
    assert primary.task not in _round._UNENDED
    assert "ended at last" in caplog.text
