"""The segment store: many writers and readers at once, old DuckDB readers, migration of a
single-file store, compaction, and a store that cannot be written."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan

from otel_llm import NotAStore, SegmentSpanExporter
from otel_llm import _semconv as sc
from otel_llm._show._sql._schema import ALL_COLUMNS, BASE_COLUMNS, migrate
from otel_llm._show._store._access import (
    LEGACY_SUFFIX,
    connect,
    open_store,
    prepare_for_writing,
    reader_sql,
)
from otel_llm._show._store._breakdown import breakdown_sql, run_query, worst_stalls_sql
from otel_llm._show._store._columns import SegmentColumns
from otel_llm._show._store._rows import span_row
from otel_llm._show._store._segments import SCHEMA_SEGMENT, SegmentStore, encode_rows
from tests.conftest import Spans, require
from tests.support import REPOSITORY
from tests.support.duckdb_store import Store, lockless_count
from tests.support.processes import run_python

ROOT = REPOSITORY


def count(path: Path, sql: str = "SELECT count(*) FROM otel_traces") -> int:
    with open_store(path, views=False) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def test_a_store_is_a_directory_of_sealed_segments(tmp_path: Path) -> None:
    """Each write seals one Parquet segment; nothing half-written is left, and the views read
    them (the store starts with an empty schema segment so a glob always matches)."""
    path = tmp_path / "store"
    store = Store(path, flush_interval_s=3600)  # one segment per flush, however slow the call
    store.call()
    assert store.exporter.force_flush(10_000)
    store.call()
    store.close()
    names = sorted(p.name for p in (path / "segments").iterdir() if not p.name.startswith("."))
    assert names[0] == SCHEMA_SEGMENT
    assert len(names) == 3
    assert all(name.endswith(".parquet") for name in names)
    assert count(path) == 6
    assert run_query(path, "SELECT count(*) FROM llm_calls").rows == [(2,)]
    assert store.exporter.stats.segments == 2


def test_an_empty_store_reads_as_empty(tmp_path: Path) -> None:
    """A store with no spans yet answers every view with no rows, not an error."""
    path = tmp_path / "store"
    SegmentStore(path).create()
    assert run_query(path, "SELECT count(*) FROM llm_attempts_at(500)", canned=True).rows == [(0,)]


_OUR_KEYS = (sc.SPAN_ROLE, sc.ATTEMPT_NUMBER, sc.GEN_AI_REQUEST_STREAM, "otel_llm.stall_ms")
_ATTRIBUTE_VALUES = st.one_of(
    st.text(max_size=20),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=2**63, max_value=2**70),  # past a BIGINT: the typed column has NULL
    st.floats(allow_nan=False),
    st.lists(st.integers(min_value=-(2**31), max_value=2**31), max_size=3),
    st.lists(st.text(max_size=5), max_size=3),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    attributes=st.dictionaries(
        st.one_of(st.text(min_size=1, max_size=12), st.sampled_from(_OUR_KEYS)),
        _ATTRIBUTE_VALUES,
        max_size=6,
    ),
    others=st.lists(
        st.dictionaries(st.sampled_from(_OUR_KEYS), _ATTRIBUTE_VALUES, max_size=4), max_size=3
    ),
    events=st.lists(
        st.tuples(
            st.sampled_from(["otel_llm.chunk", "exception", "x"]),
            st.dictionaries(
                st.sampled_from(["otel_llm.chunk.index", "otel_llm.chunk.gap_ns", "k"]),
                _ATTRIBUTE_VALUES,
                max_size=3,
            ),
        ),
        max_size=5,
    ),
)
def test_columns_are_the_row_of_every_span(
    attributes: dict[str, object],
    others: list[dict[str, object]],
    events: list[tuple[str, dict[str, object]]],
) -> None:
    """Whatever attributes and events a span has, and whatever the spans beside it in a table
    have under the same keys (a column of mixed types), the fast column builder gives exactly
    the rows ``span_row`` gives (the Collector's spans go through rows), and DuckDB reads it
    back."""
    spans = Spans()
    span = spans.tracer.start_span("s", attributes=attributes)  # type: ignore[arg-type]
    for name, event_attributes in events:
        span.add_event(name, event_attributes)  # type: ignore[arg-type]
    span.end()
    for other in others:
        spans.tracer.start_span("o", attributes=other).end()  # type: ignore[arg-type]
    finished, *beside = spans.finished()
    fast = SegmentColumns()
    rows = SegmentColumns()
    for each in (finished, *beside, finished):  # the offsets of one span follow the other's
        fast.append_span(each)
        rows.append_row(span_row(each))
    assert fast.table().equals(rows.table())
    arrow = fast.table()
    with duckdb.connect() as conn:
        conn.register("t", arrow)
        got = conn.execute('SELECT "SpanAttributes", "Events.Attributes" FROM t').fetchone()
    assert got is not None
    row = span_row(finished)
    assert dict(got[0]) == row["SpanAttributes"]
    assert [dict(m) for m in got[1]] == row["Events.Attributes"]


_WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from tests.support.duckdb_store import Store
    s = Store(Path({path!r}), flush_interval_s=0.01, compact_every_s=0.05)
    for i in range({calls}):
        s.call()
        assert s.exporter.force_flush(30_000)  # a segment per call: merges must happen
    s.close()
    stats = s.exporter.stats
    assert stats.dropped == 0 and stats.pending == 0, stats
    print(stats.written)
    """
)

