"""``otel-llm report`` (``otel_llm/_show/_report/_data.py``): the panels run on real SDK data, the
page written by the command and by the demo, and loaded in a real browser with the network
blocked."""

from __future__ import annotations

import html
import json
import os
import random
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_llm import ConfigurationError, NotAStore, OtelLLMError, open_store
from otel_llm import _semconv as sc
from otel_llm._show._dashboards._panels import PANELS, variable_sql, worst_trace_ids
from otel_llm._show._report._data import (
    REPEAT_LIMIT,
    TimeRange,
    collect,
    panel_rows,
    variables,
)
from otel_llm._show._report._hedging import KEY as HEDGING
from otel_llm._show._report._hedging import frontier_rows, hedging_section
from otel_llm._show._report._html import NO_DATA, SPECS_ID
from otel_llm._show._report._write import default_output, write_report
from otel_llm._show._sql._grafana_macros import Variable, expand
from otel_llm._show._sql._panel_sql import DUCKDB_PANELS
from otel_llm._show._store._segments import SEGMENTS, SegmentStore
from otel_llm._show._store._since import EARLIEST, parse_since
from otel_llm.cli._app import DEMO_TOO_BUSY_EXIT
from tests.support import REPOSITORY
from tests.support.processes import UNHURRIED, run_cli, run_python
from tests.support.report_browser import loaded
from tests.support.tune_store import Scripted, TuneStore, measured_like, stream, write_store

SEED = 529
"""Twelve demo calls of this seed stall, hedge, and lose hedge legs (tests/cli/test_demo.py)."""
CALLS = 12
HOSTILE = "</script><script>alert('x')</script>\"'&<img src=x onerror=alert(1)>"
"""A name that would run script or break markup if the page did not escape it."""
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CHARTS = ("timeseries", "barchart", "xychart")
ROOT = REPOSITORY


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """One small demo run: its store, the report it wrote, and what it printed."""
    folder = tmp_path_factory.mktemp("report")
    store, report = folder / "store", folder / "demo-report.html"
    args = ("--calls", str(CALLS), "--concurrency", str(CALLS), "--seed", str(SEED))
    out = run_cli("demo", "--db", str(store), "--report", str(report), *args, timeout_s=120)
    if out.returncode == DEMO_TOO_BUSY_EXIT:
        # The machine was too busy for the demo to vouch for its figures, so it wrote no
        # report; the spans are stored all the same, and the report is written from them.
        write_report(store, report)
        return store, report, ""
    assert out.returncode == 0, out.stdout + out.stderr
    return store, report, out.stdout


def _hostile_copy(source: Path, target: Path, hostile: str = HOSTILE) -> Path:
    """The demo's spans with the source, provider, model, service and error names replaced
    by ``hostile`` variants, on the attempts and on the calls that name their winner's (the
    escaping tests' store)."""
    SegmentStore(target).create()
    glob = str(SegmentStore(source).segments_dir / "*.parquet")
    names = ", ".join(
        f'\'{prefix}\' || "{column}" || {_sql(hostile)} AS "{column}"'
        for prefix, column in (
            ("s", "Source"),
            ("s", "WinnerSource"),
            ("p", "Provider"),
            ("p", "WinnerProvider"),
            ("m", "RequestModel"),
            ("m", "ResponseModel"),
            ("m", "WinnerModel"),
            ("svc", "ServiceName"),
        )
    )
    error = f'CASE WHEN "ErrorType" IS NULL THEN NULL ELSE {_sql(hostile)} END AS "ErrorType"'
    segment = target / SEGMENTS / f"{1:020d}-hostile.parquet"
    with duckdb.connect() as conn:
        conn.execute(
            f"COPY (SELECT * REPLACE ({names}, {error}) FROM read_parquet({_sql(glob)}, "
            f"union_by_name = true)) TO {_sql(str(segment))} (FORMAT parquet)"
        )
    return target


