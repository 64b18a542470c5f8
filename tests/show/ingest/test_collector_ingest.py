"""The collector's spool files into the store (``otel_llm._show._ingest._otlp_files``): whole files
only, idempotent after a crash, and nothing lost silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource

from otel_llm._show._ingest._otlp_files import CURRENT, Spool, split_messages
from otel_llm._show._store._access import open_store, prepare_for_writing
from otel_llm._show._store._rows import span_row
from otel_llm._show._store._segments import SegmentStore
from tests.support.duckdb_store import MemoryCalls


def _messages(calls: int = 2) -> tuple[list[bytes], list[dict[str, object]]]:
    """One OTLP message per call (3 spans each), and the embedded rows of the same spans."""
    source = MemoryCalls(Resource.create({"service.name": "ingest"}))
    messages: list[bytes] = []
    for _ in range(calls):
        source.exporter.clear()
        source.call()
        spans = source.exporter.get_finished_spans()
        messages.append(encode_spans(spans).SerializeToString())
    rows = [span_row(span) for span in source.exporter.get_finished_spans()]
    return messages, rows


def _framed(messages: list[bytes]) -> bytes:
    """The file exporter's framing: a 4-byte big-endian length before each message."""
    return b"".join(len(m).to_bytes(4, "big") + m for m in messages)


def _store(tmp_path: Path) -> tuple[SegmentStore, Spool]:
    store = prepare_for_writing(tmp_path / "store")
    spool = Spool(tmp_path / "spool", store)
    spool.folder.mkdir()
    return store, spool


def _count(path: Path) -> int:
    with open_store(path) as conn:
        row = conn.execute("SELECT count(*), count(DISTINCT SpanId) FROM otel_traces").fetchone()
    assert row is not None
    assert row[0] == row[1], "a span landed twice"
    return int(row[0])


def test_a_rotated_file_lands_whole_and_is_deleted(tmp_path: Path) -> None:
    """Every span of a finished file is in the store afterwards, and the file is gone."""
    store, spool = _store(tmp_path)
    messages, _ = _messages(3)
    rotated = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
    rotated.write_bytes(_framed(messages))
    (spool.folder / CURRENT).write_bytes(_framed(messages[:1]))  # being written: left alone
    report = spool.ingest()
    assert (report.files, report.spans, report.problems) == (1, 9, [])
    assert not rotated.exists()
    assert (spool.folder / CURRENT).exists()
    assert _count(store.path) == 9


def test_ingesting_a_file_again_after_a_crash_adds_nothing(tmp_path: Path) -> None:
    """A crash between writing the segments and deleting the file: the next pass writes the
    same segment names, which replace the first ones, so no span lands twice."""
    store, spool = _store(tmp_path)
    messages, _ = _messages(4)
    data = _framed(messages)
    rotated = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
    rotated.write_bytes(data)
    spool.segment_spans = 5  # several segments from one file
    assert spool.ingest().spans == 12
    names = sorted(segment.path.name for segment in store.segments())
    rotated.write_bytes(data)  # as if the delete never happened
    assert spool.ingest().spans == 12
    assert sorted(segment.path.name for segment in store.segments()) == names
    assert len(names) == 1 + 2  # the schema segment, then spans 1-6 and 7-12
    assert _count(store.path) == 12


