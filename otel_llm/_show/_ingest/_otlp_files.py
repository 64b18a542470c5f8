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
writing it) or whose framing breaks keeps its name with ``.incomplete`` / ``.corrupt`` added,
the spans of the messages before the damage are ingested, and :class:`IngestReport` names the
file, the byte offset and why; a message that does not parse, or holds a value the store cannot,
is left out the same way and the messages after it are ingested. A file is read a message at a
time (:class:`Frames`).
"""

from __future__ import annotations

import datetime
import io
import os
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final, Protocol

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
SEGMENT_BYTES: Final = 64 << 20
"""A segment is sealed once its messages come to this many bytes (or ``segment_spans`` spans):
a file of large spans is held a segment at a time (the collector's files, rotated at 32 MB,
never reach it)."""
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


_READ_BYTES: Final = 1 << 20
"""A file is read this much at a time for its checksum and over a run of zeros."""
_ZEROS: Final = bytes(_READ_BYTES)


class Frames:
    """The length-prefixed messages of a spool file, read one at a time from ``handle``
    (its first ``size`` bytes): iterating gives (offset of the length prefix, message bytes)
    of each whole message that holds anything; then :attr:`end`, :attr:`problem` and
    :attr:`corrupt` say where the whole messages stop and why.

    An empty message holds no spans and is passed over. A run of them is zeros — what a file
    system can leave where a file's last writes never reached the disk — and is passed at once
    (a message and an object each, 32 MB of zeros took 30 s and 3 GB)."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        self._handle = handle
        self.size = size
        self.end = 0
        """Bytes taken by the whole messages: where the damage starts when ``problem`` is set."""
        self.problem: str | None = None
        """Why the bytes after ``end`` are not whole messages (``None``: there are none)."""
        self.corrupt = False
        """The bytes after ``end`` are not a message at all (else: a message cut short)."""

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        handle, size = self._handle, self.size
        handle.seek(0)
        offset = 0
        while offset < size:
            left = size - offset
            if left < LENGTH_BYTES:
                self.problem = f"a length prefix cut short ({left} of {LENGTH_BYTES} bytes)"
                return
            prefix = handle.read(LENGTH_BYTES)
            if len(prefix) < LENGTH_BYTES:  # the file was cut short while it was read
                self.problem = f"a length prefix cut short ({len(prefix)} of {LENGTH_BYTES} bytes)"
                return
            length = int.from_bytes(prefix, "big")
            start = offset + LENGTH_BYTES
            if length == 0:
                zeros = LENGTH_BYTES + _zeros_ahead(handle, size - start)
                offset = self.end = offset + zeros - zeros % LENGTH_BYTES
                handle.seek(offset)
                continue
            if length > MAX_MESSAGE_BYTES:
                self.problem = f"a length of {length} bytes, not a message the collector wrote"
                self.corrupt = True
                return
            if length > size - start:
                self.problem = f"the last message cut short ({size - start} of {length} bytes)"
                return
            message = handle.read(length)
            if len(message) < length:  # the file was cut short while it was read
                self.problem = f"the last message cut short ({len(message)} of {length} bytes)"
                return
            yield offset, message
            offset = self.end = start + length


def _zeros_ahead(handle: BinaryIO, limit: int) -> int:
    """How many zero bytes follow in ``handle`` (at most ``limit``); where it is left is
    unspecified."""
    counted = 0
    while counted < limit:
        chunk = handle.read(min(_READ_BYTES, limit - counted))
        if not chunk:
            break
        if chunk == _ZEROS[: len(chunk)]:
            counted += len(chunk)
            continue
        return counted + len(chunk) - len(chunk.lstrip(b"\0"))
    return counted


def _checksum(handle: BinaryIO, size: int) -> int:
    """The CRC-32 of the first ``size`` bytes of ``handle``, read a piece at a time."""
    handle.seek(0)
    checksum = 0
    left = size
    while left > 0 and (chunk := handle.read(min(_READ_BYTES, left))):
        checksum = zlib.crc32(chunk, checksum)
        left -= len(chunk)
    return checksum


def split_messages(data: bytes) -> tuple[list[tuple[int, bytes]], Frames]:
    """The messages of a spool file's bytes (:class:`Frames` over them)."""
    frames = Frames(io.BytesIO(data), len(data))
    return list(frames), frames


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


_UNSAFE: Final = re.compile(r"[^\w.-]")
"""What a segment name does not take from a spool file's name: readers list segments by name,
and DuckDB reads ``*?[]{}\\`` in one as a pattern (a backslash: the segment is not found)."""


def _name_stem(stem: str) -> str:
    """A spool file's stem as its segments' names hold it: letters, digits, ``.``, ``-`` and
    ``_`` as they are, anything else ``_``, then the stem's checksum, so two stems stay two
    (the collector's names, ``traces-<UTC time>[-<reason>]``, are kept as they are)."""
    safe = _UNSAFE.sub("_", stem)
    if safe == stem:
        return stem
    return f"{safe}_{zlib.crc32(stem.encode('utf-8', 'surrogateescape')):08x}"


def _segment_name(path: Path, checksum: int, offset: int) -> str:
    stem = _name_stem(path.name.removesuffix("." + _SUFFIX))
    return f"{_SEGMENT_PREFIX}{stem}-{checksum:08x}-{offset:012d}.parquet"


