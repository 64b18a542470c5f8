"""A month of the embedded store in minutes: writer processes at steady low and bursty rates,
merges without pause, random SIGKILLs of writers and mergers, a segment with flipped bytes and
a truncated one dropped in midway — while two readers that never take the store's lock (one
DuckDB connection each, the ``otel-llm views`` SQL run once, as Grafana's DuckDB data source
does it; one of them on DuckDB 1.5.4, the plugin's engine) and ``otel-llm query`` read it
throughout. Requirements (issue 20) are printed as PASS/FAIL lines:

- rows = spans acknowledged, exactly: every span a writer knew durably written is in the store,
  every row is a span some writer produced, and the only rows beyond the acknowledged ones are
  spans a killed writer had written but not yet acknowledged (each direct write lands whole or
  not at all);
- 0 duplicates ever seen by either lockless reader or by ``otel-llm query``;
- the number of segments bounded (its maximum per tenth of the run printed: no trend);
- query time flat from the first tenth of the run to the last (medians of a lockless reader's
  ``count(*)``, whose cost is the segments it opens; the margin is the size's: 3x + 20 ms at
  full size, 10x + 500 ms at CI size, whose tenths are a few seconds of a busy machine);
- at least ``--merges`` merges;
- every damaged file named and quarantined (``<store>/quarantine/``, a ``.why`` note each);
- no orphan left once one more ``compact()`` ran (``SegmentStore.orphans()``; a generation
  that was superseded more than ``generation_keep_s`` ago only while that compact ran is
  listed apart, as due);
- no writer or merger failed on its own (an exit, or a merge that raised).

Writers: direct ``SegmentStore(path).write(rows)`` loops (a steady one, a bursty one, both
merging now and then), a ``SegmentSpanExporter`` merging every 0.2 s and an ``otel_llm.init()``
application at default settings. A writer logs the span ids it is about to write, then —
after ``write()`` returned, or ``force_flush()`` returned True — logs them acknowledged; a
writer killed in between leaves spans *in doubt*, which may or may not be in the store. Mergers:
two ``SegmentStore(path).compact()`` loops (never both killed at once) and ``otel-llm
compact`` runs, half of them killed mid-way. The tenths start after a warm-up (every writer
wrote, a merge happened); SIGKILLs start there too.

    .venv/bin/python -m benchmarks.store.longrun                   # ≥ 10,000 merges
    .venv/bin/python -m benchmarks.store.longrun --ci --json r.json   # the test's size

``tests/show/store/test_store_longrun.py`` runs the CI size and asserts every requirement.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the roles import what they need, so the 1.5.4 reader imports only duckdb
    from otel_llm._show._store._segments import SegmentStore

from benchmarks import ROOT, child_command, child_env

OLD_DUCKDB = ROOT / ".cache" / "duckdb-1.5.4"
"""DuckDB 1.5.4, the engine of Grafana's DuckDB plugin (``./dev test`` installs it here)."""
SEQ_BITS = 32
DAMAGED_INCARNATION = 0xFFFFFF
"""Span ids of the damaged segments' rows: produced by no writer, so never a row of the store."""
TENTHS = 10
DUP_SQL = 'SELECT count(*), count(DISTINCT "SpanId") FROM otel_traces'
DAMAGED_PREFIX = f"{DAMAGED_INCARNATION << SEQ_BITS:016x}"[:8]
DAMAGED_SQL = f"SELECT count(*) FROM otel_traces WHERE starts_with(\"SpanId\", '{DAMAGED_PREFIX}')"
"""Rows of the damaged segments a reader counted (before they were quarantined)."""
COUNT_SQL = "SELECT count(*) FROM otel_traces"
WRITERS = ("steady", "burst", "exporter", "init")
MERGERS = ("merger", "merger")
"""Two compact() loops: while one is killed or restarting, the other merges."""


def span_id(incarnation: int, seq: int) -> int:
    """The id of the ``seq``-th span of writer process ``incarnation`` (never 0)."""
    return (incarnation << SEQ_BITS) | seq


class Log:
    """Lines appended with one ``write`` each: what the process did survives its SIGKILL."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, text: str) -> None:
        os.write(self._fd, (text + "\n").encode())


@dataclass
class Role:
    """What a role process is told (its command line)."""

    role: str
    store: Path
    log: Path
    stop: Path
    incarnation: int
    seed: int
    start: float
    sql: Path | None = None
    pace: float = 1.0
    """Writers' pauses are multiplied by this (2: half the write rate)."""

    def stopped(self) -> bool:
        return self.stop.exists()

    def nap(self, seconds: float) -> None:
        """Sleep ``seconds``, or less once the run is told to stop."""
        deadline = time.monotonic() + seconds
        while not self.stopped() and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


# --- writer and merger processes ---------------------------------------------------------------


def _rows(incarnation: int, first: int, count: int, role: str) -> list[dict[str, Any]]:
    now = time.time_ns()
    rows = []
    for seq in range(first, first + count):
        sid = span_id(incarnation, seq)
        rows.append(
            {
                "Timestamp": now,
                "TraceId": f"{sid:032x}",
                "SpanId": f"{sid:016x}",
                "ParentSpanId": "",
                "SpanName": "longrun",
                "SpanKind": "Internal",
                "ServiceName": "longrun",
                "ResourceAttributes": {"service.name": "longrun"},
                "SpanAttributes": {"longrun.writer": role, "longrun.seq": str(seq)},
                "Duration": 1_000_000,
                "StatusCode": "Unset",
            }
        )
    return rows


