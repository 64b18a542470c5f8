"""Memory the store's writer holds per span, in every state a span waits in: queued (a packed
record), converting (the segment being built: the slices encoded so far and one slice as
columns) and encoded (a segment that could not be written yet). Each is the growth per span
between two queue sizes — Python's allocations (tracemalloc) plus Arrow's (its memory pool) —
so the queue's span cap is a memory cap: ≤ 1 KB a span, plus a bounded constant (one slice)."""

from __future__ import annotations

import gc
import logging
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm._show import _duckdb_exporter
from otel_llm._show._duckdb_exporter import DuckDBSpanExporter
from tests.benchmark_modules import load_benchmark

pytestmark = pytest.mark.timeout(300)  # tracemalloc and a busy machine: minutes, not seconds

SIZES = (512, 1536)
"""Two queue sizes; the growth between them is what each further span costs."""
MOST_PER_SPAN = 1024
MOST_CONSTANT = 8 * 1024 * 1024
"""What does not grow with the queue: one slice being converted, the vocabulary."""

attempt_spans: Callable[..., list[ReadableSpan]] = load_benchmark(
    "store_throughput", "store_throughput_for_memory"
).attempt_spans


def _held() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0] + pa.total_allocated_bytes()


@pytest.fixture(autouse=True)
def _traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    """The spans a test leaves behind are counted as dropped at shutdown, with a warning."""
    log = logging.getLogger("otel_llm")
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = False


_MADE: dict[int, list[ReadableSpan]] = {}


@pytest.fixture(scope="module", autouse=True)
def _made() -> Iterator[None]:
    """The spans, made once before anything is traced (only what the exporter holds is)."""
    for count in (1, *SIZES):
        spans = attempt_spans(count, seed=count)
        assert all(len(span.events) == 31 for span in spans)  # the benchmark's attempt span
        roles = {(span.attributes or {}).get(sc.SPAN_ROLE) for span in spans}
        assert roles == {sc.SPAN_ROLE_ATTEMPT}
        _MADE[count] = spans
    yield
    _MADE.clear()


def _spans(count: int) -> list[ReadableSpan]:
    return _MADE[count]


def _unwritable(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    return blocker / "store"


def _per_span(held: Callable[[int], int]) -> tuple[float, float]:
    """Growth per span between the two sizes, and what is left at the smaller one (after a
    first round that loads what is loaded once: Arrow's Parquet writer, zstd)."""
    held(SIZES[0])
    small, large = (held(size) for size in SIZES)
    slope = (large - small) / (SIZES[1] - SIZES[0])
    return slope, small - slope * SIZES[0]


def _queued(tmp_path: Path, count: int) -> int:
    exporter = DuckDBSpanExporter(
        tmp_path / f"{count}-{len(list(tmp_path.glob('*')))}" / "store",
        flush_interval_s=3600,
        segment_spans=10 * count,
        shutdown_timeout_s=120,  # a busy machine: shutdown writes them all
    )
    exporter.export(_spans(1))  # the vocabulary's first entries are not the queue's
    before = _held()
    spans = _spans(count)
    exporter.export(spans)
    del spans
    held = _held() - before
    assert exporter.stats.pending == count + 1
    exporter.shutdown()  # writes them all
    assert exporter.stats.written == count + 1
    return held


def _converting(tmp_path: Path, count: int, monkeypatch: pytest.MonkeyPatch) -> int:
    """Held while the writer builds a segment of ``count`` spans, caught as it converts the
    last slice (every other slice is encoded by then)."""
    exporter: DuckDBSpanExporter | None = None
    caught, release = threading.Event(), threading.Event()
    last_slice = min(DEFAULTS.export_slice_spans, count)

    class Catch(_duckdb_exporter._Pause):
        __slots__ = ("_calls",)

        def __init__(self) -> None:
            super().__init__()
            self._calls = 0

        def __call__(self) -> None:
            if exporter is not None and exporter._converting == count and not caught.is_set():
                self._calls += 1
                if self._calls >= last_slice + 6:  # its records appended, its arrays built
                    caught.set()
                    release.wait(120)
            super().__call__()

    monkeypatch.setattr(_duckdb_exporter, "_Pause", Catch)
    before = _held()
    spans = _spans(count)
    exporter = DuckDBSpanExporter(
        tmp_path / f"{count}-{id(caught)}" / "store", flush_interval_s=3600, segment_spans=count
    )
    exporter.export(spans)
    del spans
    assert caught.wait(120), "the writer never reached the last slice"
    held = _held() - before
    release.set()
    caught.clear()
    assert exporter.force_flush(120_000)
    assert exporter.stats.written == count
    exporter.shutdown()
    return held


def _encoded(tmp_path: Path, count: int) -> int:
    exporter = DuckDBSpanExporter(
        _unwritable(tmp_path / f"{count}-{len(list(tmp_path.glob('*')))}"),
        retry_s=3600,
        shutdown_timeout_s=0.1,
    )
    before = _held()
    spans = _spans(count)
    exporter.export(spans)
    del spans
    assert not exporter.force_flush(120_000)  # encoded, then the store could not be written
    held = _held() - before
    stats = exporter.stats
    assert (stats.pending, stats.written, stats.last_error is not None) == (count, 0, True)
    exporter.shutdown()
    return held


def test_a_queued_span_costs_under_1_kb(tmp_path: Path) -> None:
    """A span waiting for the writer is its packed record (an SDK span was ~15 KB)."""
    slope, constant = _per_span(lambda count: _queued(tmp_path, count))
    assert slope <= MOST_PER_SPAN, f"{slope:.0f} B per queued span"
    assert constant <= MOST_CONSTANT


def test_a_span_being_converted_costs_under_1_kb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment being built holds its spans encoded, and one slice as columns."""
    slope, constant = _per_span(lambda count: _converting(tmp_path, count, monkeypatch))
    assert slope <= MOST_PER_SPAN, f"{slope:.0f} B per span being converted"
    assert constant <= MOST_CONSTANT, f"{constant / 2**20:.1f} MiB besides the spans"


def test_an_encoded_span_waiting_for_the_disk_costs_under_1_kb(tmp_path: Path) -> None:
    """A segment the store could not take waits as its Parquet bytes, and is retried."""
    slope, constant = _per_span(lambda count: _encoded(tmp_path, count))
    assert slope <= MOST_PER_SPAN, f"{slope:.0f} B per encoded span"
    assert constant <= MOST_CONSTANT
