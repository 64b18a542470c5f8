"""``otel_llm/_tune/_sample.py``: which recorded attempts a replay uses, the calls and the hedge
pools, and the data rule — on the panel tests' real client spans and on made-up records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from otel_llm import ConfigurationError, open_store
from otel_llm import _semconv as sc
from otel_llm._show._store._columns import SegmentColumns
from otel_llm._show._store._segments import SegmentStore, encode
from otel_llm._tune._hedging_model import Timeline
from otel_llm._tune._recorded import Recorded, RecordedAttempt, RecordedCall, read_recorded
from otel_llm._tune._sample import (
    CANCELLED,
    FLOOR_ABOVE,
    HEDGE_LOSER,
    INCOMPLETE,
    MIN_CALLS,
    MIN_POOL,
    NOT_STREAMED,
    SINGLE_SOURCE_NOTE,
    common_floor_ms,
    left_out_because,
    recording_advice,
    sample,
)
from tests.support.panel_calls import panel_spans

T0 = datetime(2026, 6, 1, tzinfo=UTC)


def _attempt(
    call: int,
    number: int = 1,
    *,
    source: str = "a",
    outcome: str = sc.OUTCOME_OK,
    metering: str | None = sc.METERING_EXACT,
    streamed: bool = True,
    leg: str = sc.LEG_PRIMARY,
    end_s: float = 1.0,
    floor_ms: int = 100,
) -> RecordedAttempt:
    return RecordedAttempt(
        call=f"t/{call}",
        started_at=T0 + timedelta(seconds=call),
        source=source,
        leg=leg,
        number=number,
        outcome=outcome,
        streamed=streamed,
        metering=metering,
        floor_ms=floor_ms,
        timeline=Timeline(0.5, end_s, ok=outcome == sc.OUTCOME_OK),
    )


def _recorded(attempts: list[RecordedAttempt]) -> Recorded:
    calls = {a.call: RecordedCall(1.0, 1) for a in attempts}
    return Recorded(tuple(attempts), calls, len(calls))


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({}, None),
        ({"outcome": sc.OUTCOME_ERROR}, None),
        ({"outcome": sc.OUTCOME_WATCHDOG_KILLED}, None),
        ({"outcome": sc.OUTCOME_HEDGE_CANCELLED, "metering": None}, HEDGE_LOSER),
        ({"outcome": sc.OUTCOME_HEDGE_CANCELLED, "leg": sc.LEG_HEDGE}, HEDGE_LOSER),
        ({"outcome": sc.OUTCOME_CANCELLED, "metering": None}, CANCELLED),
        ({"outcome": sc.OUTCOME_CLOSED}, CANCELLED),
        ({"outcome": sc.OUTCOME_DROPPED}, CANCELLED),
        ({"metering": sc.METERING_INCOMPLETE_DROPPED}, INCOMPLETE),
        ({"metering": sc.METERING_INCOMPLETE_MISSING}, INCOMPLETE),
        ({"metering": None}, INCOMPLETE),
        ({"outcome": None}, INCOMPLETE),
        ({"streamed": False, "metering": sc.METERING_NOT_STREAMED}, NOT_STREAMED),
    ],
)
def test_an_attempt_is_usable_only_if_it_ended_by_itself_fully_metered(
    fields: dict[str, object], reason: str | None
) -> None:
    """ok and failed attempts with exact metering are used; hedge losers (either leg) and
    cancelled ones are censored, incomplete metering and non-streamed attempts left out."""
    assert left_out_because(_attempt(1, **fields)) == reason  # type: ignore[arg-type]


def test_calls_replay_their_first_attempt_and_hedge_from_the_other_sources() -> None:
    """Each call's first attempt is its primary, in start order; a call whose first attempt
    lost a hedge race is left out (counted); hedge legs come from the other sources only."""
    attempts = [
        _attempt(1, source="a", end_s=1.0),
        _attempt(2, source="a", outcome=sc.OUTCOME_HEDGE_CANCELLED),
        _attempt(2, 2, source="b", leg=sc.LEG_HEDGE, end_s=2.0),
        _attempt(3, source="b", outcome=sc.OUTCOME_ERROR, end_s=3.0),
        _attempt(3, 2, source="a", end_s=4.0),
    ]
    data = sample(_recorded(attempts))
    assert [t.end_s for t in data.primaries] == [1.0, 3.0]
    assert data.primary_sources == ("a", "b")
    assert [t.end_s for t in data.pools["a"]] == [2.0, 3.0]
    assert [t.end_s for t in data.pools["b"]] == [1.0, 4.0]
    assert data.censored == 1
    assert data.left_out[HEDGE_LOSER] == 1
    assert data.left_out["calls_left_out"] == 1
    assert data.sources == {"a": 2, "b": 2}
    assert data.attempts_used == 4
    only_b = sample(_recorded(attempts), "b")
    assert [t.end_s for t in only_b.primaries] == [3.0]
    assert only_b.pools.keys() == {"b"}


def test_one_source_draws_hedges_from_its_own_pool() -> None:
    """With a single source, hedge legs are drawn from all its usable attempts, and the sample
    says so (a note, not a refusal: the client needs a second source to hedge); two sources
    carry no such note."""
    data = sample(_recorded([_attempt(i, end_s=float(i)) for i in range(1, 4)]))
    assert data.single_source
    assert data.notes == (SINGLE_SOURCE_NOTE,)
    assert "needs a second source" in SINGLE_SOURCE_NOTE
    two = sample(_recorded([_attempt(1, source="a"), _attempt(2, source="b")]))
    assert not two.single_source
    assert two.notes == ()
    assert [t.end_s for t in data.pools["a"]] == [1.0, 2.0, 3.0]


def test_an_unknown_source_is_a_clear_error() -> None:
    """--source naming no source of the range: a ConfigurationError naming --source and the
    sources there are."""
    with pytest.raises(ConfigurationError, match=r"--source: .*'c'.*sources: a, b"):
        sample(_recorded([_attempt(1, source="a"), _attempt(2, source="b")]), "c")


@pytest.mark.parametrize(
    ("calls", "other", "enough"),
    [
        (MIN_CALLS, MIN_POOL, True),
        (MIN_CALLS - 1, MIN_POOL, False),
        (MIN_CALLS, MIN_POOL - 1, False),
    ],
)
def test_the_rule_needs_enough_calls_and_a_big_enough_hedge_pool(
    calls: int, other: int, enough: bool
) -> None:
    """At least MIN_CALLS usable calls and MIN_POOL usable attempts of the other sources; the
    problems name what is short."""
    attempts = [_attempt(i, source="a") for i in range(calls)]
    attempts += [_attempt(calls + i, source="b", leg=sc.LEG_HEDGE) for i in range(other)]
    data = sample(_recorded(attempts), "a")
    assert data.calls == calls
    assert data.enough is enough
    assert bool(data.problems) is not enough
    if calls < MIN_CALLS:
        assert f"{calls:,} usable calls" in data.problems[0]
    if other < MIN_POOL:
        assert f"{other:,} usable attempts to draw hedge legs from" in data.problems[-1]


def test_real_client_spans_are_sorted_as_the_rule_says(tmp_path: Path) -> None:
    """The panel tests' client spans (hedged calls won and lost, a caller-cancelled call, a
    non-streamed call, failures, a watchdog kill) in a store: the left-out counts are the
    store's own counts by outcome and metering, and every used attempt ended by itself."""
    store = SegmentStore(tmp_path / "s")
    store.create()
    columns = SegmentColumns()
    for span in panel_spans():
        columns.append_span(span)
    store.write(encode(columns.table()))
    with open_store(tmp_path / "s") as conn:
        recorded = read_recorded(conn, since=None, max_calls=1000)
        counts = dict(
            conn.execute(
                "SELECT outcome, count(*) FROM llm_attempts WHERE operation = 'chat' GROUP BY 1"
            ).fetchall()
        )
        unstreamed = conn.execute(
            "SELECT count(*) FROM llm_attempts WHERE operation = 'chat' AND NOT stream"
        ).fetchone()
    data = sample(recorded)
    assert unstreamed is not None
    assert counts[sc.OUTCOME_HEDGE_CANCELLED] >= 1, "the panel calls lose a hedge race"
    assert data.left_out[HEDGE_LOSER] == counts[sc.OUTCOME_HEDGE_CANCELLED]
    assert data.left_out[CANCELLED] == counts.get(sc.OUTCOME_CANCELLED, 0) > 0
    assert data.left_out[NOT_STREAMED] == unstreamed[0] > 0
    assert data.censored == data.left_out[HEDGE_LOSER] + data.left_out[CANCELLED]
    used = [a for a in recorded.attempts if left_out_because(a) is None]
    assert sum(data.sources.values()) == data.attempts_used == len(used)
    assert {a.outcome for a in used} <= {
        sc.OUTCOME_OK,
        sc.OUTCOME_ERROR,
        sc.OUTCOME_WATCHDOG_KILLED,
    }
    assert sc.OUTCOME_WATCHDOG_KILLED in {a.outcome for a in used}
    assert data.floor_ms == 100
    assert not data.enough


