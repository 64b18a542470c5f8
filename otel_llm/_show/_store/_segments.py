"""The store on disk: sealed Parquet segments in the ``otel_traces`` layout, in generations.

``segments`` is a symbolic link to the current *generation*, a directory under
``generations/`` that holds the store's segment files (hard links). Readers glob
``segments/*.parquet``; that one directory listing is always one whole generation.

- **Writing** never waits on anyone: a segment is written to ``tmp/``, flushed to disk, and
  linked into the current generation under its final name in one atomic rename. Should a merge
  switch generations meanwhile, the writer links it into the new one too (unless that merge took
  it in), and the merger, once it switched, carries over what appeared in the old generation
  after it looked.
- **Merging** (:meth:`SegmentStore.compact`, by whichever process gets the compaction lock)
  writes the merged segment, builds the next generation beside the current one (every segment
  but the merged inputs, plus the merged one), and switches the link in one atomic rename. A
  reader that globbed the old generation never sees the merged segment, one that globbed the
  new one never sees its inputs: no reader ever counts a span twice, during a merge or after a
  crash anywhere in it, whether or not it takes our lock and whether or not an otel-llm process
  is left running. A reader that listed the old generation and opens a merged-away input after
  the switch gets "cannot open file" for that one query (the next query sees the new
  generation); our own readers hold the lock shared (:meth:`SegmentStore.reading`) so no merge
  runs under them at all.
- **Damage**: a segment that cannot be read whole (bytes flipped, cut short: every page carries
  a checksum) is moved aside into ``quarantine/`` with a note of why, named once in a warning,
  and the store reads on without it.
- **Orphans**: temporaries of processes that died (SIGKILL) and generations nobody uses any more
  are removed by the next process that merges or opens the store.

Names never grow: a written segment is ``<ns>-<pid>-<token>-<n>.parquet``, a merged one
``<oldest input's ns>-m-<ns>-<token>.parquet``. Stores of the first layout (a plain
``segments/`` directory) are migrated in place the first time a writer opens them.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import itertools
import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm._errors import ConfigurationError, NotAStore
from otel_llm._show._sql._table import ROLE_COLUMN
from otel_llm._show._store._columns import SegmentColumns, arrow_schema, statistics_columns
from otel_llm._show._store._glob import GLOB_CHARACTERS
from otel_llm._show._store._merge_plan import Candidate, batch_size, choose, tier

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

logger = logging.getLogger("otel_llm")

LAYOUT: Final = 2
"""Version of the directory layout, recorded in :data:`MARKER` (1: a plain ``segments/``)."""
MARKER: Final = "otel-llm-store.json"
"""The file that makes a directory an otel-llm store."""
SEGMENTS: Final = "segments"
"""The link to the current generation (readers glob ``segments/*.parquet``)."""
GENERATIONS: Final = "generations"
"""Holds the generation directories, each named by its number."""
TMP: Final = "tmp"
"""Where segments are written before they are linked into a generation."""
QUARANTINE: Final = "quarantine"
"""Damaged segments moved out of the store, each beside a ``<name>.why`` note."""
WHY: Final = ".why"
CONSUMED: Final = ".consumed"
"""In a generation made by a merge: which segments of the one before it left out (JSON)."""
CARRIED: Final = ".carried"
"""In a generation: it is whole (made current, and what came into the one before it meanwhile
carried over). A current generation without it is one a merger was killed in."""
SCHEMA_SEGMENT: Final = "00000000000000000000-schema.parquet"
"""The empty segment every store starts with: the glob always matches, the schema is known."""
LOCK: Final = ".compaction.lock"
QUEUE_LOCK: Final = ".compaction.queue"
"""Held by whoever waits for :data:`LOCK`: a merger that finds it held gives way between two
merges, so a reader never waits for more than the one merge under way."""
PUBLISH_LOCK: Final = ".publish.lock"
PENDING: Final = "pending-"
"""Prefix of a segment whose source may still be ingested again (the Collector's spool file
is not deleted yet): readers read it, compaction leaves it alone — so writing it again under
the same name replaces it, never adds its spans twice — and :meth:`SegmentStore.finalize`
gives it its final name."""
SMALL_SEGMENT_ROWS: Final = 256
"""Segments of fewer rows are written plainly (snappy, no dictionaries, no statistics): that
halves the fixed cost of a write, and compaction re-encodes them compactly later."""
_GENERATION_DIGITS: Final = 12
_TOKEN: Final = secrets.token_hex(4)
"""Names apart the files of processes that share a pid (containers on one volume)."""
_sequence = itertools.count()
_sequence_lock = threading.Lock()
_TEMPORARY = re.compile(r"\.(?P<pid>\d+)\.(?:(?P<token>[0-9a-f]{8})\.)?\d+\.tmp$")
"""A temporary's name ends in ``.<pid>[.<token>].<thread>.tmp`` (the token since layout 2)."""
_LEGACY_DIR = ".segments.v1."
"""Prefix of a first-layout ``segments/`` directory while it is being migrated."""


def encode(table: pa.Table) -> bytes:
    """``table`` as the bytes of one Parquet file (one row group, a checksum on every page)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    rows = max(1, table.num_rows)
    if rows < SMALL_SEGMENT_ROWS:
        pq.write_table(
            table,
            sink,
            compression="snappy",
            use_dictionary=False,
            write_statistics=False,
            row_group_size=rows,
            write_page_checksum=True,
        )
    else:
        pq.write_table(
            table,
            sink,
            compression="zstd",
            row_group_size=rows,
            write_page_checksum=True,
            write_statistics=statistics_columns(),
        )
    return bytes(sink.getvalue())


def encode_rows(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Rows as :func:`otel_llm._show._store._rows.span_row` returns them, as one segment's bytes."""
    columns = SegmentColumns()
    for row in rows:
        columns.append_row(row)
    return encode(columns.table())


def is_store(path: Path) -> bool:
    """True when ``path`` is a segment store directory."""
    return (path / MARKER).is_file()


def _temporary_name(name: str) -> str:
    return f".{name}.{os.getpid()}.{_TOKEN}.{threading.get_ident()}.tmp"


def _generation_name(number: int) -> str:
    return f"{number:0{_GENERATION_DIGITS}d}"


@dataclass(frozen=True, slots=True)
class Segment:
    """One sealed segment file."""

    path: Path
    size: int


class SegmentStore:
    """A store directory: writes sealed segments, lists them, merges small ones."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        generation_keep_s: float = DEFAULTS.generation_keep_s,
    ) -> None:
        self.path = Path(path)
        self._keep_s = generation_keep_s
        """A superseded generation stays this long: a reader may still be listing it."""
        self.segments_dir = self.path / SEGMENTS
        self._schemas: dict[tuple[str, int], bool] = {}
        """(name, inode) -> has this version's schema: read once per file, not every merge."""

    @property
    def glob(self) -> str:
        """What readers scan: every sealed segment of the current generation."""
        return str(self.segments_dir / "*.parquet")

    @property
    def quarantine_dir(self) -> Path:
        """Where damaged segments are moved."""
        return self.path / QUARANTINE

    # --- making and migrating -------------------------------------------------------------

    def create(self) -> None:
        """Make ``path`` a store, or migrate a store of the first layout (idempotent; safe when
        several processes do it at once: the marker comes first, so a second process never
        sees a half-made store as foreign)."""
        self.path.mkdir(parents=True, exist_ok=True)
        marker = self.path / MARKER
        if not marker.exists():
            self._write_marker()
        for lock in (LOCK, QUEUE_LOCK, PUBLISH_LOCK):
            (self.path / lock).touch(exist_ok=True)
        (self.path / TMP).mkdir(exist_ok=True)
        (self.path / GENERATIONS).mkdir(exist_ok=True)
        link = self.segments_dir
        if link.is_dir() and not link.is_symlink():
            self._migrate_first_layout()
        elif not link.is_symlink():
            with self._lock(shared=False, wait=True):
                if not link.is_symlink():
                    self._start_generations()
        elif self.link_problem() is not None:
            self.repair()
            self.check_link()
        if not (self.segments_dir / SCHEMA_SEGMENT).exists():
            self._seal(encode(SegmentColumns().table()), SCHEMA_SEGMENT)

    def _write_marker(self) -> None:
        text = json.dumps({"layout": LAYOUT, "format": "otel_traces parquet segments"})
        tmp = self.path / f".{MARKER}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(text + "\n", encoding="utf-8")
        tmp.replace(self.path / MARKER)

    def _start_generations(self) -> None:
        """Point ``segments`` at the newest whole generation, or a new first one (caller holds
        the exclusive lock; a crash may have left the link missing mid-migration)."""
        whole = [n for n in self._generation_numbers() if (self._dir(n) / CARRIED).exists()]
        number = max(whole, default=1)
        self._dir(number).mkdir(parents=True, exist_ok=True)
        if not whole:
            _write_json(self._dir(number) / CONSUMED, {"merged": None, "inputs": []})
        self._switch(number)
        (self._dir(number) / CARRIED).touch()

    def _migrate_first_layout(self) -> None:
        """Turn a plain ``segments/`` directory into the first generation, in place (readers
        and writers of the earlier version keep working through the link)."""
        with self._lock(shared=False, wait=True):
            old = self.segments_dir
            if old.is_symlink() or not old.is_dir():
                return  # another process migrated it while this one waited
            _finish_first_layout_merges(old)
            number = max(self._generation_numbers(), default=0) + 1
            target = self._dir(number)
            target.mkdir(parents=True)
            for path in old.glob("*.parquet"):
                with contextlib.suppress(FileNotFoundError):
                    os.link(path, target / path.name)
            _write_json(target / CONSUMED, {"merged": None, "inputs": []})
            aside = self.path / f"{_LEGACY_DIR}{os.getpid()}.{_TOKEN}"
            os.rename(old, aside)
            os.symlink(f"{GENERATIONS}/{_generation_name(number)}", old)
            _fsync_dir(self.path)
            self._adopt_first_layout_leftovers()
            (target / CARRIED).touch()
            self._write_marker()
        logger.info("otel-llm: %s now keeps its segments in generations", self.path)

    def _adopt_first_layout_leftovers(self) -> None:
        """Segments a writer of the first layout sealed into a ``segments/`` directory after
        it was linked into the first generation are linked in too; then the directory goes."""
        current = self._current()
        for aside in self.path.glob(f"{_LEGACY_DIR}*"):
            present = {p.name for p in self._dir(current).glob("*.parquet")}
            for path in aside.glob("*.parquet"):
                if path.name not in present:
                    self._link_into(current, path, path.name)
            remove_tree(aside)

    def foreign(self) -> list[str]:
        """Names in the directory that are not a store's (empty for a store, or a directory
        a store is being made in)."""
        if not self.path.is_dir():
            return []
        ours = {MARKER, SEGMENTS, LOCK, QUEUE_LOCK, PUBLISH_LOCK, TMP, GENERATIONS, QUARANTINE}
        return sorted(
            entry.name
            for entry in self.path.iterdir()
            if entry.name not in ours
            and not entry.name.startswith((f".{MARKER}.", f".{SEGMENTS}.", _LEGACY_DIR))
        )

    # --- writing -----------------------------------------------------------------------------

    def write(self, data: bytes | Sequence[Mapping[str, Any]], *, name: str | None = None) -> Path:
        """Seal one segment: ``data`` is a segment's bytes (:func:`encode`) or rows. A given
        ``name`` makes writing the same data again replace the segment, not add a second one;
        one that is no plain ``*.parquet`` file name, or holds a character DuckDB reads as a
        file pattern (readers list segments by name: one with a backslash would go unread), is
        a :class:`ConfigurationError` naming it."""
        if name is None:
            with _sequence_lock:
                sequence = next(_sequence)
            name = f"{time.time_ns():020d}-{os.getpid()}-{_TOKEN}-{sequence:06d}.parquet"
        elif not name.endswith(".parquet") or "/" in name or name.startswith("."):
            raise ConfigurationError(
                "name", f"a segment name ends in .parquet and is a plain file name: {name!r}"
            )
        elif pattern := sorted(GLOB_CHARACTERS.intersection(name)):
            raise ConfigurationError(
                "name",
                f"{name!r} has {' '.join(pattern)} in it, which DuckDB reads as a file pattern: "
                "a segment name has none of *?[]{}\\",
            )
        if not isinstance(data, bytes):
            data = encode_rows(data)
        return self._seal(data, name)

    def _seal(self, data: bytes, name: str) -> Path:
        with self._sealing(name) as tmp:
            tmp.write_bytes(data)
        return self.segments_dir / name

    @contextlib.contextmanager
    def _sealing(self, name: str) -> Iterator[Path]:
        """A temporary file to write segment ``name`` into; once written it is flushed to disk
        and linked into the current generation, and on any failure removed (nothing
        half-written is ever seen)."""
        tmp = self.path / TMP / _temporary_name(name)
        try:
            yield tmp
            with tmp.open("rb") as handle:
                os.fsync(handle.fileno())
            self._publish(tmp, name)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)

    def _publish(self, source: Path, name: str) -> None:
        """Link ``source`` into the current generation as ``name``; again into the next one
        when a merge switched generations meanwhile (unless that merge took ``name`` in)."""
        with self._publishing():
            self._publish_locked(source, name)

    def _publish_locked(self, source: Path, name: str) -> None:
        number = self._current()
        while True:
            try:
                self._link_into(number, source, name)
            except FileNotFoundError:
                # the generation was removed (this writer was very late): the current one takes
                # it; anything else (the source or the current generation gone) is an error
                now = self._current()
                if now == number or not source.exists():
                    raise
                number = now
                continue
            now = self._current()
            if now == number or self._consumed_since(number, now, name):
                return
            number = now

    @contextlib.contextmanager
    def _publishing(self, *, switch: bool = False) -> Iterator[None]:
        """The publish lock: shared by writers while they link a segment in and look at the
        link again, exclusive for the instant a merger carries the last new segments over and
        switches generations. So no segment is ever visible in one generation and missing from
        the next (a writer waits at most for that carry-over and one rename)."""
        try:
            handle = (self.path / PUBLISH_LOCK).open("a+b")
        except OSError:
            yield  # a store of a version without it, or a read-only one: the redo covers
            return
        with handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX if switch else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _link_into(self, number: int, source: Path, name: str) -> None:
        """``source`` appears as ``name`` in generation ``number`` in one atomic rename."""
        directory = self._dir(number)
        with contextlib.suppress(FileNotFoundError):
            if (directory / name).stat().st_ino == source.stat().st_ino:
                return  # there already (a carry-over and the writer both did it)
        hidden = directory / _temporary_name(name)
        os.link(source, hidden)
        try:
            os.replace(hidden, directory / name)
        finally:  # a rename onto another link of the same file leaves the source in place
            with contextlib.suppress(OSError):
                hidden.unlink()

    def _consumed_since(self, number: int, now: int, name: str) -> bool:
        """Whether a merge between generations ``number`` and ``now`` took ``name`` in."""
        for later in range(number + 1, now + 1):
            consumed = _read_json(self._dir(later) / CONSUMED)
            if isinstance(consumed, dict) and name in consumed.get("inputs", ()):
                return True
        return False

    def finalize(self, name: str) -> None:
        """Give the pending segment ``PENDING + name`` its final name (idempotent)."""
        with self._publishing():
            self._finalize_locked(name)

    def _finalize_locked(self, name: str) -> None:
        number = self._current()
        while True:
            directory = self._dir(number)
            try:
                os.replace(directory / (PENDING + name), directory / name)
            except FileNotFoundError:
                if not (directory / name).exists() and not self._taken(number, name):
                    raise
            now = self._current()
            if now == number or self._consumed_since(number, now, name):
                return
            number = now

    def _taken(self, number: int, name: str) -> bool:
        consumed = _read_json(self._dir(number) / CONSUMED)
        return isinstance(consumed, dict) and name in consumed.get("inputs", ())

    # --- reading -------------------------------------------------------------------------------

    def pending(self) -> list[str]:
        """The final names of the pending segments."""
        return sorted(p.name.removeprefix(PENDING) for p in self.segments_dir.glob(PENDING + "*"))

    def segments(self) -> list[Segment]:
        """The sealed segments of the current generation, oldest name first."""
        found = []
        for path in self.segments_dir.glob("*.parquet"):
            with contextlib.suppress(OSError):  # gone with a generation while listing
                found.append(Segment(path, path.stat().st_size))
        return sorted(found, key=lambda segment: segment.path.name)

    def quarantined(self) -> list[Path]:
        """The damaged segments moved out of the store (each has a ``<name>.why`` beside it)."""
        return sorted(self.quarantine_dir.glob("*.parquet"))

    def orphans(self) -> list[Path]:
        """What dead processes left: temporaries of processes that are gone (or older than
        ``orphan_after_s``), generations nobody uses any more, first-layout leftovers."""
        found = [path for path in self._temporaries() if _abandoned(path)]
        found += [self.path / name for name in os.listdir(self.path) if _is_aside(name)]
        try:
            current = self._current()
        except (OSError, NotAStore):  # which generation is current is not known: keep them all
            return found
        now = time.time()
        for number in self._generation_numbers():
            if number > current or (
                number < current and _long_ago(self._superseded_at(number), now, self._keep_s)
            ):
                found.append(self._dir(number))
        return sorted(found)

    def _temporaries(self) -> Iterator[Path]:
        """Temporaries in tmp/, the current generation (links half made) and the store's top
        (a link to a generation half made); other generations go whole."""
        yield from (self.path / TMP).glob("*.tmp")
        yield from self.segments_dir.glob(".*.tmp")
        yield from self.path.glob(f".{SEGMENTS}.*.tmp")

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Hold off merges while a reader reads (a shared lock; writers never take it)."""
        with self._lock(shared=True, wait=True) as held:
            del held
            yield

    @contextlib.contextmanager
    def _lock(self, *, shared: bool, wait: bool) -> Iterator[bool]:
        """The store's compaction lock: shared for readers (opened read-only, so reading never
        writes; a store without the lock file has never been merged), exclusive for a merge
        (which never runs without it). Readers take it through :data:`QUEUE_LOCK`, held
        while they wait for it, and a merger (which never waits) that finds a reader there
        gives way. An exclusive taker that waits (making or migrating a store) stays out of
        the queue: a reader nested in another reader's hold would otherwise wait behind it,
        and it behind that hold, for ever."""
        try:
            handle = (self.path / LOCK).open("rb" if shared else "a+b")
        except OSError:
            yield shared  # a reader reads on; a merge that cannot lock does not run
            return
        with handle:
            flags = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB)
            queue = (
                self._queue(wait=wait, create=not shared)
                if shared or not wait
                else contextlib.nullcontext(True)  # one who waits anyway never holds the queue
            )
            with queue as admitted:
                if admitted:
                    try:
                        fcntl.flock(handle.fileno(), flags)
                    except OSError:
                        admitted = False
            if not admitted:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _queue(self, *, wait: bool, create: bool) -> Iterator[bool]:
        """A place in the queue for the compaction lock, held until it is taken: ``False`` when
        someone else waits there and ``wait`` is false. A reader never writes: in a store
        without the queue file (made by the Collector, or before the file existed) it reads
        without a queue until a merger, which does ``create`` it, has run; one whose queue
        file refuses a lock (NFS refuses an exclusive one on a file opened read-only) takes
        the compaction lock unqueued."""
        try:
            handle = (self.path / QUEUE_LOCK).open("a+b" if create else "rb")
        except OSError:
            yield True
            return
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except OSError:
                yield wait  # a waiter that cannot queue waits unqueued; a merger gives way
                return
            try:
                yield True
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    # --- generations ---------------------------------------------------------------------------

    def _dir(self, number: int) -> Path:
        return self.path / GENERATIONS / _generation_name(number)

    def _current(self) -> int:
        """The current generation's number (``OSError`` when the store has no link yet,
        :class:`NotAStore` when its link names no generation)."""
        target = os.readlink(self.segments_dir)
        number = _generation_number(target)
        if number is None:
            raise NotAStore(self.path, self._link_problem(target))
        return number

    def link_problem(self) -> str | None:
        """What is wrong with the ``segments`` link, if anything: it names no generation
        (edited by hand, or by a sync tool), or one that is not there, or it is missing beside
        whole generations (a copy that left symbolic links out). ``None`` when there is no link
        in a store of the first layout (a plain ``segments/``) or one being made."""
        try:
            target = os.readlink(self.segments_dir)
        except OSError:
            if self.segments_dir.is_dir() or not any(
                (self._dir(number) / CARRIED).exists() for number in self._generation_numbers()
            ):
                return None
            return (
                f"has no {SEGMENTS} link (copied by a tool that leaves symbolic links out?); "
                f"{self._relink_hint()}"
            )
        number = _generation_number(target)
        if number is None or not self._dir(number).is_dir():
            return self._link_problem(target)
        return None

    def check_link(self) -> None:
        """Raise :class:`NotAStore` saying what to do when the ``segments`` link is broken."""
        problem = self.link_problem()
        if problem is not None:
            raise NotAStore(self.path, problem)

    def _link_problem(self, target: str) -> str:
        return (
            f"has a {SEGMENTS} link to {target!r}, which is not one of its generations "
            f"({GENERATIONS}/<number>); {self._relink_hint()}"
        )

    def _relink_hint(self) -> str:
        return (
            f"`otel-llm compact --db {self.path}` points it at the newest whole generation "
            "(when no other otel-llm process is reading the store)"
        )

    def _relink(self) -> None:
        """Point a ``segments`` link that names no generation at the newest whole one (caller
        holds the exclusive lock)."""
        problem = self.link_problem()
        if problem is None:
            return
        self._start_generations()
        logger.warning(
            "otel-llm: %s had %s; pointed it at %s",
            self.path,
            problem.split(";", 1)[0].removeprefix("has "),
            os.readlink(self.segments_dir),
        )

    def _generation_numbers(self) -> list[int]:
        try:
            names = os.listdir(self.path / GENERATIONS)
        except FileNotFoundError:
            return []
        return sorted(int(name) for name in names if name.isdigit())

    def _superseded_at(self, number: int) -> float:
        """When generation ``number`` stopped being current (its successor's record)."""
        try:
            return (self._dir(number + 1) / CONSUMED).stat().st_mtime
        except FileNotFoundError:
            return 0.0  # its successor is gone too: long ago

    def _switch(self, number: int) -> None:
        """Make generation ``number`` current in one atomic rename of the link."""
        link = self.path / _temporary_name(SEGMENTS)
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        os.symlink(f"{GENERATIONS}/{_generation_name(number)}", link)
        os.replace(link, self.segments_dir)
        _fsync_dir(self.path)

    def _listing(self, number: int) -> dict[str, os.stat_result]:
        listing = {}
        with os.scandir(self._dir(number)) as entries:
            for entry in entries:
                if entry.name.endswith(".parquet") and not entry.name.startswith("."):
                    with contextlib.suppress(FileNotFoundError):
                        listing[entry.name] = entry.stat(follow_symlinks=False)
        return listing

    def _next_generation(
        self,
        current: int,
        snapshot: Mapping[str, os.stat_result],
        *,
        merged: tuple[str, Path] | None,
        inputs: Sequence[str],
        damaged: Mapping[str, str],
    ) -> None:
        """Build generation ``current + 1`` (the snapshot without ``inputs`` and ``damaged``,
        plus ``merged``), quarantine ``damaged``, switch to it, and carry over what appeared
        in ``current`` since the snapshot (caller holds the exclusive lock)."""
        number = current + 1
        target = self._dir(number)
        remove_tree(target)  # what a merger that crashed before its switch left
        target.mkdir()
        left_out = set(inputs) | set(damaged)
        for name in snapshot:
            if name not in left_out:
                with contextlib.suppress(FileNotFoundError):
                    os.link(self._dir(current) / name, target / name)
        if merged is not None:
            os.link(merged[1], target / merged[0])
        for name, why in damaged.items():
            self._quarantine(self._dir(current) / name, why)
        record = {"merged": merged[0] if merged else None, "inputs": sorted(left_out)}
        _write_json(target / CONSUMED, record)
        self._carry_over(current, number, snapshot, left_out)  # most of what came meanwhile
        with self._publishing(switch=True):
            self._carry_over(current, number, snapshot, left_out)  # the rest
            _fsync_dir(target)
            self._switch(number)
        self._carry_over(current, number, snapshot, left_out)  # writers of the first layout
        (target / CARRIED).touch()
        self._schemas = {key: ok for key, ok in self._schemas.items() if key[0] not in left_out}

    def _carry_over(
        self, old: int, new: int, snapshot: Mapping[str, os.stat_result], left_out: set[str]
    ) -> None:
        """Apply to generation ``new`` what changed in ``old`` after ``snapshot`` was taken:
        segments sealed, replaced or renamed there by writers that had not seen the switch."""
        now = self._listing(old)
        by_inode = {stat.st_ino: name for name, stat in snapshot.items()}
        for name, stat in now.items():
            before = snapshot.get(name)
            if name in left_out or (before is not None and before.st_ino == stat.st_ino):
                continue
            renamed_from = by_inode.get(stat.st_ino)
            with contextlib.suppress(FileNotFoundError):
                if renamed_from is not None and renamed_from not in now:
                    os.replace(self._dir(new) / renamed_from, self._dir(new) / name)
                else:
                    self._link_into(new, self._dir(old) / name, name)
        inodes_now = {stat.st_ino for stat in now.values()}
        for name, stat in snapshot.items():
            if name not in now and name not in left_out and stat.st_ino not in inodes_now:
                with contextlib.suppress(FileNotFoundError):
                    (self._dir(new) / name).unlink()  # removed by a writer of the first layout

    def _adopt_late_segments(self) -> None:
        """Segments sealed into the generation before the current one that the merge which
        superseded it did not carry over (it was killed right after its switch) are linked
        into the current one: every segment there that the merge did not take in and whose
        file the current generation does not hold under any name."""
        current = self._current()
        if (self._dir(current) / CARRIED).exists() or not self._dir(current - 1).is_dir():
            return  # whole: anything else in the one before was changed on purpose since
        record = _read_json(self._dir(current) / CONSUMED)
        taken = set(record.get("inputs", ())) if isinstance(record, dict) else set()
        here = self._listing(current)
        files_here = {stat.st_ino for stat in here.values()}
        for name, stat in self._listing(current - 1).items():
            final = name.removeprefix(PENDING)
            if final in here or PENDING + final in here:
                continue  # a pending segment written again or finalized since
            if name not in taken and stat.st_ino not in files_here:
                with contextlib.suppress(FileNotFoundError):
                    self._link_into(current, self._dir(current - 1) / name, name)
        (self._dir(current) / CARRIED).touch()

    def _quarantine(self, path: Path, why: str) -> None:
        self.quarantine_dir.mkdir(exist_ok=True)
        destination = self.quarantine_dir / path.name
        if destination.exists():  # a name damaged before (written again): keep both
            destination = destination.with_name(f"{path.stem}-{time.time_ns()}.parquet")
        with contextlib.suppress(FileExistsError, FileNotFoundError):
            os.link(path, destination)
            stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            note = (
                f"otel-llm moved this segment out of {self.path} at {stamp}: it cannot be read "
                f"whole ({why}). The store reads on without it; delete it when you are done.\n"
            )
            (self.quarantine_dir / (destination.name + WHY)).write_text(note, encoding="utf-8")
            logger.warning(
                "otel-llm: segment %s of %s is damaged (%s); moved it to %s, the store reads on "
                "without its spans",
                path.name,
                self.path,
                why,
                destination,
            )

    def _tidy(self) -> None:
        """Finish what a merger killed after its switch left undone, remove what dead processes
        left (caller holds the exclusive lock)."""
        self._adopt_first_layout_leftovers()
        self._adopt_late_segments()
        for path in self.orphans():
            if path.is_dir():
                remove_tree(path)
            else:
                with contextlib.suppress(OSError):
                    path.unlink()

    # --- merging -------------------------------------------------------------------------------

    def compact(
        self,
        *,
        small_bytes: int = DEFAULTS.segment_small_bytes,
        min_segments: int = DEFAULTS.segment_merge_min,
        max_bytes: int = DEFAULTS.segment_merge_max_bytes,
        fanout: int = DEFAULTS.segment_tier_fanout,
        max_inputs: int = DEFAULTS.segment_merge_max_inputs,
        max_merges: int | None = DEFAULTS.segment_merges_per_compact,
    ) -> int:
        """Merge what is due (the small segments, then every size tier that filled up: see
        :mod:`._merge_plan`), at most ``max_merges`` batches (``None``: until nothing is due) of
        at most ``max_inputs`` segments each (more when that would leave small segments
        behind: :func:`._merge_plan.batch_size`); the number of segments merged (0 when none was
        due, or another process is merging or reading). Each merge takes the lock anew, and
        one that finds a reader waiting for it stops: the reader gets in after the merge under
        way, and the rest is left for the next compaction. Damaged segments met on the way are
        quarantined; a segment of another version's schema is left where it is."""
        with contextlib.suppress(OSError):  # no link yet: the merge below says so
            listing = self._listing(self._current())
            small = sum(
                1
                for stat in listing.values()
                if tier(stat.st_size, small_bytes=small_bytes, fanout=fanout) == 0
            )
            max_inputs = batch_size(small, max_inputs=max_inputs, max_merges=max_merges)
        merged = 0
        for count in itertools.count():
            if max_merges is not None and count >= max_merges:
                break
            with self._lock(shared=False, wait=False) as held:
                if not held:
                    break
                if count == 0:
                    self._tidy()
                batch = self._merge_one(
                    small_bytes=small_bytes,
                    min_segments=min_segments,
                    max_bytes=max_bytes,
                    fanout=fanout,
                    max_inputs=max_inputs,
                )
            if not batch:
                break
            merged += batch
        return merged

    def _merge_one(
        self, *, small_bytes: int, min_segments: int, max_bytes: int, fanout: int, max_inputs: int
    ) -> int:
        """One merge of the current generation (caller holds the exclusive lock): the number
        of segments it took, 0 when none was due."""
        current = self._current()
        snapshot = self._listing(current)
        damaged: dict[str, str] = {}
        candidates = self._candidates(current, snapshot, damaged)
        while True:
            chosen = choose(
                candidates,
                small_bytes=small_bytes,
                min_segments=min_segments,
                max_bytes=max_bytes,
                fanout=fanout,
                max_inputs=max_inputs,
            )
            if not chosen:
                if damaged:
                    self._next_generation(
                        current, snapshot, merged=None, inputs=(), damaged=damaged
                    )
                return 0
            paths = [self._dir(current) / candidate.name for candidate in chosen]
            tmp = self.path / TMP / _temporary_name(f"merge-{current + 1}")
            try:
                broken = write_merged(paths, tmp)
                if broken is None:
                    oldest = chosen[0].name[:20]
                    prefix = oldest if oldest.isdigit() else "0" * 20
                    name = f"{prefix}-m-{time.time_ns():020d}-{_TOKEN}.parquet"
                    inputs = [candidate.name for candidate in chosen]
                    self._next_generation(
                        current, snapshot, merged=(name, tmp), inputs=inputs, damaged=damaged
                    )
                    logger.debug("otel-llm: merged %d segments of %s", len(chosen), self.path)
                    return len(chosen)
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
            damaged[broken[0].name] = broken[1]
            candidates = [c for c in candidates if c.name != broken[0].name]

    def _candidates(
        self, current: int, snapshot: Mapping[str, os.stat_result], damaged: dict[str, str]
    ) -> list[Candidate]:
        """The segments of this version's schema compaction may take; unreadable ones go to
        ``damaged``."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = arrow_schema()
        found = []
        for name, stat in snapshot.items():
            if name == SCHEMA_SEGMENT or name.startswith(PENDING):
                continue
            key = (name, stat.st_ino)
            if key not in self._schemas:
                try:
                    read = pq.read_schema(self._dir(current) / name)
                except FileNotFoundError:
                    continue
                except (OSError, pa.ArrowException, ValueError) as exc:
                    # ValueError: a footer naming a column in bytes that are not UTF-8
                    damaged[name] = _first_line(exc)
                    continue
                self._schemas[key] = read.equals(schema, check_metadata=False)
            if self._schemas[key]:
                found.append(Candidate(name, stat.st_size))
        return found

    def damaged(self, names: Collection[str] | None = None) -> dict[str, str]:
        """The segments of the current generation (or those of them in ``names``) that cannot
        be read whole, every page's checksum verified, and why. Takes no lock and moves
        nothing: a sealed segment never changes in place."""
        current = self._current()
        return {
            name: why
            for name in self._listing(current)
            if (names is None or name in names)
            and (why := _unreadable(self._dir(current) / name)) is not None
        }

    def quarantine(self, damaged: Mapping[str, str], *, wait: bool) -> list[str] | None:
        """Move the ``damaged`` segments (name: why) still in the current generation into
        quarantine, each with a note and a warning; the names moved. Takes the exclusive lock:
        waits for a merge or reader in progress, or, when ``wait`` is false, returns ``None``
        when there is one (or the store cannot be locked)."""
        with self._lock(shared=False, wait=wait) as held:
            if not held:
                return None
            current = self._current()
            snapshot = self._listing(current)
            here = {name: why for name, why in damaged.items() if name in snapshot}
            if here:
                self._next_generation(current, snapshot, merged=None, inputs=(), damaged=here)
            return sorted(here)

    def check(self, *, wait: bool = True) -> list[str] | None:
        """Read every segment whole, verifying each page's checksum, and quarantine the
        damaged ones; the names quarantined (``None``: damage found, but ``wait`` is false and
        a merge or reader holds the store). Reading takes no lock; moving takes the exclusive
        one, as :meth:`quarantine`."""
        damaged = self.damaged()
        return self.quarantine(damaged, wait=wait) if damaged else []

    def repair(self) -> None:
        """Point a ``segments`` link that names no generation at the newest whole one, finish
        what a killed merger left undone and remove what dead processes left, if anything (and
        nobody else is merging or reading)."""
        if self.link_problem() is None:
            try:
                whole = (self._dir(self._current()) / CARRIED).exists()
            except OSError:
                whole = True  # no generations yet (a store of the first layout)
            if whole and not self.orphans():
                return
        with contextlib.suppress(OSError), self._lock(shared=False, wait=False) as held:
            if held:
                self._relink()
                self._tidy()


def _generation_number(target: str) -> int | None:
    """The number of the generation a ``segments`` link's ``target`` names, if it names one."""
    name = target.rstrip("/").rsplit("/", 1)[-1]
    return int(name) if name.isascii() and name.isdigit() else None


def write_merged(paths: Sequence[Path], tmp: Path) -> tuple[Path, str] | None:
    """Stream ``paths`` into one zstd segment at ``tmp``, flushed to disk, holding about
    ``segment_merge_buffer_bytes`` of rows at a time; or the first input that cannot be read
    whole and why (checked before any of its rows is written)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema()
    try:
        for path in paths:
            if (why := _unreadable(path)) is not None:
                return path, why
        with pq.ParquetWriter(
            tmp,
            schema,
            compression="zstd",
            write_page_checksum=True,
            write_statistics=statistics_columns(),
        ) as out:
            pending: list[pa.Table] = []
            table: pa.Table | None = None
            held = 0
            for path in paths:
                with pq.ParquetFile(path, page_checksum_verification=True) as file:
                    for group in range(file.num_row_groups):
                        # one thread: Arrow's decoding threads each keep what they allocated,
                        # and RSS would swing by tens of MiB from merge to merge
                        table = file.read_row_group(group, use_threads=False).cast(schema)
                        pending.append(table)
                        held += table.nbytes
                        if held >= DEFAULTS.segment_merge_buffer_bytes:  # bounded memory
                            _write_by_role(out, pa.concat_tables(pending))
                            pending, held = [], 0
            if pending:
                _write_by_role(out, pa.concat_tables(pending))
            del pending, table
    finally:  # Arrow's allocator keeps what a merge freed (~70 MiB for 6,000 spans) unless told
        pa.default_memory_pool().release_unused()
    with tmp.open("rb") as handle:
        os.fsync(handle.fileno())
    return None


def _write_by_role(out: pq.ParquetWriter, table: pa.Table) -> None:
    """``table``'s call rows, then its other rows, each in row groups of their own (in the
    order they came): a reader of the call rows alone — every winner query — skips the
    attempts' row groups by ``LlmRole``'s statistics, and a time filter still skips by
    ``Timestamp``'s."""
    import pyarrow.compute as pc

    role = pc.field(ROLE_COLUMN)
    is_call = role == sc.SPAN_ROLE_CALL
    for part in (table.filter(is_call), table.filter(~is_call | role.is_null())):
        if part.num_rows:
            out.write_table(part)


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read whole (every page, checksums verified), or ``None``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(path, page_checksum_verification=True) as file:
            for group in range(file.num_row_groups):
                file.read_row_group(group, use_threads=False)
    except FileNotFoundError:
        return None
    except (OSError, pa.ArrowException, ValueError) as exc:
        return _first_line(exc)
    return None


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _abandoned(path: Path) -> bool:
    """Whether the temporary ``path`` belongs to no live process of this host (or is older
    than any write takes)."""
    match = _TEMPORARY.search(path.name)
    try:
        stamp = path.lstat().st_mtime
    except FileNotFoundError:
        return False
    age = time.time() - stamp
    if _long_ago(stamp, time.time(), DEFAULTS.orphan_after_s):
        return True
    if match is None or age < DEFAULTS.orphan_dead_after_s:
        return False  # a write in flight, maybe of another pid namespace sharing the volume
    pid = int(match["pid"])
    if pid == os.getpid():
        return False  # ours, or a process of another container that shares our pid: age decides
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _long_ago(stamp: float, now: float, after_s: float) -> bool:
    """Whether a file stamped ``stamp`` was made more than ``after_s`` ago — or stamped further
    ahead than that: made before the clock was set back (a VM resumed, a clock corrected), when
    it would otherwise be kept until the clock caught up."""
    return stamp < now - after_s or stamp > now + after_s


def _is_aside(name: str) -> bool:
    if not name.startswith(_LEGACY_DIR):
        return False
    pid = name.removeprefix(_LEGACY_DIR).split(".", 1)[0]
    if not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _finish_first_layout_merges(segments_dir: Path) -> None:
    """Complete or undo the merges a crash cut short in a first-layout store (its merged
    segment is there: its listed inputs go; else the intent goes)."""
    for intent in segments_dir.glob(".*.merge"):
        merged = segments_dir / intent.name.removeprefix(".").removesuffix(".merge")
        inputs = _read_json(intent)
        if merged.exists() and isinstance(inputs, list):
            for name in inputs:
                if isinstance(name, str) and "/" not in name and name != merged.name:
                    with contextlib.suppress(FileNotFoundError):
                        (segments_dir / name).unlink()
        with contextlib.suppress(FileNotFoundError):
            intent.unlink()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None


def _write_json(path: Path, value: object) -> None:
    tmp = path.with_name(_temporary_name(path.name))
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(value, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_tree(path: Path) -> None:
    """Remove ``path`` and what is in it, as far as it goes (a generation, a leftover)."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for child in sorted(path.rglob("*"), reverse=True):
            with contextlib.suppress(OSError):
                child.unlink() if not child.is_dir() or child.is_symlink() else child.rmdir()
    with contextlib.suppress(OSError):
        path.rmdir()
