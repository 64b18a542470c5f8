"""Opening a store: the segment directory of today, or a single DuckDB file of earlier versions.

Readers get a DuckDB connection on which ``otel_traces`` and the views (``llm_attempts``,
``llm_calls``, ``llm_attempts_at``) exist, whichever kind the path is. A segment store is read
by an in-memory DuckDB, so any number of readers and writers share it without a lock: Grafana's
DuckDB data source over the segments' glob (:func:`reader_sql`, its ``initSql``),
:func:`open_store` over the segments sealed when it opens, one list per stored schema
(:func:`_snapshot_sql`). A single-file store is read as before, and migrated into a segment
directory the first time a writer opens it (:func:`prepare_for_writing`).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import logging
import os
import stat
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Final, TypeVar

import duckdb

from otel_llm._defaults import DEFAULTS
from otel_llm._errors import NotAStore, OtelLLMError
from otel_llm._show._sql._schema import ALL_COLUMNS, TABLE, VIEWS, backfilled, migrate
from otel_llm._show._store._columns import SegmentColumns, arrow_schema
from otel_llm._show._store._footer import stored_arrow_schema
from otel_llm._show._store._glob import GLOB_CHARACTERS, glob_problem
from otel_llm._show._store._segments import (
    PENDING,
    SCHEMA_SEGMENT,
    Segment,
    SegmentStore,
    encode,
    is_store,
    remove_tree,
)

logger = logging.getLogger("otel_llm")
T = TypeVar("T")

NO_EXTENSIONS: Final = {"autoload_known_extensions": False, "autoinstall_known_extensions": False}
"""Opening a store never loads or downloads a DuckDB extension (DuckDB would, for a SQLite
file given as the store)."""

SEGMENT_READER: Final = "SET parquet_metadata_cache = true"
"""A segment store's reader keeps each segment's footer once read: segments are sealed files
that never change in place, and the next query spends its time on the rows, not the footers."""

STORE_HINT = "write spans with otel_llm.init(db_path=...) or run `otel-llm demo --db PATH`"
"""How to get a store, for every message that says a path is not one."""
_DUCKDB_MAGIC = b"DUCK"
"""Bytes 8–11 of every DuckDB database file."""
_SQLITE_MAGIC = b"SQLite format 3\x00"
_NO_SEGMENTS: Final = "otel_llm_no_segments"
"""The empty table of the store's columns a store without a segment is read as."""
LEGACY_SUFFIX: Final = ".v1.duckdb"
"""A migrated single-file store is kept beside the new directory under this suffix."""


