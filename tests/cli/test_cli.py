"""The ``otel-llm`` command: demo, query, and clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_llm import open_store
from otel_llm._show._dashboards._grafana import files
from tests.support import REPOSITORY
from tests.support.processes import run_cli

ROOT = REPOSITORY


def otel_llm(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, columns=160, timeout_s=300)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One demo run shared by the query tests, at 0.8 of real time: a gap may be off its script
    by 160 ms (40 ms at the default 0.2), so the demo shows its breakdown on a machine busy
    enough to wake its event loop 60–110 ms late, where at 0.2 it rightly refused to."""
    path = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    out = otel_llm(
        "demo",
        "--db",
        str(path),
        "--calls",
        "12",
        "--concurrency",
        "12",
        "--seed",
        "529",
        "--time-scale",
        "0.8",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Where the time went" in out.stdout
    assert "Worst stalls" in out.stdout
    assert str(path) in out.stdout
    return path


def test_demo_writes_queryable_spans(demo_db: Path) -> None:
    """The demo's calls are in the views, with the identity wall = net + stall on every call."""
    with open_store(Path(str(demo_db))) as conn:
        calls = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE stall_ms IS NOT NULL), "
            "count(*) FILTER (WHERE wall_ms <> generation_ms + stall_ms) FROM llm_calls"
        ).fetchone()
        stalled = conn.execute("SELECT count(*) FROM llm_calls WHERE stall_count > 0").fetchone()
    assert calls is not None
    assert stalled is not None
    total, observed, broken = calls
    assert total == 12
    assert observed == 12
    assert broken == 0
    assert stalled[0] > 0, "the measured preset stalls some calls"


def test_query_breakdown_and_rederivation(demo_db: Path) -> None:
    """`query` prints the breakdown as measured and re-derived at another threshold."""
    measured = otel_llm("query", "--db", str(demo_db))
    assert measured.returncode == 0, measured.stderr
    assert "Breakdown (as measured)" in measured.stdout
    rederived = otel_llm("query", "--db", str(demo_db), "--threshold-ms", "500")
    assert rederived.returncode == 0, rederived.stderr
    assert "Breakdown (at 500 ms)" in rederived.stdout


def test_query_since_counts_only_the_calls_in_range(tmp_path: Path) -> None:
    """``--since 6h``: the breakdown and the worst stalls of the calls that started in the
    last six hours, the older ones left out; a bad value is refused naming the option."""
    import json
    import time

    from tests.support.tune_store import Scripted, TuneStore, stream

    now_ns = time.time_ns()
    hour_ns = 3600 * 1_000_000_000
    store = TuneStore(tmp_path / "store")
    stalled = Scripted(stream(200.0, chunks=4, every_ms=50.0, silences={2: 1500.0}), 2000.0)
    for hours_ago in (30, 20, 7):  # before the range
        store.call([stalled], at_ns=now_ns - hours_ago * hour_ns)
    for hours_ago in (5, 1):
        store.call(
            [Scripted(stream(200.0, chunks=4, every_ms=50.0), 400.0)],
            at_ns=now_ns - hours_ago * hour_ns,
        )
    store.close()
    db = str(tmp_path / "store")
    every = json.loads(otel_llm("query", "--db", db, "--format", "json").stdout)
    assert sum(row["calls"] for row in every) == 5
    assert sum(row["stalled"] for row in every) == 3
    recent = otel_llm("query", "--db", db, "--since", "6h", "--format", "json")
    assert recent.returncode == 0, recent.stderr
    assert [row["calls"] for row in json.loads(recent.stdout)] == [2]
    assert json.loads(recent.stdout)[0]["stalled"] == 0
    worst = otel_llm("query", "--db", db, "--since", "6h", "--worst-stalls", "--format", "json")
    assert json.loads(worst.stdout) == []  # the stalled calls are older
    table = otel_llm("query", "--db", db, "--since", "6h")
    assert "calls since" in table.stdout
    bad = otel_llm("query", "--db", db, "--since", "yesterday")
    assert bad.returncode != 0
    assert "--since" in bad.stderr + bad.stdout
    for ancient in ("1000-01-01", "20000w", "0001-01-01T00:00+05:00"):  # before 1677: all
        everything = otel_llm("query", "--db", db, "--since", ancient, "--format", "json")
        assert everything.returncode == 0, everything.stderr
        assert sum(row["calls"] for row in json.loads(everything.stdout)) == 5


