"""``otel_llm/_tune/_recorded.py``: a store's attempts read back as the hedging model's
timelines — from scripted SDK spans exactly, from the client against the simulator within the
real clock's margin, and from any chunk-event plan the instrumentation can make."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_llm import Client, DerivingSpanProcessor, SegmentSpanExporter, Source, open_store
from otel_llm import _semconv as sc
from otel_llm._measure._events import plan_chunk_events
from otel_llm._measure._stalls import NS_PER_MS
from otel_llm._tune._hedging_model import Role, Rules, Timeline, simulate_call
from otel_llm._tune._recorded import read_recorded, timeline_of_events
from otel_llm._tune._script_timeline import timeline_of
from otel_llm.simulator import Script, Silence, SimulatedProvider
from tests.support.tune_store import Scripted, TuneStore, stream

NS = 1e-9
"""The stored times are nanoseconds: a timeline read back is exact to this."""


def _close(read: Timeline, expected: Timeline, tolerance: float = 2 * NS) -> None:
    assert read.ok == expected.ok
    assert math.isclose(read.first_s, expected.first_s, abs_tol=tolerance) or (
        read.first_s == expected.first_s == math.inf
    )
    assert math.isclose(read.end_s, expected.end_s, abs_tol=tolerance)
    assert len(read.long_gaps) == len(expected.long_gaps), (read, expected)
    for (before, gap), (want_before, want_gap) in zip(
        read.long_gaps, expected.long_gaps, strict=True
    ):
        assert math.isclose(before, want_before, abs_tol=tolerance)
        assert math.isclose(gap, want_gap, abs_tol=tolerance)


SCRIPTS = (
    Scripted(stream(1630.0, 8, 20.0, {3: 54_880.0}), 58_725.0),
    Scripted(stream(400.0, 30, 15.0, {2: 250.0, 10: 90.0, 20: 3_000.0}), 4_500.0, source="b-2"),
    Scripted(stream(900.0, 5, 20.0, {1: 700.0}), 2_300.0, outcome=sc.OUTCOME_ERROR),
    Scripted((), 30_000.0, outcome=sc.OUTCOME_WATCHDOG_KILLED),
    Scripted(stream(200.0, 3, 20.0), 260.0, outcome=sc.OUTCOME_HEDGE_CANCELLED, start_ms=500.0),
)


def test_scripted_spans_read_back_as_their_timelines(tmp_path: Path) -> None:
    """Attempts written as real SDK spans through the deriving processor into a store read back
    as the script's timeline to the nanosecond: first chunk, every gap above the 100 ms floor
    (a 90 ms one is not), the end; ok only for ``ok``; a cancelled one carries no metering
    status (its end was censored); with their call and number."""
    store = TuneStore(tmp_path / "s")
    store.call(SCRIPTS[:2])
    for scripted in SCRIPTS[2:]:
        store.call([scripted])
    store.close()
    with open_store(tmp_path / "s") as conn:
        recorded = read_recorded(conn, since=None, max_calls=100)
    assert recorded.calls_in_range == 4
    assert len(recorded.attempts) == len(SCRIPTS)
    by_source = {(a.source, a.outcome): a for a in recorded.attempts}
    for scripted in SCRIPTS:
        attempt = by_source[(scripted.source, scripted.outcome)]
        assert attempt.floor_ms == 100
        cancelled = scripted.outcome in sc.OUTCOMES_WITHOUT_FIGURES
        assert attempt.metering == (None if cancelled else sc.METERING_EXACT)
        assert attempt.streamed
        _close(attempt.timeline, scripted.timeline())
    failed = by_source[("sim-1", sc.OUTCOME_ERROR)].timeline
    assert math.isclose(failed.long_gaps[-1][0], 1.68, abs_tol=1e-6), "after the last chunk"
    assert math.isclose(failed.long_gaps[-1][1], 0.62, abs_tol=1e-6), "the silence that failed"
    first_call = [a for a in recorded.attempts if a.call == recorded.attempts[0].call]
    assert [a.number for a in first_call] == [1, 2]
    assert recorded.calls[first_call[0].call].requests == 2
    assert math.isclose(recorded.calls[first_call[0].call].wall_s, 58.725, abs_tol=1e-6)


def test_the_cap_keeps_the_newest_calls(tmp_path: Path) -> None:
    """``max_calls`` keeps the calls that started last, and says how many were in range."""
    store = TuneStore(tmp_path / "s")
    for first in (100.0, 200.0, 300.0):
        store.call([Scripted(stream(first, 3), first + 100.0)])
    store.close()
    with open_store(tmp_path / "s") as conn:
        recorded = read_recorded(conn, since=None, max_calls=2)
    assert recorded.calls_in_range == 3
    assert sorted(round(a.timeline.first_s, 3) for a in recorded.attempts) == [0.2, 0.3]


GAPS = st.lists(st.integers(min_value=1, max_value=5_000 * NS_PER_MS), min_size=0, max_size=60)


@settings(max_examples=200, deadline=None)
@given(
    first=st.integers(min_value=0, max_value=10_000 * NS_PER_MS),
    gaps=GAPS,
    floor_ms=st.integers(min_value=1, max_value=2_000),
    budget=st.integers(min_value=3, max_value=40),
    tail=st.integers(min_value=0, max_value=10**9),
    ok=st.booleans(),
)
def test_any_event_plan_reads_back_as_every_gap_above_its_floor(
    first: int, gaps: list[int], floor_ms: int, budget: int, tail: int, ok: bool
) -> None:
    """Whatever events the instrumentation chooses (a floor raised when the budget is short,
    the longest gap and the last chunk recorded although below it), the timeline holds exactly
    the gaps above the plan's floor, each after the chunk before it, and the first chunk; a
    failed attempt also the silence after its last chunk, when above the floor."""
    arrivals = [first]
    for gap in gaps:
        arrivals.append(arrivals[-1] + gap)
    plan = plan_chunk_events(arrivals, gaps, floor_ms=floor_ms, budget=budget)
    end = arrivals[-1] + tail
    timeline = timeline_of_events(
        outcome=sc.OUTCOME_OK if ok else sc.OUTCOME_ERROR,
        duration_ns=end,
        floor_ms=plan.floor_ms,
        indexes=[e.index for e in plan.events],
        gaps_ns=[e.gap_ns for e in plan.events],
        offsets_ns=[e.offset_ns for e in plan.events],
    )
    floor_ns = plan.floor_ms * NS_PER_MS
    expected = [(arrivals[i] / 1e9, gap / 1e9) for i, gap in enumerate(gaps) if gap > floor_ns]
    if not ok and tail > floor_ns:  # the silence that ended a failed attempt
        expected.append((arrivals[-1] / 1e9, tail / 1e9))
    assert timeline.first_s == first / 1e9
    assert timeline.end_s == end / 1e9
    assert timeline.ok is ok
    assert list(timeline.long_gaps) == expected


def test_an_attempt_without_chunks_never_had_a_first_chunk() -> None:
    """No chunk event: the first chunk is infinitely late, the end is the wall time."""
    timeline = timeline_of_events(
        outcome=sc.OUTCOME_ERROR,
        duration_ns=3 * 10**9,
        floor_ms=100,
        indexes=None,
        gaps_ns=None,
        offsets_ns=None,
    )
    assert timeline == Timeline(math.inf, 3.0, (), ok=False)


CLIENT_SCRIPT = Script(
    first_chunk_delay_s=0.05,
    chunk_interval_s=0.005,
    chunk_count=30,
    silences=(Silence(after_chunk=4, duration_s=0.8), Silence(after_chunk=17, duration_s=1.2)),
)
NOISE_S = 0.5
"""Gaps a loaded machine's scheduling can add between chunks stay below this (the scripted
silences are well above it); only the longer gaps are compared with the script."""


async def _calls(provider: TracerProvider, calls: int) -> None:
    async with SimulatedProvider(scripts={"scripted": CLIENT_SCRIPT}) as sim:
        source = Source(name="sim-1", provider="sim", base_url=sim.base_url, model="scripted")
        async with Client([source], tracer_provider=provider) as client:
            for _ in range(calls):
                await client.chat([{"role": "user", "content": "hi"}])


def test_the_clients_spans_read_back_as_the_simulators_script(tmp_path: Path) -> None:
    """The client against the simulator with scripted silences, stored in a real store: each
    attempt reads back with the script's long gaps in order — never shorter than scripted (a
    silence runs from the end of the previous write), within a loaded machine's margin of it
    (and a gap the scheduler added, below ``NOISE_S``, is no scripted one) —
    its first chunk and end no earlier than scripted, and ok."""
    exporter = SegmentSpanExporter(tmp_path / "s")
    provider = TracerProvider()
    provider.add_span_processor(DerivingSpanProcessor([SimpleSpanProcessor(exporter)]))
    asyncio.run(_calls(provider, 3))
    provider.shutdown()
    with open_store(tmp_path / "s") as conn:
        recorded = read_recorded(conn, since=None, max_calls=10)
    scripted = timeline_of(CLIENT_SCRIPT, floor_s=0.1)
    assert len(recorded.attempts) == 3
    for attempt in recorded.attempts:
        read = attempt.timeline
        assert read.ok
        assert read.first_s >= scripted.first_s * 0.9
        assert read.end_s >= scripted.end_s * 0.9
        assert read.end_s < scripted.end_s + 5.0
        long_gaps = [(before, gap) for before, gap in read.long_gaps if gap > NOISE_S]
        assert len(long_gaps) == len(scripted.long_gaps), read
        for (before, gap), (want_before, want_gap) in zip(
            long_gaps, scripted.long_gaps, strict=True
        ):
            assert gap >= want_gap - 0.005, (gap, want_gap)
            assert gap < want_gap + 1.0
            assert before >= want_before * 0.9


def test_the_silence_that_ended_a_failed_attempt_hedges_and_kills(tmp_path: Path) -> None:
    """A primary that streamed 20 chunks from 1 s, then fell silent until the 60 s watchdog
    killed it: read back, that silence is its last gap, so the model's stall trigger at 4 s
    hedges it at 5.5 s (the hedge answers 3 s later) and a 10 s watchdog kills it at 11.5 s
    (the retry answers 3 s after its backoff)."""
    arrivals = stream(1000.0, 20, 25.0)
    killed = Scripted(arrivals, arrivals[-1] + 60_000, outcome=sc.OUTCOME_WATCHDOG_KILLED)
    store = TuneStore(tmp_path / "s")
    store.call([killed])
    store.close()
    with open_store(tmp_path / "s") as conn:
        timeline = read_recorded(conn, since=None, max_calls=10).attempts[0].timeline
    assert math.isclose(timeline.long_gaps[-1][0], 1.475, abs_tol=1e-6)
    assert math.isclose(timeline.long_gaps[-1][1], 60.0, abs_tol=1e-6)
    good = Timeline(1.0, 3.0)

    def draw(role: Role) -> Timeline:
        return timeline if role == "primary" else good

    hedged = simulate_call(Rules(stall_after_s=4.0), draw, Rules().budgets(), (0.25, 0.5))
    assert hedged.stall_hedges == 1
    assert math.isclose(hedged.wall_s, 1.475 + 4.0 + 3.0, abs_tol=1e-6)
    watched = simulate_call(Rules(watchdog_s=10.0), draw, Rules().budgets(), (0.25, 0.5))
    assert watched.rounds == 2
    assert math.isclose(watched.wall_s, 1.475 + 10.0 + 0.25 + 3.0, abs_tol=1e-6)


def _without_chunks(outcome: str) -> Timeline:
    """An attempt of 0.3 s that recorded no chunk event, ended with ``outcome``."""
    return timeline_of_events(
        outcome=outcome,
        duration_ns=300 * NS_PER_MS,
        floor_ms=100,
        indexes=[],
        gaps_ns=[],
        offsets_ns=[],
    )


def test_a_completed_stream_without_a_chunk_is_replayed_as_completed_at_its_time() -> None:
    """A stream the model ended at once (no chunk, finish reason ``stop``) is done at its
    recorded 0.3 s: replayed unhedged it answers then, not after a 60 s timeout and a retry."""
    timeline = _without_chunks(sc.OUTCOME_OK)
    assert (timeline.first_s, timeline.end_s, timeline.ok) == (0.3, 0.3, True)
    failed = _without_chunks(sc.OUTCOME_ERROR)
    assert failed.first_s == math.inf, "a failed attempt without a chunk never had one"