class MergeLog(logging.Handler):
    """Logs each merge of this process (the store's debug line) as ``M <inputs> <when>`` and
    a writer's failed merge as ``E``; passes warnings on to stderr."""

    def __init__(self, log: Log) -> None:
        super().__init__(logging.DEBUG)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("otel-llm: merged"):
            self._log.line(f"M {message.split()[2]} {time.monotonic():.3f}")
        elif message.startswith("otel-llm: could not merge"):
            self._log.line("E " + message[:300])
        if record.levelno >= logging.WARNING:
            print(message, file=sys.stderr, flush=True)

    @classmethod
    def install(cls, log: Log) -> None:
        otel_logger = logging.getLogger("otel_llm")
        otel_logger.setLevel(logging.DEBUG)
        otel_logger.addHandler(cls(log))


def _merge(store: SegmentStore, log: Log, **kwargs: int) -> None:
    """One ``compact()`` (its merges are logged by :class:`MergeLog`); one that raised is
    logged ``E`` (never fatal)."""
    try:
        store.compact(**kwargs)
    except Exception as exc:  # a merge failing is a finding, not the end of the writer
        log.line("E " + (str(exc).splitlines() or [type(exc).__name__])[0][:300])


def role_direct(role: Role) -> None:
    """``SegmentStore.write(rows)`` loops: ``steady`` writes 1–3 spans every 200–400 ms;
    ``burst`` is quiet for 3–6 s, then writes 10–40 segments of 1–50 spans back to back. Both
    merge now and then, as a writer does."""
    from otel_llm._show._store._segments import SegmentStore

    rng = random.Random(role.seed)
    store = SegmentStore(role.store)
    log = Log(role.log)
    MergeLog.install(log)
    seq = 1
    writes = 0

    def write(count: int) -> None:
        nonlocal seq, writes
        log.line(f"P {seq} {count}")
        store.write(_rows(role.incarnation, seq, count, role.role))
        log.line(f"A {seq} {count}")
        seq += count
        writes += 1

    while not role.stopped():
        if role.role == "steady":
            write(rng.randint(1, 3))
            if writes % 25 == 0:
                _merge(store, log)
            role.nap(role.pace * rng.uniform(0.2, 0.4))
        else:
            role.nap(role.pace * rng.uniform(3.0, 6.0))
            for _ in range(rng.randint(10, 40)):
                if role.stopped():
                    break
                write(rng.randint(1, 50))
            _merge(store, log)


def role_sdk(role: Role) -> None:
    """Spans through the real embedded writer: ``exporter`` is a ``SegmentSpanExporter``
    sealing every 50 ms and merging every 0.2 s; ``init`` an ``otel_llm.init()`` application
    (default merge interval). A batch is acknowledged once ``force_flush()`` returned True."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    import otel_llm
    from otel_llm._show._store._exporter import SegmentSpanExporter

    rng = random.Random(role.seed)
    log = Log(role.log)

    class Ids(IdGenerator):
        def __init__(self) -> None:
            self.seq = 0

        def generate_span_id(self) -> int:
            self.seq += 1
            return span_id(role.incarnation, self.seq)

        def generate_trace_id(self) -> int:
            return span_id(role.incarnation, self.seq + 1)

    MergeLog.install(log)
    ids = Ids()
    provider = TracerProvider(id_generator=ids, shutdown_on_exit=False)
    exporter: SegmentSpanExporter | None = None
    telemetry: otel_llm.Telemetry | None = None
    if role.role == "exporter":
        exporter = SegmentSpanExporter(role.store, compact_every_s=0.2, flush_interval_s=0.05)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        telemetry = otel_llm.init(
            db_path=role.store, tracer_provider=provider, set_global=False, otlp=False
        )

    def flush(timeout_ms: int) -> bool:
        if exporter is not None:
            return exporter.force_flush(timeout_ms)
        assert telemetry is not None
        return telemetry.force_flush(timeout_ms / 1000)

    tracer = provider.get_tracer("longrun")
    unacked: list[tuple[int, int]] = []
    while not role.stopped():
        count = rng.randint(1, 5)
        first = ids.seq + 1
        log.line(f"P {first} {count}")
        for _ in range(count):
            tracer.start_span("longrun", attributes={"longrun.writer": role.role}).end()
        unacked.append((first, count))
        if flush(10_000):
            for first, count in unacked:
                log.line(f"A {first} {count}")
            unacked.clear()
        role.nap(role.pace * (rng.uniform(0.15, 0.35) if exporter else rng.uniform(0.3, 0.8)))
    if flush(10_000):
        for first, count in unacked:
            log.line(f"A {first} {count}")
    if exporter is not None:
        exporter.shutdown()
    if telemetry is not None:
        telemetry.shutdown()


def role_merger(role: Role) -> None:
    """A ``SegmentStore(path).compact()`` loop, asking for 2, 4 or 16 inputs at a time."""
    from otel_llm._show._store._segments import SegmentStore

    rng = random.Random(role.seed)
    store = SegmentStore(role.store)
    log = Log(role.log)
    MergeLog.install(log)
    while not role.stopped():
        _merge(store, log, min_segments=rng.choice((2, 2, 4, 16)))
        role.nap(rng.uniform(0.0, 0.02))


def role_reader(role: Role) -> None:
    """The lockless reader, Grafana's way: ONE in-memory connection that ran the reader SQL
    once, then the same queries again and again. Imports only duckdb (it also runs on 1.5.4)."""
    import duckdb

    assert role.sql is not None
    out = Log(role.log)
    out.line(json.dumps({"version": duckdb.__version__}))
    conn = duckdb.connect(":memory:")
    conn.execute(role.sql.read_text("utf-8"))
    while not role.stopped():
        at = time.monotonic() - role.start
        entry: dict[str, Any] = {"t": round(at, 3)}
        try:
            began = time.perf_counter()
            row = conn.execute(DUP_SQL).fetchone()
            entry["dup_ms"] = round((time.perf_counter() - began) * 1000, 3)
            began = time.perf_counter()
            counted = conn.execute(COUNT_SQL).fetchone()
            entry["count_ms"] = round((time.perf_counter() - began) * 1000, 3)
            damaged = conn.execute(DAMAGED_SQL).fetchone()
            assert row is not None
            assert counted is not None
            assert damaged is not None
            entry["n"], entry["d"], entry["damaged"] = int(row[0]), int(row[1]), int(damaged[0])
        except duckdb.Error as exc:
            entry["err"] = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
        out.line(json.dumps(entry))
        time.sleep(0.5)  # a dashboard refreshing, time-compressed
    conn.close()


ROLES = {
    "steady": role_direct,
    "burst": role_direct,
    "exporter": role_sdk,
    "init": role_sdk,
    "merger": role_merger,
    "reader": role_reader,
}


# --- the harness -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """The size of a run."""

    seconds: float
    """The run lasts at least this long after its warm-up ..."""
    merges: int
    """... and until this many merges happened ..."""
    max_seconds: float
    """... but never longer than this."""
    kill_every_s: float
    """Mean interval between SIGKILLs of a writer or a merger loop."""
    cli_compact_every_s: float
    """Mean interval between ``otel-llm compact`` runs (half of them killed mid-way)."""
    query_pause_s: float
    pace: float
    """Writers' pauses are multiplied by this."""
    flat: tuple[float, float]
    """Query time is flat when the last tenth's median <= factor x the first's + slack ms."""
    seed: int
    old_duckdb: Path | None


