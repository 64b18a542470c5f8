"""The embedded default: spans written to a DuckDB file by one writer thread.

``export()`` only queues the spans, so the application's event loop never waits on the disk.
The writer thread opens the file, writes a batch and closes it again, so other processes (the
CLI, Grafana, a second application) can open the file between batches. When the file is busy
or cannot be written, spans stay queued and the write is retried; past ``max_pending`` spans the
oldest are dropped and counted in a warning. At shutdown, spans that still could not be written
are spilled to a JSON-lines file beside the database and loaded the next time a write succeeds;
a store that is already failing gets one last attempt instead of the whole shutdown wait, the
spill directory is bounded (``spill_max_bytes``, oldest files dropped first), and a file that is
not a DuckDB database is named as needing repair. Nothing is lost silently, and nothing here
ever raises into the application.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import duckdb
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_llm._defaults import DEFAULTS
from otel_llm._show._rows import batch_json, insert_sql, span_row
from otel_llm._show._schema import migrate

logger = logging.getLogger("otel_llm")

_RETRYABLE = (duckdb.IOException, duckdb.TransactionException, OSError)
"""Failures of the file, not of the rows: the batch waits and is written again."""


def is_corrupt(exc: BaseException) -> bool:
    """True when DuckDB refused the file itself: it is not (or no longer) a DuckDB database."""
    text = str(exc)
    return isinstance(exc, duckdb.Error) and (
        "not a valid DuckDB database" in text or "Corrupt" in text or "corrupt" in text
    )


def is_locked(exc: BaseException) -> bool:
    """True when another process holds the file's lock (a writer's batch, or a reader)."""
    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()


@dataclass(frozen=True, slots=True)
class ExportStats:
    """Counters of one exporter, for tests, the CLI and operators."""

    written: int
    pending: int
    dropped: int
    retries: int
    spilled: int
    last_error: str | None


NO_EXTENSIONS: Final = {"autoload_known_extensions": False, "autoinstall_known_extensions": False}
"""Opening a store never loads or downloads a DuckDB extension (DuckDB would, for a SQLite
file given as the store)."""


def connect(path: Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open ``path`` writing the storage format Grafana's embedded DuckDB can read."""
    if read_only:
        return duckdb.connect(str(path), read_only=True, config=dict(NO_EXTENSIONS))
    config: dict[str, str | bool | int | float | list[str]] = {
        **NO_EXTENSIONS,
        "storage_compatibility_version": DEFAULTS.duckdb_storage_version,
    }
    return duckdb.connect(str(path), config=config)