def _sql(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# --- the range -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("90s", NOW - timedelta(seconds=90)),
        ("15m", NOW - timedelta(minutes=15)),
        (" 6h ", NOW - timedelta(hours=6)),
        ("7d", NOW - timedelta(days=7)),
        ("2w", NOW - timedelta(weeks=2)),
        ("2026-05-31", datetime(2026, 5, 31, tzinfo=UTC)),
        ("2026-05-31T10:30", datetime(2026, 5, 31, 10, 30, tzinfo=UTC)),
        ("2026-05-31T10:30:00Z", datetime(2026, 5, 31, 10, 30, tzinfo=UTC)),
        ("2026-05-31T12:30:00+02:00", datetime(2026, 5, 31, 10, 30, tzinfo=UTC)),
    ],
)
def test_since_takes_durations_and_iso_times(text: str, start: datetime) -> None:
    """--since is a duration back from now or an ISO 8601 time, UTC unless it says otherwise."""
    assert parse_since(text, NOW) == start


@pytest.mark.parametrize(
    "text", ["", "5x", "0m", "-5m", "1.5h", "15 minutes", "2026-13-01", "7d1h"]
)
def test_a_bad_since_is_a_configuration_error(text: str) -> None:
    """A --since that is neither a positive duration nor an ISO time is refused, naming it."""
    with pytest.raises(ConfigurationError, match="--since"):
        parse_since(text, NOW)


def test_a_since_in_the_future_is_refused() -> None:
    """A --since after now would show nothing: it is refused."""
    with pytest.raises(ConfigurationError, match="in the future"):
        parse_since("2026-06-02", NOW)


@pytest.mark.parametrize(
    "text", ["1000-01-01", "20000w", "0001-01-01T00:00+05:00", "0001-01-01", "1677-01-01"]
)
def test_a_since_before_the_store_can_hold_reads_everything(text: str) -> None:
    """A start before the earliest time a store's nanosecond timestamps hold (1677) — even one
    whose zone offset takes it before year 1 — is that earliest time: everything, not
    DuckDB's conversion error or a traceback."""
    assert parse_since(text, NOW) == EARLIEST


def test_a_since_whose_offset_passes_year_9999_is_in_the_future() -> None:
    """The last moment of year 9999 in a zone behind UTC is past every clock: refused."""
    with pytest.raises(ConfigurationError, match="in the future"):
        parse_since("9999-12-31T23:59:59-05:00", NOW)


@given(
    st.integers(min_value=1, max_value=10_000),
    st.sampled_from([("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800)]),
)
def test_a_duration_counts_back_from_now(amount: int, unit: tuple[str, int]) -> None:
    """Every positive duration is that many seconds before now."""
    suffix, seconds = unit
    assert NOW - parse_since(f"{amount}{suffix}", NOW) == timedelta(seconds=amount * seconds)


@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)))
def test_the_range_holds_its_last_moment(end: datetime) -> None:
    """The query range is in whole seconds (the plugin's literals) and still holds the last
    call: the end is rounded up, the start down."""
    start = end - timedelta(hours=1, microseconds=1)
    context = TimeRange(start.replace(tzinfo=UTC), end.replace(tzinfo=UTC)).context({})
    assert context.time_from <= start.replace(tzinfo=UTC)
    assert context.time_from.microsecond == 0
    assert context.time_to >= end.replace(tzinfo=UTC)
    assert context.time_to.microsecond == 0
    assert context.time_to - end.replace(tzinfo=UTC) < timedelta(seconds=1)


# --- the panels on real data -----------------------------------------------------------------


def test_the_report_runs_the_dashboards_sql(demo: tuple[Path, Path, str]) -> None:
    """Each panel's rows are what its DuckDB dashboard SQL returns with "All", the threshold
    as measured, the store's whole range and the worst stalled call as the chosen call."""
    store, _, _ = demo
    with open_store(store) as conn:
        data = collect(conn, store, now=datetime.now(UTC))
        context = data.time_range.context(variables(None))
        worst = conn.execute(
            expand(worst_trace_ids(DUCKDB_PANELS), context, "duckdb", variable_query=True)
        ).fetchall()
        assert data.chosen_call == worst[0][0], "the demo's seed stalls"
        context = data.time_range.context(variables(None, data.chosen_call))
        for panel in PANELS:
            copies = [r for r in data.results if r.panel.key == panel.key]
            if panel.repeat is None:
                sql = expand(panel.sql(DUCKDB_PANELS), context, "duckdb")
                assert [c.rows for c in copies] == [conn.execute(sql).fetchall()], panel.key
                continue
            options = expand(
                variable_sql(DUCKDB_PANELS, panel.repeat), context, "duckdb", variable_query=True
            )
            values = [value for (value,) in conn.execute(options).fetchall()]
            assert [c.repeat_value for c in copies] == values, "one copy per value in range"
            for copy, value in zip(copies, values, strict=True):
                one = Variable(value, multi=True, include_all=True)
                scoped = replace(context, variables={**context.variables, panel.repeat: one})
                sql = expand(panel.sql(DUCKDB_PANELS), scoped, "duckdb")
                assert copy.rows == conn.execute(sql).fetchall(), (panel.key, value)
                assert copy.rows, f"{panel.key} has rows for {value}"
    rows = panel_rows(data)
    assert data.calls == CALLS
    assert sum(row[0] for row in rows["hedging"]) == CALLS
    for key in ("time_split", "stall_share", "ttft", "stall_counts", "chunk_gaps", "outcomes"):
        assert rows[key], f"{key} has rows on the demo's data"
    assert rows["worst"]
    assert rows["timeline"]