def test_a_crash_before_the_delete_survives_a_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash between sealing a file's segments and deleting the file leaves them pending:
    readers see them, a merge leaves them alone, and ingesting the file again replaces them —
    no span twice even when writers merged the store in between."""
    store, spool = _store(tmp_path)
    messages, _ = _messages(4)
    rotated = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
    rotated.write_bytes(_framed(messages))
    spool.segment_spans = 5
    real_unlink = Path.unlink

    def crash(path: Path, missing_ok: bool = False) -> None:
        if path == rotated:
            raise OSError("the process died here")
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", crash)
    with pytest.raises(OSError, match="died"):
        spool.ingest()
    monkeypatch.undo()
    assert len(store.pending()) == 2
    assert _count(store.path) == 12  # readers see pending segments
    other = SegmentStore(store.path)
    other.write([])  # another writer's small segments, which a merge may take
    other.write([])
    assert other.compact(min_segments=2) == 2  # the two small ones; pending ones stay
    assert len(store.pending()) == 2
    assert spool.ingest().spans == 12
    assert store.pending() == []
    assert not rotated.exists()
    assert _count(store.path) == 12


def test_a_crash_after_the_delete_is_finished_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the file is deleted but before its segments got their final names: the
    next pass gives them their names (so merges may take them) and adds nothing."""
    store, spool = _store(tmp_path)
    messages, _ = _messages(2)
    rotated = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
    rotated.write_bytes(_framed(messages))

    def crash(name: str) -> None:
        raise OSError("the process died here")

    monkeypatch.setattr(store, "finalize", crash)
    with pytest.raises(OSError, match="died"):
        spool.ingest()
    monkeypatch.undo()
    assert not rotated.exists()
    assert len(store.pending()) == 1
    assert spool.ingest().spans == 0
    assert store.pending() == []
    assert _count(store.path) == 6


def test_a_message_cut_short_is_kept_and_reported(tmp_path: Path) -> None:
    """A file whose last message is incomplete (a collector killed mid-write): the whole
    messages land, the file is kept as .incomplete, and the report names it and the offset."""
    store, spool = _store(tmp_path)
    messages, _ = _messages(2)
    data = _framed(messages)
    cut = len(data) - 10
    spool.folder.joinpath(CURRENT).write_bytes(data[:cut])
    sealed = spool.seal_current()
    assert sealed is not None
    report = spool.ingest()
    assert report.spans == 3
    [problem] = report.problems
    first = 4 + len(messages[0])
    assert sealed.name in problem
    assert f"at byte {first} of {cut}" in problem
    assert "cut short" in problem
    assert (spool.folder / (sealed.name + ".incomplete")).read_bytes() == data[:cut]
    assert _count(store.path) == 3


@pytest.mark.parametrize(
    ("damage", "where"),
    [
        (b"\xff\xff\xff\xff" + b"x" * 16, "a length of"),
        (b"\x00\x00\x00\x05" + b"\xff\xff\xff\xff\xff", "do not parse"),
    ],
)
def test_a_corrupt_file_is_kept_by_name(tmp_path: Path, damage: bytes, where: str) -> None:
    """Bytes that are no message (an absurd length, or a message that does not parse): the
    messages before them land, the file is kept as .corrupt, the report says why."""
    _, spool = _store(tmp_path)
    messages, _ = _messages(1)
    rotated = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
    rotated.write_bytes(_framed(messages) + damage)
    report = spool.ingest()
    assert report.spans == 3
    [problem] = report.problems
    assert rotated.name in problem
    assert where in problem
    assert (spool.folder / (rotated.name + ".corrupt")).exists()
    assert spool.ingest().files == 0  # kept aside, not retried on every pass


def test_seal_current_drops_an_empty_file_and_keeps_order(tmp_path: Path) -> None:
    """An empty current file is removed; a non-empty one sorts after every rotated file."""
    _, spool = _store(tmp_path)
    (spool.folder / CURRENT).write_bytes(b"")
    assert spool.seal_current() is None
    assert not (spool.folder / CURRENT).exists()
    rotated = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
    rotated.write_bytes(b"")
    (spool.folder / CURRENT).write_bytes(b"\x00\x00\x00\x00")
    sealed = spool.seal_current()
    assert spool.finished() == [rotated, sealed]


def test_split_messages_finds_the_boundaries() -> None:
    """Length-prefixed messages split where the prefixes say; an empty message holds no spans
    and is passed over, a run of them (zeros) at once, up to a length prefix cut short."""
    messages, framing = split_messages(_framed([b"ab", b"", b"cde"]))
    assert messages == [(0, b"ab"), (10, b"cde")]
    assert (framing.end, framing.problem) == (17, None)
    messages, short = split_messages(b"\x00\x00")
    assert (messages, short.end) == ([], 0)
    assert short.problem is not None
    assert "prefix" in short.problem
    zeros = 3 * 1024 * 1024 + 6  # runs past a read of the zeros, ends with a prefix cut short
    messages, tail = split_messages(_framed([b"ab"]) + bytes(zeros))
    assert (messages, tail.end) == ([(0, b"ab")], 6 + zeros - 2)
    assert tail.problem is not None
    assert "prefix cut short (2 of 4" in tail.problem
    messages, _ = split_messages(bytes(4096) + _framed([b"x"]) + bytes(8) + _framed([b"yz"]))
    assert messages == [(4096, b"x"), (4096 + 5 + 8, b"yz")]