def test_query_runs_sql(demo_db: Path) -> None:
    """`query SQL` runs the statement and prints its rows."""
    out = otel_llm("query", "--db", str(demo_db), "SELECT count(*) AS n FROM llm_calls")
    assert out.returncode == 0, out.stderr
    assert "12" in out.stdout


def test_query_reports_bad_sql_clearly(demo_db: Path) -> None:
    """Bad SQL is a clear error and exit code 2, not a traceback."""
    out = otel_llm("query", "--db", str(demo_db), "SELECT nope FROM llm_calls")
    assert out.returncode == 2
    assert "error:" in out.stderr
    assert "Traceback" not in out.stdout + out.stderr


def test_query_on_missing_file_says_so(tmp_path: Path) -> None:
    """Querying a file that does not exist says so and how to create one."""
    out = otel_llm("query", "--db", str(tmp_path / "none.duckdb"))
    assert out.returncode == 2
    assert "does not exist" in out.stderr


def test_query_rejects_threshold_below_one(tmp_path: Path) -> None:
    """--threshold-ms must be a positive integer."""
    out = otel_llm("query", "--db", str(tmp_path / "x.duckdb"), "--threshold-ms", "0")
    assert out.returncode == 2


def test_provider_refuses_unknown_preset() -> None:
    """`provider --preset` names the known presets when given an unknown one."""
    out = otel_llm("provider", "--port", "0", "--preset", "nope")
    assert out.returncode == 2
    assert "unknown preset" in out.stderr


def test_provider_names_a_host_it_cannot_listen_on() -> None:
    """`provider --host` with a name that resolves to nothing: exit 2 naming the option and
    the host (the resolver's own error names neither)."""
    out = otel_llm("provider", "--port", "0", "--host", "no-such-host.invalid")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--host 'no-such-host.invalid': no address to listen on" in " ".join(out.stderr.split())
    assert "Traceback" not in out.stderr


def test_provider_stall_probability_is_checked() -> None:
    """`provider --stall-probability` must be a share between 0 and 1."""
    out = otel_llm("provider", "--port", "0", "--stall-probability", "1.5")
    assert out.returncode == 2


def test_provider_serves_measured_with_a_stall_probability() -> None:
    """`provider --stall-probability 0` serves the measured preset without long silences."""
    import httpx2

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "otel_llm.cli",
            "provider",
            "--port",
            "0",
            "--time-scale",
            "0.001",
            "--stall-probability",
            "0",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = next(word for word in line.split() if word.startswith("http://"))
        body = {"model": "measured", "messages": [{"role": "user", "content": "x"}]}
        answer = httpx2.post(f"{url}/chat/completions", json=body, timeout=30)
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"]
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_compact_merges_and_names_what_it_quarantined(tmp_path: Path) -> None:
    """`otel-llm compact` merges now, and counts and names a damaged segment it moved aside."""
    from otel_llm._show._store._segments import SegmentStore

    store = SegmentStore(tmp_path / "store")
    store.create()
    for _ in range(3):
        store.write([])
    bad = store.segments_dir / "00000000000000000001-bad.parquet"
    bad.write_bytes(b"PAR1" + b"\x00" * 64)
    out = otel_llm("compact", "--db", str(store.path))
    assert out.returncode == 0, out.stderr
    assert "merged 3 segments" in out.stdout
    assert "quarantined 1 damaged segment" in out.stdout
    assert bad.name in out.stdout
    assert [p.name for p in store.quarantined()] == [bad.name]
    again = otel_llm("compact", "--db", str(store.path))
    assert "quarantined" not in again.stdout


def test_compact_verify_counts_one_segment_in_the_singular(tmp_path: Path) -> None:
    """`otel-llm compact --verify` on a new store (its one, empty, segment) says so in a
    sentence: one segment, not "1 segments"."""
    from otel_llm._show._store._segments import SegmentStore

    store = SegmentStore(tmp_path / "store")
    store.create()
    out = otel_llm("compact", "--db", str(store.path), "--verify")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "nothing to merge (or the store is busy)",
        "verified the page checksums of 1 segment",
    ]


