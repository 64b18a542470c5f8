"""A segment whose Parquet footer names a column in bytes that are not UTF-8: compaction sets
it aside like any unreadable segment and merges the rest (it raised ``UnicodeDecodeError``, and
every writer's compaction failed for good)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pyarrow.parquet as pq
from opentelemetry.sdk.resources import Resource

from otel_llm._env import OTEL_LLM_DB
from otel_llm._show._store._access import prepare_for_writing
from otel_llm._show._store._rows import span_row
from otel_llm._show._store._segments import SegmentStore
from tests.support.duckdb_store import MemoryCalls
from tests.support.processes import run_cli

SEGMENTS = 20
"""More small segments than a merge waits for."""


def _store_with_a_bad_footer(path: Path) -> tuple[SegmentStore, Path, int]:
    """A store of :data:`SEGMENTS` small segments, one of whose footers names ``SpanName`` in
    bytes that are not UTF-8; the store, that segment, and the rows of the others."""
    segments = prepare_for_writing(path)
    calls = MemoryCalls(Resource.create({"service.name": "damaged-footer"}))
    for _ in range(SEGMENTS):
        calls.exporter.clear()
        calls.call()
        segments.write([span_row(span) for span in calls.exporter.get_finished_spans()])
    written = sorted((path / "segments").glob("0*.parquet"))
    victim = written[5].resolve()
    good = sum(pq.ParquetFile(segment).metadata.num_rows for segment in written) - (
        pq.ParquetFile(victim).metadata.num_rows
    )
    data = bytearray(victim.read_bytes())
    footer = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]
    data[data.index(b"SpanName", footer)] = 0xFF
    victim.write_bytes(bytes(data))
    return SegmentStore(path), victim, good


def _rows(store: SegmentStore) -> int:
    return sum(pq.ParquetFile(segment.path).metadata.num_rows for segment in store.segments())


def test_compaction_sets_a_segment_with_a_non_utf8_footer_aside(tmp_path: Path) -> None:
    store, victim, good = _store_with_a_bad_footer(tmp_path / "store")
    merged = store.compact(min_segments=2, max_merges=None)
    assert merged == SEGMENTS - 1
    assert [path.name for path in store.quarantined()] == [victim.name]
    assert "utf-8" in (store.quarantine_dir / f"{victim.name}.why").read_text("utf-8")
    assert _rows(store) == good


def test_otel_llm_compact_names_the_segment_and_merges_the_rest(tmp_path: Path) -> None:
    store, victim, good = _store_with_a_bad_footer(tmp_path / "store")
    out = run_cli(
        "compact",
        "--db",
        str(store.path),
        env={k: v for k, v in os.environ.items() if k != OTEL_LLM_DB},
    )
    assert out.returncode == 0, out.stderr
    assert f"merged {SEGMENTS - 1} segments" in out.stdout
    assert victim.name in out.stdout + out.stderr
    assert [path.name for path in store.quarantined()] == [victim.name]
    assert _rows(store) == good
