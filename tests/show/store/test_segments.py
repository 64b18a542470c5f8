"""The segment store's generations: merging that goes on for hundreds of merges with bounded
names and counts, in-place migration of the first layout, and readers that take no lock (the
way Grafana's DuckDB data source reads, with today's DuckDB and the plugin's 1.5.4) never
counting a span twice while writers seal and merge as fast as they can."""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm._show._sql._table import ROLE_COLUMN
from otel_llm._show._store._access import prepare_for_writing, reader_sql
from otel_llm._show._store._rows import span_row
from otel_llm._show._store._segments import (
    GENERATIONS,
    LOCK,
    MARKER,
    QUEUE_LOCK,
    SCHEMA_SEGMENT,
    SEGMENTS,
    SegmentStore,
    encode_rows,
)
from tests.conftest import Spans, require
from tests.support import REPOSITORY
from tests.support.duckdb_store import lockless_count

ROOT = REPOSITORY
OLD_DUCKDB = ROOT / ".cache" / "duckdb-1.5.4"


def _rows(count: int) -> list[dict[str, object]]:
    spans = Spans()
    for index in range(count):
        spans.tracer.start_span(f"s{index}").end()
    return [span_row(span) for span in spans.finished()]


@pytest.mark.timeout(300)  # a time-compressed long run: ~25 s idle, slower beside burners
def test_merging_goes_on_for_hundreds_of_merges(tmp_path: Path) -> None:
    """Sixteen one-span segments, a merge, again and again: every merge succeeds (no name ever
    grows with history), the store stays at a few segments, and nothing is lost or doubled."""
    store = SegmentStore(tmp_path / "store", generation_keep_s=0.0)  # no reader to wait for
    store.create()
    rows = _rows(16)
    for round_ in range(120):
        for row in rows:
            store.write([{**row, "SpanId": f"{round_:06d}{row['SpanId'][6:]}"}])
        assert store.compact() in (16, 17), round_
        names = [segment.path.name for segment in store.segments()]
        assert len(names) <= 3, names
        assert max(len(name) for name in names) <= 64, names
    assert lockless_count(store.path) == (120 * 16, 120 * 16)
    generations = os.listdir(store.path / GENERATIONS)
    assert len(generations) == 2  # the current one and the one the last merge superseded


