"""The Collector file exporter's OTLP protobuf files, ingested into the store.

Collectors of earlier versions wrote spans into a spool directory through the file exporter
(``collector/duckdb.yaml`` now has the ``otelllm_store`` exporter write the store itself; the
files any of them left are still ingested): ``traces.binpb`` is the file being written; full
ones are rotated to ``traces-<UTC time>-<reason>.binpb``. A file is a
sequence of 4-byte big-endian lengths, each followed by one ``ExportTraceServiceRequest``; the
exporter writes each message with one write into the rotating file, so a message never spans two
files and a rotated file ends on a message boundary.

:class:`Spool` ingests finished files only — the rotated ones while the collector runs, and the
current one once it has stopped (:meth:`Spool.seal_current`) — in name order, each into
segments named after the file, its checksum and the offset of the segment's first message
(the spans go straight into the segment's columns: :func:`~otel_llm._show._ingest._otlp_rows.
append_export_request`).
Message boundaries depend on the bytes alone, so ingesting the same file again (after a crash
between writing its segments and deleting it) writes the same names, which replace the segments
instead of adding spans twice. A file is deleted only once all its spans are in the store.

Nothing is lost silently: a file whose last message is cut short (the collector was killed while
writing it) or whose bytes do not parse keeps its name with ``.incomplete`` / ``.corrupt``
added, the spans of the messages before the damage are ingested, and :class:`IngestReport`
names the file, the byte offset and why.
"""

from __future__ import annotations

import datetime
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from otel_llm._defaults import DEFAULTS
from otel_llm._show._ingest._otlp_rows import append_export_request
from otel_llm._show._store._columns import SegmentColumns
from otel_llm._show._store._segments import PENDING, encode

CURRENT: Final = "traces.binpb"
"""The file the collector is writing (``collector/duckdb.yaml``'s ``path``)."""
_STEM, _SUFFIX = CURRENT.rsplit(".", 1)
LENGTH_BYTES: Final = 4
MAX_MESSAGE_BYTES: Final = 1 << 30
"""A length above this is not a message the collector wrote (its batches are megabytes)."""
INCOMPLETE: Final = ".incomplete"
CORRUPT: Final = ".corrupt"


class SegmentWriter(Protocol):
    """What the ingest needs of the store (:class:`~otel_llm._show._store._segments.SegmentStore`,
    written to)."""

    def write(self, data: bytes | Sequence[Mapping[str, Any]], *, name: str | None = None) -> Path:
        """Seal one segment (its bytes, or rows); a given ``name`` replaces a segment of that
        name."""
        ...

    def finalize(self, name: str) -> None:
        """Give the pending segment ``PENDING + name`` its final name."""
        ...

    def pending(self) -> list[str]:
        """The final names of the pending segments."""
        ...


@dataclass(frozen=True, slots=True)
class Framing:
    """The whole messages at the start of a file's bytes, and what follows them."""

    messages: tuple[tuple[int, memoryview], ...]
    """(offset of the length prefix, message bytes) of each whole message."""
    end: int
    """Bytes taken by the whole messages: where the damage starts when ``problem`` is set."""
    problem: str | None
    """Why the bytes after ``end`` are not whole messages (``None``: there are none)."""
    corrupt: bool = False
    """The bytes after ``end`` are not a message at all (else: a message cut short)."""


def split_messages(data: bytes) -> Framing:
    """Split the bytes of a spool file into length-prefixed messages."""
    view = memoryview(data)
    messages: list[tuple[int, memoryview]] = []
    offset = 0
    size = len(data)
    problem = None
    corrupt = False
    while offset < size:
        if size - offset < LENGTH_BYTES:
            problem = f"a length prefix cut short ({size - offset} of {LENGTH_BYTES} bytes)"
            break
        length = int.from_bytes(view[offset : offset + LENGTH_BYTES], "big")
        if length > MAX_MESSAGE_BYTES:
            problem = f"a length of {length} bytes, not a message the collector wrote"
            corrupt = True
            break
        start = offset + LENGTH_BYTES
        if start + length > size:
            problem = f"the last message cut short ({size - start} of {length} bytes)"
            break
        messages.append((offset, view[start : start + length]))
        offset = start + length
    return Framing(tuple(messages), offset, problem, corrupt)


@dataclass
class IngestReport:
    """What one pass of :meth:`Spool.ingest` did."""

    files: int = 0
    spans: int = 0
    problems: list[str] = field(default_factory=list)
    """One line per file that was kept (its name, the offset, why), for the user."""
    names: list[str] = field(default_factory=list)
    """The segments written (their final names)."""

    def add(self, other: IngestReport) -> None:
        """Count ``other``'s files, spans and problems in this report."""
        self.files += other.files
        self.spans += other.spans
        self.problems.extend(other.problems)
        self.names.extend(other.names)


_SEGMENT_PREFIX: Final = "collector-"


def _segment_name(path: Path, checksum: int, offset: int) -> str:
    stem = path.name.removesuffix("." + _SUFFIX)
    return f"{_SEGMENT_PREFIX}{stem}-{checksum:08x}-{offset:012d}.parquet"


def _stem_of_segment(name: str) -> str | None:
    """The spool file stem a segment name was made from (``None``: not one of ours)."""
    if not name.startswith(_SEGMENT_PREFIX):
        return None
    parts = name.removeprefix(_SEGMENT_PREFIX).removesuffix(".parquet").rsplit("-", 2)
    return parts[0] if len(parts) == 3 else None


