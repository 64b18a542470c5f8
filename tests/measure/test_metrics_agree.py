"""The metrics tell the store's story: counted and summed over a run of every kind of call, they
give the figures the store gives for the same calls."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)

from otel_llm import SegmentSpanExporter
from otel_llm import _semconv as sc
from otel_llm._env import OTEL_LLM_METRICS_CHUNK_GAPS
from otel_llm._measure._metric_names import (
    ATTEMPTS,
    CHUNK_GAP,
    DURATION,
    HEDGE_WASTED_CHUNKS,
    HEDGES,
    STALL,
    STALL_COUNT,
)
from otel_llm._show._store._breakdown import run_query
from tests.support.panel_calls import panel_spans


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[object]]]:
    """The panel calls (smooth, stalled, hedged, failed over, killed, failed, cancelled, not
    streamed; two services) with their spans in a store and their metrics -- the per-gap
    histogram too -- in memory."""
    reader = InMemoryMetricReader()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(OTEL_LLM_METRICS_CHUNK_GAPS, "true")
        spans = panel_spans(MeterProvider(metric_readers=[reader]))
    store = tmp_path_factory.mktemp("agree") / "store"
    exporter = SegmentSpanExporter(store)
    exporter.export(spans)
    assert exporter.force_flush(60_000)
    exporter.shutdown()
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[object]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points.setdefault(metric.name, []).extend(metric.data.data_points)
    return store, points


def _histograms(points: dict[str, list[object]], name: str) -> list[HistogramDataPoint]:
    found = points.get(name, [])
    assert all(isinstance(p, HistogramDataPoint) for p in found)
    return found  # type: ignore[return-value]


def _counted(points: dict[str, list[object]], name: str, by: str | None = None) -> Counter[str]:
    counted: Counter[str] = Counter()
    for point in points.get(name, []):
        assert isinstance(point, NumberDataPoint)
        counted[str((point.attributes or {}).get(by)) if by else ""] += int(point.value)
    return counted


def test_attempts_by_outcome(run: tuple[Path, dict[str, list[object]]]) -> None:
    store, points = run
    counted = _counted(points, ATTEMPTS.current, sc.ATTEMPT_OUTCOME)
    rows = run_query(store, "SELECT outcome, count(*) FROM llm_attempts GROUP BY 1", canned=True)
    assert counted == Counter(dict(rows.rows))
    assert {sc.OUTCOME_OK, sc.OUTCOME_ERROR, sc.OUTCOME_HEDGE_CANCELLED} <= set(counted)


def test_stalls_per_attempt(run: tuple[Path, dict[str, list[object]]]) -> None:
    store, points = run
    found = _histograms(points, STALL_COUNT.current)
    sql = "SELECT count(*), sum(stall_count) FROM llm_attempts WHERE stall_count IS NOT NULL"
    ((attempts, stalls),) = run_query(store, sql, canned=True).rows
    assert (sum(p.count for p in found), sum(p.sum for p in found)) == (attempts, stalls)
    assert stalls > 0


def test_calls_and_their_stall_time(run: tuple[Path, dict[str, list[object]]]) -> None:
    """One duration per call that was not cancelled; the stall histogram sums to the calls'
    stall time in the store (both in whole milliseconds underneath)."""
    store, points = run
    durations = _histograms(points, DURATION.current)
    sql = "SELECT count(*) FROM llm_calls WHERE coalesce(error_type, '') <> 'CancelledError'"
    ((calls,),) = run_query(store, sql, canned=True).rows
    assert sum(p.count for p in durations) == calls
    stall = _histograms(points, STALL.current)
    sql = "SELECT count(*), sum(stall_ms) FROM llm_calls WHERE stall_ms IS NOT NULL"
    ((observable, stall_ms),) = run_query(store, sql, canned=True).rows
    assert sum(p.count for p in stall) == observable
    assert sum(p.sum for p in stall) == pytest.approx(stall_ms / 1000, abs=1e-9)


def test_hedges_and_their_waste(run: tuple[Path, dict[str, list[object]]]) -> None:
    """Hedges started and won, and the chunks the losers had received, from the counters, equal
    the calls' hedge figures in the store."""
    store, points = run
    sql = """SELECT sum(hedges), count_if(hedge_won), sum(hedge_waste_chunks)
             FROM llm_calls WHERE hedges > 0"""
    ((hedges, won, waste),) = run_query(store, sql, canned=True).rows
    outcomes = _counted(points, HEDGES.current, sc.HEDGE_OUTCOME)
    assert sum(outcomes.values()) == hedges > 0
    assert outcomes[sc.HEDGE_WON] == won > 0
    assert sum(_counted(points, HEDGE_WASTED_CHUNKS.current).values()) == waste
    assert set(_counted(points, HEDGES.current, sc.HEDGE_TRIGGER)) == {"stall"}


def test_one_gap_point_per_gap(run: tuple[Path, dict[str, list[object]]]) -> None:
    """The per-gap histogram holds one point per gap between two chunks of every attempt --
    cancelled ones too (a hedge's loser: its gaps until then were real), so the store's count is
    the chunks each attempt span recorded receiving, not its figures (which a cancelled attempt
    has none of)."""
    store, points = run
    gaps = _histograms(points, CHUNK_GAP.current)
    received = f"TRY_CAST(\"SpanAttributes\"['{sc.CHUNK_COUNT_RECORDED}'] AS BIGINT)"
    sql = f"""SELECT sum(greatest(coalesce({received}, 0) - 1, 0)) FROM otel_traces
              WHERE "LlmRole" = '{sc.SPAN_ROLE_ATTEMPT}'"""
    ((expected,),) = run_query(store, sql, canned=True).rows
    assert sum(p.count for p in gaps) == expected > 0