@pytest.mark.timeout(300)  # a time-compressed long run: ~25 s idle, slower beside burners
def test_a_merge_rewrites_a_bounded_amount_however_old_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hundreds of rounds of sixteen segments of about 2 KiB and one ``compact()`` each, small
    segments capped at 64 KiB: no merge of small segments ever rewrites more than that cap plus
    the round's new segments (the store's history goes up the size tiers instead of being merged
    again every time), each ``compact()`` leaves nothing due (a tier that filled up is merged
    in the same call), the count stays within its bound, and every span is there once."""
    import otel_llm._show._store._segments as segments_module
    from otel_llm._show._store._merge_plan import Candidate, choose, tier

    small, fanout, minimum, cap = 64 * 1024, 4, 16, 256 * 1024 * 1024
    merges: list[list[int]] = []
    write_merged = segments_module.write_merged

    def recording(paths: list[Path], tmp: Path) -> object:
        merges.append([path.stat().st_size for path in paths])
        return write_merged(paths, tmp)

    monkeypatch.setattr(segments_module, "write_merged", recording)
    store = SegmentStore(tmp_path / "store", generation_keep_s=0.0)
    store.create()
    rows = _rows(16)
    tiers_seen: set[int] = set()
    for round_ in range(150):
        before = len(merges)
        for row in rows:
            payload = {"payload": os.urandom(1024).hex()}  # incompressible: sizes grow
            store.write(
                [{**row, "SpanId": f"{round_:06d}{row['SpanId'][6:]}", "SpanAttributes": payload}]
            )
        new_bytes = sum(segment.path.stat().st_size for segment in store.segments()[-16:])
        assert store.compact(small_bytes=small, fanout=fanout, min_segments=minimum) >= 16
        for sizes in merges[before:]:
            if all(size < small for size in sizes):
                assert sum(sizes) <= small + new_bytes, (round_, sizes)
        left = [
            Candidate(segment.path.name, segment.path.stat().st_size)
            for segment in store.segments()
            if segment.path.name != SCHEMA_SEGMENT
        ]
        due = choose(
            left,
            small_bytes=small,
            min_segments=minimum,
            max_bytes=cap,
            fanout=fanout,
            max_inputs=DEFAULTS.segment_merge_max_inputs,
        )
        assert due == [], round_
        levels = {tier(c.size, small_bytes=small, fanout=fanout) for c in left}
        tiers_seen |= levels
        assert len(left) <= minimum + fanout * len(levels), (round_, left)
    assert max(tiers_seen) >= 3  # the history went three tiers up
    assert lockless_count(store.path) == (150 * 16, 150 * 16)


def test_a_first_layout_store_is_migrated_in_place(tmp_path: Path) -> None:
    """A store of the earlier layout (a plain segments/ directory, a merge a crash cut short)
    becomes generations at the same path the first time a writer opens it, every span once."""
    path = tmp_path / "store"
    segments = path / SEGMENTS
    segments.mkdir(parents=True)
    (path / MARKER).write_text(json.dumps({"layout": 1}) + "\n")
    (path / ".compaction.lock").touch()
    rows = _rows(6)
    (segments / SCHEMA_SEGMENT).write_bytes(encode_rows([]))
    for index, row in enumerate(rows[:4]):
        (segments / f"{index + 1:020d}-1-old.parquet").write_bytes(encode_rows([row]))
    # a merge of the first two, killed after its rename: both inputs and the merged one remain
    merged = "00000000000000000001-1-old-m2.parquet"
    (segments / merged).write_bytes(encode_rows(rows[:2]))
    (segments / f".{merged}.merge").write_text(
        json.dumps(["00000000000000000001-1-old.parquet", "00000000000000000002-1-old.parquet"])
    )
    store = prepare_for_writing(path)
    assert (path / SEGMENTS).is_symlink()
    store.write([rows[4]])
    assert json.loads((path / MARKER).read_text())["layout"] == 2
    assert lockless_count(path) == (5, 5)
    assert store.orphans() == []
    assert store.compact(min_segments=2) == 4
    assert lockless_count(path) == (5, 5)


_LOCKLESS_READER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    import duckdb
    init_sql, stop = sys.argv[1], Path(sys.argv[2])
    # Grafana's way: one connection for the reader's life, the reader SQL as its initSql
    seen, failed, doubled = [], 0, 0
    with duckdb.connect() as conn:
        while True:  # the initSql binds the views: it can meet a merge too
            try:
                conn.execute(init_sql)
                break
            except duckdb.IOException:
                failed += 1
        while not stop.exists():
            try:
                rows, distinct = conn.execute(
                    'SELECT count(*), count(DISTINCT "SpanId") FROM otel_traces'
                ).fetchone()
            except duckdb.IOException as exc:  # listed before a merge, opened after it
                assert "No such file" in str(exc) or "Cannot open" in str(exc), exc
                failed += 1
                continue
            doubled += rows != distinct
            seen.append(rows)
    print(json.dumps({"version": duckdb.__version__, "seen": seen, "failed": failed,
                      "doubled": doubled}))
    """
)