class DuckDBSpanExporter(SpanExporter):
    """Writes finished spans to ``otel_traces`` in a DuckDB file (see the module docstring)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_pending: int = DEFAULTS.export_max_pending_spans,
        retry_s: float = DEFAULTS.export_lock_retry_s,
        shutdown_timeout_s: float = DEFAULTS.shutdown_timeout_s,
        shutdown_lock_grace_s: float = DEFAULTS.shutdown_lock_grace_s,
        spill_max_bytes: int = DEFAULTS.spill_max_bytes,
    ) -> None:
        self.path = Path(path)
        self._max_pending = max_pending
        self._spill_max_bytes = spill_max_bytes
        self._retry_s = retry_s
        self._shutdown_timeout_s = shutdown_timeout_s
        self._lock_grace_s = min(shutdown_timeout_s, shutdown_lock_grace_s)
        self._queue: deque[ReadableSpan] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._stopping = False
        self._closed = False
        self._written = self._dropped = self._retries = self._spilled = 0
        self._last_error: str | None = None
        self._locked = False
        """Whether the last failure was another process holding the file's lock."""
        self._last_warning = 0.0
        self._unreported_drops = 0
        self._thread: threading.Thread | None = None

    # --- SpanExporter --------------------------------------------------------------------------

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Queue ``spans`` for the writer thread; never blocks on I/O."""
        with self._cond:
            if self._closed:
                self._count_drop(len(spans), "the exporter is shut down")
                return SpanExportResult.FAILURE
            self._queue.extend(spans)
            overflow = len(self._queue) - self._max_pending
            for _ in range(max(0, overflow)):
                self._queue.popleft()
            if overflow > 0:
                self._count_drop(overflow, f"more than {self._max_pending} spans waiting")
            self._ensure_thread()
            self._cond.notify_all()
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Wait until every queued span is written; False on timeout."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._cond:
            self._cond.notify_all()
            while self._queue or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def shutdown(self) -> None:
        """Write what can be written, spill the rest to disk, stop the writer thread.

        A healthy store is given up to ``shutdown_timeout_s`` to write what is queued; once a
        write fails (before or during that wait) the writer gets one more attempt and stops, so
        a broken file never holds the process's exit for the whole timeout. A file another
        process holds locked is tried for ``shutdown_lock_grace_s`` first (another writer's
        batch takes milliseconds; a reader that keeps it open costs that much, no more).
        """
        started = time.monotonic()
        deadline = started + self._shutdown_timeout_s
        lock_deadline = started + self._lock_grace_s
        with self._cond:
            self._cond.notify_all()
            while self._queue or self._busy:
                now = time.monotonic()
                if self._last_error is not None and not (self._locked and now < lock_deadline):
                    break
                remaining = (deadline if self._last_error is None else lock_deadline) - now
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
        with self._cond:
            if self._closed:
                return
            self._closed = self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(self._shutdown_timeout_s)
        with self._cond:
            leftover = list(self._queue)
            self._queue.clear()
        if leftover:
            self._spill(leftover)

    @property
    def stats(self) -> ExportStats:
        """A snapshot of the counters."""
        with self._cond:
            return self._stats()

    def wait_for(self, predicate: Callable[[ExportStats], bool], timeout_s: float) -> bool:
        """Block until ``predicate(stats)`` holds (checked after every write attempt)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not predicate(self._stats()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def _stats(self) -> ExportStats:
        return ExportStats(
            written=self._written,
            pending=len(self._queue),
            dropped=self._dropped,
            retries=self._retries,
            spilled=self._spilled,
            last_error=self._last_error,
        )

    # --- writer thread ------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="otel-llm-duckdb-writer", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if self._stopping and not self._queue:
                    return
                batch = [
                    self._queue.popleft()
                    for _ in range(min(DEFAULTS.export_batch_spans, len(self._queue)))
                ]
                self._busy = True
            try:
                written = self._write_spans(batch)
            except Exception:  # the writer thread must never die: count the batch and go on
                logger.exception("otel-llm: unexpected error writing %d spans", len(batch))
                with self._cond:
                    self._count_drop(len(batch), "an unexpected error in the writer")
                written = 0
            with self._cond:
                self._busy = False
                if written is not None:
                    self._written += written
                    self._last_error = None
                else:
                    self._queue.extendleft(reversed(batch))
                    self._retries += 1
                self._cond.notify_all()
                if written is None:
                    if self._stopping:
                        return
                    self._cond.wait(self._retry_s)

    def _rows(self, spans: Sequence[ReadableSpan]) -> list[dict[str, Any]]:
        rows = []
        for span in spans:
            try:
                rows.append(span_row(span))
            except Exception:
                logger.exception("otel-llm: span %r could not be converted; dropped", span.name)
                with self._cond:
                    self._count_drop(1, "a span could not be converted")
        return rows

    def _write_spans(self, spans: Sequence[ReadableSpan]) -> int | None:
        """Write ``spans``; the number written, or ``None`` when the file is busy or broken
        and the whole batch should be retried."""
        rows = self._rows(spans)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = connect(self.path)
        except (duckdb.Error, OSError) as exc:
            self._note_failure(exc, len(spans))
            return None
        try:
            migrate(conn)
            written = self._insert(conn, rows)
        except _RETRYABLE as exc:
            self._note_failure(exc, len(spans))
            return None
        finally:
            conn.close()
        return written

    def _insert(self, conn: duckdb.DuckDBPyConnection, rows: Sequence[dict[str, Any]]) -> int:
        """Insert ``rows`` and then any spilled spans; the number of ``rows`` written."""
        written = self._insert_rows(conn, rows)
        try:
            self._load_spills(conn)
        except _RETRYABLE as exc:  # the batch is in; the spills wait for the next write
            logger.warning("otel-llm: spilled spans wait for the next write (%s)", exc)
        return written

    def _insert_rows(self, conn: duckdb.DuckDBPyConnection, rows: Sequence[dict[str, Any]]) -> int:
        """One statement for all ``rows``; if the rows themselves are refused (not the file),
        one statement each, counting those refused. File failures propagate."""
        if not rows:
            return 0
        try:
            conn.execute(insert_sql(), [batch_json(rows)])
            return len(rows)
        except _RETRYABLE:
            raise
        except duckdb.Error:
            pass
        written = 0
        for row in rows:
            try:
                conn.execute(insert_sql(), [batch_json([row])])
                written += 1
            except _RETRYABLE:
                raise
            except duckdb.Error as exc:
                with self._cond:
                    self._count_drop(1, f"a row was refused: {exc}")
        return written

    def _note_failure(self, exc: BaseException, in_hand: int) -> None:
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        with self._cond:
            self._last_error = message
            self._locked = is_locked(exc)
            pending = len(self._queue) + in_hand
        now = time.monotonic()
        if now - self._last_warning >= DEFAULTS.export_warn_every_s:
            self._last_warning = now
            if is_corrupt(exc):
                logger.warning(
                    "otel-llm: %s is not a readable DuckDB database (corrupt, or another kind "
                    "of file) and needs repair: move it away or delete it. %d spans held, "
                    "retrying every %g s; spans still held at exit are spilled to %s (%s)",
                    self.path,
                    pending,
                    self._retry_s,
                    self.spill_dir,
                    message,
                )
                return
            logger.warning(
                "otel-llm: cannot write spans to %s (%s); %d spans held, retrying every %g s",
                self.path,
                message,
                pending,
                self._retry_s,
            )

    def _count_drop(self, count: int, why: str) -> None:
        """Count dropped spans and warn (at most every few seconds). Caller holds the lock."""
        self._dropped += count
        self._unreported_drops += count
        now = time.monotonic()
        if now - self._last_warning >= DEFAULTS.export_warn_every_s or self._closed:
            self._last_warning = now
            logger.warning(
                "otel-llm: dropped %d spans for %s (%s); %d dropped in total",
                self._unreported_drops,
                self.path,
                why,
                self._dropped,
            )
            self._unreported_drops = 0

    # --- spill files ----------------------------------------------------------------------------

    @property
    def spill_dir(self) -> Path:
        """Where spans that could not be written at shutdown wait for the next write."""
        return self.path.with_name(self.path.name + ".spill")

    def _spill(self, spans: Sequence[ReadableSpan]) -> None:
        rows = self._rows(spans)
        target = self.spill_dir / f"{os.getpid()}-{time.time_ns()}.jsonl"
        tmp = target.with_suffix(".tmp")
        lines = [json.dumps(row, separators=(",", ":")) + "\n" for row in rows]
        kept, size = len(lines), 0
        for index in range(len(lines) - 1, -1, -1):  # the newest spans that fit the bound
            size += len(lines[index].encode("utf-8"))
            if size > self._spill_max_bytes:
                kept = len(lines) - 1 - index
                break
        if kept < len(lines):
            with self._cond:
                self._count_drop(
                    len(lines) - kept,
                    f"the spill alone is larger than the spill bound ({self._spill_max_bytes} "
                    "bytes); its oldest spans were left out",
                )
            lines = lines[len(lines) - kept :]
            rows = rows[len(rows) - kept :]
            if not lines:
                return
        text = "".join(lines)
        try:
            self.spill_dir.mkdir(parents=True, exist_ok=True)
            self._make_room(len(text.encode("utf-8")))
            with tmp.open("w", encoding="utf-8") as handle:
                handle.write(text)
            tmp.replace(target)
        except OSError as exc:
            with contextlib.suppress(OSError):  # a full disk must not leave half a spill
                tmp.unlink(missing_ok=True)
            with self._cond:
                self._count_drop(len(rows), f"spill to {target} failed: {exc}")
            return
        with self._cond:
            self._spilled += len(rows)
        logger.warning(
            "otel-llm: %s was not writable (%s); %d spans saved to %s and will be loaded "
            "at the next successful write",
            self.path,
            self._last_error,
            len(rows),
            target,
        )

    def _make_room(self, needed: int) -> None:
        """Drop the oldest spill files until ``needed`` more bytes fit the bound."""
        found: list[tuple[int, Path, int]] = []
        for spill in self.spill_dir.glob("*.jsonl"):
            with contextlib.suppress(OSError):  # another process may be loading it
                info = spill.stat()
                found.append((info.st_mtime_ns, spill, info.st_size))
        total = sum(size for _, _, size in found)
        for _, spill, size in sorted(found):  # oldest first
            if total + needed <= self._spill_max_bytes:
                break
            try:
                with spill.open("rb") as handle:
                    lines = sum(1 for _ in handle)
                spill.unlink()
            except OSError:
                continue
            total -= size
            with self._cond:
                self._count_drop(
                    lines,
                    f"the spill directory {self.spill_dir} is full "
                    f"({self._spill_max_bytes} bytes); the oldest spill {spill.name} was dropped",
                )

    def _load_spills(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Load spill files left by earlier shutdowns. A busy database leaves them for the next
        write; lines that are not rows, or rows the table refuses, are counted as dropped."""
        directory = self.spill_dir
        if not directory.is_dir():
            return
        for spill in sorted(directory.glob("*.jsonl")):
            claimed = spill.with_suffix(f".loading-{os.getpid()}")
            try:
                spill.rename(claimed)
                lines = [line for line in claimed.read_text("utf-8").splitlines() if line]
            except OSError:
                continue  # another process took it, or it cannot be read now
            rows = []
            for line in lines:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    with self._cond:
                        self._count_drop(1, f"a line of {spill} is not a span")
            try:
                written = self._insert_rows(conn, rows)
            except _RETRYABLE:
                claimed.rename(spill)  # try again at the next write
                raise
            claimed.unlink()
            logger.info("otel-llm: loaded %d spilled spans from %s", written, spill)
