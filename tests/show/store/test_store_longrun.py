"""A CI-sized run of ``benchmarks/store/longrun.py`` — writers steady and bursty, merges without
pause, SIGKILLs of writers and mergers, two damaged segments dropped in midway, two lockless
readers (the current DuckDB and 1.5.4, Grafana's engine) and ``otel-llm query`` throughout —
with every requirement asserted on the results it writes back. The run lasts about a minute
(35 s after its warm-up, at half the full size's write rate)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import require
from tests.support import REPOSITORY

ROOT = REPOSITORY
OLD_DUCKDB = ROOT / ".cache" / "duckdb-1.5.4"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One CI-sized run (about a minute), its results as written to ``--json``."""
    require((OLD_DUCKDB / "duckdb").is_dir(), f"DuckDB 1.5.4 in {OLD_DUCKDB} (./dev installs it)")
    work = tmp_path_factory.mktemp("longrun")
    out = work / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.store.longrun", "--ci", "--seed", "3",
         "--work", str(work / "run"), "--json", str(out)],
        capture_output=True, text=True, timeout=240, check=False, cwd=ROOT,
    )  # fmt: skip
    print(done.stdout)
    assert out.exists(), done.stdout + done.stderr
    loaded: dict[str, Any] = json.loads(out.read_text("utf-8"))
    loaded["exit_code"] = done.returncode
    loaded["stdout"] = done.stdout
    return loaded


@pytest.mark.timeout(300)
def test_every_requirement_passes(results: dict[str, Any]) -> None:
    """The run's own verdict: every requirement PASS, exit code 0."""
    failed = [name for name, ok in results["requirements"].items() if not ok]
    assert failed == [], results["stdout"]
    assert results["exit_code"] == 0
    assert results["stdout"].count("PASS") == len(results["requirements"])


@pytest.mark.timeout(300)
def test_rows_are_the_acknowledged_spans(results: dict[str, Any]) -> None:
    """No acknowledged span lost, no row that no writer produced, none twice; what is beyond
    the acknowledged spans is in-doubt spans of killed writers, each write whole or absent."""
    spans = results["spans"]
    assert spans["store_unreadable"] is None
    assert spans["acked"] > 1000
    assert spans["lost"] == 0
    assert spans["foreign"] == 0
    assert spans["torn_batches"] == 0
    assert spans["in_doubt_landed_of_live_writers"] == 0
    assert spans["rows"] == spans["distinct_rows"] == spans["acked"] + spans["in_doubt_landed"]
    assert spans["in_doubt_landed"] <= spans["in_doubt"]


@pytest.mark.timeout(300)
def test_no_reader_ever_counts_a_span_twice(results: dict[str, Any]) -> None:
    """Both lockless readers (one on DuckDB 1.5.4) and ``otel-llm query``: 0 double counts,
    and each answered queries all through the run; a new lockless reader of each engine, once
    every process is gone (some killed mid-merge), counts every row once."""
    readers = results["readers"]
    assert sorted(r["duckdb"] for r in readers)[0] == "1.5.4"
    assert len(readers) == 2
    for reader in readers:
        assert reader["duplicated_queries"] == 0, reader
        assert reader["queries"] - reader["failed"] > 0, reader
    after = results["lockless_after_run"]  # every process gone, before anything repairs
    assert [(a.get("n"), a.get("d")) for a in after] == [(results["spans"]["rows"],) * 2] * 2
    query = results["otel_llm_query"]
    assert query["duplicated"] == 0
    assert query["runs"] - query["failed"] > 0


@pytest.mark.timeout(300)
def test_the_store_kept_merging_through_kills_and_damage(results: dict[str, Any]) -> None:
    """Writers and mergers were SIGKILLed, merges went on (no merge raised), the segment count
    stayed bounded, both damaged files are quarantined with a note, no orphan is left."""
    kills = results["kills"]
    assert sum(kills.get(role, 0) for role in ("steady", "burst", "exporter", "init")) > 0
    assert kills.get("merger", 0) + kills.get("compact", 0) > 0
    assert results["merges_total"] >= results["config"]["merges"]
    assert results["merge_errors"] == 0, results["merge_error_samples"]
    assert results["crash_count"] == 0, results["crashes"]
    tenths = results["segments"]["tenths_max"]
    assert tenths[-1] <= 1.5 * max(tenths[1:5]) + 16
    damaged = results["damaged"]
    assert len(damaged) == 2
    assert sorted(damaged) == sorted(set(damaged) & set(results["quarantined"]))
    assert all(results["why_notes"].values())
    assert results["orphans"] == []