@pytest.mark.parametrize("engine", ["current", "1.5.4"])
def test_a_lockless_reader_never_counts_a_span_twice(tmp_path: Path, engine: str) -> None:
    """While a writer seals one-span segments and merges after every second one, a reader on
    one long-lived connection that never takes the store's lock counts each span at most once
    in every query. A query whose listing straddles a merge's switch fails (a listed segment was
    merged away before it was opened) or misses the merged segments (DuckDB checks each listed
    name again after listing): both only rarely, with the rate printed."""
    env = dict(os.environ)
    if engine != "current":
        require(OLD_DUCKDB.is_dir(), f"DuckDB {engine} in {OLD_DUCKDB} (./dev test installs it)")
        env["PYTHONPATH"] = str(OLD_DUCKDB)
    store = SegmentStore(tmp_path / "store")
    store.create()
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", _LOCKLESS_READER, reader_sql(store.path), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    rows = _rows(1)
    written = 0
    merges = 0
    done = threading.Event()

    def write() -> None:
        nonlocal written, merges
        deadline = time.monotonic() + 8.0
        while time.monotonic() < deadline and written < 3000:
            store.write([{**rows[0], "SpanId": f"{written:016x}"}])
            written += 1
            merges += bool(store.compact(min_segments=2))
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    try:
        assert done.wait(120)
    finally:
        thread.join(60)
        stop.touch()
        out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    result = json.loads(out)
    if engine != "current":
        assert result["version"] == engine
    seen: list[int] = result["seen"]
    queries = len(seen) + result["failed"]
    print(
        f"DuckDB {result['version']}: {queries} lockless queries during {merges} merges, "
        f"{result['failed']} failed ({result['failed'] / max(1, queries):.1%}), "
        f"{result['doubled']} doubled"
    )
    assert merges >= 20
    assert len(seen) >= 20
    dips = sum(1 for before, after in itertools.pairwise(seen) if after < before)
    print(f"  {dips} queries saw fewer spans than the one before (a merge under its listing)")
    assert result["doubled"] == 0
    assert max(seen) <= written
    assert result["failed"] + dips <= queries // 4
    assert lockless_count(store.path) == (written, written)


def test_a_pending_segment_written_again_after_a_merge_is_never_brought_back(
    tmp_path: Path,
) -> None:
    """The Collector's pending segment, written again (a re-ingest after a restart) and
    finalized within a minute of a merge, is counted once: the merge's old generation still
    holds the first copy, and nothing brings it back."""
    store = SegmentStore(tmp_path / "store")
    store.create()
    rows = _rows(9)
    for row in rows[:4]:
        store.write([row])
    store.write(rows[4:], name="pending-X.parquet")
    assert store.compact(min_segments=2) == 4
    store.write(rows[4:], name="pending-X.parquet")  # the same spans, a new file
    store.finalize("X.parquet")
    assert lockless_count(store.path) == (9, 9)
    store.compact(min_segments=2)
    store.repair()
    assert lockless_count(store.path) == (9, 9)
    assert store.pending() == []


