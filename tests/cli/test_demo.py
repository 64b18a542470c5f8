"""``otel-llm demo``: measured figures checked against the simulator's script, under load too
(``otel_llm/cli/_demo.py``)."""

from __future__ import annotations

import asyncio
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.console import Console
from typer.core import TyperGroup, TyperOption

from benchmarks.support import burners
from otel_llm._show._store._breakdown import breakdown_sql, run_query
from otel_llm.cli import app
from otel_llm.cli._demo import DEMO_FIT, DemoOptions, rerun_advice, run_demo
from otel_llm.cli._render import Format, Output
from otel_llm.simulator import sample_measured, scripted_figures
from tests.conftest import require
from tests.support.processes import UNHURRIED, run_cli

SEED = 529
"""Twelve calls of this seed have 15 scripted silences and 4 stalls past the 20 s stall hedge;
the slowest call takes about 30 simulated seconds, 6 s at --time-scale 0.2."""
CALLS = 12
SHORT_SEED = 17
"""Its first calls are short (at most 10 simulated seconds: 8 s at UNHURRIED) and never
hedge."""

DRIVER = """
import asyncio, json, sys
from pathlib import Path
from rich.console import Console
from otel_llm.cli._demo import DemoOptions, measure

db, calls, concurrency, scale, seed = sys.argv[1:]
options = DemoOptions(Path(db), int(calls), int(concurrency), float(scale), int(seed))
run = asyncio.run(measure(options, Console(stderr=True)))
keys = [f"call-{n}" for n in range(int(calls))]
print(json.dumps({
    "run_id": run.run_id,
    "reasons": list(run.verdict.reasons),
    "checks": [
        {"label": c.label, "measured": [c.measured.calls, c.measured.stalls, c.measured.stall_s],
         "scripted": [c.scripted.stalls_min, c.scripted.stalls_max, c.scripted.stall_s]}
        for c in run.verdict.checks
    ],
    "calls": [
        {"source": r.source, "attempts": r.stats.attempts, "hedges": r.stats.hedges,
         "stall_count": r.stats.stall_count,
         "script": run.stats[r.source].script_of(r.response_id).model_dump_json()}
        for r in run.outcome.results
    ],
    "first_draws": {k: run.stats["sim-a"].scripts_for(k)[0].model_dump_json() for k in keys},
}))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "COLUMNS": "160"}


def otel_llm(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, columns=160)


def drive(db: Path, calls: int, concurrency: int, scale: float, seed: int) -> dict[str, Any]:
    """Run the demo's measurement in a fresh process and return what it found, as JSON."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            DRIVER,
            str(db),
            str(calls),
            str(concurrency),
            str(scale),
            str(seed),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=_env(),
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def cpu_burners(count: int = 2) -> AbstractContextManager[None]:
    """``count`` processes spinning on the CPU (each stops by itself after 120 s at most)."""
    manager: AbstractContextManager[None] = burners.cpu_burners(count, 120.0)
    return manager


def test_demo_measures_what_the_providers_scripted(tmp_path: Path) -> None:
    """Every source's stall count and seconds are within tolerance of the script, each call
    drew the script its seed and key dictate, and unhedged calls count their scripted stalls."""
    found = drive(tmp_path / "demo.duckdb", CALLS, CALLS, 0.2, SEED)
    assert found["reasons"] == [], "the demo judged this machine too busy to measure honestly"
    assert sum(check["measured"][0] for check in found["checks"]) == CALLS
    scripted_stalls = sum(check["scripted"][1] for check in found["checks"])
    assert scripted_stalls >= 5, "the seed scripts stalls: the comparison is not vacuous"
    for check in found["checks"]:
        _, stalls, _ = check["measured"]
        low, high, _ = check["scripted"]
        assert low <= stalls <= high, check
    options = DemoOptions(tmp_path / "x.duckdb", CALLS, CALLS, 0.2, SEED)
    for number, call in enumerate(found["calls"]):
        drawn = sample_measured(random.Random(f"{SEED}/call-{number}/0"), fit=DEMO_FIT)
        assert found["first_draws"][f"call-{number}"] == drawn.model_dump_json()
        if call["attempts"] == 1 and call["hedges"] == 0:
            assert call["script"] == drawn.model_dump_json()
            truth = scripted_figures(
                drawn,
                threshold_s=options.threshold_ms / 1000,
                time_scale=0.2,
                band_s=options.tolerance.gap_s,
            )
            low, high = truth.stall_count_range
            assert low <= call["stall_count"] <= high
    assert any(call["hedges"] for call in found["calls"]), "the seed hedges some calls"