FULL: dict[str, Any] = {
    "seconds": 120.0,
    "merges": 10_000,
    "max_seconds": 3600.0,
    "kill_every_s": 3.0,
    "pace": 1.0,
    "flat": (3.0, 20.0),  # tenths of minutes, hundreds of queries each, on a busy machine
}
CI: dict[str, Any] = {
    "seconds": 35.0,
    "merges": 20,
    "max_seconds": 75.0,
    "kill_every_s": 5.0,
    "pace": 2.0,  # half the write rate: room to merge on a busy 2-core machine
    "flat": (10.0, 500.0),  # tenths of 3.5 s, a few queries each: catches a pile-up, not drift
}


@dataclass
class Child:
    role: str
    incarnation: int
    proc: subprocess.Popen[bytes]
    log: Path
    killed: bool = False
    kill_at: float | None = None


@dataclass
class Tally:
    """Reads the processes' logs as they grow (merges, merge errors)."""

    offsets: dict[Path, int] = field(default_factory=dict)
    merges: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    acked_roles: set[str] = field(default_factory=set)
    writes: dict[str, int] = field(default_factory=dict)
    """Batches acknowledged, per role (a direct writer's batch is one segment)."""

    def read(self, role: str, path: Path) -> None:
        with contextlib.suppress(OSError), path.open("rb") as handle:
            handle.seek(self.offsets.get(path, 0))
            data = handle.read()
            end = data.rfind(b"\n") + 1
            self.offsets[path] = self.offsets.get(path, 0) + end
            for line in data[:end].decode().splitlines():
                if line.startswith("M "):
                    self.merges[role] = self.merges.get(role, 0) + 1
                elif line.startswith("E "):
                    self.errors.append(f"{role}: {line[2:]}")
                elif line.startswith("A "):
                    self.acked_roles.add(role)
                    self.writes[role] = self.writes.get(role, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.merges.values())


def _tenths(points: Sequence[tuple[float, float]], span: tuple[float, float]) -> list[list[float]]:
    """``points`` (time, value) in ten buckets of equal time over ``span`` (what is before its
    start, the warm-up, left out)."""
    start, end = span
    buckets: list[list[float]] = [[] for _ in range(TENTHS)]
    for at, value in points:
        if at >= start:
            buckets[min(TENTHS - 1, int((at - start) / max(1e-9, end - start) * TENTHS))].append(
                value
            )
    return buckets


