"""The collector path: OTLP into the store, in spans per second of one core's CPU time — the
Go exporter in the real Collector beside the Python ingest of the same spans, in one run.

Real SDK spans: otel-llm attempt spans through the deriving processor, each with ``--events``
chunk events (one per gap above the 100 ms floor), encoded by the SDK's OTLP encoder into
messages of ``--batch`` spans. Printed, best of ``--repeat``:

- ``convert``: bytes → rows (``rows_from_export_request``), the Python ingest's conversion;
- ``ingest``: a whole spool file (as the file exporter of earlier versions framed it) → sealed
  Parquet segments (``Spool.ingest_file`` into a ``SegmentStore``);
- for scale, the embedded path's ``span_row`` on the same spans (SDK objects → rows).

With ``--collector BINARY`` (collector/build.sh's) the same messages go over OTLP/HTTP into the
real Collector with ``collector/duckdb.yaml`` (its ``otelllm_store`` exporter, Go, writing
the store), ``--rounds`` times from ``--senders`` connections at once: its CPU time (user +
system, ``/proc/<pid>/stat``) over the sends gives spans per CPU-second — OTLP/HTTP receive,
protobuf decode, rows, Parquet, fsync and publish, all of it — judged against 50,000; each
export's answer comes once its spans are sealed, so its latency is how soon they are readable
(judged against 2 s); the store's row count is checked::

    .venv/bin/python -m benchmarks.store.collector_ingest [--spans 10000] \
        [--collector "$(collector/build.sh)"]
"""

from __future__ import annotations

import argparse
import http.client
import os
import queue
import shutil
import statistics
import tempfile
import threading
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


