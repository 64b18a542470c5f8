"""The embedded store through DuckDB: views, re-derivation, migrations, lost spans counted."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import duckdb
import pytest
from opentelemetry import trace

from otel_llm import SegmentSpanExporter, open_store
from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm._measure._spans import AttemptSpan
from otel_llm._measure._stalls import Timeline, meter
from otel_llm._show._sql._schema import (
    BASE_COLUMNS,
    BASE_DDL,
    SCHEMA_VERSION,
    migrate,
    stored_version,
)
from otel_llm._show._store._breakdown import breakdown_sql, run_query
from otel_llm._show._store._segments import SegmentStore
from tests.conftest import Spans
from tests.support import REPOSITORY
from tests.support.duckdb_store import ARRIVALS, END, MS, Store

ROOT = REPOSITORY


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "spans.duckdb")
    yield s
    s.close()


def query(path: Path, sql: str) -> list[tuple[object, ...]]:
    with open_store(Path(str(path))) as conn:
        return conn.execute(sql).fetchall()


def test_views_carry_the_processor_figures(store: Store) -> None:
    """llm_attempts and llm_calls show the figures the client computed."""
    figures = store.call()
    assert store.exporter.force_flush(10_000)
    rows = query(
        store.path,
        "SELECT attempt, leg, outcome, ttft_ms, wall_ms, generation_ms, stall_ms, stall_count, "
        "max_inter_chunk_ms, chunk_count, stall_threshold_ms, input_tokens, output_tokens "
        "FROM llm_attempts ORDER BY attempt",
    )
    assert rows[0] == (
        1,
        "primary",
        "ok",
        figures.ttft_ms,
        figures.wall_ms,
        figures.generation_ms,
        figures.stall_ms,
        figures.stall_count,
        figures.max_inter_chunk_ms,
        figures.chunk_count,
        1000,
        12,
        34,
    )
    assert rows[1][:3] == (2, "hedge", "hedge_cancelled")
    assert rows[1][6:8] == (None, None), "a cancelled loser has no stall figures"
    calls = query(
        store.path,
        "SELECT attempts, hedges, hedge_won, winner_attempt, stall_ms, stall_count, "
        "generation_ms, wall_ms FROM llm_calls",
    )
    assert calls == [
        (
            2,
            1,
            False,
            1,
            figures.stall_ms,
            figures.stall_count,
            figures.generation_ms,
            figures.wall_ms,
        )
    ]


def test_base_columns_follow_the_clickhouse_layout(store: Store) -> None:
    """otel_traces has the ClickHouse exporter's columns with the same meaning."""
    store.call()
    store.exporter.force_flush(10_000)
    row = query(
        store.path,
        'SELECT "SpanKind", "StatusCode", "SpanAttributes"[\'otel_llm.attempt.source\'], '
        '"Duration", len("Events.Timestamp"), "Events.Name"[1] FROM otel_traces '
        'WHERE "AttemptNumber" = 1',
    )[0]
    assert row[0] == "Client"
    assert row[1] == "Unset"
    assert row[2] == "sim-1"
    assert row[3] == int(END * MS)
    assert row[4] == 4, "first, last and the two gaps above the 100 ms floor"
    assert row[5] == sc.CHUNK_EVENT
    columns = [r[0] for r in query(store.path, "DESCRIBE otel_traces")]
    assert columns[: len(BASE_COLUMNS)] == [name for name, _ in BASE_COLUMNS]


@pytest.mark.parametrize("threshold", [100, 250, 1000, 2000, 60_000])
def test_sql_rederives_at_any_threshold(store: Store, threshold: int) -> None:
    """llm_attempts_at(T) equals metering every arrival at T, for T at or above the floor."""
    store.call()
    store.exporter.force_flush(10_000)
    gaps = [int((b - a) * MS) for a, b in pairwise(ARRIVALS)]
    expected = meter(
        Timeline.from_gaps(wall_ns=int(END * MS), ttft_ns=int(ARRIVALS[0] * MS), gaps_ns=gaps),
        threshold,
    )
    (row,) = query(
        store.path,
        f"SELECT stall_ms, stall_count, generation_ms, wall_ms FROM llm_attempts_at({threshold}) "
        "WHERE outcome = 'ok'",
    )
    assert row == (
        expected.stall_ms,
        expected.stall_count,
        expected.generation_ms,
        expected.wall_ms,
    )


