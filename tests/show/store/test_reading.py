"""How ``open_store`` reads the segments: the ones sealed when it opened, as a plain list when
they share one schema (read from each footer without a Parquet library), else unioned by name."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_llm import open_store
from otel_llm._show._sql._table import TABLE
from otel_llm._show._store._access import NO_EXTENSIONS, reader_sql
from otel_llm._show._store._columns import arrow_schema
from otel_llm._show._store._footer import stored_arrow_schema
from otel_llm._show._store._segments import SCHEMA_SEGMENT, SegmentStore, encode
from tests.support.duckdb_store import Store

SPANS_A_CALL = 3


def _store(path: Path, calls: int, segments: int) -> SegmentStore:
    """A store of ``calls`` calls in ``segments`` segments (the last written holding the most)."""
    store = Store(path, flush_interval_s=3600)
    for index in range(segments):
        for _ in range(calls // segments + (calls % segments if index == segments - 1 else 0)):
            store.call()
        assert store.exporter.force_flush(10_000)
    store.close()
    return SegmentStore(path)


def _holding(store: SegmentStore) -> list[Path]:
    return [s.path for s in store.segments() if s.path.name != SCHEMA_SEGMENT]


def _table_sql(conn: duckdb.DuckDBPyConnection) -> str:
    row = conn.execute("SELECT sql FROM duckdb_views() WHERE view_name = ?", [TABLE]).fetchone()
    assert row is not None
    return str(row[0])


def _rows(conn: duckdb.DuckDBPyConnection) -> list[tuple[object, ...]]:
    return conn.execute(
        'SELECT "SpanId", "LlmRole", "StallMs", "WinnerGapNs" FROM otel_traces ORDER BY 1'
    ).fetchall()


def _by_glob(path: Path) -> list[tuple[object, ...]]:
    """The rows as Grafana's ``initSql`` reads them: the glob, unioned by name."""
    with duckdb.connect(":memory:", config=dict(NO_EXTENSIONS)) as conn:
        conn.execute(reader_sql(path))
        return _rows(conn)


def _rewrite(path: Path, table: pa.Table) -> None:
    """Replace the segment at ``path`` by ``table``, as another version's writer would."""
    tmp = path.with_name(f".{path.name}.rewrite")
    tmp.write_bytes(encode(table))
    tmp.replace(path)


# --- the footer ---------------------------------------------------------------------------------


def test_the_stored_arrow_schema_is_the_one_pyarrow_reads(tmp_path: Path) -> None:
    """For a small (snappy) and a large (zstd) segment and the schema segment, the bytes read
    from the footer are those pyarrow reads under ``ARROW:schema``, and the same for all three."""
    store = _store(tmp_path / "store", calls=2, segments=1)
    small = _holding(store)[0]
    large = small.with_name("00000000000000000009-large.parquet")
    table = pq.read_table(small).cast(arrow_schema())
    large.write_bytes(encode(pa.concat_tables([table] * 3000)))
    paths = [store.segments_dir / SCHEMA_SEGMENT, small, large]
    assert pq.ParquetFile(large).metadata.row_group(0).column(0).compression == "ZSTD"
    read = [stored_arrow_schema(path) for path in paths]
    for path, stored in zip(paths, read, strict=True):
        metadata = pq.ParquetFile(path).metadata.metadata
        assert stored is not None
        assert stored == metadata[b"ARROW:schema"]
    assert len(set(read)) == 1


def test_a_footer_that_does_not_say_is_unknown(tmp_path: Path) -> None:
    """No stored schema, a file cut short, an empty or a missing file, bytes that are not
    Parquet, a footer length past the start: ``None``, never an error."""
    table = pa.table({"a": [1, 2, 3]})
    bare = tmp_path / "bare.parquet"
    pq.write_table(table, bare, store_schema=False)
    with_schema = tmp_path / "with.parquet"
    pq.write_table(table, with_schema)
    data = with_schema.read_bytes()
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(data[:-3])
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")
    text = tmp_path / "text.parquet"
    text.write_bytes(b"not a parquet file at all")
    too_long = tmp_path / "long.parquet"
    too_long.write_bytes(b"PAR1" + (1 << 30).to_bytes(4, "little") + b"PAR1")
    assert stored_arrow_schema(with_schema) is not None
    for path in (bare, cut, empty, text, too_long, tmp_path / "missing.parquet"):
        assert stored_arrow_schema(path) is None, path.name


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_damaged_footer_never_raises(tmp_path: Path, data: st.DataObject) -> None:
    """Bytes of a real segment's tail overwritten anywhere (or cut): never an exception, and
    where Parquet reads the footer, the schema read is the one it reads there or ``None``."""
    source = tmp_path / "source.parquet"
    if not source.exists():
        pq.write_table(pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]}), source)
    original = source.read_bytes()
    tail = data.draw(st.integers(min_value=1, max_value=min(len(original), 2000)))
    at = len(original) - tail
    patch = data.draw(st.binary(min_size=1, max_size=16))
    damaged = original[:at] + patch + original[at + len(patch) :]
    path = tmp_path / "damaged.parquet"
    path.write_bytes(damaged[: data.draw(st.integers(min_value=0, max_value=len(damaged)))])
    stored = stored_arrow_schema(path)
    try:  # Parquet's own reading of the footer's key-value entries, where it can read them
        entries = pq.read_metadata(path).metadata or {}
    except (OSError, pa.ArrowException):
        return
    assert stored in (None, entries.get(b"ARROW:schema"))