def test_a_merge_keeps_call_rows_in_row_groups_of_their_own(tmp_path: Path) -> None:
    """Calls and attempts sealed interleaved come out of a merge with the call rows in row
    groups apart, each role's statistics one value, so a reader of the calls skips every
    attempt row group; every row is there once, in its role's order."""
    import pyarrow.parquet as pq

    from tests.support.panel_calls import panel_spans

    rows = [span_row(span) for span in panel_spans()]
    store = SegmentStore(tmp_path / "store", generation_keep_s=0.0)
    store.create()
    for first in range(0, len(rows), 7):
        store.write(rows[first : first + 7])
    assert store.compact(min_segments=2) == -(-len(rows) // 7)
    (merged,) = [s for s in store.segments() if s.path.name != SCHEMA_SEGMENT]
    metadata = pq.ParquetFile(merged.path).metadata
    (column,) = [
        i for i in range(metadata.num_columns) if metadata.schema.column(i).path == ROLE_COLUMN
    ]
    roles = []
    for group in range(metadata.num_row_groups):
        statistics = metadata.row_group(group).column(column).statistics
        assert statistics is not None
        assert statistics.has_min_max
        assert statistics.min == statistics.max, group
        roles.append(statistics.min)
    assert roles == [sc.SPAN_ROLE_CALL, sc.SPAN_ROLE_ATTEMPT]
    calls = [r["SpanId"] for r in rows if r[ROLE_COLUMN] == sc.SPAN_ROLE_CALL]
    others = [r["SpanId"] for r in rows if r[ROLE_COLUMN] != sc.SPAN_ROLE_CALL]
    table = pq.read_table(merged.path, columns=["SpanId"])
    assert 0 < len(calls) < len(rows)
    assert table.column("SpanId").to_pylist() == calls + others


def test_generations_superseded_before_the_clock_went_back_are_removed(tmp_path: Path) -> None:
    """A clock set back (a VM resumed, a machine that booted with its clock ahead and was
    corrected) leaves superseded generations stamped in the future: they were kept until the
    clock caught up — a day set back kept a day of generations, each holding every segment
    merged since (its disk space). A stamp further ahead than the keep time is taken for the
    past, a dead process's temporary's too."""
    store = prepare_for_writing(tmp_path / "store")
    for _ in range(3):
        for _ in range(2):
            store.write(_rows(1))
        assert store.compact(min_segments=2) > 0
    store.write(_rows(1))  # sealed into the current generation: kept
    generations = store.path / GENERATIONS
    ahead = time.time() + 24 * 3600
    for name in os.listdir(generations):
        os.utime(generations / name / ".consumed", (ahead, ahead))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    left = store.path / "tmp" / f".x.parquet.{dead}.0badc0de.1.tmp"
    left.write_bytes(b"half a segment")
    os.utime(left, (ahead, ahead))
    store.compact()
    assert store.orphans() == []
    assert sorted(os.listdir(generations)) == [os.readlink(store.segments_dir).rsplit("/", 1)[-1]]
    assert not left.exists()
    assert lockless_count(store.path) == (7, 7)


def _queue_taken(store: SegmentStore) -> bool:
    """Whether someone holds the store's place in the queue for the compaction lock."""
    with (store.path / QUEUE_LOCK).open("rb") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


@pytest.mark.timeout(120)
def test_a_reader_waits_for_one_merge_of_a_backlog_not_all_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backlog of four batches of small segments and a reader that arrives during the first
    merge: the reader gets in once that merge is done (the merger finds it waiting and gives
    way, leaving the rest for the next compaction), and the next compaction merges on; every
    span is there once."""
    import otel_llm._show._store._segments as segments_module

    store = SegmentStore(tmp_path / "store", generation_keep_s=0.0)
    store.create()
    rows = _rows(4 * 8)
    for row in rows:
        store.write([row])
    merging, go_on = threading.Event(), threading.Event()
    merges: list[int] = []
    write_merged = segments_module.write_merged

    def first_waits(paths: list[Path], tmp: Path) -> object:
        merges.append(len(paths))
        if len(merges) == 1:
            merging.set()
            assert go_on.wait(60)
        return write_merged(paths, tmp)

    monkeypatch.setattr(segments_module, "write_merged", first_waits)
    merged: list[int] = []
    merger = threading.Thread(
        target=lambda: merged.append(store.compact(min_segments=8, max_inputs=8, max_merges=None))
    )
    merger.start()
    assert merging.wait(60)
    merges_when_read: list[int] = []

    def read() -> None:
        with SegmentStore(store.path).reading():
            merges_when_read.append(len(merges))
            merger.join(60)  # reading on: the merger finds the store taken

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + 60
    while not _queue_taken(store):  # the reader waits in the queue for the merge under way
        assert time.monotonic() < deadline
        time.sleep(0.01)
    go_on.set()
    merger.join(60)
    reader.join(60)
    assert merges_when_read == [1]
    assert merged == [8]  # it gave way to the reader after its first merge
    assert store.compact(min_segments=8, max_inputs=8, max_merges=None) == 24
    assert merges == [8, 8, 8, 8]
    assert lockless_count(store.path) == (len(rows), len(rows))


def test_a_writers_compaction_keeps_up_with_a_backlog(tmp_path: Path) -> None:
    """96 small segments, batches of 8 and two merges a compaction: the batches grow to half
    the backlog rather than leave 80 behind (a writer that seals faster than its compactions
    merge would grow the store for ever); every span is there once."""
    store = SegmentStore(tmp_path / "store", generation_keep_s=0.0)
    store.create()
    rows = _rows(96)
    for row in rows:
        store.write([row])
    assert store.compact(min_segments=8, max_inputs=8, max_merges=2) >= 96
    assert len([s for s in store.segments() if s.path.name != SCHEMA_SEGMENT]) == 1
    assert lockless_count(store.path) == (96, 96)


def test_otel_llm_compact_merges_a_backlog_until_nothing_is_due(tmp_path: Path) -> None:
    """``otel-llm compact`` on a backlog of 640 one-span segments: it merges until nothing is
    due (a writer's compaction stops after eight merges), and every span is there once."""
    from tests.support.processes import run_cli

    store = SegmentStore(tmp_path / "store")
    store.create()
    rows = _rows(640)
    for row in rows:
        store.write([row])
    done = run_cli("compact", "--db", str(store.path), timeout_s=300)
    assert done.returncode == 0, done.stderr
    said = done.stdout.strip()  # each merge's inputs, the merged segments merged again too
    assert said.startswith("merged "), said
    assert int(said.split()[1]) >= 640, said
    assert store.compact(min_segments=2, max_merges=None) == 0  # nothing left due
    assert len([s for s in store.segments() if s.path.name != SCHEMA_SEGMENT]) == 1
    assert lockless_count(store.path) == (640, 640)


def _someone_waits_for(path: Path) -> bool:
    """Whether a lock on ``path`` has a blocked waiter (``->`` lines of ``/proc/locks``)."""
    inode = f":{path.stat().st_ino} "
    return any(
        line.split()[1] == "->" and inode in line
        for line in Path("/proc/locks").read_text().splitlines()
    )


@pytest.mark.timeout(120)
def test_a_reader_nested_in_a_read_never_waits_behind_an_exclusive_waiter(tmp_path: Path) -> None:
    """A reader holds the store, something waits for it exclusively (making or migrating a
    store waits), and the reader opens the store again inside its read (``open_store`` within
    ``open_store``): the inner read gets in at once — were the waiter queued, the inner read
    would wait behind it and it behind the outer read, for ever."""
    store = SegmentStore(tmp_path / "store")
    store.create()
    got_it = threading.Event()

    def exclusive() -> None:
        with store._lock(shared=False, wait=True):
            got_it.set()

    with store.reading():
        waiter = threading.Thread(target=exclusive)
        waiter.start()
        deadline = time.monotonic() + 60
        while not _someone_waits_for(store.path / LOCK):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        inner_read = threading.Event()

        def read_inside() -> None:
            with SegmentStore(store.path).reading():
                inner_read.set()

        inner = threading.Thread(target=read_inside, daemon=True)
        inner.start()
        assert inner_read.wait(10)
        inner.join(10)
        assert not got_it.is_set()
    waiter.join(60)
    assert got_it.is_set()


@pytest.mark.parametrize("character", sorted("*?[]{}\\"))
def test_a_segment_name_duckdb_reads_as_a_pattern_is_refused(
    tmp_path: Path, character: str
) -> None:
    """Readers list a store's segments by name, and DuckDB reads ``*?[]{}\\`` in one as a file
    pattern: such a name sent every reader to the glob, which does not find a name with a
    backslash (its spans silently unread). ``write`` refuses it, naming it; nothing is
    written."""
    from otel_llm import ConfigurationError

    store = SegmentStore(tmp_path / "store")
    store.create()
    name = f"pending-a{character}b.parquet"
    with pytest.raises(ConfigurationError, match=re.escape(repr(name))):
        store.write(_rows(1), name=name)
    assert [segment.path.name for segment in store.segments()] == [SCHEMA_SEGMENT]
    store.write(_rows(1), name="pending-a_b.parquet")  # the same name made safe is written