def test_sql_rederivation_matches_processor_at_configured_threshold(store: Store) -> None:
    """At the configured threshold, SQL and the processor agree on every attempt."""
    store.call()
    store.exporter.force_flush(10_000)
    rows = query(
        store.path,
        "SELECT a.stall_ms IS NOT DISTINCT FROM r.stall_ms, "
        "a.stall_count IS NOT DISTINCT FROM r.stall_count, "
        "a.generation_ms IS NOT DISTINCT FROM r.generation_ms "
        "FROM llm_attempts a JOIN llm_attempts_at(1000) r USING (span_id)",
    )
    assert rows
    assert all(all(r) for r in rows)


def test_rederivation_below_floor_is_null(store: Store) -> None:
    """Below the recording floor SQL refuses (NULL) rather than under-counting."""
    store.call()
    store.exporter.force_flush(10_000)
    (row,) = query(
        store.path, "SELECT stall_ms, generation_ms FROM llm_attempts_at(50) WHERE outcome = 'ok'"
    )
    assert row[0] is None


def test_the_breakdown_below_floor_says_unknown_not_zero(store: Store) -> None:
    """Where no call's stall figures can be re-derived at a threshold, every stall column of
    the breakdown is empty — the count of stalled calls too (it said 0, a known "none")."""
    store.call()
    store.call()
    store.exporter.force_flush(10_000)
    table = run_query(store.path, breakdown_sql(50))
    (row,) = [dict(zip(table.columns, values, strict=True)) for values in table.rows]
    assert row["calls"] == 2
    assert (row["stall_s"], row["net_s"], row["stall_%"], row["stalled"]) == (None,) * 4
    measured = run_query(store.path, breakdown_sql())
    (known,) = [dict(zip(measured.columns, values, strict=True)) for values in measured.rows]
    assert known["stalled"] == 2, "as measured, both calls stalled (the fixture's gaps)"


def _old_schema_file(path: Path, store: Store) -> None:
    """A file with only the ClickHouse layout (schema 1), holding one call's spans."""
    store.call()
    store.exporter.force_flush(10_000)
    with open_store(Path(str(store.path))) as src:
        names = ", ".join(f'"{name}"' for name, _ in BASE_COLUMNS)
        rows = src.execute(f"SELECT {names} FROM otel_traces").fetchall()
    with duckdb.connect(str(path)) as conn:
        conn.execute(BASE_DDL)
        placeholders = ", ".join("?" for _ in BASE_COLUMNS)
        conn.executemany(f"INSERT INTO otel_traces VALUES ({placeholders})", rows)


def test_migration_upgrades_an_old_file_idempotently(tmp_path: Path, store: Store) -> None:
    """An old-schema file gains typed columns, backfilled, and views; a second run is a no-op."""
    old = tmp_path / "old.duckdb"
    _old_schema_file(old, store)
    with duckdb.connect(str(old)) as conn:
        assert stored_version(conn) == 1
        assert migrate(conn) is True
        assert stored_version(conn) == SCHEMA_VERSION
        first = conn.execute(
            "SELECT span_id, stall_ms, stall_count, generation_ms FROM llm_attempts ORDER BY 1"
        ).fetchall()
        assert migrate(conn) is False
        again = conn.execute(
            "SELECT span_id, stall_ms, stall_count, generation_ms FROM llm_attempts ORDER BY 1"
        ).fetchall()
        rederived = conn.execute(
            "SELECT stall_ms FROM llm_attempts_at(1000) WHERE outcome = 'ok'"
        ).fetchall()
    expected = query(store.path, "SELECT stall_ms FROM llm_attempts WHERE outcome = 'ok'")
    assert first == again
    assert len(first) == 2
    assert rederived == expected


