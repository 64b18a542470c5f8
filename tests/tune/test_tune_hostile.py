"""``otel-llm tune`` on hostile or failing stores: stored names reach the terminal escaped, as
``otel-llm query`` writes them, and a failed call is no wall time in the JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from otel_llm import _semconv as sc
from otel_llm._tune._sample import MIN_CALLS
from tests.support.processes import run_cli
from tests.support.tune_store import Scripted, TuneStore, stream, write_store

HOSTILE = "\x1b]52;c;cHduZWQ=\x07clip\x1b[2J"
"""Writes the terminal's clipboard (OSC 52), then clears the screen."""
ESCAPED = "\\u001b]52;c;cHduZWQ=\\u0007clip\\u001b[2J"


def test_a_hostile_source_name_is_escaped_in_the_data_line_and_the_verdict(
    tmp_path: Path,
) -> None:
    """Too few calls on two sources: the data line names both sources and the verdict names
    the hostile one (its hedge pool is too small); neither writes a control character."""
    write_store(tmp_path / "s", 40, sources=(HOSTILE, "ok-src"))
    result = run_cli("tune", "--db", str(tmp_path / "s"), columns=400)
    assert result.returncode == 3, result.stderr
    text = result.stdout + result.stderr
    assert "\x1b" not in text
    assert "\x07" not in text
    data = next(line for line in result.stdout.splitlines() if line.startswith("Data:"))
    assert f"({ESCAPED} 20, ok-src 20)" in data
    verdict = next(line for line in result.stdout.splitlines() if "No recommendation" in line)
    assert f"for calls on {ESCAPED}" in verdict


def test_the_unknown_source_error_lists_the_sources_escaped(tmp_path: Path) -> None:
    write_store(tmp_path / "s", 10, sources=(HOSTILE, "ok-src"))
    result = run_cli("tune", "--db", str(tmp_path / "s"), "--source", "nope")
    assert result.returncode == 2
    assert "\x1b" not in result.stderr
    assert "\x07" not in result.stderr
    assert f"(sources: {ESCAPED}, ok-src)" in result.stderr


def _failing(index: int) -> Scripted:
    arrivals = stream(300.0, 5, 25.0)
    source = ("sim-1", "sim-2")[index % 2]
    return Scripted(arrivals, arrivals[-1] + 500, source=source, outcome=sc.OUTCOME_ERROR)


def test_every_call_failing_is_said_and_no_figure_is_a_sentinel(tmp_path: Path) -> None:
    """Every call failed: each percentile in the JSON is null, the data's failed share is 1, the
    verdict says every call failed, and the table says so too."""
    store = TuneStore(tmp_path / "s")
    try:
        for index in range(MIN_CALLS + 100):
            store.call([_failing(index)])
    finally:
        store.close()
    result = run_cli("tune", "--db", str(tmp_path / "s"), "--format", "json")
    assert result.returncode == 3, "no recommendation: a script must not take it for one"
    document = json.loads(result.stdout)
    for figures in (document["baseline"], document["recorded"], *document["settings"]):
        assert figures["p50_s"] is None
        assert figures["p95_s"] is None
        assert figures["p99_s"] is None
        assert figures["p99_interval_s"] == [None, None]
    assert document["data"]["failed_share"] == 1.0
    assert document["recommendation"] is None
    assert document["verdict"].startswith(f"every one of the {MIN_CALLS + 100:,} calls")
    assert "1000000000000" not in result.stdout
    table = run_cli("tune", "--db", str(tmp_path / "s"), columns=400)
    assert table.returncode == 3
    assert f"No recommendation: every one of the {MIN_CALLS + 100:,} calls replayed failed" in (
        table.stdout
    )
    assert "p99 failed, " in table.stdout