def test_a_threshold_rederives_the_stalls(demo: tuple[Path, Path, str]) -> None:
    """--threshold-ms re-derives the stall figures: a lower threshold finds at least as much
    stall time, and the page says which threshold it shows."""
    store, _, _ = demo
    with open_store(store) as conn:
        measured = collect(conn, store)
        lower = collect(conn, store, threshold_ms=100)
    stall = PANELS[0].columns.index("stall_s")
    total = {
        name: sum(row[stall] for row in panel_rows(data)["time_split"])
        for name, data in (("measured", measured), ("lower", lower))
    }
    assert total["lower"] >= total["measured"] > 0
    with pytest.raises(ConfigurationError, match="--threshold-ms"):
        write_report(store, store.parent / "x.html", threshold_ms=0)


def test_a_range_with_no_calls_says_so_on_every_panel(
    demo: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """A range before the store's calls: every panel says "no data in this range"."""
    store, _, _ = demo
    with open_store(store) as conn:
        first = conn.execute("SELECT min(started_at) FROM llm_calls").fetchone()
    assert first is not None
    out = tmp_path / "r.html"
    before = first[0].replace(tzinfo=UTC) - timedelta(seconds=2)
    written = write_report(store, out, since="1d", now=before)
    page = out.read_text("utf-8")
    assert written.data.calls == 0
    assert written.data.chosen_call is None
    empty = [key for key, rows in panel_rows(written.data).items() if not rows]
    assert set(empty) >= {p.key for p in PANELS if p.kind != "stat"}
    assert page.count(NO_DATA) == len(empty)


def test_an_empty_store_gets_a_report(tmp_path: Path) -> None:
    """A store with no calls yet: a page, every panel empty, no chosen call."""
    store = tmp_path / "empty"
    SegmentStore(store).create()
    written = write_report(store, tmp_path / "empty.html")
    assert written.data.calls == 0
    assert "No call in this range stalled" in (tmp_path / "empty.html").read_text("utf-8")


# --- what the page holds -----------------------------------------------------------------------


class _Elements(HTMLParser):
    """Every start tag of a page (a script's content is text to the parser, as to a browser)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def test_hostile_names_are_escaped(demo: tuple[Path, Path, str], tmp_path: Path) -> None:
    """Model, source, service and error names that close a script or open markup come out as
    text: escaped in the tables, \\u003c-escaped in the JSON, nowhere raw."""
    store = _hostile_copy(demo[0], tmp_path / "hostile")
    out = tmp_path / "hostile.html"
    write_report(store, out)
    page = out.read_text("utf-8")
    assert HOSTILE not in page
    assert page.lower().count("</script") == 3, "only the page's own three script elements"
    assert html.escape(HOSTILE) in page, "the errors table shows the name, escaped"
    assert "\\u003c/script\\u003e\\u003cscript\\u003e" in page, "the specs hold it, escaped"
    parsed = _Elements()
    parsed.feed(page)
    assert parsed.tags.count("script") == 3
    assert "img" not in parsed.tags


def test_separators_and_direction_overrides_in_names_are_shown_escaped(
    demo: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """A name holding U+2028 (a line separator: a raw one in the chart's sort array is a
    JavaScript syntax error, and the stall-share and TTFT charts were not drawn) or U+202E (a
    right-to-left override: in the chosen call's sentence it reversed the figures after it) is
    shown as its escape, in the charts and in the text; every chart still compiles."""
    import vl_convert

    store = _hostile_copy(demo[0], tmp_path / "separators", "\u2028\u202e")
    out = tmp_path / "separators.html"
    write_report(store, out)
    page = out.read_text("utf-8")
    raw_specs = re.search(r'id="otel-llm-specs">(.*?)</script>', page, re.S).group(1)  # type: ignore[union-attr]
    specs = json.loads(raw_specs)
    assert "\u2028" not in json.dumps(specs, ensure_ascii=False)
    for key in ("stall_share", "ttft"):
        vl_convert.vegalite_to_svg(specs[key])  # raises where the chart cannot be drawn
        shown = {str(v) for row in specs[key]["data"]["values"] for v in row.values()}
        assert any("\\u2028\\u202e" in text for text in shown), "the name, escaped"
    assert "\\u2028\\u202e), the worst stalled call" in page


# --- the command and the demo ------------------------------------------------------------------


def test_the_demo_writes_the_report_and_prints_its_path(demo: tuple[Path, Path, str]) -> None:
    """`otel-llm demo --report PATH` ends by writing the report there and printing the path."""
    store, report, printed = demo
    assert report.is_file()
    if not printed:
        pytest.skip("the demo found the machine too busy and wrote no report (exit code 3)")
    assert str(report) in printed
    assert f"otel-llm report --db {store}" in " ".join(printed.split())
    assert not default_output(store).exists(), "--report replaced the default path"


def test_report_command_writes_and_prints_the_path(
    demo: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """`otel-llm report --db S -o F --since 7d --threshold-ms 500` prints F, which it wrote
    in one piece (no temporary file left beside it)."""
    out = tmp_path / "r.html"
    result = run_cli(
        "report", "--db", str(demo[0]), "-o", str(out), "--since", "7d", "--threshold-ms", "500"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out)
    assert "re-derived at <b>500 ms</b>" in out.read_text("utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


def test_report_defaults_to_a_file_beside_the_store(tmp_path: Path) -> None:
    """Without -o the report goes beside the store, under the default name."""
    store = tmp_path / "s"
    SegmentStore(store).create()
    result = run_cli("report", "--db", str(store))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(default_output(store))
    assert default_output(store).parent == tmp_path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--db", "{tmp}/missing"), "does not exist"),
        (("--since", "soon"), "--since: expected a duration"),
        (("--threshold-ms", "0"), "--threshold-ms: must be a positive integer"),
        (("-o", "{tmp}/nowhere/r.html"), "does not exist"),
        (("-o", "{tmp}"), "is a directory"),
    ],
)
def test_report_errors_are_said_plainly(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    """A missing store, a bad --since or threshold, an output that cannot be written: exit 2
    with the reason, no traceback, nothing written."""
    store = tmp_path / "s"
    SegmentStore(store).create()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--db" not in argv:
        argv = ["--db", str(store), *argv]
    result = run_cli("report", *argv, columns=200)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]


@pytest.mark.parametrize("inside", ["r.html", "segments/r.html", "tmp/r.html"])
def test_an_output_inside_the_store_is_refused(tmp_path: Path, inside: str) -> None:
    """``-o`` inside the store's own folders: exit 2 saying so, nothing written there — in
    ``segments/`` (a generation) the next merge's switch dropped the report a minute later,
    in ``tmp/`` the next writer's cleanup could."""
    store = SegmentStore(tmp_path / "s")
    store.create()
    target = store.path / inside
    before = sorted(str(p.relative_to(store.path)) for p in store.path.rglob("*"))
    result = run_cli("report", "--db", str(store.path), "-o", str(target), columns=200)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "is inside the store" in " ".join(result.stderr.split())
    assert sorted(str(p.relative_to(store.path)) for p in store.path.rglob("*")) == before


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_an_output_that_is_no_regular_file_is_refused_not_replaced(
    tmp_path: Path, kind: str
) -> None:
    """``-o`` naming a named pipe or a socket (``/dev/null``, ``/dev/stdout`` alike): exit 2
    saying so, and the special file is still there — the report's atomic rename replaced it
    with a regular file before (as root, even ``/dev/null``)."""
    import socket
    import stat

    store = tmp_path / "s"
    SegmentStore(store).create()
    special = tmp_path / "out.html"
    listener = None
    if kind == "fifo":
        os.mkfifo(special)
    else:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(special))
    try:
        result = run_cli("report", "--db", str(store), "-o", str(special), columns=200)
        mode = special.lstat().st_mode
    finally:
        if listener is not None:
            listener.close()
    assert result.returncode == 2, result.stdout + result.stderr
    assert "is not a regular file" in " ".join(result.stderr.split())
    assert stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISSOCK(mode), "it was replaced"


def test_a_link_as_the_output_stays_a_link_to_the_report(tmp_path: Path) -> None:
    """``-o`` naming a link: the file it points to gets the report; the link stays."""
    store = tmp_path / "s"
    SegmentStore(store).create()
    target = tmp_path / "reports" / "latest.html"
    target.parent.mkdir()
    target.write_text("the previous report")
    link = tmp_path / "report.html"
    link.symlink_to(target)
    result = run_cli("report", "--db", str(store), "-o", str(link))
    assert result.returncode == 0, result.stderr
    assert link.is_symlink()
    assert target.read_text().startswith("<!DOCTYPE html>")


def test_a_file_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    """A text file as the store: NotAStore, before any page is written."""
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(NotAStore, match="not a DuckDB database"):
        write_report(path, tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


# --- in a browser ------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_the_page_renders_offline_in_chromium(demo: tuple[Path, Path, str]) -> None:
    """From file:// with every network request blocked: nothing is requested but the file,
    no console message or page error, every chart drawn at a non-zero size, every table and
    stat filled, no horizontal scroll at 1366 px, and the screenshot is not blank."""
    _, report, _ = demo
    with loaded(report) as page:
        assert page.blocked == []
        assert all(url.startswith("file://") for url in page.requests), page.requests
        assert page.console == []
        assert page.page_errors == []
        sections = page.evaluate(
            """() => [...document.querySelectorAll("section.panel")].map(s => ({
                key: s.dataset.key, kind: s.dataset.kind, rows: +s.dataset.rows,
                rendered: s.querySelector(".chart")?.dataset.rendered ?? null,
                svg: (() => { const g = s.querySelector(".chart svg");
                              if (!g) return null; const r = g.getBoundingClientRect();
                              return [r.width, r.height, g.querySelectorAll("path").length]; })(),
                tableRows: s.querySelectorAll("tbody tr").length,
                stats: s.querySelectorAll(".stat").length,
                noData: s.querySelector(".no-data") !== null }))"""
        )
        keys = [s["key"] for s in sections]
        assert list(dict.fromkeys(keys)) == [*(p.key for p in PANELS), HEDGING]
        assert keys.count("time_split") == 2, "one chart per source (a repeated panel)"
        for section in sections:
            key, kind, rows = section["key"], section["kind"], section["rows"]
            if rows == 0:
                assert section["noData"], key
                continue
            if kind in CHARTS:
                assert section["rendered"] == "true", key
                width, height, paths = section["svg"]
                assert width > 100, (key, section["svg"])
                assert height > 100, (key, section["svg"])
                assert paths > 3, (key, section["svg"])
            elif kind == "table":
                assert section["tableRows"] == rows, key
            else:
                assert section["stats"] == len(PANELS[[p.key for p in PANELS].index(key)].columns)
        drawn = [s["key"] for s in sections if s["svg"]]
        assert {"time_split", "ttft", "outcomes", "timeline"} <= set(drawn)
        assert page.evaluate("document.documentElement.scrollWidth") <= 1366
        chosen = page.evaluate("document.querySelector('.chosen-call').textContent")
        assert re.search(r"trace [0-9a-f]{32} \(", chosen), chosen
        shot = page.page.screenshot(full_page=True)
        assert page.distinct_colours(shot) > 50
        chart = page.page.locator("#chart-time_split-0").screenshot()
        assert page.distinct_colours(chart) > 10


@pytest.mark.timeout(120)
def test_hostile_names_stay_text_in_the_browser(
    demo: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """Names that would close the script block run nothing: no dialog, no error, the charts
    drawn, and the legend shows the name as text."""
    store = _hostile_copy(demo[0], tmp_path / "hostile")
    out = tmp_path / "hostile.html"
    write_report(store, out)
    with loaded(out) as page:
        assert page.dialogs == []
        assert page.page_errors == []
        assert page.console == []
        assert page.blocked == []
        legend = page.evaluate("document.querySelector('#chart-stall_share svg').textContent")
        assert "</script><script>" in legend
        worst = page.evaluate("document.querySelector('#table-worst').textContent")
        assert HOSTILE in worst  # (the demo's only error types are hedge losers: no error)
        # a tooltip (vega-tooltip writes HTML) shows the name as text too
        page.page.hover("#chart-timeline svg .mark-symbol path")
        page.page.wait_for_selector("#vg-tooltip-element.visible")
        tooltip = page.evaluate("document.querySelector('#vg-tooltip-element').textContent")
        assert "</script><script>alert('x')</script>" in tooltip
        assert page.evaluate("document.querySelectorAll('#vg-tooltip-element img').length") == 0
        assert page.dialogs == []


@pytest.mark.timeout(120)
def test_a_very_long_name_wraps_within_the_page(
    demo: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """A source, model and service name of 10,000 characters with no space (a generated id, a
    mistake): the titles and sentences that name it wrap inside their panels (old: a repeated
    panel's title and the hedging panel's text ran ~97,000 px wide, and the whole page scrolled
    sideways); a table scrolls inside its panel."""
    store = _hostile_copy(demo[0], tmp_path / "long", "x" * 10_000)
    out = write_report(store, tmp_path / "long.html").path
    with loaded(out) as page:
        assert page.page_errors == []
        width, viewport = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width <= viewport, (width, viewport)


def test_a_panel_repeated_per_source_is_drawn_for_the_busiest_sources(tmp_path: Path) -> None:
    """More sources than the page draws one by one (1,000 copies took chromium 20-40 s to
    open): the per-source time split is drawn for the sources with the most wall time in the
    range, in the variable's order, and the page names the others and where their calls are."""
    sources = REPEAT_LIMIT + 6
    store = TuneStore(tmp_path / "store")
    for n in range(sources):
        store.call([Scripted((100.0, 150.0), 200.0 + 10 * n, source=f"src-{n:02d}")])
    store.close()
    written = write_report(tmp_path / "store", tmp_path / "r.html")
    copies = [r for r in written.data.results if r.panel.key == "time_split"]
    drawn = [r.repeat_value for r in copies]
    assert drawn == [f"src-{n:02d}" for n in range(6, sources)], "the busiest, in order"
    page = written.path.read_text("utf-8")
    assert page.count('data-key="time_split"') == REPEAT_LIMIT
    note = re.search(r'<p class="not-repeated">(.*?)</p>', page, re.S)
    assert note is not None
    assert "6 more sources" in note[1]
    assert all(f"src-{n:02d}" in note[1] for n in range(6))


def test_a_p99_on_a_failed_call_reads_as_a_sentence(tmp_path: Path) -> None:
    """Twenty calls, half of them failed: the replay's unhedged p99 falls on a failed call,
    which has no time — the estimate says so in words (old: "puts the unhedged p99 at failed
    (95 % interval failed to failed)")."""
    store = TuneStore(tmp_path / "store")
    for n in range(20):
        outcome = sc.OUTCOME_ERROR if n % 2 == 0 else sc.OUTCOME_OK
        store.call([Scripted(stream(200.0, chunks=3), 400.0 + n, outcome=outcome)])
    store.close()
    section = _hedging_panel(write_report(tmp_path / "store", tmp_path / "r.html").path.read_text())
    assert "Estimate, not a recommendation" in section
    assert "at failed" not in section
    assert "failed to failed" not in section
    assert "the unhedged p99 on a failed call" in section


def test_the_charting_runtime_loads_only_for_a_report(tmp_path: Path) -> None:
    """`import otel_llm` and the command line load neither vl_convert nor the report modules:
    only writing a report does."""
    script = (
        "import sys, otel_llm, otel_llm.cli._app\n"
        "lazy = ('vl_convert', 'otel_llm._show._report._data')\n"
        "print(sorted(m for m in sys.modules if m.startswith(lazy)))"
    )
    out = run_python(script, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_demo_can_skip_the_report(tmp_path: Path) -> None:
    """`demo --no-report` writes no page; with --report as well it is refused before any call."""
    store = tmp_path / "store"
    both = run_cli("demo", "--db", str(store), "--calls", "1", "--report", "x.html", "--no-report")
    assert both.returncode == 2, both.stdout + both.stderr
    assert "exclude each other" in both.stderr
    assert not store.exists(), "refused before any call"
    out = run_cli(
        "demo", "--db", str(store), "--calls", "1", "--seed", "17", "--no-report",
        "--time-scale", "0.8",  # unhurried: a busy machine seldom makes the demo refuse
    )  # fmt: skip
    # a machine too busy to vouch for the figures still ends the demo with its own exit code
    # (and no report, as always then); on any other the run is the one --no-report changes
    assert out.returncode in (0, DEMO_TOO_BUSY_EXIT), out.stdout + out.stderr
    assert "report" not in out.stdout.split("Spans are in")[-1].lower()
    assert not list(tmp_path.glob("*.html"))


_WITHOUT_RUNTIME = (
    "import sys; sys.modules['vl_convert'] = None; "  # as if otel-llm[report] were not installed
    "from otel_llm.cli import main; sys.argv = ['otel-llm', *sys.argv[1:]]; main()"
)


def test_without_the_runtime_the_report_says_what_to_install(
    demo: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """Without vl-convert-python, `otel-llm report` exits 2 naming the extra to install and
    writes nothing; the demo runs its calls and says why it writes no report."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = tmp_path / "r.html"
    report = run_python(
        _WITHOUT_RUNTIME, "report", "--db", str(demo[0]), "-o", str(out), cwd=tmp_path, env=env
    )
    assert report.returncode == 2, report.stdout + report.stderr
    assert "pip install 'vl-convert-python>=" in " ".join(report.stderr.split())
    assert not out.exists()
    store = tmp_path / "store"
    ran = run_python(
        _WITHOUT_RUNTIME,
        "demo",
        "--db",
        str(store),
        "--calls",
        "1",
        "--seed",
        "17",
        *UNHURRIED,
        cwd=tmp_path,
        env=env,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "No report at the end" in ran.stdout
    assert "(otel-llm's report extra)" in " ".join(ran.stdout.split())
    assert not list(tmp_path.glob("*.html"))
    assert store.is_dir()


# --- what hedging would buy ------------------------------------------------------------------


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store with enough calls of two sources for tune to recommend, and its report."""
    folder = tmp_path_factory.mktemp("tuned")
    write_store(folder / "store", 1100, sources=("sim-1", "sim-2"))
    return folder / "store", write_report(folder / "store", folder / "tuned.html").path


def _specs(page: str) -> dict[str, object]:
    start = page.index(f'id="{SPECS_ID}">') + len(f'id="{SPECS_ID}">')
    return json.loads(page[start : page.index("</script>", start)])  # type: ignore[no-any-return]


def test_the_hedging_panel_is_tune_on_the_range(tuned: tuple[Path, Path]) -> None:
    """With enough calls the panel charts tune's frontier on the report's range (its rows are
    the frontier's, the recommendation marked) and prints the lines to paste."""
    store, report = tuned
    page = report.read_text("utf-8")
    with open_store(store) as conn:
        data = collect(conn, store)
    tuning = data.hedging
    assert tuning is not None
    assert tuning.sample.calls == 1100
    assert tuning.recommendation is not None
    assert tuning.config is not None
    spec = _specs(page)[HEDGING]
    assert isinstance(spec, dict)
    assert spec["data"]["values"] == frontier_rows(tuning)
    marked = [row for row in spec["data"]["values"] if row["recommended"]]
    assert len(marked) == 2, "p99 and p50 of the one recommended setting"
    assert f'data-key="{HEDGING}"' in page
    assert "What hedging would buy" in page
    assert "needs a second source" not in _hedging_panel(page)
    for line in tuning.config.env:
        assert html.escape(line) in page


def test_on_one_source_the_panel_says_a_hedge_needs_a_second_source(tmp_path: Path) -> None:
    """One source: the panel still recommends (hedge legs drawn from the same pool, as the
    issue allows) but says prominently that the client needs a second source to hedge."""
    write_store(tmp_path / "store", 1100)
    page = write_report(tmp_path / "store", tmp_path / "r.html").path.read_text("utf-8")
    section = _hedging_panel(page)
    assert "needs a second source to take effect" in section
    assert "Recommended for 1.25 requests per call" in section


def test_the_hedging_panel_refuses_below_the_rule(demo: tuple[Path, Path, str]) -> None:
    """The demo's dozen calls: the panel says there is too little data, why, and what
    recording would be enough, draws nothing, and gives the replay's figures as a labelled
    estimate with the p99's interval (no setting to paste)."""
    page = demo[1].read_text("utf-8")
    section = page[page.index(f'id="panel-{HEDGING}"') :]
    section = section[: section.index("</section>")]
    assert 'data-rows="0"' in section
    assert "Too little data to say what hedging would buy" in section
    assert "fewer than 1,000" in section
    assert re.search(r"Enough: about [\d,]+ calls recorded like these", section), section
    estimate = re.search(
        r"Estimate, not a recommendation</b> \(([\d,]+) calls\): the replay puts the unhedged "
        r"p99 at ([\d.]+) s \(95 % interval ([\d.]+)–([\d.]+) s\)",
        section,
    )
    assert estimate is not None, section
    p99, low, high = (float(estimate[n]) for n in (2, 3, 4))
    assert low <= p99 <= high
    assert "Recommended for" not in section, "an estimate has no setting to paste"
    assert f'id="chart-{HEDGING}"' not in section
    assert HEDGING not in _specs(page)


@pytest.mark.timeout(120)
def test_the_hedging_chart_renders_offline_in_chromium(tuned: tuple[Path, Path]) -> None:
    """The frontier chart draws in a browser with the network blocked, the recommended point
    labelled, nothing logged."""
    with loaded(tuned[1]) as page:
        assert page.blocked == []
        assert page.console == []
        assert page.page_errors == []
        chart = page.evaluate(
            f"""() => {{ const c = document.querySelector("#chart-{HEDGING}");
                const g = c.querySelector("svg"); const r = g.getBoundingClientRect();
                return [c.dataset.rendered, r.width, r.height, g.textContent]; }}"""
        )
        rendered, width, height, text = chart
        assert rendered == "true"
        assert width > 300
        assert height > 150
        assert "recommended" in text
        assert "extra requests" in text


def _hedging_panel(page: str) -> str:
    section = page[page.index(f'id="panel-{HEDGING}"') :]
    return section[: section.index("</section>")]


def test_first_attempts_failed_before_a_chunk_do_not_take_the_report_down(
    tmp_path: Path,
) -> None:
    """A store where some first attempts failed before their first chunk (a 503, then a
    retry on the other source): the report is written and its hedging panel tunes on it."""
    rng = random.Random(3)
    store = TuneStore(tmp_path / "store")
    for i in range(60):
        if i % 20 == 0:
            failed = Scripted((), 2000.0, source="a-1", outcome=sc.OUTCOME_ERROR)
            store.call([failed, measured_like(rng, "b-1")])
        else:
            store.call([measured_like(rng, "a-1" if i % 2 else "b-1")])
    store.close()
    page = write_report(tmp_path / "store", tmp_path / "r.html").path.read_text("utf-8")
    section = _hedging_panel(page)
    assert "Too little data to say what hedging would buy" in section
    assert "could not run" not in section


def test_a_tune_error_is_shown_in_the_panel_not_raised(
    demo: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library error of tune on the range is the panel's text; the rest of the report stands.
    An unexpected exception (a bug) still surfaces."""
    import otel_llm._show._report._data as report

    def failing(*_: object, **__: object) -> None:
        raise OtelLLMError("the store's chunk events are unreadable")

    monkeypatch.setattr(report, "tune", failing)
    with open_store(demo[0]) as conn:
        data = collect(conn, demo[0])
    assert data.hedging is None
    assert data.hedging_error == "the store's chunk events are unreadable"
    specs: dict[str, object] = {}
    section = hedging_section(None, specs, data.hedging_error)
    assert "otel-llm tune could not run on this range" in section
    assert "unreadable" in section
    assert HEDGING not in specs

    def buggy(*_: object, **__: object) -> None:
        raise ValueError("a bug")

    monkeypatch.setattr(report, "tune", buggy)
    with open_store(demo[0]) as conn, pytest.raises(ValueError, match="a bug"):
        collect(conn, demo[0])