def test_a_message_the_store_cannot_hold_is_left_out_and_the_rest_lands(tmp_path: Path) -> None:
    """OTLP times are unsigned 64-bit, the store's signed: a span starting past 2**63 cannot be
    a row. Its message is left out and named; the messages around it, and the next file, land;
    the file is kept as .corrupt rather than blocking every later ingest."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    store, spool = _store(tmp_path)
    messages, _ = _messages(4)
    bad = ExportTraceServiceRequest.FromString(messages[1])
    bad.resource_spans[0].scope_spans[0].spans[0].start_time_unix_nano = 2**63 + 5
    framed = [messages[0], bad.SerializeToString(), messages[2]]
    first = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
    first.write_bytes(_framed(framed))
    later = spool.folder / "traces-2026-01-01T00-00-01.000-size.binpb"
    later.write_bytes(_framed(messages[3:]))
    report = spool.ingest()
    assert (report.files, report.spans) == (2, 9)
    [problem] = report.problems
    assert first.name in problem
    assert f"at byte {4 + len(messages[0])}" in problem
    assert "past 64 bits" in problem
    assert (spool.folder / (first.name + ".corrupt")).exists()
    assert not later.exists()
    assert _count(store.path) == 9
    assert spool.ingest().files == 0


def test_bytes_inside_an_array_are_stored_as_the_collector_stores_them(tmp_path: Path) -> None:
    """An OTLP span whose attribute is an array holding bytes (no SDK makes one; a request may):
    the spool file is ingested — its row holds the JSON string of their hex, as the Collector's
    exporter writes it — instead of the ingest dying with a traceback on every start."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, "s"
    span.start_time_unix_nano = span.end_time_unix_nano = 1_700_000_000_000_000_000
    values = span.attributes.add(key="ids").value.array_value.values
    values.add().bytes_value = b"\x01\x02"
    values.add().string_value = "a"
    store, spool = _store(tmp_path)
    (spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb").write_bytes(
        _framed([request.SerializeToString()])
    )
    report = spool.ingest()
    assert (report.spans, report.problems) == (1, [])
    with open_store(store.path) as conn:
        row = conn.execute("""SELECT "SpanAttributes"['ids'] FROM otel_traces""").fetchone()
    assert row == ('["0102","a"]',)


def test_a_file_of_zeros_is_read_a_message_at_a_time(tmp_path: Path) -> None:
    """Zeros where a file's last writes never reached the disk (what a file system can leave
    after a power loss) read as empty messages: 8 MiB of them between two messages once cost
    100 times their size in memory (the whole file, then an object per empty message) and
    a second a MiB; the file is read a message at a time and a run of zeros passed at once."""
    import tracemalloc

    store, spool = _store(tmp_path)
    messages, _ = _messages(2)
    zeros = 8 << 20
    rotated = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
    with rotated.open("wb") as handle:
        handle.write(_framed(messages[:1]))
        handle.seek(zeros, 1)  # a hole: reads as zeros
        handle.write(_framed(messages[1:]))
    tracemalloc.start()
    try:
        report = spool.ingest()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (report.files, report.spans, report.problems) == (1, 6, [])
    assert peak < zeros // 2, f"{peak} bytes at the peak for a file of {zeros} zeros"
    assert not rotated.exists()
    assert _count(store.path) == 6