_READER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from pathlib import Path
    import duckdb
    from otel_llm._show._store._segments import SegmentStore
    from otel_llm._show._store._access import reader_sql
    path = Path({path!r})
    store = SegmentStore(path)
    seen = []
    # one connection for the reader's whole life, as Grafana's DuckDB data source keeps it;
    # each query holds the store's read lock, so no merge runs under it
    with duckdb.connect() as conn:
        conn.execute(reader_sql(path))
        while not Path({stop!r}).exists():
            with store.reading():
                n = conn.execute("SELECT count(*) FROM llm_calls").fetchone()[0]
                dup = conn.execute(
                    'SELECT count(*) - count(DISTINCT "SpanId") FROM otel_traces'
                ).fetchone()[0]
            assert dup == 0, dup
            seen.append(n)
            time.sleep(0.02)
    assert seen == sorted(seen), seen
    print(len(seen), seen[-1] if seen else 0)
    """
)


_LOCKLESS_READER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {root!r})
    from pathlib import Path
    import duckdb
    from otel_llm._show._store._access import reader_sql
    # Grafana's way: one connection, the reader SQL as initSql, no lock around queries
    vanished = queries = 0
    with duckdb.connect() as conn:
        conn.execute(reader_sql(Path({path!r})))
        while not Path({stop!r}).exists():
            try:
                conn.execute("SELECT count(*) FROM llm_calls").fetchone()
                queries += 1
            except duckdb.IOException as exc:  # a merge deleted a segment this query listed
                assert "No such file" in str(exc) or "Cannot open" in str(exc), exc
                vanished += 1
            time.sleep(0.01)
    print(queries, vanished)
    """
)


