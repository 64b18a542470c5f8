"""Stores at their edges: a path written with ``~``, a broken ``segments`` link, a path that is
a named pipe, a generation with no segment, damage met while another reader holds the store,
and damage met only by a query (or only by verifying the pages' checksums)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from otel_llm import NotAStore, open_store
from otel_llm._env import OTEL_LLM_DB, env_path
from otel_llm._show._store._access import check_store, reader_sql
from otel_llm._show._store._columns import arrow_schema
from otel_llm._show._store._segments import SCHEMA_SEGMENT, SegmentStore, encode
from tests.support.duckdb_store import Store
from tests.support.processes import run_cli

SPANS_A_CALL = 3
"""A call of the fixture writes its call span and two attempts."""


def _write(path: Path, calls: int, segments: int = 1) -> SegmentStore:
    """A store of ``calls`` calls in ``segments`` segments."""
    store = Store(path, flush_interval_s=3600)
    for index in range(segments):
        for _ in range(calls // segments + (calls % segments if index == segments - 1 else 0)):
            store.call()
        assert store.exporter.force_flush(10_000)
    store.close()
    return SegmentStore(path)


def _spans(path: Path | str) -> int:
    with open_store(path, views=False) as conn:
        row = conn.execute("SELECT count(*) FROM otel_traces").fetchone()
    assert row is not None
    return int(row[0])


def _cli_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != OTEL_LLM_DB}, **extra}


# --- a path written with ~ ----------------------------------------------------------------------


def test_a_relative_path_starting_with_a_tilde_reads_what_was_written_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``open_store("~/spans")`` reads the store a writer made at that path, relative to the
    working directory as Python reads it, not the home directory DuckDB would read."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    _write(Path("~/spans"), calls=2, segments=2)
    assert (tmp_path / "~" / "spans").is_dir()
    assert _spans("~/spans") == 2 * SPANS_A_CALL


def test_a_tilde_in_the_store_variable_is_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``OTEL_LLM_DB='~/spans'`` set where no shell expands it names ``$HOME/spans``, for the
    writers and for ``otel-llm query`` alike."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv(OTEL_LLM_DB, "~/spans")
    assert env_path(OTEL_LLM_DB) == home / "spans"
    _write(home / "spans", calls=3)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = run_cli(
        "query",
        "SELECT count(*) AS spans FROM otel_traces",
        "--format",
        "csv",
        env=_cli_env(HOME=str(home), OTEL_LLM_DB="~/spans"),
        cwd=elsewhere,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["spans", str(3 * SPANS_A_CALL)]
    assert not (elsewhere / "~").exists()


# --- a segments link that names no generation ---------------------------------------------------


@pytest.mark.parametrize("target", ["segments", "generations/abc", "generations/000000000099"])
def test_a_link_that_names_no_generation_is_pointed_back_by_the_first_reader(
    tmp_path: Path, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``segments`` link edited by hand (to itself, to a name that is no number, to a
    generation that is not there) is pointed at the newest whole generation by the first
    process that may, named in a warning; every span is read."""
    store = _write(tmp_path / "store", calls=2, segments=2)
    store.segments_dir.unlink()
    store.segments_dir.symlink_to(target)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        assert _spans(store.path) == 2 * SPANS_A_CALL
    assert os.readlink(store.segments_dir) == "generations/000000000001"
    assert f"segments link to {target!r}" in caplog.text


def test_a_broken_link_the_store_is_too_busy_to_repair_exits_2_saying_what_to_do(
    tmp_path: Path,
) -> None:
    """While another reader holds the store, a broken ``segments`` link cannot be pointed
    back: ``query``, ``report`` and ``compact`` exit 2 naming the link and ``otel-llm compact``,
    with no traceback; once the reader is gone, ``compact`` points it back and every span reads."""
    store = _write(tmp_path / "store", calls=2)
    store.segments_dir.unlink()
    store.segments_dir.symlink_to("segments")
    with store.reading():
        for command in (
            ("query",),
            ("report", "-o", str(tmp_path / "report.html")),
            ("compact",),
        ):
            out = run_cli(*command, "--db", str(store.path), env=_cli_env())
            assert out.returncode == 2, (command, out.stderr)
            assert "has a segments link to 'segments'" in out.stderr
            assert "otel-llm compact --db" in out.stderr
            assert "Traceback" not in out.stderr
    fixed = run_cli("compact", "--db", str(store.path), env=_cli_env())
    assert fixed.returncode == 0, fixed.stderr
    assert os.readlink(store.segments_dir) == "generations/000000000001"
    assert _spans(store.path) == 2 * SPANS_A_CALL


