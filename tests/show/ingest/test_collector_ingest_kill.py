"""The spool ingest SIGKILLed at random moments in a real process, then run again: every span
of every file lands once — none lost, none twice — and nothing is left pending."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource

from otel_llm._show._ingest._claim import spool_path
from otel_llm._show._store._access import open_store, prepare_for_writing
from tests.support.duckdb_store import MemoryCalls

FILES = 8
CALLS = 20  # per file, one message each, 3 spans a call
KILLS = 5

_INGEST = """
import sys
from pathlib import Path
import pyarrow.parquet  # imported before the kills can come, so they fall within the ingest
from otel_llm._show._ingest._claim import spool_path
from otel_llm._show._ingest._otlp_files import Spool
from otel_llm._show._store._access import prepare_for_writing
store = Path(sys.argv[1])
spool = Spool(spool_path(store), prepare_for_writing(store), segment_spans=7)
print("ingesting", flush=True)
spool.seal_current()
report = spool.ingest()
print(report.spans, report.problems, flush=True)
"""


def _ingest(store: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _INGEST, str(store)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "ingesting\n"
    return process


def _finish(process: subprocess.Popen[str]) -> str:
    """The rest of what ``process`` printed, once it ended (read through the same buffer as
    its first line: ``communicate`` with a timeout reads past it and loses what it holds)."""
    assert process.stdout is not None
    with process.stdout:
        out = process.stdout.read()
    process.wait(timeout=120)
    return out


def test_killed_at_random_moments_every_span_lands_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    prepare_for_writing(store)
    folder = spool_path(store)
    folder.mkdir()
    source = MemoryCalls(Resource.create({"service.name": "killed"}))
    for number in range(FILES):
        framed = b""
        for _ in range(CALLS):
            source.exporter.clear()
            source.call()
            message = encode_spans(source.exporter.get_finished_spans()).SerializeToString()
            framed += len(message).to_bytes(4, "big") + message
        name = f"traces-2026-01-01T00-00-{number:02d}.000-size.binpb" if number else "traces.binpb"
        (folder / name).write_bytes(framed)  # traces.binpb: left by a collector killed
    expected = FILES * CALLS * 3
    draw = random.Random(20261208)
    kills = 0
    for _ in range(KILLS):
        process = _ingest(store)
        time.sleep(draw.uniform(0.0, 0.6))
        if process.poll() is not None:  # done before the kill: the next run has nothing left
            _finish(process)
            break
        process.send_signal(signal.SIGKILL)
        _finish(process)
        kills += 1
    last = _ingest(store)
    out = _finish(last)
    assert last.returncode == 0
    assert out.endswith(" []\n"), out  # no file kept: a kill never damages one
    assert kills >= 1, "every run finished before its kill: nothing was tested"
    assert sorted(path.name for path in folder.iterdir()) == []
    with open_store(store) as conn:
        row = conn.execute("SELECT count(*), count(DISTINCT SpanId) FROM otel_traces").fetchone()
    assert row == (expected, expected)
    assert not any(path.name.startswith("pending-") for path in (store / "segments").iterdir())