def _damaged_bytes(work: Path, how: str) -> tuple[bytes, str]:
    """A real sealed segment (400 spans of no writer, sealed by ``SegmentStore.write``), with a
    few bytes flipped in its middle where both pyarrow and DuckDB notice, or cut in half."""
    import duckdb
    import pyarrow.parquet as pq

    from otel_llm._show._store._segments import SegmentStore

    scratch = SegmentStore(work / f"scratch-{how}")
    scratch.create()
    data = scratch.write(_rows(DAMAGED_INCARNATION, 1, 400, "damaged")).read_bytes()
    if how == "truncated":
        return data[: len(data) // 2], f"cut from {len(data)} to {len(data) // 2} bytes"
    probe = work / f"probe-{how}.parquet"
    footer = int.from_bytes(data[-8:-4], "little")
    middle = (len(data) - 8 - footer) // 2  # the middle of the pages, before the footer
    for step in range(200):
        at = middle + (step // 2) * 37 * (1 if step % 2 else -1)
        flipped = bytearray(data)
        for i in range(at, at + 4):
            flipped[i] ^= 0xFF
        probe.write_bytes(bytes(flipped))
        try:
            pq.read_table(probe)
        except Exception:  # damaged as pyarrow sees it: now DuckDB too?
            try:
                duckdb.connect().execute(f"SELECT * FROM read_parquet('{probe}')").fetchall()
            except duckdb.Error:
                probe.unlink()
                return bytes(flipped), f"4 bytes flipped at offset {at} of {len(data)}"
    raise RuntimeError("no offset found whose flipped bytes both readers notice")


class Harness:
    """Starts, kills, restarts and reaps the processes of one run and keeps its figures."""

    def __init__(self, config: Config, work: Path) -> None:
        from otel_llm._show._store._access import prepare_for_writing, reader_sql

        self.config = config
        self.work = work
        self.rng = random.Random(config.seed)
        self.store_path = work / "store"
        self.store: SegmentStore = prepare_for_writing(self.store_path)
        self.logs = work / "logs"
        self.logs.mkdir()
        self.stop = work / "stop"
        self.sql = work / "reader.sql"
        self.sql.write_text(reader_sql(self.store_path), "utf-8")
        self.start = time.monotonic()
        self.children: list[Child] = []
        self.incarnations = 0
        self.tally = Tally()
        self.restarts: list[tuple[float, str]] = []
        self.crashes: list[str] = []
        self.kills: dict[str, int] = {}
        self.killed: set[int] = set()
        self.stuck: list[str] = []
        self.warm_at: float | None = None
        """When every writer had written and a merge had happened: the tenths start there."""
        self.cli_compacts = {"run": 0, "merged": 0, "killed": 0, "failed": 0}
        self.cli_outputs: list[str] = []
        self.segment_counts: list[tuple[float, float]] = []
        self.damaged: dict[str, dict[str, Any]] = {}
        self.queries: list[dict[str, Any]] = []
        self._querying = threading.Event()

    def now(self) -> float:
        return time.monotonic() - self.start

    # --- processes

    def spawn(self, role: str, *, env: dict[str, str] | None = None) -> Child:
        self.incarnations += 1
        incarnation = self.incarnations
        log = self.logs / f"{role}-{incarnation}.log"
        command = [
            *child_command(__spec__.name), "--role", role,
            "--store", str(self.store_path), "--log", str(log), "--stop", str(self.stop),
            "--incarnation", str(incarnation), "--seed", str(self.rng.randrange(2**31)),
            "--start", repr(self.start), "--sql", str(self.sql), "--pace", repr(self.config.pace),
        ]  # fmt: skip
        with (self.logs / f"{role}-{incarnation}.err").open("wb") as err:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env or _env(ROOT),
                cwd=self.work,
            )
        child = Child(role, incarnation, proc, log)
        self.children.append(child)
        return child

    def spawn_cli_compact(self) -> None:
        self.incarnations += 1
        log = self.logs / f"compact-{self.incarnations}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "otel_llm.cli", "compact", "--db", str(self.store_path)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=_env(ROOT),
                cwd=self.work,
            )
        child = Child("compact", self.incarnations, proc, log)
        if self.rng.random() < 0.5:
            child.kill_at = self.now() + self.rng.uniform(0.3, 2.5)
        self.children.append(child)
        self.cli_compacts["run"] += 1

    def kill(self, child: Child) -> None:
        if child.proc.poll() is None:
            child.proc.send_signal(signal.SIGKILL)
            child.killed = True
            self.killed.add(child.incarnation)
            self.kills[child.role] = self.kills.get(child.role, 0) + 1

    def reap(self, *, restart: bool) -> None:
        """Notice exits: a killed writer or merger comes back as a new process; one that died
        on its own is a crash (and comes back too)."""
        for child in list(self.children):
            if child.kill_at is not None and self.now() >= child.kill_at:
                child.kill_at = None
                self.kill(child)
            code = child.proc.poll()
            if code is None:
                continue
            self.children.remove(child)
            if child.role == "compact":
                text = child.log.read_text("utf-8", "replace").strip()
                if child.killed:
                    self.cli_compacts["killed"] += 1
                elif code != 0:
                    self.cli_compacts["failed"] += 1
                    self.crashes.append(f"otel-llm compact exited {code}: {text[-300:]}")
                else:
                    self.cli_outputs.append(text)
                    if text.startswith("merged"):
                        self.cli_compacts["merged"] += 1
                        self.tally.merges["otel-llm compact"] = (
                            self.tally.merges.get("otel-llm compact", 0) + 1
                        )
                continue
            self.tally.read(child.role, child.log)
            if not child.killed and not self.stop.exists():
                err = (self.logs / f"{child.role}-{child.incarnation}.err").read_text(
                    "utf-8", "replace"
                )
                self.crashes.append(f"{child.role} exited {code}: {err.strip()[-500:]}")
            if restart and not self.stop.exists():
                self.restarts.append((self.now(), child.role))
                if child.role == "reader":
                    self.crashes.append("a lockless reader died (it is not restarted)")
                else:
                    self.spawn(child.role)

    def shutdown(self, timeout_s: float = 30.0) -> list[str]:
        """Tell every process to stop, wait for them, SIGKILL what is left (its name returned)."""
        self.stop.touch()
        self._querying.clear()
        deadline = time.monotonic() + timeout_s
        stuck = []
        for child in list(self.children):
            try:
                child.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stuck.append(f"{child.role}-{child.incarnation}")
                child.proc.kill()
                child.proc.wait(10)
        self.reap(restart=False)
        return stuck

    def kill_all(self) -> None:
        """Reap every child, even when the run failed."""
        self.stop.touch()
        self._querying.clear()
        for child in self.children:
            if child.proc.poll() is None:
                child.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(10)

    # --- the locking reader: otel-llm query, in a loop

    def query_loop(self) -> None:
        sql = 'SELECT count(*) AS n, count(DISTINCT "SpanId") AS d FROM otel_traces'
        command = [
            sys.executable, "-m", "otel_llm.cli", "query", "--db", str(self.store_path),
            "--format", "json", sql,
        ]  # fmt: skip
        while self._querying.is_set():
            at = self.now()
            began = time.perf_counter()
            try:
                done = subprocess.run(
                    command,
                    capture_output=True,
                    text=True,
                    timeout=120,
                    check=False,
                    env=_env(ROOT),
                    cwd=self.work,
                )
            except subprocess.TimeoutExpired:
                self.queries.append({"t": at, "err": "timed out after 120 s"})
                continue
            entry: dict[str, Any] = {"t": at, "ms": (time.perf_counter() - began) * 1000}
            if done.returncode == 0:
                try:
                    row = json.loads(done.stdout)[0]
                    entry["n"], entry["d"] = int(row["n"]), int(row["d"])
                except (ValueError, LookupError, TypeError):
                    entry["err"] = f"exit 0 but not one JSON table: {done.stdout[:300]!r}"
            else:
                entry["err"] = (done.stderr.strip().splitlines() or ["?"])[-1][:300]
            self.queries.append(entry)
            time.sleep(self.config.query_pause_s)

    # --- damage

    def drop_damaged(self, how: str) -> None:
        """A damaged copy of a real segment, put where writers put sealed segments, the way
        they do (``SegmentStore.write``: a temporary, flushed, then linked into the current
        generation in one rename), so it appears whole at once."""
        data, what = _damaged_bytes(self.work, how)
        name = f"{time.time_ns():020d}-0-{how}-000000.parquet"
        self.store.write(data, name=name)
        self.damaged[name] = {"how": what, "dropped_at": self.now(), "gone_at": None}

    def sample(self) -> None:
        from otel_llm._show._store._segments import SegmentStore

        with contextlib.suppress(OSError):
            self.segment_counts.append(
                (self.now(), float(len(SegmentStore(self.store_path).segments())))
            )
        for name, entry in self.damaged.items():
            if entry["gone_at"] is None and not (self.store.segments_dir / name).exists():
                entry["gone_at"] = self.now()

    # --- the run

    def run(self) -> float:
        """Run until the config says stop; the run's length in seconds."""
        config = self.config
        readers = [self.spawn("reader")]
        if config.old_duckdb is not None:
            readers.append(self.spawn("reader", env=_env(config.old_duckdb)))
        for role in (*WRITERS, *MERGERS):
            self.spawn(role)
        self._querying.set()
        query = threading.Thread(target=self.query_loop, name="otel-llm query", daemon=True)
        query.start()
        next_kill: float | None = None  # SIGKILLs start once the store is warm
        next_cli = self.rng.expovariate(1 / config.cli_compact_every_s)
        next_tally = 0.0
        next_sample = 0.0
        while True:
            now = self.now()
            if now >= next_tally:
                for child in self.children:
                    if child.role != "compact":
                        self.tally.read(child.role, child.log)
                next_tally = now + 0.5
            done = self.tally.total
            if self.warm_at is None and done and self.tally.acked_roles >= set(WRITERS):
                self.warm_at = now  # every writer wrote, the first merge happened
                next_kill = now + self.rng.expovariate(1 / config.kill_every_s)
            ran = 0.0 if self.warm_at is None else now - self.warm_at
            if now >= config.max_seconds or (ran >= config.seconds and done >= config.merges):
                break
            # how far the run is: by time and merges, or by time alone when merges lag
            midway = max(
                min(ran / config.seconds, done / max(1, config.merges)), now / config.max_seconds
            )
            if midway >= 0.4 and "flipped" not in {d.split("-")[2] for d in self.damaged}:
                self.drop_damaged("flipped")
            if midway >= 0.5 and "truncated" not in {d.split("-")[2] for d in self.damaged}:
                self.drop_damaged("truncated")
            if next_kill is not None and now >= next_kill:
                targets = [c for c in self.children if c.role in WRITERS]
                mergers = [c for c in self.children if c.role in MERGERS]
                if len(mergers) == len(MERGERS) and all(_merged_once(c) for c in mergers):
                    targets += mergers  # never both: a killed merger's stand-in must have merged
                if targets:
                    self.kill(self.rng.choice(targets))
                next_kill = now + self.rng.expovariate(1 / config.kill_every_s)
            if now >= next_cli:
                self.spawn_cli_compact()
                next_cli = now + self.rng.expovariate(1 / config.cli_compact_every_s)
            if now >= next_sample:
                self.sample()
                next_sample = now + 0.1
            self.reap(restart=True)
            time.sleep(0.02)
        duration = self.now()
        self.stuck = self.shutdown()
        query.join(150)
        self.sample()
        return duration