def test_four_writers_two_readers_nothing_lost(tmp_path: Path) -> None:
    """Four processes write at once while a long-lived reader keeps one connection open and
    the CLI queries: nobody waits on a lock or fails, no reader taking the store's read lock
    ever sees a span twice (even while writers merge segments), a reader without it (Grafana's
    way) fails only as documented, and afterwards rows = spans ended, exactly."""
    path = tmp_path / "shared"
    SegmentStore(path).create()
    stop = tmp_path / "stop"
    calls = 60
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER.format(root=str(ROOT), path=str(path), stop=str(stop))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lockless = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _LOCKLESS_READER.format(root=str(ROOT), path=str(path), stop=str(stop)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    code = _WRITER.format(root=str(ROOT), path=str(path), calls=calls)
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    cli_counts = []
    while any(w.poll() is None for w in writers):
        out = subprocess.run(
            [sys.executable, "-m", "otel_llm.cli", "query", "--db", str(path), "--format", "json",
             "SELECT count(*) AS n FROM llm_calls"],
            capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        cli_counts.append(json.loads(out.stdout)[0]["n"])
    results = [w.communicate(timeout=120) for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0, 0], [err for _, err in results]
    assert [int(out.split()[-1]) for out, _ in results] == [3 * calls] * 4
    stop.touch()
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert int(out.split()[0]) >= 1
    out, err = lockless.communicate(timeout=60)
    assert lockless.returncode == 0, err  # only the documented failure, never another
    print("lockless reader: queries, failed on a merged-away segment:", out.strip())
    assert cli_counts == sorted(cli_counts)
    assert any("-m" in segment.path.name for segment in SegmentStore(path).segments())
    assert count(path) == 4 * 3 * calls
    assert count(path, 'SELECT count(DISTINCT "SpanId") FROM otel_traces') == 4 * 3 * calls
    assert run_query(path, "SELECT count(*) FROM llm_calls").rows == [(4 * calls,)]


_CREATE = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from otel_llm._show._store._access import prepare_for_writing
    prepare_for_writing(Path(sys.argv[1])).write([])
    """
)


def test_processes_making_one_store_at_once_all_succeed(tmp_path: Path) -> None:
    """Four processes that make the same new store at the same moment all write to it: none
    takes the half-made directory of another for a foreign one."""
    code = _CREATE.format(root=str(ROOT))
    for round_ in range(4):
        path = tmp_path / f"store-{round_}"
        procs = [
            subprocess.Popen([sys.executable, "-c", code, str(path)], stderr=subprocess.PIPE)
            for _ in range(4)
        ]
        errors = [proc.communicate(timeout=120)[1] for proc in procs]
        assert [proc.returncode for proc in procs] == [0] * 4, errors
        assert count(path) == 0
        assert len(SegmentStore(path).segments()) == 5


def test_compaction_merges_small_segments_and_waits_for_readers(tmp_path: Path) -> None:
    """Small segments merge into one with the same rows; while a reader holds the store open,
    no merge happens (so the reader never sees a span twice)."""
    path = tmp_path / "store"
    store = Store(path, compact_every_s=3600, flush_interval_s=3600)
    for _ in range(5):
        store.call()
        assert store.exporter.force_flush(10_000)
    store.close()
    segments = SegmentStore(path)
    before = run_query(path, "SELECT span_id, stall_ms FROM llm_attempts ORDER BY 1").rows
    assert len(segments.segments()) == 6
    with open_store(path) as conn:
        assert segments.compact(min_segments=2) == 0  # a reader holds it
        assert conn.execute("SELECT count(*) FROM otel_traces").fetchone() == (15,)
    assert segments.compact(min_segments=2) == 5
    assert len(segments.segments()) == 2  # the schema segment and the merged one
    assert run_query(path, "SELECT span_id, stall_ms FROM llm_attempts ORDER BY 1").rows == before


def _old_duckdb(version: str) -> Path:
    return ROOT / ".cache" / f"duckdb-{version}"


@pytest.mark.parametrize("version", ["1.4.4", "1.5.4", "1.5.6"])
def test_older_duckdb_reads_the_store(tmp_path: Path, version: str) -> None:
    """DuckDB 1.4, 1.5.4 (the engine Grafana's DuckDB plugin embeds) and 1.5.6 read the store
    through the reader SQL Grafana runs as initSql: views and the re-threshold macro."""
    target = _old_duckdb(version)
    require(target.is_dir(), f"DuckDB {version} in {target} (./dev installs it)")
    store = Store(tmp_path / "store")
    store.call()
    store.close()
    script = textwrap.dedent(
        f"""
        import duckdb
        assert duckdb.__version__ == "{version}", duckdb.__version__
        c = duckdb.connect()
        c.execute({reader_sql(store.path)!r})
        print(c.execute("SELECT count(*) FROM llm_attempts").fetchone()[0])
        sql = "SELECT stall_ms FROM llm_attempts_at(1000) WHERE outcome = 'ok'"
        print(c.execute(sql).fetchone()[0])
        """
    )
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    out = run_python(script, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    expected = run_query(store.path, "SELECT stall_ms FROM llm_calls").rows[0][0]
    assert out.stdout.split() == ["2", str(expected)]


def _legacy_store(path: Path, tmp_path: Path) -> list[tuple[object, ...]]:
    """A single-file store as earlier versions wrote it, with one spilled span beside it."""
    source = Store(tmp_path / "source")
    source.call()
    source.close()
    with open_store(source.path) as conn:
        rows = conn.execute("SELECT * FROM otel_traces").fetchall()
        columns = [d[0] for d in conn.description or ()]
    with connect(path) as conn:
        migrate(conn)
        names = ", ".join(f'"{c}"' for c in columns)
        marks = ", ".join("?" for _ in columns)
        conn.executemany(f"INSERT INTO otel_traces ({names}) VALUES ({marks})", rows)
    spans = Spans()
    spans.tracer.start_span("spilled").end()
    spilled = span_row(spans.finished()[0])
    spill = path.with_name(path.name + ".spill")
    spill.mkdir()
    (spill / "1-1.jsonl").write_text(json.dumps(spilled) + "\n{not json\n", "utf-8")
    return run_query(path, "SELECT span_id, stall_ms FROM llm_attempts ORDER BY 1").rows


def test_a_single_file_store_is_read_and_migrated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store of an earlier version (one DuckDB file) is still read as it is; the first writer
    turns it into a segment store at the same path with every span, the spilled one included,
    keeps the old file beside it and says so."""
    path = tmp_path / "old.duckdb"
    before = _legacy_store(path, tmp_path)
    assert len(before) == 2
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        store = Store(path)
        store.call()
        store.close()
    assert path.is_dir()
    assert path.with_name(path.name + LEGACY_SUFFIX).is_file()
    assert "single-file store" in caplog.text
    assert count(path) == 3 + 1 + 3
    rows = run_query(path, "SELECT span_id, stall_ms FROM llm_attempts ORDER BY 1").rows
    assert set(before) <= set(rows)
    assert len(rows) == 4
    assert not path.with_name(path.name + ".spill").exists()


def test_a_migration_killed_midway_leaves_no_copy_behind(tmp_path: Path) -> None:
    """A writer killed while it migrated a single-file store left its half-made copy beside
    the store (``.<name>.migrating-<pid>``, as large as the spans it had copied) for good; the
    next migration removes it, and every span is migrated once."""
    path = tmp_path / "old.duckdb"
    before = _legacy_store(path, tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    left = SegmentStore(tmp_path / f".{path.name}.migrating-{dead.stdout.strip()}")
    left.create()
    left.write(encode_rows([span_row(span) for span in _finished(2)]))
    store = Store(path)
    store.call()
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir() if ".migrating-" in p.name) == []
    rows = run_query(path, "SELECT span_id, stall_ms FROM llm_attempts ORDER BY 1").rows
    assert set(before) <= set(rows)
    assert len(rows) == 4


def _finished(count: int) -> list[ReadableSpan]:
    spans = Spans()
    for index in range(count):
        spans.tracer.start_span(f"copied {index}").end()
    return list(spans.finished())


_WINNER_COLUMNS = (
    "WinnerModel",
    "WinnerSource",
    "WinnerProvider",
    "WinnerStartedAt",
    "WinnerGapsFloorMs",
    "WinnerGapNs",
)
"""The columns single-file stores were written without: before call rows carried their
winner."""


@pytest.mark.parametrize(
    "written_without",
    [
        pytest.param(_WINNER_COLUMNS, id="before-the-winner-columns"),
        pytest.param(
            tuple(c for c in ALL_COLUMNS if c not in {n for n, _ in BASE_COLUMNS}),
            id="the-clickhouse-exporters-columns-only",
        ),
    ],
)
def test_a_single_file_store_of_an_earlier_schema_answers_every_canned_query(
    tmp_path: Path, written_without: tuple[str, ...]
) -> None:
    """``otel-llm query`` on a single-file store of an earlier schema — written before call
    rows carried their winner (no winner columns, no ``llm_winners`` view in the file), or
    holding the ClickHouse exporter's columns only — answers the breakdown and the worst
    stalls, as measured and re-derived, as the same spans in a segment store do: the columns
    the file predates are read from each row's attributes and events, as migrating it would
    fill them. It was DuckDB's "Table with name llm_winners does not exist"."""
    source = Store(tmp_path / "source")
    for _ in range(3):
        source.call()
    source.close()
    path = tmp_path / "old.duckdb"
    with open_store(source.path) as conn:
        conn.execute(f"ATTACH '{path}' AS old")
        excluded = ", ".join(f'"{c}"' for c in {*_WINNER_COLUMNS, *written_without})
        conn.execute(
            f"CREATE TABLE old.otel_traces AS SELECT * EXCLUDE ({excluded}) FROM otel_traces"
        )
        conn.execute("CREATE VIEW old.llm_calls AS SELECT 1 AS x")
        conn.execute("CREATE VIEW old.llm_attempts AS SELECT 1 AS x")
        conn.execute("DETACH old")
    for sql in (
        breakdown_sql(),
        breakdown_sql(1000),
        worst_stalls_sql(5),
        worst_stalls_sql(5, 1000),
    ):
        expected = run_query(source.path, sql, canned=True)
        assert expected.rows, sql
        assert run_query(path, sql, canned=True) == expected


def test_paths_that_are_not_stores_are_named(tmp_path: Path) -> None:
    """Readers refuse what is not a store with a message naming it."""
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00not a database" * 10)
    for path, words in (
        (plain, "not an otel-llm store"),
        (junk, "not a DuckDB database"),
        (tmp_path / "missing", "does not exist"),
    ):
        with pytest.raises(NotAStore, match=words):
            run_query(path, "SELECT 1")


def test_a_span_that_cannot_be_converted_costs_only_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One span the writer cannot convert (an int too long to render) is dropped and counted;
    the spans before and after it in the same segment are written."""
    spans = Spans()
    for index in range(5):
        spans.tracer.start_span(f"good-{index}").end()
    spans.tracer.start_span("bad", attributes={"huge": 10**5000}).end()
    for index in range(5):
        spans.tracer.start_span(f"more-{index}").end()
    exporter = SegmentSpanExporter(tmp_path / "store")
    with caplog.at_level(logging.ERROR, logger="otel_llm"):
        exporter.export(spans.finished())
        assert exporter.force_flush(30_000)
    exporter.shutdown()
    assert (exporter.stats.written, exporter.stats.dropped) == (10, 1)
    assert count(tmp_path / "store") == 10


_FORK = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from tests.support.duckdb_store import Store
    s = Store(Path({path!r}), flush_interval_s=0.01)
    s.call()  # the writer thread runs in the parent
    assert s.exporter.force_flush(30_000)
    pid = os.fork()
    if pid == 0:  # a pre-forking server's worker
        s.call()
        ok = s.exporter.force_flush(30_000)
        s.close()
        os._exit(0 if ok and s.exporter.stats.written == 3 else 1)
    _, status = os.waitpid(pid, 0)
    s.close()
    print(os.waitstatus_to_exitcode(status), s.exporter.stats.written)
    """
)


def test_a_forked_child_writes_its_own_spans(tmp_path: Path) -> None:
    """A process forked after the writer started (gunicorn --preload, multiprocessing) gets a
    writer of its own and writes its spans; the parent's are written once, by the parent."""
    path = tmp_path / "store"
    out = run_python(_FORK.format(root=str(ROOT), path=str(path)), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "3"]
    assert count(path) == 6


_INIT_THEN = textwrap.dedent(
    """
    import os, sys, threading, time
    sys.path.insert(0, {root!r})
    from opentelemetry import trace
    import otel_llm
    from otel_llm._show._store._exporter import SegmentSpanExporter
    release = threading.Event()
    real_load = SegmentSpanExporter._load
    def held_load(self):
        release.wait(30)
        real_load(self)
    SegmentSpanExporter._load = held_load
    telemetry = otel_llm.init(db_path={path!r}, otlp=False)
    heavy = ("duckdb", "pyarrow", "pandas")
    print(",".join(name for name in heavy if name in sys.modules) or "-")
    threading.Timer(0.3, release.set).start()
    if {fork!r}:
        pid = os.fork()  # waits for the writer's libraries
        if pid == 0:
            loaded = all(name in sys.modules for name in ("duckdb", "pyarrow.parquet"))
            trace.get_tracer("t").start_span("child").end()
            ok = telemetry.exporter.force_flush(30_000)
            os._exit(0 if ok and loaded else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    trace.get_tracer("t").start_span("parent").end()
    assert telemetry.exporter.force_flush(30_000)
    telemetry.shutdown()
    """
)


def test_init_leaves_the_store_libraries_to_the_writer_thread(tmp_path: Path) -> None:
    """``init()`` returns before DuckDB, Arrow or pandas is imported (the writer thread loads
    them, held back here until after ``init()`` returned), and the first span is written once
    they are loaded."""
    path = tmp_path / "store"
    code = _INIT_THEN.format(root=str(ROOT), path=str(path), fork=False)
    out = run_python(code, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["-"]
    assert count(path) == 1


def test_a_fork_during_the_writers_load_waits_for_it(tmp_path: Path) -> None:
    """A fork right after ``init()`` (gunicorn --preload) waits until the writer thread has
    loaded its libraries — a child forked in the middle of an import would find that import's
    lock held by a thread it does not have — and the child then writes its own span."""
    path = tmp_path / "store"
    code = _INIT_THEN.format(root=str(ROOT), path=str(path), fork=True)
    out = run_python(code, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["-", "0"]
    assert count(path) == 2


def test_a_writer_thread_that_cannot_start_is_a_warning_and_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Out of threads, ``start()`` (what ``init()`` calls) warns instead of raising into the
    application, and the next span starts the writer once threads are there again."""
    exporter = SegmentSpanExporter(tmp_path / "store")
    real_start = threading.Thread.start

    def refuse(thread: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        exporter.start()
    assert "could not start the store's writer thread" in caplog.text
    monkeypatch.setattr(threading.Thread, "start", real_start)
    spans = Spans()
    spans.tracer.start_span("after").end()
    exporter.export(spans.finished())
    assert exporter.force_flush(30_000)
    exporter.shutdown()
    assert count(tmp_path / "store") == 1


_CRASHED_MERGE = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from otel_llm._show._store import _segments
    from otel_llm._show._store._segments import SegmentStore
    step = {step!r}
    def die(*args, **kwargs):
        os._exit(137)
    if step == "writing":  # the merged segment half-written in tmp/
        real = _segments.write_merged
        def write_merged(paths, tmp):
            tmp.write_bytes(b"PAR1 half a segment")
            die()
        _segments.write_merged = write_merged
    elif step == "building":  # the next generation half-built, not switched to
        real_link = os.link
        made = [0]
        def link(src, dst, *args, **kwargs):
            if "generations" in str(dst) and not str(dst).endswith(".tmp"):
                made[0] += 1
                if made[0] == 2:  # the schema segment linked, the merged one not
                    die()
            return real_link(src, dst, *args, **kwargs)
        os.link = link
    elif step == "switched":  # switched, nothing after it done (no carry-over, no tidying)
        real_switch = SegmentStore._switch
        def _switch(self, number):
            real_switch(self, number)
            die()
        SegmentStore._switch = _switch
    elif step == "late":  # a segment sealed into the old generation that nobody carried over
        real_switch = SegmentStore._switch
        def _switch(self, number):
            os.link({spare!r}, self._dir(number - 1) / "99999999999999999999-late.parquet")
            real_switch(self, number)
            die()
        SegmentStore._switch = _switch
        SegmentStore._carry_over = lambda self, *args: None
    SegmentStore(Path({path!r})).compact(min_segments=2)
    """
)


@pytest.mark.parametrize("step", ["writing", "building", "switched", "late"])
def test_a_merge_killed_anywhere_never_shows_a_span_twice(tmp_path: Path, step: str) -> None:
    """A merger killed at any step leaves the store exact for a reader that takes no lock and
    with no otel-llm process left to repair it; what the dead merger left is removed by the
    next process that opens the store, and merging goes on."""
    path = tmp_path / "store"
    store = SegmentStore(path)
    store.create()
    spans = Spans()
    for index in range(8):
        spans.tracer.start_span(f"s{index}").end()
    rows = [span_row(span) for span in spans.finished()]
    for row in rows[:7]:
        store.write([row])
    spare = tmp_path / "late.parquet"  # the eighth span, sealed late by step "late"
    spare.write_bytes(encode_rows(rows[7:]))
    if step != "late":
        store.write(rows[7:])
    out = run_python(
        _CRASHED_MERGE.format(root=str(ROOT), path=str(path), step=step, spare=str(spare)),
        cwd=tmp_path,
    )
    assert out.returncode == 137, out.stderr
    merged = step in ("switched", "late")
    # the late segment is in the old generation only, until an otel-llm process opens the store
    assert lockless_count(path) == ((7, 7) if step == "late" else (8, 8))
    assert len(SegmentStore(path).segments()) == (2 if merged else 9)
    left = [*(path / "tmp").iterdir(), *(path / "generations").iterdir()]
    assert len(left) >= 2  # the dead merger's leftovers, until someone opens the store
    for leftover in left:  # ... once they are old enough to be no write in flight
        os.utime(leftover, (time.time() - 60, time.time() - 60), follow_symlinks=False)
    assert SegmentStore(path).orphans()
    assert count(path) == 8  # an otel-llm reader opens the store: leftovers go, late ones join
    assert SegmentStore(path).orphans() == []
    assert not list((path / "tmp").iterdir())
    assert SegmentStore(path).compact(min_segments=2) in ((0, 2) if merged else (8,))
    assert lockless_count(path) == (8, 8)


def _damage(store: SegmentStore, name: str, how: str) -> Path:
    """A copy of a real sealed segment with bytes flipped, or cut short.

    The flipped bytes are the first page's header, just after the leading magic: bytes flipped
    in the middle of a file may land in a value no reader checks (3 files in 40 stayed readable
    so), and a test of damage must damage for sure."""
    (source,) = [s.path for s in store.segments() if s.path.name != SCHEMA_SEGMENT][:1]
    data = bytearray(source.read_bytes())
    if how == "flipped":
        for offset in range(4, 8):
            data[offset] ^= 0xFF
    else:
        del data[len(data) // 2 :]
    bad = store.segments_dir / name
    bad.write_bytes(bytes(data))
    return bad


def _one_span_segments(store: SegmentStore, calls: int) -> None:
    spans = Spans()
    for index in range(calls):
        spans.tracer.start_span(f"s{index}").end()
    for span in spans.finished():
        store.write([span_row(span)])


@pytest.mark.parametrize("how", ["flipped", "cut"])
def test_a_damaged_segment_is_quarantined_and_merging_goes_on(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A segment with flipped bytes or cut short is moved into quarantine/ with a note of why,
    named once in a warning; the rest merge and read on, and later merges never meet it."""
    path = tmp_path / "store"
    store = SegmentStore(path)
    store.create()
    _one_span_segments(store, 3)
    bad = _damage(store, "00000000000000000001-bad.parquet", how)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        assert store.compact(min_segments=2) == 3
        _one_span_segments(store, 3)
        assert store.compact(min_segments=2) == 4
    assert not bad.exists()
    assert [p.name for p in store.quarantined()] == [bad.name]
    why = (store.quarantine_dir / (bad.name + ".why")).read_text("utf-8")
    assert "cannot be read whole" in why
    assert len([r for r in caplog.records if bad.name in r.getMessage()]) == 1
    assert lockless_count(path) == (6, 6)


def test_a_damaged_segment_is_named_and_read_around(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A reader that meets a segment DuckDB cannot open moves it aside, names it, and answers
    from the rest."""
    path = tmp_path / "store"
    store = SegmentStore(path)
    store.create()
    _one_span_segments(store, 2)
    bad = path / "segments" / "00000000000000000001-cut.parquet"
    bad.write_bytes(b"PAR1" + b"\x00" * 64)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        assert count(path) == 2
    assert bad.name in caplog.text
    assert "quarantine" in caplog.text
    assert [p.name for p in store.quarantined()] == [bad.name]


@pytest.mark.parametrize("name", ["run[1]", "a*b", "what?"])
def test_a_path_with_glob_characters_is_refused(tmp_path: Path, name: str) -> None:
    """DuckDB reads the store through a glob, so a path it would read as a pattern is refused,
    with the reason, before anything is written."""
    path = tmp_path / name / "store"
    with pytest.raises(NotAStore, match="reads as a file pattern"):
        prepare_for_writing(path)
    assert not path.exists()


def test_a_path_that_is_not_a_store_holds_spans_and_exits_fast(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A writer pointed at someone else's directory never writes into it: the warning names
    the path, spans are held, and shutdown counts them as lost within its bound."""
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine")
    store = Store(plain, retry_s=0.05, shutdown_timeout_s=1.0)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        store.call()
        assert store.exporter.wait_for(lambda s: s.retries >= 1, 30)
        assert not store.exporter.force_flush(5_000)
        started = time.monotonic()
        store.close()
    assert time.monotonic() - started < 10
    assert sorted(p.name for p in plain.iterdir()) == ["notes.txt"]
    assert store.exporter.stats.dropped == 3
    assert str(plain) in caplog.text
    assert "not an otel-llm store" in caplog.text


_FULL_DISK = textwrap.dedent(
    """
    import resource, signal, sys
    sys.path.insert(0, {root!r})
    from pathlib import Path
    from otel_llm._show._store._segments import SegmentStore
    from tests.support.duckdb_store import Store, lockless_count
    path = Path({path!r})
    SegmentStore(path).create()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200, hard))
    s = Store(path, retry_s=0.05)
    s.call()
    assert s.exporter.wait_for(lambda st: st.retries >= 2, 30), s.exporter.stats
    assert s.exporter.stats.written == 0
    leftovers = [p.name for p in (path / "tmp").iterdir()]
    leftovers += [p.name for p in (path / "segments").iterdir() if p.name.endswith(".tmp")]
    assert leftovers == [], leftovers
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # the disk has room again
    assert s.exporter.force_flush(10_000), s.exporter.stats
    s.close()
    print(s.exporter.stats.written, s.exporter.stats.dropped)
    """
)


def test_a_full_disk_leaves_no_partial_segment_and_loses_nothing(tmp_path: Path) -> None:
    """While writes fail (a file-size limit stands in for a full disk), no partial segment is
    left behind and the spans wait; once there is room they are all written."""
    path = tmp_path / "store"
    out = run_python(_FULL_DISK.format(root=str(ROOT), path=str(path)), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "0"]
    assert count(path) == 3