def test_a_threshold_below_the_chunk_event_floor_says_why_figures_are_empty(
    demo_db: Path,
) -> None:
    """Below the 100 ms floor the stall figures cannot be re-derived: `query` says so, with
    the floor to use; at the floor it says nothing."""
    below = otel_llm("query", "--db", str(demo_db), "--threshold-ms", "50")
    assert below.returncode == 0, below.stderr
    assert "Breakdown (at 50 ms)" in below.stdout
    assert "recorded chunk events only for gaps above 100 ms" in below.stderr
    assert "--threshold-ms 100 or above for those calls' figures" in below.stderr
    at_floor = otel_llm("query", "--db", str(demo_db), "--threshold-ms", "100")
    assert at_floor.returncode == 0, at_floor.stderr
    assert "chunk events only" not in at_floor.stderr


@pytest.mark.parametrize("columns", [80, 120])
def test_help_lists_every_command_with_a_whole_sentence(columns: int) -> None:
    """``otel-llm --help`` gives each command its one-line summary, whole (never cut
    mid-sentence, at any width): the summary is the docstring's first line, a sentence."""
    import typer.main

    from otel_llm.cli import app

    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    out = run_cli("--help", columns=columns)
    assert out.returncode == 0, out.stderr
    listed = " ".join(line.strip("│ ") for line in out.stdout.splitlines())
    listed = " ".join(listed.split())
    for name, command in group.commands.items():
        summary = (command.help or "").split("\n\n")[0]
        assert "\n" not in summary, (name, summary)
        assert summary.endswith("."), (name, summary)
        assert f"{name} {summary}" in listed, (name, summary, out.stdout)


def test_dashboards_copies_the_shipped_files(tmp_path: Path) -> None:
    """``otel-llm dashboards DIR`` writes the dashboards and provisioning the repository
    ships (byte for byte), refuses to overwrite a changed file without --force, and replaces
    it with --force."""
    target = tmp_path / "grafana"
    out = otel_llm("dashboards", str(target))
    assert out.returncode == 0, out.stderr
    shipped = ROOT / "dashboards"
    expected = sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file())
    written = sorted(p.relative_to(target) for p in target.rglob("*") if p.is_file())
    assert written == expected
    assert expected == sorted(files())  # every file the generator writes
    for relative in expected:
        assert (target / relative).read_bytes() == (shipped / relative).read_bytes()
    assert sorted(Path(line).relative_to(target) for line in out.stdout.split()) == expected
    changed = target / "duckdb" / "otel-llm.json"
    changed.write_text("{}")
    refused = otel_llm("dashboards", str(target))
    assert refused.returncode == 2
    assert "differ" in refused.stderr
    assert str(changed) in " ".join(refused.stderr.split())
    assert changed.read_text() == "{}"
    forced = otel_llm("dashboards", str(target), "--force")
    assert forced.returncode == 0, forced.stderr
    assert changed.read_bytes() == (shipped / "duckdb" / "otel-llm.json").read_bytes()
    told = " ".join(run_cli("dashboards", "--help", columns=200).stdout.split()).lower()
    for folder in shipped.iterdir():  # the help names every data source shipped
        if folder.name not in ("import", "provisioning"):
            assert folder.name in told, folder.name


def test_query_rejects_a_threshold_longer_than_a_day(tmp_path: Path) -> None:
    """--threshold-ms beyond a day (one beyond 64 bits broke the SQL) is refused by name."""
    for value in ("86400001", "99999999999999999999"):
        out = otel_llm("query", "--db", str(tmp_path / "x.duckdb"), "--threshold-ms", value)
        assert out.returncode == 2
        assert "--threshold-ms: must be at most 86400000 ms (a day)" in out.stderr, out.stderr


def test_a_reader_that_goes_away_is_no_error(demo_db: Path) -> None:
    """``otel-llm query | head -1``: the reader closes the pipe before the command writes. The
    command ends quietly (no ``error: [Errno 32] Broken pipe``, not the exit code of a user
    error), as any command whose output is cut short."""
    import os
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "otel_llm.cli", "query", "--db", str(demo_db)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    assert "error" not in done.stderr.lower(), done.stderr
    assert "Traceback" not in done.stderr
    assert done.returncode == 1