def _merged_once(child: Child) -> bool:
    """Whether ``child`` logged a merge (it is up and merging)."""
    with contextlib.suppress(OSError):
        return child.log.stat().st_size > 0
    return False


def _env(path: Path) -> dict[str, str]:
    """The environment of a child: ``path`` first on its import path, no inherited one."""
    env = {k: v for k, v in os.environ.items() if k != "OTEL_LLM_DB"}
    return {**child_env(path, base=env), "OTEL_SDK_DISABLED": "false"}


# --- reading the results back ------------------------------------------------------------------


@dataclass
class Ledger:
    """What the writers' logs say: spans produced, acknowledged, and the batches in doubt."""

    produced: set[int] = field(default_factory=set)
    acked: set[int] = field(default_factory=set)
    batches: list[tuple[str, int, int, int, bool]] = field(default_factory=list)
    """(role, incarnation, first id, count, acknowledged) per batch."""


def _ledger(logs: Path) -> Ledger:
    ledger = Ledger()
    for log in sorted(logs.glob("*.log")):
        role, _, incarnation_text = log.stem.rpartition("-")
        if role not in WRITERS:
            continue
        incarnation = int(incarnation_text)
        produced: dict[int, int] = {}
        acked: set[int] = set()
        for line in log.read_text("utf-8").splitlines():
            kind, *numbers = line.split()
            if kind in ("P", "A"):
                first, count = int(numbers[0]), int(numbers[1])
                if kind == "P":
                    produced[first] = count
                else:
                    acked.add(first)
        for first, count in produced.items():
            ids = {span_id(incarnation, seq) for seq in range(first, first + count)}
            ledger.produced |= ids
            if first in acked:
                ledger.acked |= ids
            ledger.batches.append((role, incarnation, first, count, first in acked))
    return ledger


def _store_ids(harness: Harness) -> tuple[list[int], str | None]:
    """Every row's span id, read the locking way; if the store cannot be read whole (a damaged
    segment left in place), segment by segment, skipping what cannot be read."""
    import pyarrow.parquet as pq

    from otel_llm._show._store._access import open_store

    try:
        with open_store(harness.store_path, views=False) as conn:
            return [int(sid, 16) for (sid,) in conn.execute('SELECT "SpanId" FROM otel_traces')
                    .fetchall()], None  # fmt: skip
    except Exception as exc:
        error = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
    ids: list[int] = []
    for segment in harness.store.segments():
        with contextlib.suppress(Exception):
            ids.extend(int(s, 16) for s in pq.read_table(segment.path, columns=["SpanId"])
                       .column("SpanId").to_pylist() if s)  # fmt: skip
    return ids, error


