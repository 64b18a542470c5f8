"""The 1-minute rollups (otel_llm/_show/_sql/_rollup.py) on thousands of synthetic calls
generated in chDB (tests/support/clickhouse_calls.py): every over-time panel reads the same
figures from the rollups as from the spans — sums exactly, quantiles within ``quantile``'s
documented behaviour — at every whole-minute interval and filter; the panels do read the
rollups; a call split from its winner across inserts is counted missing and a backfill
restores it; spans stored twice (in one insert, or in two and then backfilled) are counted as
the spans count them."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import pytest
from chdb import session as chdb_session

from otel_llm._show._dashboards._panels import PANELS, Panel, variable_sql
from otel_llm._show._sql._clickhouse import DATABASE, schema_sql, statements_of
from otel_llm._show._sql._grafana_macros import QueryContext, Variable, all_of, expand
from otel_llm._show._sql._panel_sql import (
    AS_MEASURED,
    CALL,
    CLICKHOUSE_PANELS,
    CLICKHOUSE_RAW_PANELS,
    FILTERS,
    MODEL,
    SERVICE,
    SOURCE,
    THRESHOLD,
)
from otel_llm._show._sql._rollup import (
    CALLS_ROLLUP,
    STALLED_WINNERS,
    WINNERS_AT_ROLLUP,
    WINNERS_ROLLUP,
    backfill_statements,
    contents_sql,
    coverage_sql,
)
from otel_llm._show._sql._views import CLICKHOUSE
from tests.support.clickhouse_calls import SOURCES, insert_sql

CALLS: Final = 6_000
BLOCKS: Final = 4
"""Inserts (the exporter inserts in batches: the views see one at a time)."""
HOURS: Final = 3
END: Final = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
"""The calls start over the :data:`HOURS` before this whole minute."""
RESERVOIR: Final = 8192
"""``quantile`` keeps every value of a state (merged or not) up to this many: exact then."""
ROLLED: Final = tuple(p for p in PANELS if p.sql(CLICKHOUSE_PANELS) != p.sql(CLICKHOUSE_RAW_PANELS))
"""The panels with a rollup reading (every one but the chosen call's timeline)."""
OVER_TIME: Final = tuple(
    p for p in PANELS if p.key in {"time_split", "stall_share", "ttft", "hedge_rate"}
)
INTERVALS: Final = (timedelta(minutes=1), timedelta(minutes=5), timedelta(hours=1))
FILTERED: Final = {
    "all": {},
    "service": {SERVICE: ("chat-api",)},
    "model": {MODEL: ("stalls-1", "smooth-3", "stall-2")},
    "source": {SOURCE: ("eu",)},
}


def _ns(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000


def in_chdb(session: Any, sql: str) -> tuple[list[str], list[list[Any]]]:
    out = json.loads(session.query(sql, "JSONCompact").bytes())
    return [c["name"] for c in out["meta"]], out["data"]


@pytest.fixture(scope="module")
def chdb() -> Iterator[Any]:
    """The schema (rollups and their views included), then :data:`CALLS` calls in
    :data:`BLOCKS` inserts of the exporter's columns."""
    session: Any = chdb_session.Session()  # type: ignore[no-untyped-call]
    try:
        for statement in statements_of(schema_sql()):
            session.query(statement)
        size = CALLS // BLOCKS
        for block in range(BLOCKS):
            session.query(
                insert_sql(
                    block * size,
                    size,
                    end_ns=_ns(END),
                    spread_ns=HOURS * 3600 * 1_000_000_000,
                    total=CALLS,
                )
            )
        yield session
    finally:
        session.close()


def _context(
    interval: timedelta,
    chosen: dict[str, tuple[str, ...]],
    start: datetime,
    end: datetime,
    threshold: int = AS_MEASURED,
) -> QueryContext:
    variables = {
        name: Variable(chosen[name], True, True) if name in chosen else all_of(())
        for name in FILTERS
    }
    variables[THRESHOLD] = Variable(str(threshold))
    variables[CALL] = Variable("")
    return QueryContext(start, end, interval, variables)


def _runs(panel: Panel, context: QueryContext) -> list[tuple[str, QueryContext]]:
    """The panel, or one copy per source for the panel repeated over sources."""
    if panel.repeat is None:
        return [(panel.key, context)]
    return [
        (
            f"{panel.key}[{name}]",
            replace(context, variables={**context.variables, panel.repeat: Variable((name,))}),
        )
        for name, _, _ in SOURCES
    ]


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


RE_DERIVED: Final = (250, 1000, 300)
"""Two thresholds the dashboard offers (the rollups re-derive at them) and one it does not
(the panels read the spans)."""
CASES: Final = [
    (panel.key, interval, case, AS_MEASURED)
    for panel in ROLLED
    for interval in (INTERVALS if panel in OVER_TIME else INTERVALS[:1])
    for case in FILTERED
] + [
    (panel.key, INTERVALS[1], case, threshold)
    for panel in ROLLED
    if "${" + THRESHOLD + "}" in panel.sql(CLICKHOUSE_RAW_PANELS)
    for case in ("all", "source")
    for threshold in RE_DERIVED
]


def test_every_panel_but_the_timeline_has_a_rollup_reading() -> None:
    """The ClickHouse dashboard reads a rollup in every panel that aggregates calls or
    attempts; only the chosen call's chunk timeline (one trace) reads the spans alone."""
    assert {p.key for p in PANELS} - {p.key for p in ROLLED} == {"timeline"}


@pytest.mark.parametrize(("key", "interval", "case", "threshold"), CASES)
def test_the_rollup_reads_what_the_spans_read(
    chdb: Any, key: str, interval: timedelta, case: str, threshold: int
) -> None:
    """A panel from the rollups equals the same panel from the spans (the raw SQL of the
    same run), row for row: counts and sums exactly, the worst calls and their order, the
    gap bars, and the TTFT quantiles exactly too, every bucket holding at most the reservoir's
    8192 values (checked), where ClickHouse's ``quantile`` keeps them all and interpolates as
    ``quantileExactInclusive``; as measured and re-derived at a threshold."""
    panel = next(p for p in ROLLED if p.key == key)
    start, end = END - timedelta(hours=HOURS + 1), END + timedelta(minutes=2)
    context = _context(interval, FILTERED[case], start, end, threshold)
    for run, here in _runs(panel, context):
        rolled = in_chdb(chdb, expand(panel.sql(CLICKHOUSE_PANELS), here, "clickhouse"))
        raw = in_chdb(chdb, expand(panel.sql(CLICKHOUSE_RAW_PANELS), here, "clickhouse"))
        assert rolled[0] == raw[0] == list(panel.columns), run
        assert raw[1], f"{run}: no rows to compare"
        assert len(rolled[1]) == len(raw[1]), run
        for got, want in zip(rolled[1], raw[1], strict=True):
            assert all(_close(g, w) for g, w in zip(got, want, strict=True)), (run, got, want)


@pytest.mark.parametrize("threshold", [250, 1000, 300])
def test_ttft_reads_the_rollup_at_any_threshold(chdb: Any, threshold: int) -> None:
    """TTFT does not depend on the stall threshold, so at any threshold (offered or not) the
    TTFT panel reads the measured rollup — and equals the spans' panel at that threshold."""
    start, end = END - timedelta(hours=HOURS + 1), END + timedelta(minutes=2)
    context = _context(timedelta(minutes=5), {}, start, end)
    context = replace(context, variables={**context.variables, THRESHOLD: Variable(str(threshold))})
    ttft = next(p for p in ROLLED if p.key == "ttft")
    rolled = in_chdb(chdb, expand(ttft.sql(CLICKHOUSE_PANELS), context, "clickhouse"))
    raw = in_chdb(chdb, expand(ttft.sql(CLICKHOUSE_RAW_PANELS), context, "clickhouse"))
    assert raw[1]
    assert len(rolled[1]) == len(raw[1])
    for got, want in zip(rolled[1], raw[1], strict=True):
        assert all(_close(g, w) for g, w in zip(got, want, strict=True)), (got, want)
    assert "AND NOT ($__interval_s % 60 = 0)" in ttft.sql(CLICKHOUSE_PANELS)


@pytest.mark.parametrize("name", [*FILTERS, CALL])
def test_the_variables_offer_what_the_spans_offer(chdb: Any, name: str) -> None:
    """The template variables' options (services, models, sources, the worst calls) from the
    rollups are those from the spans."""
    start, end = END - timedelta(hours=HOURS + 1), END + timedelta(minutes=2)
    context = _context(timedelta(minutes=1), {}, start, end)
    rolled, raw = (
        in_chdb(chdb, expand(variable_sql(d, name), context, "clickhouse", variable_query=True))
        for d in (CLICKHOUSE_PANELS, CLICKHOUSE_RAW_PANELS)
    )
    assert variable_sql(CLICKHOUSE_PANELS, name) != variable_sql(CLICKHOUSE_RAW_PANELS, name)
    assert len(raw[1]) >= 2
    assert rolled == raw


def test_each_bucket_is_within_the_reservoir(chdb: Any) -> None:
    """The TTFT comparisons above are exact because no bucket (the widest interval, one
    series) holds more than 8192 values — and there are thousands to compare."""
    _, rows = in_chdb(
        chdb,
        f"SELECT max(n), sum(n) FROM (SELECT count() AS n FROM {DATABASE}.llm_calls "
        "WHERE ttft_ms IS NOT NULL GROUP BY toStartOfHour(started_at), source, model)",
    )
    ((largest, total),) = rows
    assert int(largest) <= RESERVOIR
    assert int(total) >= CALLS // 2


def test_the_panels_read_the_rollups(chdb: Any) -> None:
    """At a whole-minute interval and the threshold as measured, the ClickHouse panels answer
    from the rollups: a row only the rollups hold (in a range no span is in) is what they
    draw; at a 30 s interval they read the spans (nothing); at an offered threshold the
    re-derived rollup's row for it, at one not offered the spans."""
    minute = datetime(2001, 1, 1, 0, 0, tzinfo=UTC)
    at = f"toDateTime({int(minute.timestamp())})"
    chdb.query(
        f"INSERT INTO {DATABASE}.{WINNERS_ROLLUP} (call_minute, minute, service, source, "
        "provider, model, n_calls, wall_ms, generation_ms, stall_ms, wall_ms_count, "
        "ttft_ms_count, stall_ms_count, wall_ms_q, ttft_ms_q, stall_ms_q) "
        f"SELECT {at}, {at}, 'rollup-only', 'a', 'sim', "
        "'m', countState(), sumState(CAST(1000 AS Nullable(Int64))), "
        "sumState(CAST(400 AS Nullable(Int64))), sumState(CAST(600 AS Nullable(Int64))), "
        "countState(CAST(1 AS Nullable(Int64))), countState(CAST(1 AS Nullable(Int64))), "
        "countState(CAST(1 AS Nullable(Int64))), "
        "quantilesState(0.5, 0.95, 0.99)(CAST(1000 AS Nullable(Int64))), "
        "quantilesState(0.5, 0.95, 0.99)(CAST(250 AS Nullable(Int64))), "
        "quantilesState(0.5, 0.95, 0.99)(CAST(600 AS Nullable(Int64)))"
    )
    chdb.query(
        f"INSERT INTO {DATABASE}.{CALLS_ROLLUP} SELECT {at}, 'rollup-only', 'a', 'sim', 'm', "
        "countState(), countStateIf(true), countStateIf(false), "
        "sumState(CAST(1 AS Nullable(Int64))), sumState(CAST(NULL AS Nullable(Int64))), "
        "sumState(CAST(NULL AS Nullable(Int64)))"
    )
    share = next(p for p in OVER_TIME if p.key == "stall_share")
    rate = next(p for p in OVER_TIME if p.key == "hedge_rate")
    span = (minute, minute + timedelta(minutes=10))
    context = _context(timedelta(minutes=1), {}, *span)
    _, rows = in_chdb(chdb, expand(share.sql(CLICKHOUSE_PANELS), context, "clickhouse"))
    assert [row[1:] for row in rows] == [["a/m", 60.0]]
    _, rows = in_chdb(chdb, expand(rate.sql(CLICKHOUSE_PANELS), context, "clickhouse"))
    assert [row[1:] for row in rows] == [[100.0, 0.0]]
    for other in (
        _context(timedelta(seconds=30), {}, *span),
        replace(context, variables={**context.variables, THRESHOLD: Variable("250")}),
    ):
        assert in_chdb(chdb, expand(share.sql(CLICKHOUSE_PANELS), other, "clickhouse"))[1] == []
    chdb.query(
        f"INSERT INTO {DATABASE}.{WINNERS_AT_ROLLUP} (call_minute, minute, service, source, "
        "provider, model, threshold_ms, wall_ms, stall_ms) "
        f"SELECT {at}, {at}, 'rollup-only', 'a', 'sim', 'm', 250, "
        "sumState(CAST(1000 AS Nullable(Int64))), sumState(CAST(250 AS Nullable(Int64)))"
    )
    at_250 = replace(context, variables={**context.variables, THRESHOLD: Variable("250")})
    _, rows = in_chdb(chdb, expand(share.sql(CLICKHOUSE_PANELS), at_250, "clickhouse"))
    assert [row[1:] for row in rows] == [["a/m", 25.0]]  # re-derived at 250 ms: its own row
    at_300 = replace(context, variables={**context.variables, THRESHOLD: Variable("300")})
    assert in_chdb(chdb, expand(share.sql(CLICKHOUSE_PANELS), at_300, "clickhouse"))[1] == []
    assert (
        in_chdb(
            chdb,
            expand(
                rate.sql(CLICKHOUSE_PANELS),
                _context(timedelta(seconds=30), {}, *span),
                "clickhouse",
            ),
        )[1]
        == []
    )


def test_a_call_split_from_its_winner_is_found_and_backfilled(chdb: Any) -> None:
    """A materialized view sees one insert: calls whose spans come in two inserts (attempts,
    then the call spans) are missing from the winners' rollup, and coverage_sql says how many;
    backfill_statements rebuilds those minutes, and every panel agrees with the spans again."""
    day = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    start, end = day - timedelta(hours=1), day
    generated = insert_sql(0, 600, end_ns=_ns(end), spread_ns=3600 * 1_000_000_000, seed=7)
    head, select = generated.split("\nSELECT\n", 1)
    attempts = f"{head}\nSELECT * FROM (SELECT\n{select}) WHERE ParentSpanId != ''"
    calls = f"{head}\nSELECT * FROM (SELECT\n{select}) WHERE ParentSpanId = ''"
    chdb.query(attempts)
    chdb.query(calls)
    window = (f"toDateTime({int(start.timestamp())})", f"toDateTime({int(end.timestamp())})")
    ((spans, rolled_up),) = in_chdb(chdb, coverage_sql(CLICKHOUSE, *window))[1]
    assert int(spans) > 500
    assert int(rolled_up) == 0
    calls_rollup = in_chdb(chdb, contents_sql(CLICKHOUSE, CALLS_ROLLUP))[1]
    for statement in backfill_statements(CLICKHOUSE, *window):
        chdb.query(statement)
    ((spans_after, rolled_after),) = in_chdb(chdb, coverage_sql(CLICKHOUSE, *window))[1]
    assert int(rolled_after) == int(spans_after) == int(spans)
    assert in_chdb(chdb, contents_sql(CLICKHOUSE, CALLS_ROLLUP))[1] == calls_rollup
    _assert_the_panels_agree(chdb, start, end)


def _assert_the_panels_agree(chdb: Any, start: datetime, end: datetime) -> None:
    """Every panel with a rollup reading draws the same rows from the rollups as from the
    spans over [``start``, ``end``), in 5-minute buckets, as measured and re-derived at an
    offered threshold."""
    for threshold in (AS_MEASURED, RE_DERIVED[0]):
        context = _context(timedelta(minutes=5), {}, start, end + timedelta(minutes=2), threshold)
        for panel in ROLLED:
            if threshold != AS_MEASURED and "${" + THRESHOLD + "}" not in panel.sql(
                CLICKHOUSE_RAW_PANELS
            ):
                continue
            for run, here in _runs(panel, context):
                rolled = in_chdb(chdb, expand(panel.sql(CLICKHOUSE_PANELS), here, "clickhouse"))
                raw = in_chdb(chdb, expand(panel.sql(CLICKHOUSE_RAW_PANELS), here, "clickhouse"))
                assert raw[1], (run, threshold)
                assert len(rolled[1]) == len(raw[1]), (run, threshold, rolled[1], raw[1])
                for got, want in zip(rolled[1], raw[1], strict=True):
                    assert all(_close(g, w) for g, w in zip(got, want, strict=True)), (
                        run,
                        threshold,
                        got,
                        want,
                    )


def _twice(generated: str) -> str:
    """The INSERT ``generated`` (:func:`insert_sql`) with every span in it twice, side by side
    in its one block (a batch sent again and merged with itself, or two copies of a span)."""
    head, select = generated.split("\nSELECT\n", 1)
    return (
        f"{head}\nSELECT * EXCEPT (copy) FROM "
        f"(SELECT *, arrayJoin([1, 2]) AS copy FROM (SELECT\n{select}))"
    )


def _winners_stored(chdb: Any, start: datetime, end: datetime) -> tuple[int, int, int]:
    """The winning attempts' spans of the calls that started in [``start``, ``end``) (each
    copy stored), the winners' rollup's calls and the stalled winners' rows there."""
    window = f"BETWEEN toDateTime({int(start.timestamp())}) AND toDateTime({int(end.timestamp())})"
    _, rows = in_chdb(
        chdb,
        f"SELECT (SELECT count() FROM {DATABASE}.llm_attempts WHERE (call_span_id, attempt) IN "
        f"(SELECT span_id, winner_attempt FROM {DATABASE}.llm_calls WHERE started_at {window})), "
        f"(SELECT countMerge(n_calls) FROM {DATABASE}.{WINNERS_ROLLUP} "
        f"WHERE call_minute {window}), "
        f"(SELECT count() FROM {DATABASE}.{STALLED_WINNERS} WHERE call_started_at {window})",
    )
    ((spans, rolled, stalled),) = rows
    return int(spans), int(rolled), int(stalled)


def test_spans_stored_twice_in_one_insert_count_as_the_spans_count_them(chdb: Any) -> None:
    """Every span of 300 calls inserted twice in one block: the winners' rollups hold each
    winner as many times as its span is stored — twice, as the panels count it from the
    spans — not once per pairing of the call's copies with its winner's (four times); the
    panels agree and the coverage finds nothing missing."""
    day = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
    start, end = day - timedelta(hours=1), day
    chdb.query(_twice(insert_sql(0, 300, end_ns=_ns(end), spread_ns=3600 * 1_000_000_000, seed=8)))
    spans, rolled, stalled = _winners_stored(chdb, start, end)
    _, once = in_chdb(
        chdb,
        f"SELECT uniqExact(call_span_id), "
        f"uniqExactIf(call_span_id, stall_ms > 0) FROM {DATABASE}.llm_attempts "
        f"WHERE (call_span_id, attempt) IN (SELECT span_id, winner_attempt "
        f"FROM {DATABASE}.llm_calls WHERE started_at BETWEEN toDateTime({int(start.timestamp())}) "
        f"AND toDateTime({int(end.timestamp())}))",
    )
    ((winners, stalled_winners),) = once
    assert int(winners) > 250
    assert (spans, rolled, stalled) == (
        2 * int(winners),
        2 * int(winners),
        2 * int(stalled_winners),
    )
    window = (f"toDateTime({int(start.timestamp())})", f"toDateTime({int(end.timestamp())})")
    ((covered, rolled_up),) = in_chdb(chdb, coverage_sql(CLICKHOUSE, *window))[1]
    assert int(covered) == int(rolled_up) == spans
    _assert_the_panels_agree(chdb, start, end)


def test_spans_stored_twice_in_two_inserts_count_alike_after_a_backfill(chdb: Any) -> None:
    """The same 300 calls inserted twice, in two inserts (a batch the exporter sent again),
    then their hour rebuilt by backfill_statements: the rollups count each winner twice, as
    the spans do, before the backfill (each view saw one copy) and after it (the backfill
    reads both copies of every call and of every winner) — the panels agree both times."""
    day = datetime(2026, 11, 16, 12, 0, tzinfo=UTC)
    start, end = day - timedelta(hours=1), day
    generated = insert_sql(0, 300, end_ns=_ns(end), spread_ns=3600 * 1_000_000_000, seed=9)
    chdb.query(generated)
    chdb.query(generated)
    before = _winners_stored(chdb, start, end)
    assert before[0] == before[1] > 500
    _assert_the_panels_agree(chdb, start, end)
    window = (f"toDateTime({int(start.timestamp())})", f"toDateTime({int(end.timestamp())})")
    for statement in backfill_statements(CLICKHOUSE, *window):
        chdb.query(statement)
    assert _winners_stored(chdb, start, end) == before
    ((covered, rolled_up),) = in_chdb(chdb, coverage_sql(CLICKHOUSE, *window))[1]
    assert int(covered) == int(rolled_up) == before[0]
    _assert_the_panels_agree(chdb, start, end)


def test_some_winners_start_in_the_next_minute(chdb: Any) -> None:
    """The data exercises the two minutes a winner's row has: hedge legs that won in the
    minute after their call started (the panels bucket by the winner, filter by the call)."""
    _, rows = in_chdb(
        chdb,
        f"SELECT countIf(call_minute != minute) FROM {DATABASE}.{WINNERS_ROLLUP} "
        "WHERE service != 'rollup-only'",
    )
    assert int(rows[0][0]) >= 3