def test_unwritable_location_counts_every_lost_span(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """When the store cannot be written, every lost span is counted and announced."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    store = Store(blocker / "spans.duckdb", retry_s=0.05, shutdown_timeout_s=0.3)
    store.call()
    assert store.exporter.wait_for(lambda s: s.retries >= 1, 30)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        store.close()
    stats = store.exporter.stats
    assert stats.dropped == 3
    assert stats.written == 0
    assert "dropped 3 spans" in caplog.text


def test_overflow_drops_oldest_with_a_counted_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, spans: Spans
) -> None:
    """Past max_pending the oldest spans are dropped, counted and announced."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    exporter = SegmentSpanExporter(
        blocker / "x.duckdb", max_pending=2, retry_s=0.05, shutdown_timeout_s=0.2
    )
    for name in ("first", "second", "third"):
        spans.tracer.start_span(name).end()
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        exporter.export(spans.finished())
    assert exporter.stats.dropped == 1
    assert "dropped 1 spans" in caplog.text
    exporter.shutdown()


def test_two_processes_share_one_file(tmp_path: Path) -> None:
    """Two applications writing the same file both land all their spans."""
    path = tmp_path / "shared.duckdb"
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from tests.support.duckdb_store import Store
        s = Store(Path({str(path)!r}), retry_s=0.02)
        for _ in range(5):
            s.call()
        s.close()
        assert s.exporter.stats.dropped == 0, s.exporter.stats
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert query(path, "SELECT count(*) FROM llm_calls") == [(10,)]


def test_thinned_chunk_events_still_agree_at_the_measured_threshold(store: Store) -> None:
    """With more stalls than chunk events fit, SQL at the measured threshold returns the
    processor's exact figures, and refuses (NULL) thresholds it cannot know."""
    arrivals = [i * 1500.0 + (i % 3) for i in range(150)]
    figures = store.call(arrivals, arrivals[-1] + 1)
    store.exporter.force_flush(10_000)
    (row,) = query(
        store.path,
        "SELECT a.stall_ms, a.stall_count, a.generation_ms, r.stall_ms, r.stall_count, "
        "r.generation_ms, low.stall_ms FROM llm_attempts a "
        "JOIN llm_attempts_at(1000) r USING (span_id) "
        "JOIN llm_attempts_at(1200) low USING (span_id) WHERE a.outcome = 'ok'",
    )
    expected = (figures.stall_ms, figures.stall_count, figures.generation_ms)
    assert row[:3] == expected
    assert row[3:6] == expected
    assert row[6] is None


def test_a_non_streamed_row_has_null_stall_columns(tmp_path: Path) -> None:
    """Not observable is not zero in the store either: a non-streamed attempt has NULL stall
    figures, its whole wall time as generation, and ``not_streamed`` as metering status."""
    store = Store(tmp_path / "spans.duckdb")
    attempt = AttemptSpan(
        store.tracer,
        "chat sim-model",
        attributes={sc.GEN_AI_OPERATION_NAME: "chat", sc.ATTEMPT_NUMBER: 1},
        threshold_ms=1000,
        streamed=False,
        start_ns=0,
    )
    attempt.finish(sc.OUTCOME_OK, end_ns=2_500 * MS)
    store.close()
    rows = query(
        store.path,
        "SELECT stream, stall_ms, stall_count, max_inter_chunk_ms, wall_ms, generation_ms, "
        "metering_status FROM llm_attempts",
    )
    assert rows == [(False, None, None, None, 2500, 2500, sc.METERING_NOT_STREAMED)]


def test_only_otel_llm_spans_default_to_not_streamed(tmp_path: Path) -> None:
    """The convention sets ``gen_ai.request.stream`` only when streaming, so an otel-llm span
    without it did not stream (``Stream`` false); another library's span in the same file says
    nothing about streaming, and its ``Stream`` stays NULL."""
    store = Store(tmp_path / "spans.duckdb")
    store.tracer.start_span("GET /health", attributes={"http.request.method": "GET"}).end()
    store.tracer.start_span(
        "chat m", attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_CALL, sc.GEN_AI_OPERATION_NAME: "chat"}
    ).end()
    store.close()
    rows = query(store.path, "SELECT SpanName, Stream FROM otel_traces ORDER BY SpanName")
    assert rows == [("GET /health", None), ("chat m", False)]