def test_one_thinned_attempt_does_not_raise_the_floor_for_all() -> None:
    """The sample's floor is the one most usable attempts share; an attempt whose floor was
    raised (a long stream that outgrew its event budget) is left out and counted, and its call
    with it when it was a first attempt."""
    attempts = [_attempt(i, source="a" if i % 2 else "b") for i in range(1, 10)]
    attempts.append(_attempt(10, source="a", floor_ms=2_000))
    data = sample(_recorded(attempts))
    assert data.floor_ms == 100
    assert data.left_out[FLOOR_ABOVE] == 1
    assert data.left_out["calls_left_out"] == 1
    assert data.calls == 9
    assert common_floor_ms([100, 2_000, 2_000, 100]) == 100, "a tie: the lowest"
    assert common_floor_ms([250, 250, 100]) == 250
    assert common_floor_ms([]) == 0


def test_a_refusal_says_how_many_calls_like_these_would_be_enough() -> None:
    """84 of 100 calls usable (16 first attempts lost a hedge), 60 attempts in the other
    source's pool: the calls need 1,000 / 84 of these 100 (1,191), the pool 200 / 60 (334):
    about 1,191 calls."""
    attempts = [_attempt(i, source="a") for i in range(84)]
    attempts += [
        _attempt(84 + i, source="a", outcome=sc.OUTCOME_HEDGE_CANCELLED) for i in range(16)
    ]
    attempts += [_attempt(100 + i, source="b", leg=sc.LEG_HEDGE) for i in range(60)]
    data = sample(_recorded(attempts), "a")
    assert (data.calls, data.calls_recorded) == (84, 100)
    assert not data.enough
    assert data.calls_to_record() == 1191
    line = recording_advice(data)
    assert "about 1,191 calls recorded like these (84% of them" in line
    enough = [_attempt(i, source="a") for i in range(MIN_CALLS)]
    enough += [_attempt(MIN_CALLS + i, source="b", leg=sc.LEG_HEDGE) for i in range(MIN_POOL)]
    assert sample(_recorded(enough), "a").calls_to_record() == MIN_CALLS