def _reader_entries(path: Path) -> tuple[str, list[dict[str, Any]]]:
    lines = path.read_text("utf-8").splitlines() if path.exists() else []
    if not lines:
        return "?", []
    return json.loads(lines[0])["version"], [json.loads(line) for line in lines[1:]]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


_ONCE = (
    "import duckdb, json, sys\n"
    "conn = duckdb.connect(':memory:')\n"
    "conn.execute(open(sys.argv[1], encoding='utf-8').read())\n"
    "n, d = conn.execute(sys.argv[2]).fetchone()\n"
    "print(json.dumps({'duckdb': duckdb.__version__, 'n': n, 'd': d}))\n"
)


def _lockless_after(harness: Harness) -> list[dict[str, Any]]:
    """Once every process is gone (some killed mid-merge) and before anything touches the
    store again: what a new lockless reader counts, on each engine."""
    engines = [ROOT] + ([harness.config.old_duckdb] if harness.config.old_duckdb else [])
    found = []
    for engine in engines:
        done = subprocess.run(
            [sys.executable, "-c", _ONCE, str(harness.sql), DUP_SQL],
            capture_output=True, text=True, timeout=120, check=False, env=_env(engine),
        )  # fmt: skip
        if done.returncode == 0:
            found.append(json.loads(done.stdout))
        else:
            error = (done.stderr.strip().splitlines() or ["?"])[-1][:300]
            found.append({"duckdb": str(engine), "err": error})
    return found