def test_lone_surrogates_are_stored_as_replacement_characters(tmp_path: Path) -> None:
    """A Python string can hold a lone surrogate (``json.loads('"\\\\ud800"')`` makes one, and
    ``os.fsdecode`` of a name that is not UTF-8), which UTF-8 cannot encode: one such string
    in a span made the writer drop every span converted with it. It is stored as U+FFFD (a
    surrogate pair as the character it stands for), and the other spans are kept. Two keys
    that differ only in their surrogates are one key once stored (its first place, its last
    value): a map holding a key twice could not be read."""
    store = Store(tmp_path / "spans.duckdb")
    lone = json.loads('"\\ud800"')
    link = trace.Link(trace.SpanContext(1, 2, is_remote=False), {"l" + lone: "v" + lone})
    span = store.tracer.start_span(
        "chat " + lone,
        links=[link],
        attributes={
            sc.SPAN_ROLE: sc.SPAN_ROLE_CALL,
            sc.GEN_AI_REQUEST_MODEL: "m" + lone,
            "k" + lone: "v" + lone,
            "pair": "\ud83d\ude00",
            "k\udc00": "last",
            "list": ["i" + lone],
        },
    )
    span.add_event("e" + lone, {"ek" + lone: "ev" + lone})
    span.set_status(trace.Status(trace.StatusCode.ERROR, "boom" + lone))
    span.end()
    store.tracer.start_span("innocent").end()
    store.close()
    assert store.exporter.stats.dropped == 0
    r = "\ufffd"
    rows = query(
        store.path,
        f"SELECT SpanName, RequestModel, SpanAttributes['k{r}'], SpanAttributes['pair'],"
        ' SpanAttributes[\'list\'], "Events.Name", "Events.Attributes"[1][\'ek' + r + "'],"
        f" StatusMessage, \"Links.Attributes\"[1]['l{r}'], cardinality(SpanAttributes)"
        " FROM otel_traces ORDER BY SpanName",
    )
    assert rows == [
        (
            f"chat {r}",
            f"m{r}",
            "last",
            "\U0001f600",
            '["i\\ufffd"]',
            [f"e{r}"],
            f"ev{r}",
            f"boom{r}",
            f"v{r}",
            6,  # the role, the model, k, the pair, the list, the deriving processor's floor
        ),
        ("innocent", None, None, None, None, [], None, "", None, 0),
    ]


def test_force_flush_returns_once_the_spans_before_it_are_sealed_while_others_arrive(
    tmp_path: Path, spans: Spans
) -> None:
    """Beside threads that go on ending spans (a busy server), ``force_flush`` returns True
    once the spans queued before it are sealed: it does not wait for the queue to run dry,
    which never happens under such load (it returned False at its timeout every time)."""
    spans.tracer.start_span("busy").end()
    batch = spans.finished()
    exporter = SegmentSpanExporter(tmp_path / "store")
    exported = 0
    counted = threading.Lock()
    stop = threading.Event()

    def produce() -> None:
        nonlocal exported
        while not stop.is_set():
            exporter.export(batch * 2)
            with counted:
                exported += 2
            time.sleep(0.0002)

    producers = [threading.Thread(target=produce) for _ in range(2)]
    for producer in producers:
        producer.start()
    try:
        assert exporter.wait_for(lambda stats: stats.segments >= 1, 60)
        for _ in range(3):
            with counted:
                before = exported
            assert exporter.force_flush(30_000), exporter.stats
            stats = exporter.stats
            assert stats.written + stats.dropped >= before
    finally:
        stop.set()
        for producer in producers:
            producer.join()
        exporter.shutdown()
    assert exporter.stats.dropped == 0


def test_a_store_written_only_by_short_lived_processes_is_merged(
    tmp_path: Path, spans: Spans
) -> None:
    """A writer looks for segments to merge after its first segment (and as it stops, if it
    never did), not only once it has lived ``compact_every_s``: a store written only by
    short runs (a script, a batch job, one writer each) holds fewer than the small segments'
    minimum, where each run left one more segment that no run ever merged."""
    spans.tracer.start_span("run").end()
    for _ in range(2 * DEFAULTS.segment_merge_min):
        exporter = SegmentSpanExporter(tmp_path / "store")
        exporter.export(spans.finished())
        exporter.shutdown()
        assert exporter.stats.written == 1
    assert len(SegmentStore(tmp_path / "store").segments()) <= DEFAULTS.segment_merge_min
    assert query(tmp_path / "store", "SELECT count(*) FROM otel_traces") == [
        (2 * DEFAULTS.segment_merge_min,)
    ]