def test_a_range_whose_calls_all_failed_says_so(tmp_path: Path) -> None:
    """Three calls, every attempt failed: the breakdown counts the calls that answered, so it
    has no rows — and standard error says the range held three calls that all failed, and
    where their errors are (old: "(no rows)" twice, as for an empty store). Standard output
    stays the one document."""
    import json

    from otel_llm import _semconv as sc
    from otel_llm._show._store._segments import SegmentStore
    from tests.support.tune_store import Scripted, TuneStore, stream

    store = TuneStore(tmp_path / "store")
    for _ in range(3):
        failed = Scripted(stream(200.0, chunks=2), 400.0, outcome=sc.OUTCOME_ERROR)
        store.call([failed, failed])
    store.close()
    db = str(tmp_path / "store")
    table = otel_llm("query", "--db", db)
    assert table.returncode == 0, table.stderr
    assert "(no rows)" in table.stdout
    assert "3 calls in this range, none answered" in table.stderr
    machine = otel_llm("query", "--db", db, "--format", "json")
    assert json.loads(machine.stdout) == []
    assert "3 calls in this range, none answered" in machine.stderr
    empty = tmp_path / "empty"
    SegmentStore(empty).create()
    nothing = otel_llm("query", "--db", str(empty))
    assert nothing.returncode == 0, nothing.stderr
    assert "none answered" not in nothing.stderr


def test_a_call_whose_span_names_no_provider_is_still_named(tmp_path: Path) -> None:
    """Spans with no provider attribute (another instrumentation, an older writer): the
    breakdown and the worst stalls name the row "?/model", as the report's series are named,
    instead of NULL — which also read the same for every provider whose model was missing."""
    import json

    from tests.support.tune_store import Scripted, TuneStore, stream

    store = TuneStore(tmp_path / "store")  # its spans carry a model and a source, no provider
    store.call([Scripted(stream(200.0, chunks=4, every_ms=50.0, silences={1: 1500.0}), 2000.0)])
    store.close()
    db = str(tmp_path / "store")
    breakdown = json.loads(otel_llm("query", "--db", db, "--format", "json").stdout)
    assert [row["model"] for row in breakdown] == ["?/sim-model"]
    worst = otel_llm("query", "--db", db, "--worst-stalls", "--format", "json")
    assert [row["model"] for row in json.loads(worst.stdout)] == ["?/sim-model"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--config", "nope"), "no collector config at nope"),
        (("--grpc-port", "4399", "--http-port", "4399"), "the gRPC and HTTP ports are both 4399"),
        (("--http-port", "4398", "--health-port", "4398"), "the HTTP and health ports are both"),
        (("--db", "{notes}"), "is not a DuckDB database, so not an otel-llm store"),
    ],
)
def test_the_collector_command_refuses_what_cannot_work_before_any_build(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    """A missing config, two of the collector's ports the same, or a --db that is no store:
    exit 2 with the reason, said before the collector binary is looked for (a first build
    takes minutes) — here the binary named is missing, and that is never what is said."""
    notes = tmp_path / "notes.txt"
    notes.write_text("hello")
    argv = [a.replace("{notes}", str(notes)) for a in args]
    if "--db" not in argv:
        argv = ["--db", str(tmp_path / "store"), *argv]
    missing = tmp_path / "no-such-otelcol"
    result = run_cli("collector", *argv, env={**os.environ, "OTEL_LLM_COLLECTOR_BIN": str(missing)})
    assert result.returncode == 2, result.stdout + result.stderr
    said = " ".join(result.stderr.split())
    assert message in said
    assert "not an executable" not in said
    assert "building" not in said
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("force", [False, True])
def test_dashboards_says_what_stands_in_the_way(tmp_path: Path, force: bool) -> None:
    """A directory where a dashboard file goes: a clear error naming it (exit 2), with or
    without --force, never a traceback."""
    target = tmp_path / "grafana"
    (target / "duckdb" / "otel-llm.json").mkdir(parents=True)
    out = otel_llm("dashboards", str(target), *(["--force"] if force else []))
    assert out.returncode == 2, out.stdout
    assert "Traceback" not in out.stderr
    said = " ".join(out.stderr.split())
    assert str(target / "duckdb" / "otel-llm.json") in said, said


def test_dashboards_force_replaces_a_file_it_may_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--force`` replaces what is there without reading it first: a file the user may write
    but not read (mode 0200, for anyone but root) is replaced, where it was "cannot read"."""
    from typer.testing import CliRunner

    from otel_llm.cli._app import app

    target = tmp_path / "grafana"
    assert otel_llm("dashboards", str(target)).returncode == 0
    locked = target / "duckdb" / "otel-llm.json"
    locked.write_text("{}")
    read_bytes = Path.read_bytes

    def refused(path: Path) -> bytes:
        if path == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", refused)
    done = CliRunner().invoke(app, ["dashboards", str(target), "--force"])
    assert done.exit_code == 0, done.output
    monkeypatch.undo()
    assert locked.read_bytes() == (ROOT / "dashboards" / "duckdb" / "otel-llm.json").read_bytes()