GO_TARGET_SPANS_PER_CPU_S = 50_000
VISIBLE_WITHIN_S = 2.0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mib(pid: int) -> float:
    """The most resident memory process ``pid`` has had (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def _post_all(port: int, messages: list[bytes], senders: int) -> list[float]:
    """POST every message to /v1/traces from ``senders`` connections at once; the seconds each
    took to be answered (every answer must be 200)."""
    work: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    for message in messages:
        work.put(message)
    for _ in range(senders):
        work.put(None)
    latencies: list[float] = []
    failures: list[str] = []

    def send() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            while (message := work.get()) is not None:
                started = time.monotonic()
                connection.request(
                    "POST",
                    "/v1/traces",
                    body=message,
                    headers={"Content-Type": "application/x-protobuf"},
                )
                answer = connection.getresponse()
                answer.read()
                latencies.append(time.monotonic() - started)
                if answer.status != 200:
                    failures.append(f"HTTP {answer.status}")
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:3]
    return latencies


def _floor_config(folder: Path) -> Path:
    """duckdb.yaml with its traces ending in the debug exporter (one line a batch): the
    Collector receiving and decoding, nothing written — the floor under any exporter."""
    from otel_llm.cli._collector import collector_dir

    text = (collector_dir() / "duckdb.yaml").read_text()
    pipeline = "exporters: [otelllm_store]"
    assert text.count(pipeline) == 1, "duckdb.yaml changed"
    assert text.count("\nexporters:\n") == 1, "duckdb.yaml changed"
    text = text.replace(pipeline, "exporters: [debug]")
    text = text.replace("\nexporters:\n", "\nexporters:\n  debug:\n    verbosity: basic\n")
    path = folder / "floor.yaml"
    path.write_text(text)
    return path


def with_round_ids(message: bytes, round_: int) -> bytes:
    """``message`` with every span's trace id made its own for ``round_``: the Collector's
    exporter stores a span sent again only once, so every send of the benchmark is new spans."""
    request = ExportTraceServiceRequest.FromString(message)
    prefix = round_.to_bytes(4, "big")
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                span.trace_id = prefix + span.trace_id[4:]
    data: bytes = request.SerializeToString()
    return data


def _through(
    binary: Path, config: Path, alone: list[bytes], loaded: list[bytes], senders: int, store: Path
) -> tuple[float, float, list[float], list[float], float]:
    """The ``alone`` messages into a Collector with ``config`` one at a time, then ``loaded``
    from ``senders`` connections: its CPU seconds and wall seconds over the latter, the answer
    latencies of both, and its peak resident memory in MiB."""
    from otel_llm.cli._collector import CollectorRun, Ports

    ports = Ports.free()
    with (store.parent / f"{store.name}.log").open("wb") as log:
        run = CollectorRun(binary, config, store=store, ports=ports, log=log.fileno())
        run.start()
        try:
            pid = run.pid
            assert pid is not None
            alone_s = _post_all(ports.http, alone, 1)  # one export at a time, idle
            before = _cpu_s(pid)
            started = time.monotonic()
            loaded_s = _post_all(ports.http, loaded, senders)
            wall_s = time.monotonic() - started
            cpu_s = _cpu_s(pid) - before
            peak_mib = _peak_rss_mib(pid)
        finally:
            run.stop()
    return cpu_s, wall_s, alone_s, sorted(loaded_s), peak_mib


def through_go_exporter(
    binary: Path,
    messages: list[bytes],
    spans: int,
    first_spans: int,
    rounds: int,
    senders: int,
    folder: Path,
) -> None:
    """The first message alone five times, then the messages ``rounds`` times from
    ``senders`` connections, each send with trace ids of its own, into the real Collector
    (duckdb.yaml: the Go exporter) and into one whose traces end in the debug exporter (its
    floor); print the spans per CPU-second of both and how soon exports were answered
    (= readable)."""
    from otel_llm.cli._collector import collector_dir

    sent = spans * rounds
    alone = [with_round_ids(messages[0], rounds + n) for n in range(1, 6)]
    sends = [with_round_ids(message, n) for n in range(1, rounds + 1) for message in messages]
    floor_s, _, _, _, floor_mib = _through(
        binary, _floor_config(folder), alone, sends, senders, folder / "floor"
    )
    store = folder / "via-go"
    cpu_s, wall_s, alone_s, loaded, peak_mib = _through(
        binary, collector_dir() / "duckdb.yaml", alone, sends, senders, store
    )
    with open_store(store) as conn:
        row = conn.execute("SELECT count(*) FROM otel_traces").fetchone()
    assert row is not None
    landed = int(row[0])
    assert landed == sent + 5 * first_spans, (landed, sent)  # and the first message 5 times
    rate = sent / cpu_s
    floor = sent / floor_s
    worst = max(max(alone_s), loaded[-1])
    print(
        f"the Collector's floor (receive + decode, debug exporter): {floor:,.0f} spans per "
        f"CPU-second ({1e6 / floor:.1f} us a span), peak resident memory {floor_mib:.0f} MiB"
    )
    print(
        f"Go exporter in the Collector: {sent:,} spans from {senders} connections in "
        f"{wall_s:.2f} s wall, {cpu_s:.2f} s of its CPU: {rate:,.0f} spans per CPU-second "
        f"({1e6 / rate:.1f} us a span, receive to publish; the exporter's own "
        f"{1e6 / rate - 1e6 / floor:.1f} us); {landed:,} rows in the store; peak resident "
        f"memory {peak_mib:.0f} MiB"
    )
    print(
        f"answered (= readable) after: alone {statistics.median(alone_s):.3f} s median; loaded "
        f"p50 {loaded[len(loaded) // 2]:.3f} s, p99 {loaded[int(len(loaded) * 0.99)]:.3f} s, "
        f"max {loaded[-1]:.3f} s"
    )
    verdict = "PASS" if rate >= GO_TARGET_SPANS_PER_CPU_S else "FAIL"
    print(
        f"{verdict}: {rate:,.0f} spans per CPU-second, target >= {GO_TARGET_SPANS_PER_CPU_S:,} "
        f"(the floor alone: {floor / GO_TARGET_SPANS_PER_CPU_S:.2f}x the target)"
    )
    verdict = "PASS" if worst <= VISIBLE_WITHIN_S else "FAIL"
    print(f"{verdict}: every export readable within {worst:.2f} s, target <= {VISIBLE_WITHIN_S} s")


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=30)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--collector", type=Path, help="a collector binary (collector/build.sh)")
    parser.add_argument("--rounds", type=int, default=5, help="sends of the spans to it")
    parser.add_argument("--senders", type=int, default=8, help="connections sending at once")
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
            through_go_exporter(
                args.collector,
                messages,
                len(spans),
                min(args.batch, len(spans)),
                args.rounds,
                args.senders,
                folder,
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main()