# --- the view -----------------------------------------------------------------------------------


def test_segments_of_one_schema_are_read_as_a_list_largest_first(tmp_path: Path) -> None:
    """Three segments of this version and the empty one the store began with: the table is
    one plain list of them, the largest first, and reads every span exactly as the glob
    unioned by name does."""
    store = _store(tmp_path / "store", calls=7, segments=3)
    holding = _holding(store)
    largest = max(holding, key=lambda path: path.stat().st_size)
    assert largest == holding[-1]  # the last by name: listed first only for its size
    with open_store(store.path) as conn:
        sql = _table_sql(conn)
        rows = _rows(conn)
        calls = conn.execute("SELECT count(*) FROM llm_calls").fetchone()
    assert "union_by_name" not in sql
    assert sql.count("read_parquet(") == 1
    listed = [Path(name).name for name in re.findall(r"'([^']+[.]parquet)'", sql)]
    assert listed[0] == largest.name
    assert listed[-1] == SCHEMA_SEGMENT  # no rows: the smallest
    assert sorted(listed) == sorted([SCHEMA_SEGMENT, *(path.name for path in holding)])
    assert len(rows) == 7 * SPANS_A_CALL
    assert calls == (7,)
    assert rows == _by_glob(store.path)


def test_segments_of_another_version_are_a_list_of_their_own(tmp_path: Path) -> None:
    """A segment written without a column (an older version) or with one more (a newer): it is
    read as a list of its own, united with the others by name; every span is read once, as the
    glob unioned by name reads it, and the missing column is empty for the older rows only."""
    for change in ("older", "newer"):
        store = _store(tmp_path / change, calls=3, segments=3)
        target = _holding(store)[1]
        table = pq.read_table(target)
        if change == "older":
            table = table.drop_columns(["WinnerGapNs"])
        else:
            table = table.append_column("FutureColumn", pa.array([7] * table.num_rows))
        _rewrite(target, table)
        with open_store(store.path) as conn:
            sql = _table_sql(conn)
            rows = _rows(conn)
            nulls = conn.execute(
                "SELECT count(*) FROM otel_traces WHERE \"LlmRole\" = 'call' "
                'AND "WinnerGapNs" IS NULL'
            ).fetchone()
            future = conn.execute(
                "SELECT count(*) FROM duckdb_columns() "
                "WHERE table_name = 'otel_traces' AND column_name = 'FutureColumn'"
            ).fetchone()
        assert sql.count("read_parquet(") == 2, change
        assert "UNION ALL BY NAME" in sql
        assert "union_by_name" not in sql
        assert len(rows) == 3 * SPANS_A_CALL
        assert rows == _by_glob(store.path)
        assert nulls == ((1,) if change == "older" else (0,))
        assert future == ((0,) if change == "older" else (1,))


def test_a_schema_segment_of_another_version_is_a_list_of_its_own(tmp_path: Path) -> None:
    """The empty segment a store starts with, written by a version with another column: its
    column is there, empty, and every span is read once."""
    store = _store(tmp_path / "store", calls=2, segments=2)
    schema_segment = store.segments_dir / SCHEMA_SEGMENT
    empty = pq.read_table(schema_segment)
    _rewrite(schema_segment, empty.append_column("FutureColumn", pa.array([], pa.int64())))
    with open_store(store.path) as conn:
        sql = _table_sql(conn)
        read = conn.execute('SELECT count("FutureColumn"), count(*) FROM otel_traces').fetchone()
        rows = _rows(conn)
    assert sql.count("read_parquet(") == 2
    assert read == (0, 2 * SPANS_A_CALL)
    assert rows == _by_glob(store.path)


def test_segments_that_stored_no_schema_are_unioned_by_name(tmp_path: Path) -> None:
    """Segments whose footers hold no Arrow schema (as other Parquet writers leave them): read
    unioned by name, beside the list of the others, one of them a column short."""
    store = _store(tmp_path / "store", calls=4, segments=4)
    first, second = _holding(store)[:2]
    for target, table in (
        (first, pq.read_table(first)),
        (second, pq.read_table(second).drop_columns(["WinnerGapNs"])),
    ):
        tmp = target.with_name(f".{target.name}.rewrite")
        pq.write_table(table, tmp, store_schema=False)
        tmp.replace(target)
        assert stored_arrow_schema(target) is None
    with open_store(store.path) as conn:
        sql = _table_sql(conn)
        rows = _rows(conn)
    assert sql.count("read_parquet(") == 2
    assert sql.count("union_by_name = true") == 1
    assert len(rows) == 4 * SPANS_A_CALL
    assert rows == _by_glob(store.path)