def _not_utf8(span_name: str) -> bytes:
    """A request whose span has a text attribute that is not UTF-8: OTLP forbids it, the
    Collector's receivers pass it on, its file exporter wrote it."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, span_name
    span.start_time_unix_nano = span.end_time_unix_nano = 1_700_000_000_000_000_000
    span.attributes.add(key="k").value.string_value = "MARKER"
    return request.SerializeToString().replace(b"MARKER", b"\xff\xfeRKER")


def test_a_message_that_does_not_parse_is_left_out_and_the_rest_lands(tmp_path: Path) -> None:
    """One client's request that does not parse (a string that is not UTF-8) is left out and
    named; the messages after it land (they once stayed in the kept file, out of the store),
    and those before it make one segment (the spans appended before the bad value was met
    are not written)."""
    store, spool = _store(tmp_path)
    messages, _ = _messages(3)
    bad = _not_utf8("bad")
    rotated = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
    rotated.write_bytes(_framed([messages[0], bad, messages[1], bad, messages[2]]))
    report = spool.ingest()
    assert (report.files, report.spans) == (1, 9)
    assert len(report.names) == 1
    [problem] = report.problems
    first = 4 + len(messages[0])
    second = first + 4 + len(bad) + 4 + len(messages[1])
    assert rotated.name in problem
    assert "2 message(s) that do not parse" in problem
    assert "bad UTF-8" in problem
    assert f"at byte {first}, {second}" in problem
    assert (spool.folder / (rotated.name + ".corrupt")).exists()
    assert _count(store.path) == 9
    with open_store(store.path) as conn:
        names = conn.execute("SELECT DISTINCT SpanName FROM otel_traces").fetchall()
    assert "bad" not in {name for (name,) in names}
    assert spool.ingest().files == 0


def test_a_key_sent_twice_is_one_key_in_every_map(tmp_path: Path) -> None:
    """OTLP forbids a key twice in one attribute list; a client may send it, and the Collector
    passes it on. Each map keeps it once, at its first place with its last value (as the rows
    and the Collector's exporter do): an event's map once held it twice, and DuckDB refused to
    read that segment's events ("Map keys must be unique") — every `SELECT *` over the store."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from otel_llm import _semconv as sc
    from otel_llm._show._ingest._otlp_rows import rows_from_export_request

    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    for name in ("a", "b"):
        resource_spans.resource.attributes.add(key="service.name").value.string_value = name
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, "twice"
    span.start_time_unix_nano = 1_700_000_000_000_000_000
    span.end_time_unix_nano = span.start_time_unix_nano + 10
    for value in ("x", "y"):
        span.attributes.add(key="k").value.string_value = value
    for name in ("note", sc.CHUNK_EVENT):
        event = span.events.add(name=name, time_unix_nano=span.start_time_unix_nano + 5)
        event.attributes.add(key="other").value.string_value = "o"
        for number in (1, 2):
            event.attributes.add(key=sc.CHUNK_INDEX).value.int_value = number
    link = span.links.add(trace_id=b"\x03" * 16, span_id=b"\x04" * 8)
    for value in ("p", "q"):
        link.attributes.add(key="l").value.string_value = value
    store, spool = _store(tmp_path)
    (spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb").write_bytes(
        _framed([request.SerializeToString()])
    )
    assert spool.ingest().spans == 1
    [row] = rows_from_export_request(request)
    with open_store(store.path) as conn:
        cursor = conn.execute("SELECT * FROM otel_traces")
        names = [column[0] for column in cursor.description]
        [stored] = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    assert [list(m.items()) for m in stored["Events.Attributes"]] == [
        [("other", "o"), (sc.CHUNK_INDEX, "2")],
        [("other", "o"), (sc.CHUNK_INDEX, "2")],
    ]
    for name in (
        "ResourceAttributes",
        "SpanAttributes",
        "Events.Attributes",
        "Links.Attributes",
        "ServiceName",
        "ChunkIndex",
    ):
        assert stored[name] == row[name], name
    assert stored["ChunkIndex"] == [2]


_INGEST = """
import sys
from pathlib import Path
from otel_llm._show._ingest._otlp_files import Spool
from otel_llm._show._store._access import prepare_for_writing
spool = Spool(Path(sys.argv[2]), prepare_for_writing(Path(sys.argv[1])))
first, again = spool.ingest(), spool.ingest()
print(first.spans, again.spans, again.files, again.problems)
for problem in first.problems:
    print(problem)
"""


def _without_root_powers() -> list[str]:
    """A prefix that runs a command without root's power to read any file (as root: setpriv
    drops it), so file permissions hold for it."""
    import os
    import shutil

    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) runs the ingest without root's powers"
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