def test_demo_is_accurate_beside_two_cpu_burners(tmp_path: Path) -> None:
    """With two processes burning the two cores, the demo still matches the script and shows
    the breakdown."""
    with cpu_burners(2):
        out = otel_llm(
            "demo",
            "--db",
            str(tmp_path / "busy.duckdb"),
            "--calls",
            str(CALLS),
            "--concurrency",
            str(CALLS),
            "--seed",
            str(SEED),
        )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Every figure is within tolerance of the script" in out.stdout
    assert "Where the time went" in out.stdout
    assert " NO " not in out.stdout


def test_same_seed_draws_the_same_calls_at_any_concurrency(tmp_path: Path) -> None:
    """The calls of one seed get the same scripts one at a time or all at once."""
    one = drive(tmp_path / "one.duckdb", 4, 1, 0.02, SHORT_SEED)
    many = drive(tmp_path / "many.duckdb", 4, 4, 0.02, SHORT_SEED)
    assert one["first_draws"] == many["first_draws"]
    assert [c["script"] for c in one["calls"]] == [c["script"] for c in many["calls"]]
    other = drive(tmp_path / "other.duckdb", 4, 4, 0.02, SHORT_SEED + 1)
    assert other["first_draws"] != one["first_draws"]


def test_the_summary_counts_this_run_only(tmp_path: Path) -> None:
    """A second run on the same file keeps the first run's spans but reports and tabulates
    only its own calls."""
    db = tmp_path / "shared.duckdb"
    # slower than the default, as the demo advises a busy machine: this is about counting
    args = ("demo", "--db", str(db), "--calls", "4", "--seed", str(SHORT_SEED), *UNHURRIED)
    first = otel_llm(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "no earlier runs in the file" in first.stdout
    assert not set("━─│┏\x1b\r") & set(first.stdout), "a pipe gets plain text, no live bar"
    second = otel_llm(*args)
    assert second.returncode == 0, second.stdout + second.stderr
    text = " ".join(second.stdout.split())
    assert "4 calls answered, 0 failed" in text
    assert "also keeps 4 calls of earlier runs" in text
    run_id = re.search(r"service\.instance\.id ([0-9a-f]{32})", text)
    assert run_id is not None
    this_run = run_query(db, breakdown_sql(run=run_id.group(1)))
    every_run = run_query(db, breakdown_sql())
    calls = this_run.columns.index("calls")
    assert sum(row[calls] for row in this_run.rows) == 4
    assert sum(row[calls] for row in every_run.rows) == 8


def test_json_demo_prints_the_breakdown_alone(tmp_path: Path) -> None:
    """`demo --format json`: standard output is the breakdown as one JSON array; the prose and
    the other tables go to standard error."""
    args = ("--calls", "4", "--seed", str(SHORT_SEED), "--format", "json", *UNHURRIED)
    out = otel_llm("demo", "--db", str(tmp_path / "json.duckdb"), *args)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = json.loads(out.stdout)
    assert sum(row["calls"] for row in rows) == 4
    assert {"model", "wall_s", "stall_s", "net_s", "stall_%"} <= set(rows[0])
    assert "Measured vs scripted" in out.stderr
    assert "Worst stalls" in out.stderr


def test_a_run_too_busy_to_trust_hides_the_breakdown(tmp_path: Path) -> None:
    """When timing is off the tolerance (here one no event loop meets), the demo says it was
    too busy and why, suggests a slower scale, and prints no breakdown."""
    options = DemoOptions(tmp_path / "busy.duckdb", 4, 4, 0.2, SHORT_SEED, gap_share=1e-6)
    text = io.StringIO()
    honest = asyncio.run(
        run_demo(options, Console(file=text, width=200), Output.on(text, Format.TABLE, None))
    )
    printed = text.getvalue()
    assert honest is False
    assert "This machine was too busy to measure honestly" in printed
    assert "the event loop woke" in printed
    assert "--time-scale 0.8" in printed
    assert "Where the time went" not in printed


def test_a_db_that_is_not_duckdb_is_refused_before_any_call(tmp_path: Path) -> None:
    """An existing SQLite file given as --db is refused up front: no call runs, nothing is
    spilled beside it, no extension is fetched."""
    import sqlite3

    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    out = otel_llm("demo", "--db", str(path), "--calls", "1")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "is a SQLite database, not an otel-llm store" in " ".join(out.stderr.split())
    assert "streamed calls" not in out.stdout + out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def _read_only(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``otel-llm`` with ``folder`` read-only: by its mode, or for root (whom modes do
    not stop) as a read-only bind mount in a private mount namespace."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return otel_llm(*args)
        finally:
            folder.chmod(0o755)
    unshare = shutil.which("unshare")
    probe = (
        subprocess.run([unshare, "-m", "true"], capture_output=True, check=False)
        if unshare
        else None
    )
    require(probe is not None and probe.returncode == 0, "unshare -m (mount namespaces)")
    assert unshare is not None
    mount_then_run = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    command = [unshare, "-m", "sh", "-c", mount_then_run, str(folder), sys.executable]
    return subprocess.run(
        [*command, "-m", "otel_llm.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_env(),
    )


def test_a_read_only_directory_is_said_plainly(tmp_path: Path) -> None:
    """In a read-only directory the demo says it cannot write there: exit 2, no traceback."""
    folder = tmp_path / "ro"
    folder.mkdir()
    out = _read_only(folder, "demo", "--db", str(folder / "demo.duckdb"), "--calls", "1")
    assert out.returncode == 2, out.stdout + out.stderr
    text = " ".join(out.stderr.split())
    assert "cannot write the demo's spans to" in text
    assert "is not writable" in text
    assert "does not exist" not in text
    assert "Traceback" not in out.stdout + out.stderr
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("where", ["file-parent", "directory", "missing-parent"])
def test_an_unwritable_db_path_is_said_plainly(tmp_path: Path, where: str) -> None:
    """A --db under a file, a --db that is a directory, or under a missing folder: exit 2 with
    the reason, before any call runs."""
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    path = {
        "file-parent": blocker / "demo.duckdb",
        "directory": tmp_path,
        "missing-parent": tmp_path / "nowhere" / "demo.duckdb",
    }[where]
    out = otel_llm("demo", "--db", str(path), "--calls", "1")
    assert out.returncode == 2, out.stdout + out.stderr
    text = " ".join(out.stderr.split())
    assert "cannot write the demo's spans to" in text
    assert "streamed calls" not in text
    assert "Traceback" not in out.stdout + out.stderr


def test_every_demo_option_has_help() -> None:
    """Each option of `demo` says what it does; --time-scale says 0.05 runs 20x faster."""
    command = typer.main.get_command(app)
    assert isinstance(command, TyperGroup)
    demo = command.commands["demo"]
    options = [param for param in demo.params if isinstance(param, TyperOption)]
    assert {option.name for option in options} >= {
        "db",
        "calls",
        "concurrency",
        "time_scale",
        "seed",
    }
    for option in options:
        assert option.help, f"--{option.name} has no help"
    time_scale = next(option for option in options if option.name == "time_scale")
    assert time_scale.help is not None
    assert "0.05 20x faster" in " ".join(time_scale.help.split())
    assert "slower" not in time_scale.help.split("faster")[0]


def test_a_demo_without_hedging_records_traffic_tune_replays_whole(tmp_path: Path) -> None:
    """`demo --no-hedge`: no call hedges, so every call's first attempt is one `otel-llm tune`
    can replay (none is a hedge's loser), and the demo says it did not hedge."""
    db = tmp_path / "unhedged"
    out = otel_llm("demo", "--db", str(db), "--calls", "12", "--no-hedge", "--no-report")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Calls are not hedged (--no-hedge)" in " ".join(out.stdout.split())
    ((calls, hedged),) = run_query(
        db, "SELECT count(*), count(*) FILTER (WHERE hedges > 0) FROM llm_calls"
    ).rows
    assert (calls, hedged) == (12, 0)
    tune = otel_llm("tune", "--db", str(db), "--format", "json")
    data = json.loads(tune.stdout)["data"]
    assert data["left_out"]["hedge_loser"] == 0
    assert data["calls_to_record"] >= 1000


def test_a_demo_can_mix_apis_and_stays_exact(tmp_path: Path) -> None:
    """`demo --providers anthropic,gemini`: the primary speaks the Messages API, the other
    Gemini; hedges cross APIs; every source's stalls agree with what it scripted; the store
    names each provider as the convention does."""
    db = tmp_path / "mixed"
    out = otel_llm(
        "demo", "--db", str(db), "--calls", "40", "--providers", "anthropic,gemini",
        "--no-report", "--time-scale", "0.3",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    rows = run_query(
        db, "SELECT provider, count(*) FROM llm_calls GROUP BY provider ORDER BY provider"
    ).rows
    assert {provider for provider, _ in rows} <= {"anthropic", "gcp.gemini"}
    assert sum(count for _, count in rows) == 40
    assert "anthropic/measured" in out.stdout


@pytest.mark.parametrize(
    ("given", "said"),
    [("anthropic", "name two APIs"), ("openai,bedrock", "unknown API 'bedrock'")],
)
def test_a_bad_providers_option_is_refused_before_any_call(
    tmp_path: Path, given: str, said: str
) -> None:
    """`--providers` names exactly two of the demo's APIs; anything else is said plainly."""
    out = otel_llm("demo", "--db", str(tmp_path / "x"), "--providers", given, "--no-report")
    assert out.returncode != 0
    assert said in out.stdout + out.stderr
    assert not (tmp_path / "x").exists()


def test_two_sources_of_one_api_keep_a_row_each(tmp_path: Path) -> None:
    """`demo --providers gemini,gemini`: both sources go by the provider name gcp.gemini, so
    their models tell them apart (measured-a, measured-b): the store and the tables keep the
    primary's attempts apart from the hedges sent to the other."""
    db = tmp_path / "same-api"
    out = otel_llm(
        "demo", "--db", str(db), "--calls", str(CALLS), "--concurrency", str(CALLS),
        "--seed", str(SEED), "--providers", "gemini,gemini", "--no-report", *UNHURRIED,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    rows = run_query(
        db, "SELECT provider, model, count(*) FROM llm_attempts GROUP BY ALL ORDER BY model"
    ).rows
    assert [(provider, model) for provider, model, _ in rows] == [
        ("gcp.gemini", "measured-a"),
        ("gcp.gemini", "measured-b"),
    ], "the seed's calls hedge onto the second source"
    assert rows[0][2] == CALLS
    assert "gcp.gemini/measured-a" in out.stdout
    assert "gcp.gemini/measured " not in out.stdout


@pytest.mark.parametrize(
    ("time_scale", "advised"),
    [(0.05, "--time-scale 0.2."), (0.2, "--time-scale 0.8."), (0.5, "--time-scale 1.")],
)
def test_a_busy_run_advises_a_slower_scale(time_scale: float, advised: str) -> None:
    """After a run too busy to trust, the demo advises a scale four times slower, at most
    real time."""
    assert rerun_advice(time_scale).endswith(advised)


def test_a_busy_run_in_real_time_advises_no_slower_scale() -> None:
    """At --time-scale 1 there is no slower scale: the advice is a quieter machine, not the
    scale the run already had."""
    advice = rerun_advice(1.0)
    assert "quieter machine" in advice
    assert "slower: --time-scale" not in advice


def test_counts_are_said_in_the_right_number() -> None:
    """One call is "1 call", never "1 calls"; thousands are grouped."""
    from otel_llm.cli._demo import counted

    assert counted(1, "streamed call") == "1 streamed call"
    assert counted(0, "call") == "0 calls"
    assert counted(1200, "call") == "1,200 calls"