def evaluate(harness: Harness, duration: float) -> dict[str, Any]:
    """The figures and the requirements of a finished run."""
    from otel_llm._show._store._segments import WHY

    config = harness.config
    store = harness.store
    span = (harness.warm_at or 0.0, duration)
    after = _lockless_after(harness)
    # a temporary of a pid this host does not know is only taken for an orphan once it is
    # orphan_dead_after_s old (it may be a write of another container): let the last kills' age
    from otel_llm._defaults import DEFAULTS

    time.sleep(DEFAULTS.orphan_dead_after_s + 0.5)
    final = subprocess.run(
        [sys.executable, "-m", "otel_llm.cli", "compact", "--db", str(harness.store_path)],
        capture_output=True, text=True, timeout=300, check=False, env=_env(ROOT),
    )  # fmt: skip
    final_compact = (final.stdout + final.stderr).strip()
    # a generation superseded more than generation_keep_s ago is listed until the next tidy: one
    # that came of age while the final compact ran is due, not left behind by a dead process
    current = store.segments_dir.resolve()
    orphans: list[str] = []
    due: list[str] = []
    for p in store.orphans():
        superseded = p.parent.name == "generations" and p.name < current.name
        (due if superseded else orphans).append(str(p.relative_to(harness.store_path)))
    for p in (harness.store_path / "tmp").glob("*.tmp"):  # on disk, whatever orphans() says
        if str(p.relative_to(harness.store_path)) not in orphans:
            orphans.append(str(p.relative_to(harness.store_path)))
    quarantined = [p.name for p in store.quarantined()]
    notes = {
        name: (p := store.quarantine_dir / (name + WHY)).is_file()
        and bool(p.read_text("utf-8", "replace").strip())
        for name in harness.damaged
    }
    outputs = [
        p.read_text("utf-8", "replace")
        for p in (*harness.logs.glob("*.err"), *harness.logs.glob("compact-*.log"))
    ]
    for name, entry in harness.damaged.items():
        entry["named_by"] = sum(name in text for text in (*outputs, final_compact))
    ledger = _ledger(harness.logs)
    ids, unreadable = _store_ids(harness)
    rows = set(ids)
    lost = ledger.acked - rows
    foreign = rows - ledger.produced
    in_doubt = ledger.produced - ledger.acked
    landed = rows & in_doubt
    landed_unkilled = {sid for sid in landed if sid >> SEQ_BITS not in harness.killed}
    torn = [
        (role, inc, first, count)
        for role, inc, first, count, acked in ledger.batches
        if not acked
        and role in ("steady", "burst")
        and 0 < len({span_id(inc, s) for s in range(first, first + count)} & rows) < count
    ]
    final_segments = len(store.segments())

    readers: list[dict[str, Any]] = []
    for log in sorted(harness.logs.glob("reader-*.log"), key=lambda p: int(p.stem.split("-")[1])):
        version, entries = _reader_entries(log)
        ok = [e for e in entries if "err" not in e]
        failed = [e for e in entries if "err" in e]
        dup_queries = [e for e in ok if e["n"] != e["d"]]
        counts = [e["n"] for e in ok]
        fell = sum(1 for a, b in itertools.pairwise(counts) if b < a)
        kinds: dict[str, int] = {}
        for e in failed:
            kind = "Cannot open file" if "Cannot open" in e["err"] or "No such file" in e[
                "err"] else e["err"][:80]  # fmt: skip
            kinds[kind] = kinds.get(kind, 0) + 1
        timed = [(e["t"], e["count_ms"]) for e in ok]
        dup_timed = [(e["t"], e["dup_ms"]) for e in ok]
        readers.append(
            {
                "duckdb": version,
                "queries": len(entries),
                "failed": len(failed),
                "failures": kinds,
                "duplicated_queries": len(dup_queries),
                "duplicates_max": max((e["n"] - e["d"] for e in dup_queries), default=0),
                "count_fell": fell,
                "damaged_rows_seen_max": max((e.get("damaged", 0) for e in ok), default=0),
                "damaged_rows_seen_queries": sum(1 for e in ok if e.get("damaged")),
                "count_ms_tenths": [_median(b) for b in _tenths(timed, span)],
                "dup_ms_tenths": [_median(b) for b in _tenths(dup_timed, span)],
            }
        )
    q_ok = [q for q in harness.queries if "err" not in q]
    q_failed = [q for q in harness.queries if "err" in q]
    q_dups = [q for q in q_ok if q["n"] != q["d"]]

    seg_tenths = [max(b, default=0) for b in _tenths(harness.segment_counts, span)]
    seg_max = max(seg_tenths, default=0)
    early = max(seg_tenths[1:5], default=0)
    bounded = seg_tenths[-1] <= 1.5 * early + 16

    flat = []
    for reader in readers:
        first, last = reader["count_ms_tenths"][0], reader["count_ms_tenths"][-1]
        factor, slack = config.flat
        flat.append(first is not None and last is not None and last <= factor * first + slack)
    ratios = [
        None if r["count_ms_tenths"][0] in (None, 0) or r["count_ms_tenths"][-1] is None
        else r["count_ms_tenths"][-1] / r["count_ms_tenths"][0]
        for r in readers
    ]  # fmt: skip

    quarantined_ok = (
        all(
            name in quarantined and notes[name] and not (store.segments_dir / name).exists()
            for name in harness.damaged
        )
        and len(harness.damaged) == 2
    )
    exact = (
        not lost
        and not foreign
        and len(ids) == len(rows)
        and not torn
        and not landed_unkilled
        and unreadable is None
    )
    lockless = {}
    for r in readers:
        exact_after = [
            a
            for a in after
            if a.get("duckdb") == r["duckdb"] and a.get("n") == a.get("d") == len(ids)
        ]
        name = (
            f"0 duplicates ever seen by the lockless reader on DuckDB {r['duckdb']} "
            f"({r['queries'] - r['failed']} answers; a new one after the run: "
            f"{_after_text(after, r['duckdb'])})"
        )
        answered = r["queries"] - r["failed"] > 0
        lockless[name] = r["duplicated_queries"] == 0 and answered and bool(exact_after)
    requirements = {
        "rows = spans acknowledged (+ in-doubt spans of killed writers that landed), no loss, "
        "nothing foreign, no torn write": exact,
        **lockless,
        f"0 duplicates ever seen by otel-llm query ({len(q_ok)} answers)": not q_dups
        and len(q_ok) > 0,
        f"segment count bounded (max {seg_max:.0f}; last tenth {seg_tenths[-1]:.0f} <= "
        f"1.5 x {early:.0f} + 16)": bounded,
        f"query time flat, first to last tenth (median count(*) ms: last <= {config.flat[0]:g} x "
        f"first + {config.flat[1]:g})": all(flat) and bool(flat),
        f">= {config.merges} merges ({harness.tally.total})": harness.tally.total >= config.merges,
        "every damaged file named and quarantined": quarantined_ok,
        f"no orphan left after one more compact() ({len(orphans)})": not orphans,
        "no writer or merger failed on its own (exits, merges that raised)": not harness.crashes
        and not harness.tally.errors,
    }
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(config).items()},
        "seconds": duration,
        "warm_up_s": harness.warm_at,
        "writes": harness.tally.writes,
        "requirements": requirements,
        "passed": all(requirements.values()),
        "spans": {
            "produced": len(ledger.produced),
            "acked": len(ledger.acked),
            "in_doubt": len(in_doubt),
            "in_doubt_landed": len(landed),
            "rows": len(ids),
            "distinct_rows": len(rows),
            "lost": len(lost),
            "foreign": len(foreign),
            "torn_batches": len(torn),
            "in_doubt_landed_of_live_writers": len(landed_unkilled),
            "store_unreadable": unreadable,
        },
        "merges": dict(harness.tally.merges),
        "merges_total": harness.tally.total,
        "merge_errors": len(harness.tally.errors),
        "merge_error_samples": sorted(set(harness.tally.errors))[:5],
        "crashes": harness.crashes[:10],
        "crash_count": len(harness.crashes),
        "kills": harness.kills,
        "cli_compacts": harness.cli_compacts,
        "restarts": len(harness.restarts),
        "stuck_at_stop": harness.stuck,
        "segments": {"tenths_max": seg_tenths, "max": seg_max, "final": final_segments},
        "readers": readers,
        "lockless_after_run": after,
        "query_time_ratios": ratios,
        "otel_llm_query": {
            "runs": len(harness.queries),
            "failed": len(q_failed),
            "failure_samples": sorted({q["err"] for q in q_failed})[:3],
            "duplicated": len(q_dups),
            "ms_tenths": [_median(b) for b in _tenths([(q["t"], q["ms"]) for q in q_ok], span)],
        },
        "damaged": harness.damaged,
        "quarantined": quarantined,
        "why_notes": notes,
        "final_compact": final_compact,
        "orphans": orphans,
        "superseded_generations_due": due,
    }


def _after_text(after: Sequence[dict[str, Any]], version: str) -> str:
    for entry in after:
        if entry.get("duckdb") == version:
            return f"{entry['n']} rows, {entry['d']} distinct"
    return "failed: " + "; ".join(str(e.get("err")) for e in after if "err" in e)


def _fmt(values: Sequence[float | None], digits: int = 1) -> str:
    return " ".join("-" if v is None else f"{v:.{digits}f}" for v in values)


