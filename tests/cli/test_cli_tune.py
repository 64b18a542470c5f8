"""``otel-llm tune`` on the command line (``otel_llm/cli/_tune.py``, ``_app.py``): what it
prints, its JSON, its exit codes, and clear errors without a traceback."""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from otel_llm._defaults import DEFAULTS
from otel_llm._show._store._segments import SEGMENTS, SegmentStore
from otel_llm._tune._sample import MIN_CALLS
from otel_llm.cli._tune import TUNE_NOT_ENOUGH_EXIT
from tests.support import REPOSITORY
from tests.support.processes import run_cli
from tests.support.tune_store import write_store

ROOT = REPOSITORY
CALLS = MIN_CALLS * 5 // 4


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Enough calls of two sources for a recommendation: 1,000 on sim-1, 250 on sim-2."""
    path = tmp_path_factory.mktemp("cli-tune") / "s"
    write_store(path, CALLS, sources=("sim-1", "sim-1", "sim-1", "sim-1", "sim-2"))
    return path


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Too few calls for the rule."""
    path = tmp_path_factory.mktemp("cli-tune-small") / "s"
    write_store(path, 50)
    return path


def _entry_point() -> list[str]:
    """The installed ``otel-llm`` console script beside this interpreter (on PATH otherwise)."""
    beside = Path(sys.executable).with_name("otel-llm")
    found = str(beside) if beside.exists() else shutil.which("otel-llm")
    assert found, "the otel-llm console script is installed with the package"
    return [found]