def test_a_few_failed_calls_make_the_p99_null_with_their_share(tmp_path: Path) -> None:
    """One call in 25 failed: the recorded p99 falls on a failed call, so it is null, the p50
    is a time, and the data's ``failed_share`` gives the share; the table says the share."""
    store = TuneStore(tmp_path / "s")
    scripts = write_store(tmp_path / "ok", MIN_CALLS, sources=("sim-1", "sim-2"))
    try:
        for index, scripted in enumerate(scripts):
            store.call([_failing(index) if index % 25 == 0 else scripted])
    finally:
        store.close()
    result = run_cli("tune", "--db", str(tmp_path / "s"), "--format", "json")
    document = json.loads(result.stdout)
    recorded = document["recorded"]
    assert recorded["p99_s"] is None
    assert isinstance(recorded["p50_s"], float)
    assert document["data"]["failed_share"] == 0.04
    assert "1000000000000" not in result.stdout
    table = run_cli("tune", "--db", str(tmp_path / "s"), columns=400)
    assert "4.0% of calls failed" in table.stdout


def test_the_report_plots_no_failed_call_as_a_time(tmp_path: Path) -> None:
    """The report's "what hedging would buy" chart and text, on a store where one call in 25
    failed: a figure that falls on a failed call is left out of the chart and said as failed —
    never the replay's stand-in of 1,000,000,000,000 s on an axis."""
    store = TuneStore(tmp_path / "s")
    try:
        for index in range(MIN_CALLS + 100):
            if index % 25 == 0:
                store.call([_failing(index)])
            else:
                arrivals = stream(300.0 + index % 7, 5, 25.0)
                store.call([Scripted(arrivals, arrivals[-1] + 50, source="sim-1")])
    finally:
        store.close()
    page = tmp_path / "r.html"
    result = run_cli("report", "--db", str(tmp_path / "s"), "-o", str(page))
    assert result.returncode == 0, result.stderr
    text = page.read_text()
    assert "1000000000000" not in text
    assert "1e+12" not in text
    assert "1e12" not in text


def _rewrite_attempts(store: Path, change: Callable[[list[dict[str, Any]]], None]) -> None:
    """Rewrite the store's segments with ``change`` applied to their attempt rows (as a foreign
    or damaged writer could have left them)."""
    segments = sorted((store / "segments").glob("*.parquet"))
    tables = [pq.read_table(segment) for segment in segments]
    rows = [table.to_pylist() for table in tables]
    change([row for listed in rows for row in listed if row["LlmRole"] == sc.SPAN_ROLE_ATTEMPT])
    for segment, table, listed in zip(segments, tables, rows, strict=True):
        pq.write_table(pa.Table.from_pylist(listed, schema=table.schema), segment)


def _damage_chunk_lists(rows: list[dict[str, Any]]) -> None:
    chunked = [row for row in rows if len(row["ChunkIndex"] or ()) >= 2]
    chunked[0]["ChunkGapNs"] = chunked[0]["ChunkGapNs"][:-1]  # one gap short
    chunked[1]["ChunkOffsetNs"] = chunked[1]["ChunkOffsetNs"][:-1]  # one offset short
    chunked[2]["ChunkIndex"] = None  # the indexes lost, the offsets kept
    chunked[2]["ChunkGapNs"] = None
    chunked[3]["ChunkOffsetNs"] = [-5_000_000_000, *chunked[3]["ChunkOffsetNs"][1:]]
    chunked[4]["ChunkGapNs"] = [None, *(-1 for _ in chunked[4]["ChunkGapNs"][1:])]


def test_chunk_event_lists_that_disagree_are_incomplete_metering_not_a_traceback(
    tmp_path: Path,
) -> None:
    """Attempts whose chunk-event columns are not one event per entry (lists of different
    lengths, indexes lost) or hold negative times are no timeline: tune leaves them out as
    incomplete metering, counted, and runs on the rest — no traceback."""
    path = tmp_path / "s"
    write_store(path, 40, sources=("a-1", "b-2"))
    _rewrite_attempts(path, _damage_chunk_lists)
    result = run_cli("tune", "--db", str(path), "--format", "json")
    assert "Traceback" not in result.stderr
    assert result.returncode == 3, result.stderr
    data = json.loads(result.stdout)["data"]
    assert data["left_out"]["metering_incomplete"] == 5
    assert data["calls"] == 35
