"""The collector path's ingest: OTLP protobuf files (as the Collector's file exporter writes
them) into the store, in spans per second of one core's CPU time.

Real SDK spans: otel-llm attempt spans through the deriving processor, each with ``--events``
chunk events (one per gap above the 100 ms floor), encoded by the SDK's OTLP encoder into
messages of ``--batch`` spans and framed as the file exporter frames them (4-byte big-endian
length + ``ExportTraceServiceRequest``). Printed, best of ``--repeat``:

- ``convert``: bytes → rows (``rows_from_export_request``), the part this module owns;
- ``ingest``: a whole spool file → sealed Parquet segments (``Spool.ingest_file`` into a
  ``SegmentStore``): what ``otel-llm collector`` does per file;
- for scale, the embedded path's ``span_row`` on the same spans (SDK objects → rows).

With ``--collector BINARY`` the spans also go through a real collector (OTLP/HTTP in, the
``duckdb`` config), and the files it wrote are ingested and counted: the end-to-end check that
every span sent lands::

    .venv/bin/python -m benchmarks.store.collector_ingest [--spans 20000] \
        [--collector "$(collector/build.sh)"]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_llm import __version__
from otel_llm import _semconv as sc
from otel_llm._measure._processor import DerivingSpanProcessor
from otel_llm._measure._spans import AttemptSpan
from otel_llm._measure._stalls import NS_PER_MS
from otel_llm._show._ingest._otlp_files import Spool
from otel_llm._show._ingest._otlp_rows import rows_from_export_request
from otel_llm._show._store._access import open_store, prepare_for_writing
from otel_llm._show._store._rows import span_row


def attempt_spans(count: int, events: int) -> list[ReadableSpan]:
    """``count`` finished attempt spans with ``events`` chunk events each, figures derived."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "bench", "service.instance.id": "b-1"}),
        span_limits=SpanLimits(max_events=events + 16),
    )
    provider.add_span_processor(DerivingSpanProcessor([SimpleSpanProcessor(exporter)]))
    tracer = provider.get_tracer("otel_llm", __version__)
    common = {
        sc.GEN_AI_OPERATION_NAME: "chat",
        sc.GEN_AI_PROVIDER_NAME: "sim",
        sc.GEN_AI_REQUEST_MODEL: "sim-model",
        sc.ATTEMPT_SOURCE: "sim-1",
        sc.ATTEMPT_NUMBER: 1,
        sc.ATTEMPT_LEG: sc.LEG_PRIMARY,
    }
    for n in range(count):
        attempt = AttemptSpan(
            tracer,
            "chat sim-model",
            attributes=common,
            threshold_ms=1000,
            streamed=True,
            start_ns=0,
        )
        at = 400 + n % 7
        for k in range(events + 1):
            attempt.clock.mark_at(int(at * NS_PER_MS))
            at += 150 + (k * 37 + n) % 1200
        attempt.finish(
            sc.OUTCOME_OK,
            attributes={sc.GEN_AI_USAGE_INPUT_TOKENS: 12, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 340},
            end_ns=int((at + 5) * NS_PER_MS),
        )
    provider.shutdown()
    return list(exporter.get_finished_spans())


def framed(spans: list[ReadableSpan], batch: int) -> bytes:
    """The spans as one spool file: length-prefixed messages of ``batch`` spans."""
    parts = []
    for start in range(0, len(spans), batch):
        message = encode_spans(spans[start : start + batch]).SerializeToString()
        parts.append(len(message).to_bytes(4, "big") + message)
    return b"".join(parts)


def best_cpu_s(work: Callable[[], object], repeat: int) -> float:
    """The least CPU time (this process) of ``repeat`` runs of ``work``."""
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best


def convert_all(data: bytes, batch_bytes: list[bytes]) -> int:
    """Rows of every message (the framing is the ingest's; here the messages alone)."""
    total = 0
    for message in batch_bytes:
        request = ExportTraceServiceRequest()
        request.ParseFromString(message)
        total += len(rows_from_export_request(request))
    return total


def through_collector(binary: Path, spans: list[ReadableSpan], folder: Path) -> tuple[int, float]:
    """Send ``spans`` over OTLP/HTTP through a real collector into a store; spans landed and
    the ingest's CPU seconds."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from otel_llm.cli._collector import CollectorRun, Ports, collector_dir

    store = folder / "via-collector"
    ports = Ports.free()
    log = folder / "collector.log"
    with log.open("wb") as handle:
        run = CollectorRun(
            binary, collector_dir() / "duckdb.yaml", store=store, ports=ports, log=handle.fileno()
        )
        run.start()
        exporter = OTLPSpanExporter(endpoint=ports.traces_url)
        for start in range(0, len(spans), 512):
            exporter.export(spans[start : start + 512])
        exporter.shutdown()
        started = time.process_time()
        run.stop()
        ingest_s = time.process_time() - started
    with open_store(store) as conn:
        row = conn.execute("SELECT count(DISTINCT SpanId) FROM otel_traces").fetchone()
    assert row is not None
    assert not run.report.problems, run.report.problems
    return int(row[0]), ingest_s


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=30)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--collector", type=Path, help="a collector binary (collector/build.sh)")
    args = parser.parse_args()

    spans = attempt_spans(args.spans, args.events)
    events = sum(len(span.events) for span in spans) / len(spans)
    data = framed(spans, args.batch)
    messages = [
        encode_spans(spans[i : i + args.batch]).SerializeToString()
        for i in range(0, len(spans), args.batch)
    ]
    print(
        f"{len(spans)} attempt spans, {events:.1f} events each, {len(data) / len(spans):.0f} "
        f"bytes a span in the file, messages of {args.batch} spans"
    )

    convert_s = best_cpu_s(lambda: convert_all(data, messages), args.repeat)
    embedded_s = best_cpu_s(lambda: [span_row(span) for span in spans], args.repeat)
    folder = Path(tempfile.mkdtemp(prefix="otel-llm-ingest-"))
    try:

        def ingest() -> None:
            target = folder / f"store-{time.monotonic_ns()}"
            spool = Spool(folder / "spool", prepare_for_writing(target))
            spool.folder.mkdir(exist_ok=True)
            path = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
            path.write_bytes(data)
            spool.ingest_file(path)

        ingest_s = best_cpu_s(ingest, args.repeat)
        print(f"convert (bytes -> rows)      {len(spans) / convert_s:>9,.0f} spans/s (CPU)")
        print(f"ingest (file -> segments)    {len(spans) / ingest_s:>9,.0f} spans/s (CPU)")
        print(f"embedded span_row, for scale {len(spans) / embedded_s:>9,.0f} spans/s (CPU)")
        print(f"target ≥ 10,000 spans/s: ingest at {len(spans) / ingest_s / 10_000:.2f}x")
        if args.collector is not None:
            landed, collector_ingest_s = through_collector(args.collector, spans, folder)
            print(
                f"through a real collector: {landed} of {len(spans)} spans landed; its files "
                f"ingested at {landed / collector_ingest_s:,.0f} spans/s (CPU)"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main()