def test_a_store_copied_without_its_segments_link_reads_every_span(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A copy made by a tool that leaves symbolic links out (``rsync -r``, rclone's default)
    has its generations but no ``segments`` link: the first reader points it at the newest
    whole generation, named in a warning, and reads every span (it read an empty store, "(no
    rows)"); while another reader holds the store, readers say what is missing instead."""
    store = _write(tmp_path / "store", calls=2, segments=2)
    store.segments_dir.unlink()
    with store.reading(), pytest.raises(NotAStore, match="has no segments link"):
        _spans(store.path)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        assert _spans(store.path) == 2 * SPANS_A_CALL
    assert os.readlink(store.segments_dir) == "generations/000000000001"
    assert "had no segments link" in caplog.text


# --- a path that is a named pipe ----------------------------------------------------------------


@pytest.mark.parametrize("command", ["query", "views", "compact", "report"])
def test_a_named_pipe_is_not_a_store_and_nothing_waits_on_it(tmp_path: Path, command: str) -> None:
    """``--db`` naming a FIFO nobody writes: every store command says it is a named pipe and
    exits 2 at once (opening it to read its first bytes blocked for ever)."""
    fifo = tmp_path / "spans"
    os.mkfifo(fifo)
    extra = ("-o", str(tmp_path / "report.html")) if command == "report" else ()
    out = run_cli(command, "--db", str(fifo), *extra, env=_cli_env(), timeout_s=20)
    assert out.returncode == 2, out.stderr
    assert f"{fifo} is a named pipe (FIFO), not an otel-llm store" in out.stderr
    assert "Traceback" not in out.stderr
    with pytest.raises(NotAStore, match="is a named pipe"):
        check_store(fifo)


# --- a generation with no segment ---------------------------------------------------------------


def _columns(path: Path) -> list[tuple[object, ...]]:
    with open_store(path) as conn:
        return conn.execute(
            "SELECT column_name, column_type FROM (DESCRIBE otel_traces)"
        ).fetchall()


def test_a_store_whose_segments_were_all_removed_reads_as_an_empty_one(tmp_path: Path) -> None:
    """Every segment deleted (the schema segment too): the store reads as a fresh one does --
    no rows, the same columns, ``(no rows)`` from ``otel-llm query`` -- and ``otel-llm
    compact``, like the next writer, seals the schema segment again."""
    fresh = SegmentStore(tmp_path / "fresh")
    fresh.create()
    store = _write(tmp_path / "store", calls=2, segments=2)
    for segment in store.segments():
        segment.path.unlink()
    assert _spans(store.path) == 0
    assert _columns(store.path) == _columns(fresh.path)
    out = run_cli("query", "--db", str(store.path), env=_cli_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("(no rows)") == 2
    assert run_cli("compact", "--db", str(store.path), env=_cli_env()).returncode == 0
    assert [s.path.name for s in store.segments()] == [SCHEMA_SEGMENT]
    _write(store.path, calls=1)
    assert _spans(store.path) == SPANS_A_CALL


# --- damage met while another reader holds the store --------------------------------------------


def _cut_short(segment: Path) -> None:
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) // 2])


def test_a_reader_meeting_damage_while_another_holds_the_store_reads_on_without_waiting(
    tmp_path: Path,
) -> None:
    """While a notebook keeps the store open, ``otel-llm query`` meeting a segment cut short
    neither waits for it nor fails: it reads the rest and names the segment; the first reader
    after the notebook closed moves it to quarantine."""
    store = _write(tmp_path / "store", calls=3, segments=3)
    with open_store(store.path) as held:
        bad = next(s.path for s in store.segments() if s.path.name != SCHEMA_SEGMENT)
        _cut_short(bad)
        out = run_cli(
            "query",
            "SELECT count(*) AS spans FROM otel_traces",
            "--format",
            "csv",
            "--db",
            str(store.path),
            env=_cli_env(),
            timeout_s=30,
        )
        assert held.execute("SELECT 1").fetchone() == (1,)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["spans", str(2 * SPANS_A_CALL)]
    assert bad.name in out.stderr
    assert "not moved to quarantine now" in out.stderr
    assert store.quarantined() == []
    assert _spans(store.path) == 2 * SPANS_A_CALL
    assert [p.name for p in store.quarantined()] == [bad.name]


def test_a_segment_left_out_is_named_once_and_moved_out_when_the_store_is_free(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A process that left a damaged segment out of its readers names it once however often it
    opens the store, and moves it to quarantine the first time it opens the store unheld."""
    store = _write(tmp_path / "store", calls=2, segments=2)
    bad = next(s.path for s in store.segments() if s.path.name != SCHEMA_SEGMENT)
    _cut_short(bad)
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        with store.reading():
            assert _spans(store.path) == SPANS_A_CALL
            assert _spans(store.path) == SPANS_A_CALL
        assert store.quarantined() == []
        assert _spans(store.path) == SPANS_A_CALL
    assert [p.name for p in store.quarantined()] == [bad.name]
    named = [r.getMessage() for r in caplog.records if bad.name in r.getMessage()]
    assert len(named) == 2, named  # left out, once; then moved to quarantine
    assert "reads the store without it" in named[0]
    assert "moved it to" in named[1]


# --- damage only a query meets, and damage only checksums find ----------------------------------


def _large_segment(store: SegmentStore) -> Path:
    """One segment of 6,000 spans standing alone (no merge takes it), the store's only one."""
    rows = pa.concat_tables(
        [pq.read_table(s.path).cast(arrow_schema()) for s in store.segments()] * 1000
    )
    for segment in store.segments():
        if segment.path.name != SCHEMA_SEGMENT:
            segment.path.unlink()
    return store.write(encode(rows))


def _damage_until(segment: Path, column: str, bits: int, wanted: Callable[[], bool]) -> None:
    """Flip ``bits`` at one place after another in ``column``'s pages of ``segment`` until
    ``wanted()`` holds of the damaged file (it always does within the column's bytes)."""
    original = segment.read_bytes()
    chunk = next(
        group.column(index)
        for group in [pq.ParquetFile(segment).metadata.row_group(0)]
        for index in range(group.num_columns)
        if group.column(index).path_in_schema == column
    )
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    for offset in range(start, start + chunk.total_compressed_size):
        data = bytearray(original)
        data[offset] ^= bits
        segment.write_bytes(bytes(data))
        if wanted():
            return
    raise AssertionError(f"no damage to {column} of {segment} did what the test needs")


def _fails_reading_pages(segment: Path) -> bool:
    """DuckDB reads the footer but fails on a page, with an error naming no SQL mistake."""
    with duckdb.connect() as conn:
        try:
            conn.execute(f"SELECT count(*) FROM read_parquet('{segment}')").fetchall()
        except duckdb.Error:
            return False
        try:
            conn.execute(f"SELECT * FROM read_parquet('{segment}')").fetchall()
        except duckdb.Error as exc:
            return type(exc) is duckdb.Error  # "Payload value bigger than allowed", "Out of buffer"
    return False


def test_a_page_damaged_in_a_segment_no_merge_takes_is_moved_out_by_the_query_that_meets_it(
    tmp_path: Path,
) -> None:
    """A damaged page of a large segment, which DuckDB meets only in the middle of a query
    with an error naming no file: ``otel-llm query`` verifies the segments' checksums, moves
    that one to quarantine with a note, says so, and answers from the rest."""
    store = _write(tmp_path / "store", calls=2)
    big = _large_segment(store)
    _write(store.path, calls=1)
    _damage_until(big, "SpanName", 0xFF, lambda: _fails_reading_pages(big))
    out = run_cli(
        "query",
        "SELECT count(*) AS spans FROM otel_traces WHERE SpanName IS NOT NULL",
        "--format",
        "csv",
        "--db",
        str(store.path),
        env=_cli_env(),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["spans", str(SPANS_A_CALL)]
    assert big.name in out.stderr
    assert [p.name for p in store.quarantined()] == [big.name]
    why = (store.quarantine_dir / f"{big.name}.why").read_text("utf-8")
    assert "cannot be read whole" in why


def test_open_store_sets_a_damaged_segment_aside_but_never_hides_a_mistake_in_the_sql(
    tmp_path: Path,
) -> None:
    """In Python, a query meeting a damaged page raises NotAStore naming the segment, set
    aside, and saying to run it again (which reads the rest); a query with a mistake in it
    raises DuckDB's own error, and nothing is moved."""
    store = _write(tmp_path / "store", calls=2)
    big = _large_segment(store)
    _write(store.path, calls=1)
    with open_store(store.path) as conn, pytest.raises(duckdb.BinderException):
        conn.execute("SELECT NoSuchColumn FROM otel_traces").fetchall()
    _damage_until(big, "SpanName", 0xFF, lambda: _fails_reading_pages(big))
    with (
        pytest.raises(NotAStore, match="run the query again") as raised,
        open_store(store.path) as conn,
    ):
        conn.execute("SELECT * FROM otel_traces").fetchall()
    assert big.name in str(raised.value)
    assert [p.name for p in store.quarantined()] == [big.name]
    assert _spans(store.path) == SPANS_A_CALL


def test_a_missing_file_of_the_query_s_own_reads_no_segment_s_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query's own ``read_parquet`` of a file that is not there is the query's mistake, not
    damage: DuckDB's error is raised as it is, and the store's pages are not read to look for
    a damaged segment (which reads the whole store)."""
    store = _write(tmp_path / "store", calls=1)
    verified: list[SegmentStore] = []
    damaged = SegmentStore.damaged

    def counted(self: SegmentStore, names: object = None) -> dict[str, str]:
        verified.append(self)
        return damaged(self)

    monkeypatch.setattr(SegmentStore, "damaged", counted)
    missing = tmp_path / "nope" / "x.parquet"
    with (  # the error leaves the query through open_store, as a CLI query's does
        pytest.raises(duckdb.IOException, match="No files found"),
        open_store(store.path) as conn,
    ):
        conn.execute(f"SELECT * FROM read_parquet('{missing}')").fetchall()
    assert verified == []
    assert store.quarantined() == []


def _sum_of_wall(path: Path) -> object:
    with duckdb.connect() as conn:
        conn.execute(reader_sql(path))
        row = conn.execute('SELECT sum("WallMs") FROM otel_traces').fetchone()
    assert row is not None
    return row[0]


def _decodes_other_than(path: Path, right: object) -> bool:
    try:
        return _sum_of_wall(path) != right
    except duckdb.Error:
        return False


def test_a_flipped_bit_that_still_decodes_is_found_by_compact_verify(tmp_path: Path) -> None:
    """One bit flipped in a segment's ``WallMs`` page: DuckDB reads wrong figures without an
    error, so no reader can tell; ``otel-llm compact --verify`` checks every page's checksum
    and moves the segment to quarantine, and the figures are right again (the rest's)."""
    store = _write(tmp_path / "store", calls=2)
    segment = next(s.path for s in store.segments() if s.path.name != SCHEMA_SEGMENT)
    _write(store.path, calls=1)
    right = _sum_of_wall(store.path)
    _damage_until(segment, "WallMs", 0x40, lambda: _decodes_other_than(store.path, right))
    assert run_cli("query", "--db", str(store.path), env=_cli_env()).returncode == 0
    assert store.quarantined() == []
    out = run_cli("compact", "--verify", "--db", str(store.path), env=_cli_env())
    assert out.returncode == 0, out.stderr
    assert "verified the page checksums of" in out.stdout
    assert f"quarantined 1 damaged segment (moved to {store.quarantine_dir}" in out.stdout
    assert segment.name in out.stdout
    assert [p.name for p in store.quarantined()] == [segment.name]
    assert _spans(store.path) == SPANS_A_CALL


def test_a_backslash_in_the_store_path_is_refused_by_views_and_query(tmp_path: Path) -> None:
    """DuckDB's glob reads ``\\`` as an escape: SQL ``otel-llm views`` printed for such a path
    found no file in a plain DuckDB. Like the other glob characters, it is refused, naming it."""
    path = tmp_path / "back\\slash"
    SegmentStore(path).create()
    for command in ("views", "query"):
        result = run_cli(command, "--db", str(path))
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "has \\ in its path" in result.stderr
