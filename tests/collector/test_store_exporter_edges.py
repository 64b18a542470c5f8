"""The Collector with the otelllm_store exporter at its edges, with the real binary: a store it
could not use is refused when it starts (not answered healthy, then failing every export), and
an SDK batch of call spans that carry captured content is taken over gRPC and HTTP."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_llm import _env as env
from otel_llm._show._store._access import open_store, prepare_for_writing
from otel_llm._show._store._glob import GLOB_CHARACTERS
from otel_llm.cli._collector import CollectorRun, Ports, collector_dir
from tests.conftest import require

CONFIG = collector_dir() / "duckdb.yaml"


@pytest.fixture(scope="module")
def binary() -> Path:
    """The collector binary ./dev test built (a skip locally without it, a failure in CI)."""
    named = os.environ.get(env.OTEL_LLM_COLLECTOR_BIN, "")
    require(bool(named) and Path(named).is_file(), "the collector binary (./dev test builds it)")
    return Path(named)


def _start_refused(
    binary: Path, store: Path, *, user: int | None = None, config: Path = CONFIG
) -> str:
    """Start the collector on ``store`` (as ``user``, when given) with ``config``; it must exit
    with an error before its health check ever answers. What it said."""
    ports = Ports.free()
    environment = {
        **os.environ,
        env.OTEL_LLM_COLLECTOR_GRPC_PORT: str(ports.grpc),
        env.OTEL_LLM_COLLECTOR_HTTP_PORT: str(ports.http),
        env.OTEL_LLM_COLLECTOR_HEALTH_PORT: str(ports.health),
        env.OTEL_LLM_COLLECTOR_STORE: str(store),
        env.OTEL_LLM_COLLECTOR_SPOOL: str(store.parent / "spool"),
    }
    command = [str(binary), f"--config={config}"]
    if user is not None:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
    process = subprocess.Popen(
        command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while process.poll() is None and time.monotonic() < deadline:
            with (
                contextlib.suppress(urllib.error.URLError, OSError),
                urllib.request.urlopen(f"http://127.0.0.1:{ports.health}/", timeout=1) as r,
            ):
                pytest.fail(f"the collector started on {store} (its health check said {r.status})")
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            process.kill()
        _, said = process.communicate(timeout=30)
    assert process.returncode != 0, said
    return said


def test_a_store_path_that_readers_refuse_fails_the_start(binary: Path, tmp_path: Path) -> None:
    """Each character otel-llm's readers refuse in a store's path (DuckDB's glob reads it as a
    pattern; the backslash was once let through) fails the start, and nothing is made there."""
    for character in sorted(GLOB_CHARACTERS):
        store = tmp_path / f"st{character}ore"
        said = _start_refused(binary, store)
        assert "reads as a pattern" in said, (character, said)
        assert not store.exists(), character


@pytest.fixture
def unwritable_store() -> Iterator[tuple[Path, int | None]]:
    """A store this process made that the collector cannot write, and the user to run it as:
    root's store for the user nobody where this process is root (permissions do not stop root),
    else this user's store with its tmp/ made read-only."""
    folder = Path(tempfile.mkdtemp(prefix="otel-llm-unwritable-"))
    store = folder / "store"
    try:
        prepare_for_writing(store)
        user: int | None = None
        if os.geteuid() == 0:
            require(shutil.which("setpriv") is not None, "setpriv (util-linux) to run as nobody")
            folder.chmod(0o755)  # nobody may find the store, and the binary copied beside it
            (folder / "spool").mkdir()
            (folder / "spool").chmod(0o777)  # the metrics' file exporter writes there: it may
            user = 65534
        else:
            (store / "tmp").chmod(0o555)
        yield store, user
    finally:
        if (store / "tmp").exists():
            (store / "tmp").chmod(0o755)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_store_the_collector_cannot_write_fails_the_start(
    binary: Path, unwritable_store: tuple[Path, int | None]
) -> None:
    """A store the collector cannot write (another user's) fails the start, naming the store
    and why — where it used to start, answer its health check, and fail every export."""
    store, user = unwritable_store
    config = CONFIG
    if user is not None:  # nobody cannot read root's cache where the binary is kept, nor a
        copied = store.parent / "otelcol-llm"  # checkout in a private folder (mktemp -d)
        shutil.copy2(binary, copied)
        binary = copied
        config = store.parent / CONFIG.name
        shutil.copy2(CONFIG, config)
    said = _start_refused(binary, store, user=user, config=config)
    assert f"cannot write into the store {store}" in said, said
    assert "permission denied" in said, said


def _spans_with_content(count: int, size: int) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("otel_llm", "test")
    for n in range(count):
        content = f"{n:06d}" + os.urandom(size // 2).hex()  # captured prompt text, incompressible
        tracer.start_span(
            "chat sim", attributes={"otel_llm.span": "call", "gen_ai.input.messages": content}
        ).end()
    return list(memory.get_finished_spans())


def test_an_sdk_batch_of_spans_with_captured_content_is_taken(binary: Path, tmp_path: Path) -> None:
    """200 call spans carrying 120 KB of captured content each (24 MB, one SDK batch), sent by
    the SDK's gRPC and HTTP exporters: both taken and stored. The receiver's defaults refuse
    more than 4 MiB over gRPC and 20 MiB over HTTP, and the SDK drops a batch refused so."""
    store = tmp_path / "store"
    ports = Ports.free()
    batches = {"grpc": _spans_with_content(200, 120_000), "http": _spans_with_content(200, 120_000)}
    with CollectorRun(binary, CONFIG, store=store, ports=ports, log=subprocess.DEVNULL):
        grpc = GrpcExporter(endpoint=f"127.0.0.1:{ports.grpc}", insecure=True, timeout=60)
        http = HttpExporter(endpoint=ports.traces_url, timeout=60)
        try:
            assert grpc.export(batches["grpc"]) is SpanExportResult.SUCCESS
            assert http.export(batches["http"]) is SpanExportResult.SUCCESS
        finally:
            grpc.shutdown()
            http.shutdown()  # type: ignore[no-untyped-call]
    sent = {f"{s.context.span_id:016x}" for batch in batches.values() for s in batch}
    with open_store(store) as conn:
        stored = conn.execute(
            "SELECT SpanId, length(SpanAttributes['gen_ai.input.messages']) FROM otel_traces"
        ).fetchall()
    assert {span_id for span_id, _ in stored} == sent
    assert len(stored) == len(sent)
    assert {length for _, length in stored} == {6 + 120_000}


def test_small_spans_after_a_huge_one_are_stored(binary: Path, tmp_path: Path) -> None:
    """A span with a 15 MB captured prompt, then one batch of 5,000 small spans: both stored.
    The exporter sized the second segment's buffer by the first one's bytes a row (84 GB) and
    the Collector died of it ("fatal error: runtime: out of memory")."""
    store = tmp_path / "store"
    ports = Ports.free()
    huge = _spans_with_content(1, 15_000_000)
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for _ in range(5000):
        provider.get_tracer("otel_llm", "test").start_span("small").end()
    small = list(memory.get_finished_spans())
    with CollectorRun(binary, CONFIG, store=store, ports=ports, log=subprocess.DEVNULL) as run:
        http = HttpExporter(endpoint=ports.traces_url, timeout=60)
        try:
            assert http.export(huge) is SpanExportResult.SUCCESS
            assert http.export(small) is SpanExportResult.SUCCESS
        finally:
            http.shutdown()  # type: ignore[no-untyped-call]
        assert run.running
    with open_store(store) as conn:
        assert conn.execute("SELECT count(DISTINCT SpanId) FROM otel_traces").fetchone() == (5001,)
