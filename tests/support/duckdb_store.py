"""A tracer provider writing one scripted call (a cancelled hedge leg and a winning primary)
through the deriving processor into a DuckDB file — the store tests' fixture."""

from __future__ import annotations

from pathlib import Path

import duckdb
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_llm import DerivingSpanProcessor, SegmentSpanExporter
from otel_llm import _semconv as sc
from otel_llm._measure._spans import AttemptSpan
from otel_llm._measure._stalls import NS_PER_MS, StallFigures
from otel_llm._show._store._access import reader_sql

MS = NS_PER_MS
ARRIVALS = [1630.0, 1650.0, 1670.0, 1690.0, 56_590.0, 56_610.0, 58_700.0, 58_720.0]
END = 58_725.0


class Store:
    """A tracer provider writing through the deriving processor into a DuckDB file."""

    def __init__(self, path: Path, **exporter_options: float) -> None:
        self.path = path
        self.exporter = SegmentSpanExporter(path, **exporter_options)  # type: ignore[arg-type]
        self.provider = TracerProvider()
        self.provider.add_span_processor(
            DerivingSpanProcessor([SimpleSpanProcessor(self.exporter)])
        )
        self.tracer = self.provider.get_tracer("tests")

    def call(self, arrivals: list[float] = ARRIVALS, end: float = END) -> StallFigures:
        """One call with a losing (cancelled) hedge leg and a winning primary."""
        call = self.tracer.start_span(
            "chat sim-model",
            attributes={
                sc.SPAN_ROLE: sc.SPAN_ROLE_CALL,
                sc.GEN_AI_OPERATION_NAME: "chat",
                sc.GEN_AI_REQUEST_MODEL: "sim-model",
                sc.GEN_AI_PROVIDER_NAME: "sim",
                sc.GEN_AI_REQUEST_STREAM: True,
            },
        )
        ctx = trace.set_span_in_context(call)
        common = {
            sc.GEN_AI_OPERATION_NAME: "chat",
            sc.GEN_AI_PROVIDER_NAME: "sim",
            sc.GEN_AI_REQUEST_MODEL: "sim-model",
            sc.ATTEMPT_SOURCE: "sim-1",
        }
        primary = AttemptSpan(
            self.tracer,
            "chat sim-model",
            attributes={**common, sc.ATTEMPT_NUMBER: 1, sc.ATTEMPT_LEG: sc.LEG_PRIMARY},
            threshold_ms=1000,
            streamed=True,
            context=ctx,
            start_ns=0,
        )
        hedge = AttemptSpan(
            self.tracer,
            "chat sim-model",
            attributes={**common, sc.ATTEMPT_NUMBER: 2, sc.ATTEMPT_LEG: sc.LEG_HEDGE},
            threshold_ms=1000,
            streamed=True,
            context=ctx,
            start_ns=0,
        )
        hedge.clock.mark_at(20_000 * MS)
        hedge.finish(sc.OUTCOME_HEDGE_CANCELLED, end_ns=int(arrivals[-1] * MS))
        for t in arrivals:
            primary.clock.mark_at(int(t * MS))
        figures = primary.finish(
            sc.OUTCOME_OK,
            attributes={sc.GEN_AI_USAGE_INPUT_TOKENS: 12, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 34},
            end_ns=int(end * MS),
        )
        call.set_attributes(
            {
                sc.CALL_WINNER_ATTEMPT: 1,
                sc.CALL_ATTEMPTS: 2,
                sc.CALL_HEDGES: 1,
                sc.CALL_HEDGE_WON: False,
            }
        )
        call.end()
        return figures

    def close(self) -> None:
        self.provider.shutdown()


def lockless_count(path: Path) -> tuple[int, int]:
    """(rows, distinct span ids) as a reader that never takes the store's lock sees them: one
    in-memory DuckDB that ran the ``otel-llm views`` SQL, as Grafana's data source reads."""
    with duckdb.connect() as conn:
        conn.execute(reader_sql(path))
        row = conn.execute('SELECT count(*), count(DISTINCT "SpanId") FROM otel_traces').fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


class MemoryCalls(Store):
    """The store fixture's scripted calls, into memory through the deriving processor."""

    def __init__(self, resource: Resource) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(
            DerivingSpanProcessor([SimpleSpanProcessor(self.exporter)])
        )
        self.tracer = self.provider.get_tracer("tests", "1.2.3")
