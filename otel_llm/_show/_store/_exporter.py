"""The embedded default: spans written by one writer thread as sealed segments of the store.

``export()`` only packs the spans (:mod:`._records`: a few hundred bytes each, so the cap on
waiting spans is a cap on memory) and queues them, so the application's event loop never waits
on the disk. The writer thread converts queued spans a slice at a time (so it never holds the
GIL for long) into Arrow columns, encodes them as one Parquet segment at least every
``flush_interval_s`` (or sooner, when ``segment_spans`` are waiting, or on ``force_flush``),
and seals it into the store (:mod:`._segments`). Segments of this process never touch another
process's files, so any number of writers and readers share a store without a lock.

A segment that cannot be written (a full disk, a path that is not a store) stays in memory as
its encoded bytes (a few hundred bytes a span) and is retried; past ``max_pending`` spans the
oldest are dropped and counted in a warning, and so are the spans a shutdown could not write.
Nothing is lost silently, and nothing here ever raises into the application.

The writer thread imports DuckDB, Arrow and Parquet itself, first thing (:meth:`start`, which
``init()`` calls as it returns, or the first span), so constructing an exporter costs none of
their ~0.4 s; a ``fork()`` waits until that load is done (a bounded while: a child that still
inherits an import half made by a thread it does not have says so in a warning). A process that
shuts down at once waits for the load instead, at exit.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_llm._children import shut_down_in_children
from otel_llm._defaults import DEFAULTS
from otel_llm._show._store._records import PackedSpan, pack

if TYPE_CHECKING:
    from otel_llm._show._store._segments import SegmentStore

logger = logging.getLogger("otel_llm")

_YIELD_AFTER_S: Final = 0.0005
"""The writer gives the GIL away after this much work..."""
_YIELD_S: Final = 0.0001
"""...for this long: enough for a waiting thread (the event loop) to take it."""


@dataclass(frozen=True, slots=True)
class ExportStats:
    """Counters of one exporter, for tests, the CLI and operators."""

    written: int
    pending: int
    dropped: int
    retries: int
    segments: int
    last_error: str | None


def _before_fork(reference: weakref.ref[SegmentSpanExporter]) -> None:
    exporter = reference()
    if exporter is None:
        return
    if exporter._thread is not None:
        exporter._loaded_at_fork = exporter._loaded.wait(DEFAULTS.export_fork_waits_s)
    _written_by_multiprocessing_children(exporter)


def _written_by_multiprocessing_children(exporter: SegmentSpanExporter) -> None:
    """The spans the writer still holds in a ``multiprocessing`` fork child are written as it
    exits (:mod:`otel_llm._children`): registered once."""
    if not exporter._children_written:
        exporter._children_written = shut_down_in_children(exporter)


def _after_fork(reference: weakref.ref[SegmentSpanExporter]) -> None:
    exporter = reference()
    if exporter is not None:
        if not exporter._loaded_at_fork:
            logger.warning(
                "otel-llm: this process was forked while the store's writer was still importing "
                "DuckDB and Arrow (%g s after it began); importing them here may never return",
                DEFAULTS.export_fork_waits_s,
            )
        exporter._forked()


class _Pause:
    """Sleeps ``_YIELD_S`` once ``_YIELD_AFTER_S`` of work went by since the last sleep."""

    __slots__ = ("_since",)

    def __init__(self) -> None:
        self._since = time.perf_counter()

    def __call__(self) -> None:
        if time.perf_counter() - self._since >= _YIELD_AFTER_S:
            time.sleep(_YIELD_S)
            self._since = time.perf_counter()


@dataclass(slots=True)
class _Encoded:
    """A segment that is encoded and waits to be sealed."""

    data: bytes
    spans: int
    first: int
    """The queue number of its oldest span (:attr:`SegmentSpanExporter._queued`)."""


class SegmentSpanExporter(SpanExporter):
    """Writes finished spans into the segment store at ``path`` (see the module docstring)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_pending: int = DEFAULTS.export_max_pending_spans,
        retry_s: float = DEFAULTS.export_retry_s,
        flush_interval_s: float = DEFAULTS.export_flush_interval_s,
        segment_spans: int = DEFAULTS.export_segment_spans,
        shutdown_timeout_s: float = DEFAULTS.shutdown_timeout_s,
        compact_every_s: float = DEFAULTS.compact_every_s,
    ) -> None:
        self.path = Path(path)
        self._max_pending = max_pending
        self._retry_s = retry_s
        self._flush_interval_s = flush_interval_s
        self._segment_spans = max(1, segment_spans)
        self._shutdown_timeout_s = shutdown_timeout_s
        self._compact_every_s = compact_every_s
        self._queue: deque[PackedSpan] = deque()
        """Finished spans packed (a few hundred bytes each, where an SDK span holds ~15 KB)."""
        self._encoded: deque[_Encoded] = deque()
        self._encoded_spans = 0
        self._converting = 0
        """Spans taken from the queue and not yet encoded (the writer holds them)."""
        self._cond = threading.Condition()
        self._queued = 0
        """Spans queued so far: each queued span's number is this count when it came, so the
        spans a flush waits for are those numbered below the count when it asked."""
        self._converting_first = 0
        """The number of the oldest span the writer is converting (while it converts any)."""
        self._flush_before = 0
        """Spans numbered below this are sealed now, interval or not (a flush asked for them)."""
        self._busy = False
        self._stopping = False
        self._closed = False
        self._written = self._dropped = self._retries = self._segments = 0
        self._last_error: str | None = None
        self._failed_at = 0.0
        self._attempts = 0
        """Writes tried (a flush waits for one made after it asked)."""
        self._last_warning = 0.0
        self._unreported_drops = 0
        self._oldest_queued = 0.0
        self._store: SegmentStore | None = None
        self._sealing: _Encoded | None = None
        """The segment being written now (never dropped from under the writer)."""
        self._abandoned = False
        """Shutdown gave up waiting; what the writer still seals was counted as dropped."""
        self._last_compaction: float | None = None
        """When this writer last looked for segments to merge (``None``: never yet — it looks
        after its first segment, and as it stops if it never did, so a store written only by
        processes that live less than ``compact_every_s`` is merged too)."""
        self._thread: threading.Thread | None = None
        self._loaded = threading.Event()
        """Set once the writer imported DuckDB, Arrow and Parquet (or failed to)."""
        self._loaded_at_fork = True
        """Whether that load had ended when the process last forked (a child checks)."""
        self._children_written = False
        """Set once multiprocessing's fork children are made to write before they exit."""
        reference = weakref.ref(self)
        os.register_at_fork(
            before=lambda: _before_fork(reference),
            after_in_child=lambda: _after_fork(reference),
        )

    def start(self) -> None:
        """Start the writer thread now rather than at the first span: it loads DuckDB, Arrow
        and Parquet first, so they are ready when the first segment is due."""
        with self._cond:
            self._ensure_thread()

    # --- SpanExporter --------------------------------------------------------------------------

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Pack ``spans`` and queue them for the writer thread; never blocks on I/O."""
        packed = []
        for span in spans:
            try:
                packed.append(pack(span))
            except Exception:
                logger.exception("otel-llm: span %r could not be converted; dropped", span.name)
                with self._cond:
                    self._count_drop(1, "a span could not be converted")
        with self._cond:
            if self._closed:
                self._count_drop(len(packed), "the exporter is shut down")
                return SpanExportResult.FAILURE
            if not self._queue:
                self._oldest_queued = time.monotonic()
            self._queue.extend(packed)
            self._queued += len(packed)
            self._shed()
            self._ensure_thread()
            if len(self._queue) >= self._segment_spans or len(self._queue) == len(packed):
                self._cond.notify_all()
        return SpanExportResult.SUCCESS

    def _forked(self) -> None:
        """In a child process: a writer of its own, and none of the parent's spans (the
        parent writes those)."""
        self._cond = threading.Condition()
        self._loaded = threading.Event()
        self._loaded_at_fork = True
        self._queue.clear()
        self._encoded.clear()
        self._encoded_spans = self._converting = self._queued = 0
        self._converting_first = self._flush_before = 0
        self._written = self._dropped = self._retries = self._segments = self._attempts = 0
        self._busy = False
        self._sealing = None
        self._store = None
        self._thread = None

    def _shed(self) -> None:
        """Drop the oldest spans beyond ``max_pending`` (encoded segments first: they are the
        oldest). Caller holds the lock."""
        overflow = self._held() - self._max_pending
        dropped = 0
        while overflow > 0 and self._encoded:
            if self._encoded[0] is self._sealing:  # being written now: the next one goes
                if len(self._encoded) == 1:
                    break
                segment = self._encoded[1]
                del self._encoded[1]
            else:
                segment = self._encoded.popleft()
            self._encoded_spans -= segment.spans
            overflow -= segment.spans
            dropped += segment.spans
        while overflow > 0 and self._queue:
            self._queue.popleft()
            overflow -= 1
            dropped += 1
        if dropped:
            self._count_drop(dropped, f"more than {self._max_pending} spans waiting")

    def _held(self) -> int:
        return len(self._queue) + self._converting + self._encoded_spans

    def _oldest_held(self) -> int:
        """The number of the oldest span still held (:attr:`_queued` when none is): every
        span numbered below it is sealed or counted as dropped. Caller holds the lock."""
        oldest = self._queued - len(self._queue)
        if self._converting:
            oldest = min(oldest, self._converting_first)
        for segment in self._encoded:
            oldest = min(oldest, segment.first)
        return oldest

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Seal every span queued before the call into the store now; False on timeout (or
        when the store cannot be written: the spans stay held and are retried). Spans queued
        meanwhile (other threads go on ending spans) are not waited for."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._cond:
            wanted = self._queued
            if self._oldest_held() >= wanted:
                return True
            self._flush_before = max(self._flush_before, wanted)
            attempts = self._attempts
            self._cond.notify_all()
            while self._oldest_held() < wanted:
                remaining = deadline - time.monotonic()
                failed = self._attempts > attempts and self._last_error is not None
                if remaining <= 0 or (failed and not self._busy):
                    return False
                self._cond.wait(remaining)
            return True

    def shutdown(self) -> None:
        """Write what can be written within ``shutdown_timeout_s``, then stop the writer; the
        spans it could not write are counted as dropped, with a warning naming the store."""
        deadline = time.monotonic() + self._shutdown_timeout_s
        with self._cond:
            if self._closed:
                return
            self._closed = self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            lost = self._held()
            self._abandoned = True  # a segment the writer still seals is taken off ``dropped``
            self._queue.clear()
            sealing = self._sealing
            in_flight = [sealing] if sealing is not None and sealing in self._encoded else []
            self._encoded = deque(in_flight)
            self._encoded_spans = sum(segment.spans for segment in in_flight)
            if lost:
                self._count_drop(lost, f"they could not be written before shutdown ({self._why()})")
            self._cond.notify_all()

    def _why(self) -> str:
        return self._last_error or f"the writer took longer than {self._shutdown_timeout_s:g} s"

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
            pending=self._held(),
            dropped=self._dropped,
            retries=self._retries,
            segments=self._segments,
            last_error=self._last_error,
        )

    # --- writer thread ------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        """Start the writer thread unless it runs; a thread that cannot start (the process is
        out of threads) is a warning, and the next span tries again."""
        if self._thread is not None:
            return
        thread = threading.Thread(target=self._run, name="otel-llm-store-writer", daemon=True)
        try:
            thread.start()
        except RuntimeError as exc:
            logger.warning("otel-llm: could not start the store's writer thread (%s)", exc)
            return
        self._thread = thread

    def _due(self) -> float | None:
        """Seconds until the writer should seal a segment (0: now; None: nothing to do).
        Caller holds the lock."""
        if self._stopping or self._oldest_held() < self._flush_before:
            return 0.0 if (self._queue or self._encoded) else None
        if self._encoded:
            if self._last_error is None:
                return 0.0
            return max(0.0, self._failed_at + self._retry_s - time.monotonic())
        if not self._queue:
            return None
        if len(self._queue) >= self._segment_spans:
            return 0.0
        return max(0.0, self._oldest_queued + self._flush_interval_s - time.monotonic())

    def _load(self) -> None:
        """Import what writing needs and encode one empty segment, so the first real segment
        pays no import: this runs first in the writer thread, started by the constructor, so
        ``init()`` returns without waiting for DuckDB, Arrow, Parquet (and pandas, which Arrow
        imports when it is installed) — ~0.5 s that now overlaps the application's own start."""
        try:
            from otel_llm._show._store import _access  # noqa: F401  (DuckDB, for sealing)
            from otel_llm._show._store._columns import warm_table
            from otel_llm._show._store._segments import encode

            encode(warm_table())
        except Exception:  # the first seal meets the same error and reports it
            logger.debug("otel-llm: the store writer could not load its libraries", exc_info=True)
        finally:
            self._loaded.set()

    def _run(self) -> None:
        self._load()
        while True:
            with self._cond:
                while True:
                    due = self._due()
                    if due == 0.0:
                        break
                    if due is None and self._stopping:
                        return
                    self._cond.wait(due)
                self._busy = True
            try:
                self._convert()
                self._seal()
            except Exception:  # the writer thread must never die: count what it held, go on
                logger.exception("otel-llm: unexpected error in the store writer")
                with self._cond:  # the encoded segments are whole: they wait for the next seal
                    lost, self._converting = self._converting, 0
                    self._count_drop(lost, "an unexpected error in the writer")
            with self._cond:
                self._busy = False
                if self._encoded and self._last_error is not None:
                    self._flush_before = 0  # its flushes return False; retried at the pace
                self._cond.notify_all()
                if self._stopping and self._encoded and self._last_error is not None:
                    return  # one last attempt failed: shutdown counts what is left
            self._maybe_compact()

    def _convert(self) -> None:
        """Turn up to one segment's worth of queued spans into an encoded segment. Spans are
        converted a slice at a time, each slice its own Arrow table (so no single Arrow call
        holds the GIL for long), and the writer sleeps briefly whenever it has run for
        ``_YIELD_AFTER_S`` — a thread that only switches when the interpreter forces it would
        keep the event loop waiting up to the 5 ms switch interval at every wake-up."""
        import pyarrow as pa

        from otel_llm._show._store._columns import SegmentColumns
        from otel_llm._show._store._segments import encode

        tables: list[pa.Table] = []
        converted = 0
        pause = _Pause()
        while converted < self._segment_spans:
            with self._cond:
                take = min(DEFAULTS.export_slice_spans, len(self._queue))
                take = min(take, self._segment_spans - converted)
                if take and not self._converting:
                    self._converting_first = self._queued - len(self._queue)
                spans = [self._queue.popleft() for _ in range(take)]
                self._converting += take
            if not spans:
                break
            columns = SegmentColumns()
            for span in spans:
                try:
                    columns.append_packed(span)
                except Exception:
                    logger.exception("otel-llm: a queued span could not be converted; dropped")
                    with self._cond:
                        self._converting -= 1
                        self._count_drop(1, "a span could not be converted")
                pause()
            del spans
            converted += len(columns)
            if len(columns):
                tables.append(columns.table(pause))
        if not tables:
            return
        data = encode(pa.concat_tables(tables))
        with self._cond:
            self._converting -= converted
            self._encoded.append(_Encoded(data, converted, self._converting_first))
            self._encoded_spans += converted

    def _seal(self) -> None:
        """Seal the encoded segments, oldest first; on failure they stay and are retried."""
        while True:
            with self._cond:
                if not self._encoded:
                    return
                segment = self._sealing = self._encoded[0]
            try:
                if self._store is None:
                    from otel_llm._show._store._access import prepare_for_writing

                    self._store = prepare_for_writing(self.path)
                self._store.write(segment.data)
            except Exception as exc:  # a full disk, not a store, a migration's DuckDB error
                with self._cond:
                    self._sealing = None
                self._note_failure(exc)
                return
            with self._cond:
                self._attempts += 1
                self._sealing = None
                if self._encoded and self._encoded[0] is segment:
                    self._encoded.popleft()
                    self._encoded_spans -= segment.spans
                if self._abandoned:  # shutdown counted these as lost; they made it after all
                    self._dropped -= segment.spans
                self._written += segment.spans
                self._segments += 1
                self._last_error = None

    def _maybe_compact(self) -> None:
        store = self._store
        now = time.monotonic()
        if store is None:
            return
        if self._last_compaction is not None and (
            self._stopping or now - self._last_compaction < self._compact_every_s
        ):
            return
        self._last_compaction = now
        try:
            store.compact()  # logs each merge (debug)
        except Exception as exc:  # merging is an optimisation: never lose the writer to it
            logger.warning("otel-llm: could not merge the segments of %s (%s)", self.path, exc)

    def _note_failure(self, exc: BaseException) -> None:
        message = f"{type(exc).__name__}: {exc}".splitlines()[0]
        with self._cond:
            self._attempts += 1
            self._last_error = message
            self._failed_at = time.monotonic()
            self._retries += 1
            self._store = None  # look at the path again next time (it may have been repaired)
            pending = self._held()
        now = time.monotonic()
        if now - self._last_warning >= DEFAULTS.export_warn_every_s:
            self._last_warning = now
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