def test_a_file_it_may_not_read_is_named_and_the_rest_lands(tmp_path: Path) -> None:
    """A spool file the process may not read once stopped the whole ingest with a bare
    `[Errno 13] Permission denied` (and `otel-llm collector` from starting, exit code 2, at
    every start): it is named with why, left as it is for a later start, not tried again in
    this process, and the other files land."""
    import subprocess
    import sys

    store, spool = _store(tmp_path)
    messages, _ = _messages(2)
    locked = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
    locked.write_bytes(_framed(messages[:1]))
    locked.chmod(0)
    readable = spool.folder / "traces-2026-01-01T00-00-01.000-size.binpb"
    readable.write_bytes(_framed(messages[1:]))
    done = subprocess.run(
        [*_without_root_powers(), sys.executable, "-c", _INGEST, str(store.path), spool.folder],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    counts, problem = done.stdout.splitlines()
    assert counts == "3 0 0 []"
    assert problem.startswith(f"{locked}: cannot be read (Permission denied)")
    assert "left as it is" in problem
    assert locked.exists()
    assert not readable.exists()
    assert _count(store.path) == 3


def test_large_values_are_not_kept_after_the_ingest(tmp_path: Path) -> None:
    """Each distinct attribute value was decoded once and kept, up to 65,536 of them however
    large: spans with captured content (prompts of 100 KB) kept twice their text in memory
    for as long as the process ran — 1.3 GB after 5,000 such spans, about 13 GB before the
    memo was cleared. Only small values (a model's name, a chunk's index) are kept."""
    import gc
    import tracemalloc

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    def prompts(first: int, count: int) -> bytes:
        request = ExportTraceServiceRequest()
        spans = request.resource_spans.add().scope_spans.add().spans
        for number in range(first, first + count):
            span = spans.add(
                trace_id=b"\x01" * 16,
                span_id=(number + 1).to_bytes(8, "big"),
                name="chat",
                start_time_unix_nano=1_700_000_000_000_000_000,
                end_time_unix_nano=1_700_000_000_000_000_001,
            )
            span.attributes.add(key="gen_ai.model").value.string_value = "m"
            prompt = span.attributes.add(key="gen_ai.prompt").value
            prompt.string_value = f"{number:08d}" + "p" * 64_000
        return _framed([request.SerializeToString()])

    store, spool = _store(tmp_path)
    (spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb").write_bytes(prompts(0, 2))
    assert spool.ingest().spans == 2  # the imports and first allocations of an ingest
    (spool.folder / "traces-2026-01-01T00-00-01.000-size.binpb").write_bytes(prompts(2, 200))
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        assert spool.ingest().spans == 200
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 1 << 20, f"{after - before} bytes kept after 12.8 MB of prompts"
    assert _count(store.path) == 202


@pytest.mark.parametrize(
    "stem", ["traces-a\\b", "traces-[1]*?{x}", "traces-new\nline", "traces-a é ü"]
)
def test_a_file_name_readers_would_take_for_a_pattern_makes_a_plain_segment_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stem: str
) -> None:
    """Segment names were made from the spool file's name as it was: a backslash in it made
    a segment DuckDB's glob does not find (its spans silently unread: 3 of 6 counted), and any
    of `*?[]{}` made every reader of the store fall back to the glob. Such characters are
    replaced (the name's checksum keeps two names two), and a crash before the final names
    is finished as for any file."""
    from otel_llm._show._store._glob import GLOB_CHARACTERS

    store, spool = _store(tmp_path)
    messages, _ = _messages(2)
    (spool.folder / "traces-zz-later.binpb").write_bytes(_framed(messages[:1]))
    odd = spool.folder / f"{stem}.binpb"  # ingested first: its final names wait for the next
    odd.write_bytes(_framed(messages[1:]))

    def crash(name: str) -> None:
        raise OSError("the process died here")

    monkeypatch.setattr(store, "finalize", crash)
    with pytest.raises(OSError, match="died"):
        spool.ingest()
    monkeypatch.undo()
    assert spool.ingest().spans == 3  # the later file; the odd one's segment gets its name
    assert store.pending() == []
    assert not odd.exists()
    names = [segment.path.name for segment in store.segments()]
    assert not [name for name in names if GLOB_CHARACTERS.intersection(name) or "\n" in name]
    assert _count(store.path) == 6


def test_sealing_the_current_file_never_replaces_a_file_of_the_same_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The current file is renamed after the time of day, to the millisecond: a file of that
    name still waiting (its ingest failed, and the clock was set back since) was replaced by
    the rename, its spans lost. The new one takes a name of its own."""
    import datetime

    from otel_llm._show._ingest import _otlp_files

    store, spool = _store(tmp_path)
    messages, _ = _messages(2)
    at = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> Frozen:
            return cls.fromtimestamp(at.timestamp(), tz)

    monkeypatch.setattr(_otlp_files.datetime, "datetime", Frozen)
    (spool.folder / CURRENT).write_bytes(_framed(messages[:1]))
    first = spool.seal_current()
    (spool.folder / CURRENT).write_bytes(_framed(messages[1:]))
    second = spool.seal_current()
    assert first is not None
    assert second is not None
    assert first != second
    assert first.read_bytes() == _framed(messages[:1])
    assert spool.finished() == [first, second]
    assert spool.ingest().spans == 6
    assert _count(store.path) == 6


def test_a_crash_after_a_file_is_kept_is_finished_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after a damaged file was kept aside but before its segments got their final
    names: the next pass gives them their names, as for a file deleted (a kept file is never
    ingested again); they stayed pending for good, which merges never take."""
    store, spool = _store(tmp_path)
    messages, _ = _messages(1)
    rotated = spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb"
    rotated.write_bytes(_framed(messages) + b"\xff\xff\xff\xff")

    def crash(name: str) -> None:
        raise OSError("the process died here")

    monkeypatch.setattr(store, "finalize", crash)
    with pytest.raises(OSError, match="died"):
        spool.ingest()
    monkeypatch.undo()
    assert (spool.folder / (rotated.name + ".corrupt")).exists()
    assert len(store.pending()) == 1
    assert spool.ingest().files == 0
    assert store.pending() == []
    assert _count(store.path) == 3


def test_a_segment_holds_a_bounded_size_of_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment was sealed only at 5,000 spans: a file of large spans (a collector configured
    to rotate late, spans with captured content) held all of them at once — 5,000 spans of
    3 MB, 15 GB. It is also sealed once its messages come to a bound (64 MiB; 256 KiB here):
    the peak is a few segments' worth and a MiB read at a time, not the whole file twice."""
    import tracemalloc

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from otel_llm._show._ingest import _otlp_files

    bound = 256 << 10
    monkeypatch.setattr(_otlp_files, "SEGMENT_BYTES", bound)
    messages = []
    for number in range(40):
        request = ExportTraceServiceRequest()
        span = (
            request.resource_spans.add()
            .scope_spans.add()
            .spans.add(
                trace_id=b"\x01" * 16,
                span_id=(number + 1).to_bytes(8, "big"),
                name="chat",
                start_time_unix_nano=1_700_000_000_000_000_000,
                end_time_unix_nano=1_700_000_000_000_000_001,
            )
        )
        prompt = span.attributes.add(key="gen_ai.prompt").value
        prompt.string_value = f"{number:04d}" + "p" * 100_000
        messages.append(request.SerializeToString())
    store, spool = _store(tmp_path)
    warm, _ = _messages(1)
    (spool.folder / "traces-2026-01-01T00-00-00.000-size.binpb").write_bytes(_framed(warm))
    assert spool.ingest().spans == 3  # the imports and first allocations of an ingest
    (spool.folder / "traces-2026-01-01T00-00-01.000-size.binpb").write_bytes(_framed(messages))
    tracemalloc.start()
    try:
        report = spool.ingest()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.spans == 40
    assert len(report.names) == 14  # three messages of 100 KB pass 256 KiB: 13 of 3, then 1
    assert peak < 4 * bound + (2 << 20), f"{peak} bytes at the peak for 4 MB of messages"
    assert _count(store.path) == 43