def _source_stem(name: str) -> str:
    """The stem of a spool file, kept ones (``.incomplete`` / ``.corrupt``) included."""
    return name.removesuffix(INCOMPLETE).removesuffix(CORRUPT).removesuffix("." + _SUFFIX)


class Spool:
    """The collector's spool directory, ingested into ``store``."""

    def __init__(
        self,
        folder: Path,
        store: SegmentWriter,
        *,
        segment_spans: int = DEFAULTS.collector_segment_spans,
    ) -> None:
        self.folder = folder
        self.store = store
        self.segment_spans = segment_spans

    @property
    def current(self) -> Path:
        """The file the collector writes."""
        return self.folder / CURRENT

    def finished(self) -> list[Path]:
        """The rotated files, oldest first (their names sort by the time they were rotated)."""
        found = [
            path
            for path in self.folder.glob(f"{_STEM}-*.{_SUFFIX}")
            if path.is_file() and path.name != CURRENT
        ]
        return sorted(found, key=lambda path: path.name)

    def seal_current(self) -> Path | None:
        """Rotate the current file by hand, once no collector writes it (at stop, or one left
        by a collector that was killed): it is then ingested like the others."""
        current = self.current
        if not current.is_file():
            return None
        if current.stat().st_size == 0:
            current.unlink()
            return None
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H-%M-%S.%f")[:-3]
        target = self.folder / f"{_STEM}-{now}-stop.{_SUFFIX}"
        current.rename(target)
        return target

    def ingest(self) -> IngestReport:
        """Ingest every finished file, oldest first (first finishing what a crash left: the
        pending segments of files already gone get their final names)."""
        report = IngestReport()
        present = {_source_stem(path.name) for path in self.folder.iterdir()}
        for name in self.store.pending():
            stem = _stem_of_segment(name)
            if stem is not None and stem not in present:
                self.store.finalize(name)
        for path in self.finished():
            report.add(self.ingest_file(path))
        return report

    def ingest_file(self, path: Path) -> IngestReport:
        """Write the spans of one finished file into the store, then delete it (or keep it
        under a telling name, when part of it could not be read)."""
        data = path.read_bytes()
        checksum = zlib.crc32(data)
        framing = split_messages(data)
        report = IngestReport(files=1)
        problem = framing.problem
        corrupt = framing.corrupt
        end = framing.end
        columns = SegmentColumns()
        batch: list[tuple[int, bytes | memoryview]] = []
        refused: list[int] = []
        for offset, message in framing.messages:
            try:
                append_export_request(columns, message)
            except DecodeError as exc:
                problem = f"a message that does not parse ({exc})"
                corrupt = True
                end = offset
                break
            batch.append((offset, message))
            if len(columns) >= self.segment_spans:
                refused += self._write_batch(columns, batch, path, checksum, report)
                columns, batch = SegmentColumns(), []
        if len(columns):
            refused += self._write_batch(columns, batch, path, checksum, report)
        left_out = bool(refused) and problem is None
        if left_out:
            problem = (
                f"{len(refused)} message(s) with values the store cannot hold (a time past "
                f"64 bits), at byte {', '.join(map(str, refused))}, left out"
            )
            corrupt = True
            end = refused[0]
        if problem is None:
            path.unlink()
        else:
            kept = path.with_name(path.name + (CORRUPT if corrupt else INCOMPLETE))
            path.rename(kept)
        for name in report.names:  # the file can no longer be ingested twice: final names
            self.store.finalize(name)
        if problem is None:
            return report
        if left_out:
            report.problems.append(
                f"{path}: {problem}; the {report.spans} spans of the other messages are in the "
                f"store, the file is kept as {kept.name}"
            )
            return report
        report.problems.append(
            f"{path}: {problem} at byte {end} of {len(data)}; the {report.spans} spans before "
            f"it are in the store, the file is kept as {kept.name}"
        )
        return report

    def _write_batch(
        self,
        columns: SegmentColumns,
        batch: list[tuple[int, bytes | memoryview]],
        path: Path,
        checksum: int,
        report: IngestReport,
    ) -> list[int]:
        """Write the spans of ``batch`` (its messages, appended to ``columns``) as one segment;
        when they cannot make one table (a value a column cannot hold: OTLP times are
        unsigned 64-bit, the store's signed), write them message by message instead, leaving
        out the messages that cannot. The offsets of the messages left out."""
        import pyarrow as pa

        try:
            self._write(columns, path, checksum, batch[0][0], report)
            return []
        except (OverflowError, pa.ArrowException):
            pass
        refused = []
        for offset, message in batch:
            alone = SegmentColumns()
            append_export_request(alone, message)
            try:
                self._write(alone, path, checksum, offset, report)
            except (OverflowError, pa.ArrowException):
                refused.append(offset)
        return refused

    def _write(
        self,
        columns: SegmentColumns,
        path: Path,
        checksum: int,
        offset: int,
        report: IngestReport,
    ) -> None:
        name = _segment_name(path, checksum, offset)
        self.store.write(encode(columns.table()), name=PENDING + name)
        report.names.append(name)
        report.spans += len(columns)


def kept_files(folder: Path) -> Iterator[Path]:
    """Files an earlier ingest kept because part of them could not be read."""
    for suffix in (INCOMPLETE, CORRUPT):
        yield from sorted(folder.glob(f"*{suffix}"))