def report(results: dict[str, Any]) -> None:
    s = results["spans"]
    warm = results["warm_up_s"]
    print(f"run: {results['seconds']:.1f} s (tenths after a warm-up of "
          f"{'-' if warm is None else f'{warm:.1f}'} s: every writer wrote, a merge happened); "
          f"config {results['config']}")  # fmt: skip
    print(f"batches acknowledged: {results['writes']}")
    print(
        f"spans: produced {s['produced']}, acknowledged {s['acked']}, in doubt {s['in_doubt']} "
        f"(landed {s['in_doubt_landed']}); rows {s['rows']} ({s['distinct_rows']} distinct); "
        f"lost {s['lost']}, foreign {s['foreign']}, torn writes {s['torn_batches']}"
    )
    if s["store_unreadable"]:
        print(f"  the store could not be read whole: {s['store_unreadable']}")
    print(f"merges: {results['merges_total']} {results['merges']}; merge errors "
          f"{results['merge_errors']} {results['merge_error_samples']}")  # fmt: skip
    print(f"SIGKILLs: {results['kills']}; restarts {results['restarts']}; otel-llm compact "
          f"{results['cli_compacts']}")  # fmt: skip
    for crash in results["crashes"]:
        print(f"  crash: {crash}")
    seg = results["segments"]
    print(f"segments: max {seg['max']:.0f}, final {seg['final']}; max per tenth "
          f"{_fmt(seg['tenths_max'], 0)}")  # fmt: skip
    for reader, ratio in zip(results["readers"], results["query_time_ratios"], strict=True):
        rate = reader["failed"] / max(1, reader["queries"])
        print(
            f"lockless reader, DuckDB {reader['duckdb']}: {reader['queries']} queries, failed "
            f"{reader['failed']} ({rate:.2%}) {reader['failures']}; queries that double "
            f"counted {reader['duplicated_queries']} (most {reader['duplicates_max']} rows); "
            f"count fell {reader['count_fell']} times; answers that counted rows of a damaged "
            f"segment {reader['damaged_rows_seen_queries']} "
            f"(most {reader['damaged_rows_seen_max']})"
        )
        print(f"  count(*) ms, median per tenth: {_fmt(reader['count_ms_tenths'])} "
              f"(last/first {'-' if ratio is None else f'{ratio:.2f}'})")  # fmt: skip
        print(f"  count + count(DISTINCT SpanId) ms: {_fmt(reader['dup_ms_tenths'])}")
    q = results["otel_llm_query"]
    print(f"otel-llm query: {q['runs']} runs, failed {q['failed']} {q['failure_samples']}, "
          f"double counted {q['duplicated']}; ms per tenth {_fmt(q['ms_tenths'], 0)}")  # fmt: skip
    for name, entry in results["damaged"].items():
        gone = entry["gone_at"]
        print(f"damaged {name} ({entry['how']}): dropped at {entry['dropped_at']:.1f} s, "
              f"out of the glob at {'never' if gone is None else f'{gone:.1f} s'}, named in "
              f"{entry['named_by']} outputs; quarantined "
              f"{name in results['quarantined']}, .why {results['why_notes'][name]}")  # fmt: skip
    print(f"quarantine: {results['quarantined']}")
    print(f"final otel-llm compact: {results['final_compact']!r}")
    due = results["superseded_generations_due"]
    print(f"orphans: {results['orphans'][:5]}{' …' if len(results['orphans']) > 5 else ''}; "
          f"superseded generations due for removal: {due}")  # fmt: skip
    for requirement, ok in results["requirements"].items():
        print(f"{'PASS' if ok else 'FAIL'}  {requirement}")


def run(config: Config, work: Path | None = None) -> dict[str, Any]:
    """One run in ``work`` (a temporary directory by default), every child reaped."""
    with contextlib.ExitStack() as stack:
        if work is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="longrun-")))
        harness = Harness(config, work)
        try:
            duration = harness.run()
            return evaluate(harness, duration)
        finally:
            harness.kill_all()


def _role_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=sorted(ROLES), required=True)
    for name in ("--store", "--log", "--stop", "--sql"):
        parser.add_argument(name, type=Path, required=True)
    parser.add_argument("--incarnation", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--start", type=float, required=True)
    parser.add_argument("--pace", type=float, default=1.0)
    args = parser.parse_args(argv)
    role = Role(**vars(args))
    ROLES[role.role](role)


def _terminated(signum: int, frame: FrameType | None) -> None:
    del frame
    raise SystemExit(128 + signum)  # the harness reaps its children on the way out


@contextlib.contextmanager
def _reaped_on_sigterm() -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main() -> None:
    if "--role" in sys.argv:
        _role_main(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ci", action="store_true", help="the test's size (about a minute)")
    parser.add_argument("--seconds", type=float, help="run at least this long")
    parser.add_argument("--merges", type=int, help="and until this many merges")
    parser.add_argument("--max-seconds", type=float, help="but never longer")
    parser.add_argument("--kill-every-s", type=float, help="mean interval between SIGKILLs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--old-duckdb", type=Path, default=OLD_DUCKDB, help="DuckDB 1.5.4's dir")
    parser.add_argument("--no-old-duckdb", action="store_true", help="no 1.5.4 reader")
    parser.add_argument("--work", type=Path, help="keep the store and logs here")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    size = CI if args.ci else FULL
    old = None if args.no_old_duckdb else args.old_duckdb.resolve()  # children run elsewhere
    if old is not None and not (old / "duckdb").is_dir():
        parser.error(f"no DuckDB 1.5.4 in {old} (./dev test installs it; or --no-old-duckdb)")
    config = Config(
        seconds=args.seconds or size["seconds"],
        merges=args.merges if args.merges is not None else int(size["merges"]),
        max_seconds=args.max_seconds or size["max_seconds"],
        kill_every_s=args.kill_every_s or size["kill_every_s"],
        cli_compact_every_s=8.0,
        query_pause_s=3.0,
        pace=size["pace"],
        flat=size["flat"],
        seed=args.seed,
        old_duckdb=old,
    )
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=False)
    with _reaped_on_sigterm():
        results = run(config, args.work)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, default=str) + "\n", "utf-8")
    report(results)
    sys.exit(0 if results["passed"] else 1)


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main()