def test_a_connection_reads_the_segments_sealed_when_it_opened(tmp_path: Path) -> None:
    """Spans sealed while a connection is open are read by the next one, not by it."""
    path = tmp_path / "store"
    _store(path, calls=2, segments=1)
    more = Store(path, flush_interval_s=3600)
    with open_store(path) as conn:
        more.call()
        assert more.exporter.force_flush(10_000)
        assert conn.execute("SELECT count(*) FROM llm_calls").fetchone() == (2,)
    more.close()
    with open_store(path) as conn:
        assert conn.execute("SELECT count(*) FROM llm_calls").fetchone() == (3,)


def test_a_store_copied_elsewhere_reads_its_own_segments(tmp_path: Path) -> None:
    """The list names the segments of the store opened (through its ``segments`` link), so a
    copy reads its own files."""
    source = _store(tmp_path / "a", calls=2, segments=2)
    copy = tmp_path / "b"
    shutil.copytree(source.path, copy, symlinks=True)
    with open_store(copy) as conn:
        sql = _table_sql(conn)
        assert str(copy) in sql
        assert str(source.path) + "/" not in sql
        assert conn.execute("SELECT count(*) FROM llm_calls").fetchone() == (2,)


def test_a_footer_damaged_past_its_stored_schema_is_met_on_opening(tmp_path: Path) -> None:
    """A segment whose footer still holds its schema but is damaged elsewhere, not the first of
    its list (which alone is bound): found when the store is opened, moved aside and named, and
    the rest read -- not met by a query later."""
    store = _store(tmp_path / "store", calls=4, segments=3)  # 1, 1 and 2 calls
    target = _holding(store)[0]
    assert target.stat().st_size < _holding(store)[-1].stat().st_size  # not first in the list
    data = bytearray(target.read_bytes())
    footer_at = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    for index in range(footer_at + 30, footer_at + 34):  # inside the footer's Parquet schema
        data[index] ^= 0xFF
    target.write_bytes(bytes(data))
    assert stored_arrow_schema(target) is not None
    with open_store(store.path) as conn:
        calls = conn.execute("SELECT count(*) FROM llm_calls").fetchone()
    assert calls == (3,)
    assert [path.name for path in store.quarantined()] == [target.name]


def test_a_segment_named_like_a_pattern_is_read_by_the_glob(tmp_path: Path) -> None:
    """A segment whose name DuckDB would take for a pattern (no writer of ours names one so)
    cannot be listed: the store is read through its glob, every span once."""
    store = _store(tmp_path / "store", calls=2, segments=2)
    first = _holding(store)[0]
    first.rename(first.with_name("99999999999999999999-x[1].parquet"))
    with open_store(store.path) as conn:
        sql = _table_sql(conn)
        calls = conn.execute("SELECT count(*) FROM llm_calls").fetchone()
    assert "*.parquet" in sql
    assert calls == (2,)


def test_a_key_spelled_inside_a_statistic_is_not_the_stored_schema(tmp_path: Path) -> None:
    """Two files with other columns that stored no schema, each holding a value that spells the
    footer's key-value entry (kept in their statistics): neither is read as having stored one,
    so they are never listed together; a file that stored its schema beside such a value reads
    its real one."""
    spelled = "\x19\x1c\x18\x0cARROW:schema\x18\x03abc\x00"
    for index, columns in enumerate(({"a": [1]}, {"b": [2]})):
        table = pa.table({**columns, "s": [spelled]})
        bare, stored = tmp_path / f"bare-{index}.parquet", tmp_path / f"stored-{index}.parquet"
        pq.write_table(table, bare, store_schema=False)
        pq.write_table(table, stored)
        assert spelled.encode() in bare.read_bytes()
        assert stored_arrow_schema(bare) is None
        assert (
            stored_arrow_schema(stored) == pq.ParquetFile(stored).metadata.metadata[b"ARROW:schema"]
        )


def test_a_pending_segment_finalized_while_a_connection_is_open_stays_read(
    tmp_path: Path,
) -> None:
    """A pending segment (the Collector's spool ingest) given its final name after the store
    was opened: the open connection reads its spans still, once, before and after."""
    store = _store(tmp_path / "store", calls=2, segments=1)
    source = _holding(store)[0]
    SegmentStore(store.path).write(source.read_bytes(), name="pending-X.parquet")
    with open_store(store.path) as conn:
        before = conn.execute("SELECT count(*) FROM otel_traces").fetchone()
        store.finalize("X.parquet")
        after = conn.execute("SELECT count(*) FROM otel_traces").fetchone()
        calls = conn.execute("SELECT count(*) FROM llm_calls").fetchone()
    assert before == after == (2 * 2 * SPANS_A_CALL,)
    assert calls == (4,)
