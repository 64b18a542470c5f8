"""The store on disk: a directory of sealed Parquet segments in the ``otel_traces`` layout.

Every writing process adds segment files of its own and never changes one: a segment is written
to a hidden ``.tmp`` file, flushed to disk, then renamed into ``segments/``, so a reader's glob
sees whole files or nothing, and no process ever waits on another's lock. A store starts with
an empty segment carrying the schema, so a glob over it always matches. Small segments are
merged opportunistically (:meth:`SegmentStore.compact`) by whichever writer gets the store's
compaction lock; readers that need an exact snapshot hold the same lock shared while they read
(:meth:`SegmentStore.reading`), so a merge never shows them a span twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import secrets
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from otel_llm._defaults import DEFAULTS
from otel_llm._show._columns import SegmentColumns, arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa

LAYOUT: Final = 1
"""Version of the directory layout, recorded in :data:`MARKER`."""
MARKER: Final = "otel-llm-store.json"
"""The file that makes a directory an otel-llm store."""
SEGMENTS: Final = "segments"
"""Sub-directory holding the segment files (readers glob ``segments/*.parquet``)."""
SCHEMA_SEGMENT: Final = "00000000000000000000-schema.parquet"
"""The empty segment every store starts with: the glob always matches, the schema is known."""
LOCK: Final = ".compaction.lock"
PENDING: Final = "pending-"
"""Prefix of a segment whose source may still be ingested again (the Collector's spool file
is not deleted yet): readers read it, compaction leaves it alone — so writing it again under
the same name replaces it, never adds its spans twice — and :meth:`SegmentStore.finalize`
gives it its final name."""
SMALL_SEGMENT_ROWS: Final = 256
"""Segments of fewer rows are written plainly (snappy, no dictionaries, no statistics): that
halves the fixed cost of a write, and compaction re-encodes them compactly later."""

_sequence = itertools.count()
_TOKEN: Final = secrets.token_hex(4)
"""Names apart the segments of processes that share a pid (containers on one volume)."""
GLOB_CHARACTERS: Final = frozenset("*?[]{}")
"""Characters DuckDB's glob would read as a pattern: a store's path has none of them."""
_sequence_lock = threading.Lock()


def encode(table: pa.Table) -> bytes:
    """``table`` as the bytes of one Parquet file (one row group)."""
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
        )
    else:
        pq.write_table(table, sink, compression="zstd", row_group_size=rows)
    return bytes(sink.getvalue())


def encode_rows(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Rows as :func:`otel_llm._show._rows.span_row` returns them, as one segment's bytes."""
    columns = SegmentColumns()
    for row in rows:
        columns.append_row(row)
    return encode(columns.table())


def is_store(path: Path) -> bool:
    """True when ``path`` is a segment store directory."""
    return (path / MARKER).is_file()


@dataclass(frozen=True, slots=True)
class Segment:
    """One sealed segment file."""

    path: Path
    size: int


class SegmentStore:
    """A store directory: writes sealed segments, lists them, merges small ones."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.segments_dir = self.path / SEGMENTS

    @property
    def glob(self) -> str:
        """What readers scan: every sealed segment."""
        return str(self.segments_dir / "*.parquet")

    def create(self) -> None:
        """Make ``path`` a store (idempotent; safe when several processes do it at once: the
        marker comes first, so a second process never sees a half-made store as foreign)."""
        self.path.mkdir(parents=True, exist_ok=True)
        marker = self.path / MARKER
        if not marker.exists():
            text = json.dumps({"layout": LAYOUT, "format": "otel_traces parquet segments"})
            tmp = self.path / f".{MARKER}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.write_text(text + "\n", encoding="utf-8")
            tmp.replace(marker)
        self.segments_dir.mkdir(exist_ok=True)
        (self.path / LOCK).touch(exist_ok=True)
        if not (self.segments_dir / SCHEMA_SEGMENT).exists():
            self._seal(encode(SegmentColumns().table()), SCHEMA_SEGMENT)

    def foreign(self) -> list[str]:
        """Names in the directory that are not a store's (empty for a store, or a directory
        a store is being made in)."""
        if not self.path.is_dir():
            return []
        ours = {MARKER, SEGMENTS, LOCK}
        return sorted(
            entry.name
            for entry in self.path.iterdir()
            if entry.name not in ours and not entry.name.startswith(f".{MARKER}.")
        )

    def write(self, data: bytes | Sequence[Mapping[str, Any]], *, name: str | None = None) -> Path:
        """Seal one segment: ``data`` is a segment's bytes (:func:`encode`) or rows. A given
        ``name`` makes writing the same data again replace the segment, not add a second one."""
        if not isinstance(data, bytes):
            data = encode_rows(data)
        if name is None:
            with _sequence_lock:
                sequence = next(_sequence)
            name = f"{time.time_ns():020d}-{os.getpid()}-{_TOKEN}-{sequence:06d}.parquet"
        elif not name.endswith(".parquet") or "/" in name or name.startswith("."):
            raise ValueError(f"a segment name ends in .parquet and is a plain file name: {name!r}")
        return self._seal(data, name)

    def _seal(self, data: bytes, name: str) -> Path:
        with self._sealing(name) as tmp:
            tmp.write_bytes(data)
        return self.segments_dir / name

    @contextlib.contextmanager
    def _sealing(self, name: str) -> Iterator[Path]:
        """A hidden file to write segment ``name`` into; once written it is flushed to disk and
        renamed into place, and on any failure removed (nothing half-written is ever seen)."""
        tmp = self.segments_dir / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            yield tmp
            with tmp.open("rb") as handle:
                os.fsync(handle.fileno())
            tmp.replace(self.segments_dir / name)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise

    def finalize(self, name: str) -> None:
        """Give the pending segment ``PENDING + name`` its final name (idempotent)."""
        try:
            os.replace(self.segments_dir / (PENDING + name), self.segments_dir / name)
        except FileNotFoundError:
            if not (self.segments_dir / name).exists():
                raise

    def pending(self) -> list[str]:
        """The final names of the pending segments."""
        return sorted(p.name.removeprefix(PENDING) for p in self.segments_dir.glob(PENDING + "*"))

    def segments(self) -> list[Segment]:
        """The sealed segments, oldest name first."""
        found = []
        for path in self.segments_dir.glob("*.parquet"):
            with contextlib.suppress(OSError):  # merged away while listing
                found.append(Segment(path, path.stat().st_size))
        return sorted(found, key=lambda segment: segment.path.name)

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
        (which never runs without it)."""
        try:
            handle = (self.path / LOCK).open("rb" if shared else "a+b")
        except OSError:
            yield shared  # a reader reads on; a merge that cannot lock does not run
            return
        with handle:
            flags = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB)
            try:
                fcntl.flock(handle.fileno(), flags)
            except OSError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def compact(
        self,
        *,
        small_bytes: int = DEFAULTS.segment_small_bytes,
        min_segments: int = DEFAULTS.segment_merge_min,
        max_bytes: int = DEFAULTS.segment_merge_max_bytes,
    ) -> int:
        """Merge small segments into one; the number merged (0 when there were too few, or
        another process is merging or reading). Only whole segments of this version's schema
        merge (a damaged one is left where it is, for readers to name).

        Crash-safe: before the merged segment is renamed in, an intent file lists its inputs;
        the inputs are deleted after it, then the intent. A merge cut short anywhere is finished
        by the next one (:meth:`_finish_merges`), so no span stays in the store twice."""
        with self._lock(shared=False, wait=False) as held:
            if not held:
                return 0
            self._finish_merges()
            chosen = self._mergeable(small_bytes, max_bytes)
            if len(chosen) < min_segments:
                return 0
            name = chosen[0].path.name.removesuffix(".parquet") + f"-m{len(chosen)}.parquet"
            intent = self.segments_dir / f".{name}.merge"
            with intent.open("w", encoding="utf-8") as handle:
                json.dump([segment.path.name for segment in chosen], handle)
                handle.flush()
                os.fsync(handle.fileno())
            self._write_merged(chosen, name)
            self._finish_merges()
            return len(chosen)

    def repair(self) -> None:
        """Finish a merge a crash cut short, if any (and nobody else is merging or reading)."""
        if not any(self.segments_dir.glob(".*.merge")):
            return
        with contextlib.suppress(OSError), self._lock(shared=False, wait=False) as held:
            if held:
                self._finish_merges()

    def _mergeable(self, small_bytes: int, max_bytes: int) -> list[Segment]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = arrow_schema()
        chosen: list[Segment] = []
        total = 0
        for segment in self.segments():
            name = segment.path.name
            if name == SCHEMA_SEGMENT or name.startswith(PENDING) or segment.size >= small_bytes:
                continue
            if total + segment.size > max_bytes:
                break
            try:
                if not pq.read_schema(segment.path).equals(schema, check_metadata=False):
                    continue
            except (OSError, pa.ArrowException):  # gone, or damaged outside otel-llm
                continue
            chosen.append(segment)
            total += segment.size
        return chosen

    def _write_merged(self, chosen: Sequence[Segment], name: str) -> None:
        """Stream ``chosen`` into one zstd segment, holding at most ~16 MiB of rows in memory
        (a row group each)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = arrow_schema()
        with self._sealing(name) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd") as out:
            pending: list[pa.Table] = []
            held = 0
            for segment in chosen:
                table = pq.read_table(segment.path, schema=schema)
                pending.append(table)
                held += table.nbytes
                if held >= DEFAULTS.segment_merge_buffer_bytes:  # bounded memory
                    out.write_table(pa.concat_tables(pending))
                    pending, held = [], 0
            if pending:
                out.write_table(pa.concat_tables(pending))

    def _finish_merges(self) -> None:
        """Complete or undo merges a crash cut short (caller holds the exclusive lock): a
        merged segment that is there has its listed inputs deleted; an intent whose merged
        segment never landed is dropped."""
        for intent in self.segments_dir.glob(".*.merge"):
            merged = self.segments_dir / intent.name.removeprefix(".").removesuffix(".merge")
            try:
                inputs = json.loads(intent.read_text("utf-8"))
            except (OSError, ValueError):
                inputs = []
            if merged.exists():
                for name in inputs if isinstance(inputs, list) else []:
                    if isinstance(name, str) and "/" not in name and name != merged.name:
                        with contextlib.suppress(FileNotFoundError):
                            (self.segments_dir / name).unlink()
            with contextlib.suppress(FileNotFoundError):
                intent.unlink()