def _stem_of_segment(name: str) -> str | None:
    """The spool file stem a segment name was made from (``None``: not one of ours)."""
    if not name.startswith(_SEGMENT_PREFIX):
        return None
    parts = name.removeprefix(_SEGMENT_PREFIX).removesuffix(".parquet").rsplit("-", 2)
    return parts[0] if len(parts) == 3 else None


def _source_stem(name: str) -> str:
    """The stem of a spool file as its segments' names hold it."""
    return _name_stem(name.removesuffix("." + _SUFFIX))


@dataclass
class _LeftOut:
    """The messages of a file that were left out, by their offsets."""

    unparsed: list[int] = field(default_factory=list)
    """Messages that do not parse (OTLP requires UTF-8 strings; the Collector's receivers pass
    on whatever bytes a client sent)."""
    why: str = ""
    """Why the first of them does not parse."""
    unheld: list[int] = field(default_factory=list)
    """Messages with a value the store cannot hold."""

    def lines(self) -> list[str]:
        """What was left out, for the user."""
        lines = []
        if self.unparsed:
            lines.append(
                f"{len(self.unparsed)} message(s) that do not parse ({self.why}), at byte "
                f"{_offsets(self.unparsed)}, left out"
            )
        if self.unheld:
            lines.append(
                f"{len(self.unheld)} message(s) with values the store cannot hold (a time past "
                f"64 bits), at byte {_offsets(self.unheld)}, left out"
            )
        return lines


_OFFSETS_SHOWN: Final = 10


def _offsets(offsets: list[int]) -> str:
    shown = ", ".join(map(str, offsets[:_OFFSETS_SHOWN]))
    more = len(offsets) - _OFFSETS_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


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
        self._unreadable: set[Path] = set()
        """Files this process may not read: named once, left for a later start."""

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
        again = 1
        while target.exists():  # one still waiting, sealed as the clock read the same (or was
            again += 1  # set back since): a rename would replace it
            target = self.folder / f"{_STEM}-{now}-stop{again}.{_SUFFIX}"
        current.rename(target)
        return target

    def ingest(self) -> IngestReport:
        """Ingest every finished file, oldest first (first finishing what a crash left: the
        pending segments of files that will not be ingested again — gone, or kept aside as
        damaged — get their final names)."""
        report = IngestReport()
        finished = self.finished()
        again = {_source_stem(path.name) for path in finished}
        for name in self.store.pending():
            stem = _stem_of_segment(name)
            if stem is not None and stem not in again:
                self.store.finalize(name)
        for path in finished:
            if path not in self._unreadable:
                report.add(self.ingest_file(path))
        return report

    def ingest_file(self, path: Path) -> IngestReport:
        """Write the spans of one finished file into the store, then delete it (or keep it
        under a telling name, when part of it could not be read). The file is read a message
        at a time: a file of any size costs the memory of a segment's spans (at most
        ``segment_spans`` of them, :data:`SEGMENT_BYTES` of messages)."""
        try:
            handle = path.open("rb")
        except FileNotFoundError:  # gone since it was listed
            return IngestReport()
        except OSError as exc:
            return self._cannot_read(path, exc)
        with handle:
            size = os.fstat(handle.fileno()).st_size
            try:
                checksum = _checksum(handle, size)
            except OSError as exc:
                return self._cannot_read(path, exc)
            frames = Frames(handle, size)
            report = IngestReport(files=1)
            left_out = _LeftOut()
            columns = SegmentColumns()
            batch: list[tuple[int, bytes]] = []
            held = 0  # bytes of the messages in the batch
            for offset, message in frames:
                try:
                    append_export_request(columns, message)
                except DecodeError as exc:
                    left_out.unparsed.append(offset)
                    left_out.why = left_out.why or str(exc)
                    columns = SegmentColumns()  # it may hold part of the message's spans
                    for _, earlier in batch:
                        append_export_request(columns, earlier)
                    continue
                batch.append((offset, message))
                held += len(message)
                if len(columns) >= self.segment_spans or held >= SEGMENT_BYTES:
                    left_out.unheld += self._write_batch(columns, batch, path, checksum, report)
                    columns, batch, held = SegmentColumns(), [], 0
            if len(columns):
                left_out.unheld += self._write_batch(columns, batch, path, checksum, report)
        problems = left_out.lines()
        if frames.problem is not None:
            problems.append(f"{frames.problem} at byte {frames.end} of {size}")
        if not problems:
            path.unlink()
        else:
            damaged = frames.corrupt or bool(left_out.lines())
            kept = path.with_name(path.name + (CORRUPT if damaged else INCOMPLETE))
            path.rename(kept)
        for name in report.names:  # the file can no longer be ingested twice: final names
            self.store.finalize(name)
        if problems:
            landed = "of the other messages" if left_out.lines() else "before it"
            report.problems.append(
                f"{path}: {'; '.join(problems)}; the {report.spans} spans {landed} are in the "
                f"store, the file is kept as {kept.name}"
            )
        return report

    def _cannot_read(self, path: Path, exc: OSError) -> IngestReport:
        """A file this process may not read (its permissions, a read error): named, with why,
        and left as it is — not tried again by this process, ingested by a later start that
        may read it — rather than stopping the ingest of every other file."""
        self._unreadable.add(path)
        return IngestReport(
            problems=[
                f"{path}: cannot be read ({exc.strerror or exc}); it is left as it is, for a "
                "later start to ingest"
            ]
        )

    def _write_batch(
        self,
        columns: SegmentColumns,
        batch: list[tuple[int, bytes]],
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