def test_the_console_script_prints_the_frontier_and_the_lines_to_paste(store: Path) -> None:
    """Through the installed entry point: the data used, the rule met, the baseline and the
    recorded sanity line, the frontier, the recommendation and its env and Client lines."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160"}
    result = subprocess.run(
        [*_entry_point(), "tune", "--db", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert f"Data: {CALLS:,} calls replayed" in out
    assert f"sim-1 {MIN_CALLS:,}, sim-2 {CALLS - MIN_CALLS:,}" in out
    assert "Rule: met" in out
    assert "Baseline (unhedged, replayed)" in out
    assert "As recorded (the same calls)" in out
    assert "Frontier" in out
    assert "<- recommended" in out
    assert "LLM__HEDGE__BUDGET_RATIO=" in out
    assert "Client(sources, " in out
    assert result.stderr == ""


def test_json_is_one_document_with_the_recommendation(store: Path) -> None:
    """--format json prints one JSON document and nothing else; --source restricts the calls
    and hedges draw from the other source; the same seed gives the same document."""
    first = run_cli("tune", "--db", str(store), "--format", "json", "--source", "sim-1")
    again = run_cli("tune", "--db", str(store), "--format", "json", "--source", "sim-1")
    assert first.returncode == 0, first.stderr
    document = json.loads(first.stdout)
    assert first.stdout == again.stdout
    assert document["data"]["calls"] == MIN_CALLS
    assert document["data"]["source"] == "sim-1"
    assert document["data"]["sources"] == {"sim-1": MIN_CALLS, "sim-2": CALLS - MIN_CALLS}
    assert document["recommendation"]["predicted"]["requests_per_call"] <= 1.25
    other = run_cli(
        "tune", "--db", str(store), "--format", "json", "--seed", "9", "--budget", "1.5"
    )
    assert json.loads(other.stdout)["budget"] == 1.5
    timed = run_cli("tune", "--db", str(store), "--format", "json", "--timeout", "45")
    assert json.loads(timed.stdout)["timeout_s"] == 45.0
    once = run_cli("tune", "--db", str(store), "--format", "json", "--max-attempts", "1")
    assert json.loads(once.stdout)["max_attempts"] == 1
    assert document["max_attempts"] == DEFAULTS.max_attempts
    assert document["data"]["single_source"] is False
    assert document["data"]["notes"] == []


def test_one_source_is_said_in_the_table_and_the_json(tmp_path: Path) -> None:
    """A one-source store: the recommendation stands (hedges drawn from the same pool) with a
    note in the table and ``data.single_source`` true in the JSON."""
    write_store(tmp_path / "s", MIN_CALLS + 50)
    table = run_cli("tune", "--db", str(tmp_path / "s"), columns=200)
    assert table.returncode == 0, table.stderr
    assert "Note: one source only" in table.stdout
    assert "needs a second source" in " ".join(table.stdout.split())
    document = json.loads(run_cli("tune", "--db", str(tmp_path / "s"), "--format", "json").stdout)
    assert document["data"]["single_source"] is True
    assert "needs a second source" in document["data"]["notes"][0]
    assert document["recommendation"] is not None


def test_too_little_data_exits_3_with_the_reason(small: Path) -> None:
    """Below the rule: exit code 3, JSON with enough false and no recommendation, and the
    reason on standard error; the table says so on standard output, and on standard error
    too."""
    result = run_cli("tune", "--db", str(small), "--format", "json")
    assert result.returncode == TUNE_NOT_ENOUGH_EXIT == 3
    document = json.loads(result.stdout)
    assert document["recommendation"] is None
    assert document["data"]["enough"] is False
    assert "50 usable calls, fewer than 1,000" in result.stderr
    needed = document["data"]["calls_to_record"]
    assert isinstance(needed, int)
    assert needed >= 1000
    table = run_cli("tune", "--db", str(small), columns=160)
    assert table.returncode == 3
    assert "No recommendation: not enough data" in table.stdout
    assert "Rule: not met" in table.stdout
    assert f"Enough: about {needed:,} calls recorded like these" in table.stdout
    assert "No recommendation: not enough data" in table.stderr
    assert "50 usable calls, fewer than 1,000" in table.stderr


def _damaged(tmp_path: Path) -> Path:
    path = tmp_path / "damaged"
    SegmentStore(path).create()
    (path / SEGMENTS / "00000000000000000001-x.parquet").write_bytes(b"PAR1 not really")
    return path


def test_a_damaged_segment_is_moved_aside_and_named(tmp_path: Path) -> None:
    """A segment DuckDB cannot read is quarantined, named on standard error, and tune reads the
    rest (here: nothing, so no recommendation)."""
    path = _damaged(tmp_path)
    result = run_cli("tune", "--db", str(path), columns=200)
    assert result.returncode == 3, result.stdout + result.stderr
    said = " ".join(result.stderr.split())
    assert "00000000000000000001-x.parquet" in said
    assert "is damaged" in said
    assert "No recommendation: not enough data" in said
    assert "Traceback" not in result.stderr
    assert (path / "quarantine" / "00000000000000000001-x.parquet").exists()


def _locked(tmp_path: Path) -> tuple[Path, duckdb.DuckDBPyConnection]:
    """A single-file store this process holds open for writing (DuckDB's file lock)."""
    path = tmp_path / "locked.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE otel_traces (x INTEGER)")
    return path, conn


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--db", "{tmp}/missing"), "does not exist"),
        (("--db", "{locked}"), "lock"),
        (("--db", "{tmp}/notes.txt"), "not a DuckDB database"),
        (("--source", "nowhere"), "--source: no attempt ran on source 'nowhere'"),
        (("--budget", "0.5"), "--budget: requests per call"),
        (("--budget", "nan"), "--budget: requests per call"),
        (("--budget", "lots"), "'--budget'"),
        (("--budget", "1e308", "--format", "json"), "--budget: requests per call, a number"),
        (("--timeout", "0"), "--timeout: the client's TIMEOUT_S"),
        (("--timeout", "inf", "--format", "json"), "--timeout: the client's TIMEOUT_S"),
        (("--max-attempts", "0"), "--max-attempts: the client's RETRY__MAX_ATTEMPTS"),
        (("--max-attempts", "1001"), "a whole number from 1 to 1000, got 1001"),
        (("--max-attempts", "2.5"), "'--max-attempts'"),
        (("--since", "soon"), "--since: expected a duration"),
        (("--since", "2999-01-01"), "--since: '2999-01-01' is in the future"),
        (("--format", "csv"), "'--format'"),
    ],
)
def test_errors_are_said_plainly(
    small: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    """No store, a locked one, something else, an unknown source, a bad budget,
    since or format: exit code 2 with the reason, no traceback."""
    (tmp_path / "notes.txt").write_text("hello")
    locked, holder = _locked(tmp_path)
    places = {"{tmp}": str(tmp_path), "{locked}": str(locked)}
    argv = list(args)
    for key, value in places.items():
        argv = [a.replace(key, value) for a in argv]
    if "--db" not in argv:
        argv = ["--db", str(small), *argv]
    try:
        result = run_cli("tune", *argv, columns=200)
    finally:
        holder.close()
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_the_commands_defaults_are_the_libraries() -> None:
    """--budget, --seed and --timeout default to what the library's tune uses (one owner
    each)."""
    from otel_llm._tune._replay import DEFAULT_SEED
    from otel_llm._tune._tuning import DEFAULT_BUDGET
    from otel_llm.cli._app import TUNE_SEED, tune

    defaults = tune.__defaults__ or ()
    assert TUNE_SEED == DEFAULT_SEED
    assert DEFAULT_BUDGET in defaults
    assert TUNE_SEED in defaults
    from otel_llm._tune._tuning import tune as library_tune

    library = inspect.signature(library_tune).parameters["timeout_s"].default
    assert inspect.signature(tune).parameters["timeout"].default is library is None
    (option,) = inspect.get_annotations(tune, eval_str=True)["timeout"].__metadata__
    assert f"{DEFAULTS.inter_token_timeout_s:g} s between chunks" in option.help