def connect(path: Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open a single-file store, writing the storage format Grafana's embedded DuckDB reads."""
    path = path.absolute()  # DuckDB reads a leading ``~`` as the home directory; Python does not
    if read_only:
        return duckdb.connect(str(path), read_only=True, config=dict(NO_EXTENSIONS))
    config: dict[str, str | bool | int | float | list[str]] = {
        **NO_EXTENSIONS,
        "storage_compatibility_version": DEFAULTS.duckdb_storage_version,
    }
    return duckdb.connect(str(path), config=config)


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def reader_sql(path: str | os.PathLike[str]) -> str:
    """The SQL that makes an in-memory DuckDB read the segment store at ``path``: the
    ``otel_traces`` view over its segments, then the views. Grafana's ``initSql``."""
    glob = SegmentStore(Path(path).absolute()).glob
    return (
        f"CREATE OR REPLACE VIEW {TABLE} AS SELECT * FROM "
        f"read_parquet({_sql_text(glob)}, union_by_name = true);\n{VIEWS}"
    )


def _listed(segments: list[Segment]) -> str:
    return "[" + ", ".join(_sql_text(_read_as(segment.path)) for segment in segments) + "]"


def _read_as(path: Path) -> str:
    """The file name DuckDB is given for the segment at ``path``. A pending segment may be
    given its final name while the store is read (the only rename that does not wait for
    readers): a pattern matching either name, of which exactly one exists at any moment.
    Always absolute: DuckDB reads a relative name starting with ``~`` from the home directory,
    where Python and the writers read it from the working directory."""
    path = path.absolute()
    if path.name.startswith(PENDING):
        return str(path.with_name("*" + path.name.removeprefix(PENDING)))
    return str(path)


def _snapshot_sql(segments: list[Segment]) -> str:
    """The ``otel_traces`` view over ``segments``: those that stored the same Arrow schema in
    their footers read as one plain list, largest first; those that stored none unioned by name;
    and the lists united by name.

    Unioning by name reads every segment's footer each time a query refers to the table
    (about 1 ms a segment a reference, three references a canned query); a plain list binds its
    first file only (hence one list per schema, as reading a file without a column the first
    one has fails), and DuckDB takes that file's rows as its estimate of each file's (hence the
    largest first). United by name, segments of an older and a newer otel-llm, or of the
    Collector's writer and Python's, read as the union by name reads them."""
    lists: dict[bytes | None, list[Segment]] = {}
    for segment in segments:
        lists.setdefault(stored_arrow_schema(segment.path), []).append(segment)
    parts = []
    for schema, listed in lists.items():
        listed.sort(key=lambda segment: segment.size, reverse=True)
        parts.append(
            f"SELECT * FROM read_parquet({_listed(listed)}"
            f"{', union_by_name = true' if schema is None else ''})"
        )
    united = "\nUNION ALL BY NAME\n".join(parts)
    return f"CREATE OR REPLACE VIEW {TABLE} AS\n{united}"


def _read_snapshot(
    conn: duckdb.DuckDBPyConnection, store: SegmentStore, left_out: Collection[str] = ()
) -> None:
    """Make ``conn`` read the segments of ``store`` sealed now (the store is held from
    merging: :func:`_snapshot_sql`), and the views over them. Every segment's footer is read
    here, once (DuckDB keeps them for the queries), so a damaged one is met now and moved
    aside, not in the middle of a query: a plain list binds only its first file. The segments
    named in ``left_out`` are not read."""
    segments = [s for s in store.segments() if s.path.name not in left_out]
    if not segments:
        # every segment deleted or moved aside: an empty store, as a fresh one reads (the next
        # writer, or `otel-llm compact`, seals the empty schema segment again)
        conn.register(_NO_SEGMENTS, arrow_schema().empty_table())
        conn.execute(f"CREATE OR REPLACE VIEW {TABLE} AS SELECT * FROM {_NO_SEGMENTS};\n{VIEWS}")
        return
    if any(GLOB_CHARACTERS.intersection(s.path.name) for s in segments):
        # a name DuckDB would read as a pattern (no writer of ours makes one) is read by the
        # glob, as it always was
        conn.execute(reader_sql(store.path))
        return
    conn.execute(f"{_snapshot_sql(segments)};\n{VIEWS}")
    conn.execute(f"SELECT count(*) FROM {TABLE}").fetchall()  # every footer: rows are counted


def _check_glob_safe(path: Path) -> None:
    problem = glob_problem(path)
    if problem is not None:
        raise NotAStore(path, problem)


def check_store(path: Path) -> None:
    """Raise :class:`NotAStore` unless ``path`` is a segment store or a DuckDB database file."""
    if not path.exists():
        raise NotAStore(path, f"does not exist ({STORE_HINT})")
    if path.is_dir():
        _check_glob_safe(path)
        if not is_store(path):
            raise NotAStore(path, f"is a directory but not an otel-llm store ({STORE_HINT})")
        return
    try:
        # without waiting: opening a named pipe nobody writes would block until one does
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise NotAStore(path, f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    with os.fdopen(fd, "rb") as file:
        kind = _not_a_file(os.fstat(fd).st_mode)
        if kind is not None:
            raise NotAStore(path, f"is {kind}, not an otel-llm store ({STORE_HINT})")
        try:
            head = file.read(16)
        except OSError as exc:
            raise NotAStore(path, f"cannot be read: {exc.strerror or type(exc).__name__}") from None
    if head.startswith(_SQLITE_MAGIC):
        raise NotAStore(path, f"is a SQLite database, not an otel-llm store ({STORE_HINT})")
    if head[8:12] != _DUCKDB_MAGIC:
        raise NotAStore(path, f"is not a DuckDB database, so not an otel-llm store ({STORE_HINT})")


def _not_a_file(mode: int) -> str | None:
    """What a path of this ``st_mode`` is when it is no regular file (only those are read)."""
    for test, kind in (
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) else "not a regular file"


def _check_tables(conn: duckdb.DuckDBPyConnection, path: Path) -> None:
    names = {
        name
        for (name,) in conn.execute(
            "SELECT table_name FROM duckdb_tables() UNION ALL SELECT view_name FROM duckdb_views()"
        ).fetchall()
    }
    if TABLE not in names:
        raise NotAStore(
            path,
            f"is a DuckDB database but not an otel-llm store: it has no {TABLE} table "
            f"({STORE_HINT})",
        )


_LEGACY: Final = "otel_llm_single_file"
"""The name a single-file store is attached under in its reader."""


@contextlib.contextmanager
def _single_file(path: Path, *, views: bool) -> Iterator[duckdb.DuckDBPyConnection]:
    """A reader of a single-file store (an earlier version's). Without ``views`` the file as
    it is, its own table and views (what SQL of the user's was written against). With them
    (the canned queries): its table read with this version's columns — those it predates are
    NULL, as in a segment written before them — and this version's views over it, whatever
    views the file holds (one written before the call rows carried their winner has no
    ``llm_winners``)."""
    with connect(path, read_only=True) as conn:
        _check_tables(conn, path)
        if not views:
            yield conn
            return
    with duckdb.connect(":memory:", config=dict(NO_EXTENSIONS)) as conn:
        conn.execute(f"ATTACH {_sql_text(str(path.absolute()))} AS {_LEGACY} (READ_ONLY)")
        conn.register(_NO_SEGMENTS, arrow_schema().empty_table())
        conn.execute(
            f"CREATE VIEW {TABLE} AS SELECT * FROM {_NO_SEGMENTS} "
            f"UNION ALL BY NAME {_legacy_rows(conn)};\n{VIEWS}"
        )
        yield conn


def _legacy_rows(conn: duckdb.DuckDBPyConnection) -> str:
    """The attached single-file store's rows, each column it predates filled from the row's
    attributes and events as migrating the file would fill it (NULL where nothing can)."""
    (names,) = conn.execute(
        "SELECT list(column_name) FROM duckdb_columns() "
        f"WHERE database_name = '{_LEGACY}' AND table_name = '{TABLE}'"
    ).fetchone() or ([],)
    present = set(names)
    filled = [
        f'{value} AS "{name}"'
        for name in ALL_COLUMNS
        if name not in present and (value := backfilled(name)) is not None
    ]
    return f"SELECT {', '.join(['*', *filled])} FROM {_LEGACY}.{TABLE}"


@contextlib.contextmanager
def open_store(
    path: str | os.PathLike[str], *, views: bool = True
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only DuckDB connection to the store at ``path``, with the ``otel_traces`` table
    and the views (``llm_calls``, ``llm_attempts``, ``llm_winners`` and their ``_at(T)``), as a
    context manager. It reads the segments sealed when it opened, and while it is open no
    writer merges segments, so every query on it sees each of those spans exactly once; writers
    go on writing (open the store again to read what they wrote since).

    Raises :class:`~otel_llm.NotAStore` when ``path`` is not a store, or has a segment DuckDB
    cannot read even after the damaged ones were set aside; and when a query on it failed on a
    damaged segment, which is then set aside (open the store again to read the rest). A damaged
    segment is set aside by moving it to quarantine, or, while another otel-llm process reads
    the store, by leaving it out of this process's readers (never waiting for that one)."""
    path = Path(path)
    check_store(path)
    if not path.is_dir():
        with _single_file(path, views=views) as conn:
            yield conn
        return
    store = SegmentStore(path)
    store.repair()  # a merge cut short by a crash would show its spans twice
    store.check_link()  # a link edited by hand that repair could not point back
    _quarantine_left_out(store)
    with duckdb.connect(":memory:", config=dict(NO_EXTENSIONS)) as conn:
        conn.execute(SEGMENT_READER)
        for attempt in range(2):
            opening = True
            with store.reading():
                try:
                    _read_snapshot(conn, store, _left_out_of(store))
                except duckdb.Error as exc:  # a segment damaged outside otel-llm
                    failed = exc
                else:
                    opening = False
                    try:
                        yield conn
                        return
                    except duckdb.Error as exc:
                        if not _may_be_damage(exc, store):
                            raise
                        failed = exc
            problem = (str(failed).splitlines() or [type(failed).__name__])[0]
            set_aside = _set_aside(store)
            if opening and not attempt and set_aside:
                continue  # read the rest
            if opening:
                raise NotAStore(
                    path,
                    f"has a segment DuckDB cannot read ({problem}); move that file out of "
                    f"{store.segments_dir} to read the rest",
                )
            if not set_aside:
                raise failed
            raise NotAStore(
                path,
                f"had a damaged segment ({', '.join(set_aside)}) a query met ({problem}); it "
                "is set aside (named in a warning): run the query again to read the rest",
            ) from failed


_DAMAGE_SIGNS: Final = (
    "corrupt",
    "decompress",
    "out of buffer",
    "payload value",
    "tprotocol",
    "invalid data",
    "checksum",
    "utf8",
    "don't know what type",
)
"""Words of DuckDB's I/O and invalid-input errors that may come from a damaged segment."""

_left_out: dict[tuple[str, str], str] = {}
"""(store, segment name): why -- damaged segments this process found but could not move to
quarantine (another otel-llm process was reading the store): its readers leave them out."""
_damage_met: dict[str, int] = {}
"""Store: how many times this process set damaged segments of it aside."""


def _store_key(path: str | os.PathLike[str]) -> str:
    return str(Path(path).absolute())


_NOT_DAMAGE: Final = ("no files found",)
"""Words of DuckDB's I/O errors that are never a damaged segment (a path of the query's own)."""


def _may_be_damage(exc: duckdb.Error, store: SegmentStore) -> bool:
    """Whether a query's error may come from a damaged segment — and so is worth reading every
    segment's pages to find it: DuckDB's plain errors (its Parquet reader's buffer and Thrift
    errors, which name no file) and its I/O and invalid-input errors about corrupt data, that
    name no file or one of the store's. Never a mistake in the SQL (parser, binder, catalog,
    conversion errors) nor an error about a file of the query's own (``read_parquet`` of a
    missing file): those are raised as they are, and so is any error for which no segment turns
    out to be damaged."""
    if type(exc) is duckdb.Error:
        return True
    if not isinstance(exc, duckdb.IOException | duckdb.InvalidInputException):
        return False
    text = str(exc)
    lowered = text.lower()
    if any(sign in lowered for sign in _NOT_DAMAGE):
        return False
    if not any(sign in lowered for sign in _DAMAGE_SIGNS):
        return False
    return "/" not in text or str(store.path.absolute()) in text


def _left_out_of(store: SegmentStore) -> set[str]:
    key = _store_key(store.path)
    return {name for (held, name) in _left_out if held == key}


def _set_aside(store: SegmentStore) -> list[str]:
    """Verify every segment's page checksums; move the damaged ones to quarantine (named in a
    warning each) or, when another otel-llm process is reading the store, leave them out of
    this process's readers (named in a warning once). The names set aside."""
    try:
        damaged = store.damaged()
    except (OSError, NotAStore):
        return []
    if not damaged:
        return []
    key = _store_key(store.path)
    _damage_met[key] = _damage_met.get(key, 0) + 1
    try:
        moved = store.quarantine(damaged, wait=False)
    except OSError:  # a store this process may not change
        moved = None
    if moved is None:
        for name, why in damaged.items():
            if (key, name) not in _left_out:
                _left_out[(key, name)] = why
                logger.warning(
                    "otel-llm: segment %s of %s is damaged (%s); this process reads the store "
                    "without it. Another otel-llm process is reading the store, so it is not "
                    "moved to quarantine now: the next reader that meets it and can will, or "
                    "`otel-llm compact --verify`",
                    name,
                    store.path,
                    why,
                )
    return sorted(damaged)


def _quarantine_left_out(store: SegmentStore) -> None:
    """Move the segments this process left out of its readers to quarantine, if it now can."""
    key = _store_key(store.path)
    left_out = {name: why for (held, name), why in _left_out.items() if held == key}
    if not left_out:
        return
    try:
        moved = store.quarantine(left_out, wait=False)
    except (OSError, NotAStore):
        return
    if moved is not None:
        for name in left_out:
            del _left_out[(key, name)]


def read_again_after_damage(path: str | os.PathLike[str], read: Callable[[], T]) -> T:
    """``read()`` (which opens the store at ``path``), run once more when it failed on a
    damaged segment that was then set aside: the second run reads the rest."""
    key = _store_key(path)
    before = _damage_met.get(key, 0)
    try:
        return read()
    except (OtelLLMError, duckdb.Error):
        if _damage_met.get(key, 0) == before:
            raise
    return read()


# --- writing ------------------------------------------------------------------------------------


def prepare_for_writing(path: Path) -> SegmentStore:
    """The segment store at ``path``, created if missing and migrated from a single-file store.

    Raises :class:`NotAStore` when ``path`` is something else (a file that is not a DuckDB
    store, a directory with other content); DuckDB and OS errors of a migration propagate."""
    _check_glob_safe(path)
    if path.is_file():
        migrate_legacy(path)
    store = SegmentStore(path)
    if not is_store(path) and (foreign := store.foreign()):
        raise NotAStore(
            path,
            f"is a directory with other files in it ({', '.join(foreign[:3])}), "
            "not an otel-llm store",
        )
    store.create()
    store.repair()
    return store


def migrate_legacy(path: Path) -> int:
    """Turn the single-file store at ``path`` into a segment directory at the same path; the
    number of spans moved. The old file is kept as ``<path>.v1.duckdb``; spans an older
    version spilled beside it are moved too. Safe when several processes try at once."""
    check_store(path)
    lock_path = path.with_name(f".{path.name}.migrate.lock")
    with lock_path.open("a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        for left in path.parent.glob(f".{glob.escape(path.name)}.migrating-*"):
            remove_tree(left)  # what a migration killed midway left (none runs: we hold the lock)
        if not path.is_file():
            return 0  # another process migrated it while this one waited
        staging = path.with_name(f".{path.name}.migrating-{os.getpid()}")
        store = SegmentStore(staging)
        try:
            store.create()
            moved = _move_rows(path, store) + _move_spills(path, store)
        except BaseException:
            remove_tree(staging)  # the single file is untouched: the next attempt starts over
            raise
        legacy = path.with_name(path.name + LEGACY_SUFFIX)
        os.replace(path, legacy)
        try:
            os.rename(staging, path)
        except OSError:  # a writer created the directory in between: join it
            target = SegmentStore(path)
            target.create()
            for segment in store.segments():
                if segment.path.name != SCHEMA_SEGMENT:
                    os.replace(segment.path, target.segments_dir / segment.path.name)
            remove_tree(staging)
    logger.warning(
        "otel-llm: %s was a single-file store; its %d spans now live in the segment store at "
        "the same path (the old file is kept as %s)",
        path,
        moved,
        legacy,
    )
    return moved


def _move_rows(path: Path, store: SegmentStore) -> int:
    with connect(path) as conn:
        _check_tables(conn, path)
        migrate(conn)
        columns = ", ".join(f'"{name}"' for name in ALL_COLUMNS)
        relation = conn.cursor().sql(f"SELECT {columns} FROM {TABLE}")
        # DuckDB 2 renamed fetch_arrow_reader to to_arrow_reader
        batches = getattr(relation, "to_arrow_reader", None) or relation.fetch_arrow_reader
        reader = batches(DEFAULTS.segment_merge_rows)
        schema = arrow_schema()
        import pyarrow as pa

        moved = 0
        for index, batch in enumerate(reader):
            table = pa.Table.from_batches([batch]).cast(schema)
            store.write(encode(table), name=f"{1 + index:020d}-migrated.parquet")
            moved += table.num_rows
        return moved


def _move_spills(path: Path, store: SegmentStore) -> int:
    spill_dir = path.with_name(path.name + ".spill")
    if not spill_dir.is_dir():
        return 0
    columns = SegmentColumns()
    files = sorted(spill_dir.glob("*.jsonl"))
    for spill in files:
        for line in spill.read_text("utf-8").splitlines():
            with contextlib.suppress(ValueError):
                row = json.loads(line)
                if isinstance(row, dict):
                    columns.append_row(row)
    if len(columns):
        store.write(encode(columns.table()), name="00000000000000000000-spilled.parquet")
    for spill in files:
        spill.unlink()
    with contextlib.suppress(OSError):
        spill_dir.rmdir()
    return len(columns)
