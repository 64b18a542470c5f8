"""The report's charts as a reader sees them, read back from the SVG chromium drew: the time
axis's labels on a short range, the steps of a sparse range, and bars on a log scale with
zero-valued series. Stores of scripted calls at chosen moments (real SDK spans through the
deriving processor into a real segment store), reports written by ``write_report``."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from otel_llm import _semconv as sc
from otel_llm._show._report._charts import MAX_TICKS, PALETTE, Frame, time_ticks
from otel_llm._show._report._write import write_report
from tests.support.report_browser import loaded
from tests.support.tune_store import Scripted, TuneStore, stream

pytestmark = pytest.mark.timeout(180)

NOON_NS = int(datetime(2026, 11, 2, 12, 0, 0, tzinfo=UTC).timestamp() * 1e9)
SECOND_NS = 1_000_000_000

_AXIS = """(slot) => {
  const chart = document.querySelector(`#chart-${slot} svg`);
  const axis = [...chart.querySelectorAll("g.role-axis")]
    .find(g => (g.getAttribute("aria-label") || "").startsWith("X-axis"));
  return [...axis.querySelectorAll(".role-axis-label text")].map(t => t.textContent);
}"""

_PATHS = """([slot, role]) => {
  const chart = document.querySelector(`#chart-${slot} svg`);
  return [...chart.querySelectorAll(`g.mark-${role}.role-mark path`)]
    .map(p => p.getAttribute("d") || "");
}"""

_BARS = """(slot) => {
  const chart = document.querySelector(`#chart-${slot} svg`);
  return [...chart.querySelectorAll("g.mark-rect.role-mark path")].map(p => {
    const r = p.getBBox(); return [r.x, r.y, r.width, r.height]; });
}"""


def _points(d: str) -> list[tuple[float, float]]:
    """The vertices of an SVG path Vega drew (absolute M/L commands)."""
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", d)]
    return list(zip(numbers[::2], numbers[1::2], strict=False))


def _ok(chunks: int = 5) -> Scripted:
    return Scripted(stream(200.0, chunks=chunks, every_ms=50.0), 200.0 + chunks * 50.0)


def _store(path: Path, calls: list[tuple[int, list[Scripted]]]) -> Path:
    store = TuneStore(path)
    for at_ns, attempts in calls:
        store.call(attempts, at_ns=at_ns)
    store.close()
    return path


@pytest.fixture(scope="module")
def sparse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two calls 75 s apart: a report over 75 s with two busy seconds."""
    folder = tmp_path_factory.mktemp("sparse")
    store = _store(folder / "store", [(NOON_NS, [_ok()]), (NOON_NS + 75 * SECOND_NS, [_ok()])])
    return write_report(store, folder / "report.html").path


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Four calls within 3 s."""
    folder = tmp_path_factory.mktemp("short")
    calls = [(NOON_NS + n * SECOND_NS * 3 // 4, [_ok()]) for n in range(5)]
    return write_report(_store(folder / "store", calls), folder / "report.html").path


@pytest.fixture(scope="module")
def zeros(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """300 good primaries and one error, no hedge at all: attempts by outcome has zero-valued
    series and spans more than a hundredfold (a log scale)."""
    folder = tmp_path_factory.mktemp("zeros")
    calls = [(NOON_NS + n * SECOND_NS // 10, [_ok(2)]) for n in range(300)]
    failed = Scripted(stream(200.0, chunks=2), 400.0, outcome=sc.OUTCOME_ERROR)
    calls.append((NOON_NS + 31 * SECOND_NS, [failed]))
    return write_report(_store(folder / "store", calls), folder / "report.html").path


def test_tick_steps_fit_every_span() -> None:
    """At most eight ticks on any span, at least a second apart, each label a whole second or
    coarser (never milliseconds), and as fine as the span needs."""
    for span_ms in (500, 3_000, 75_000, 3_600_000, 86_400_000, 40 * 86_400_000, 10**12):
        count, every, fmt = time_ticks(span_ms)
        assert 2 <= count <= MAX_TICKS
        assert every >= 1_000
        assert span_ms / every <= MAX_TICKS
        assert "%L" not in fmt
    assert time_ticks(4_000) == (4, 1_000, "%H:%M:%S")
    assert time_ticks(76_000)[1:] == (10_000, "%H:%M:%S")
    assert time_ticks(2 * 3_600_000)[1:] == (15 * 60_000, "%H:%M")


def test_buckets_cover_the_range_on_the_querys_grid() -> None:
    """Every bucket from the one holding the start to the one holding the end, on the grid of
    the buckets returned."""
    frame = Frame(start_ms=10_500, end_ms=14_200, step_ms=1_000)
    assert frame.buckets([12_000]) == [10_000, 11_000, 12_000, 13_000, 14_000]
    assert Frame(0, 0, 0).buckets([5, 3]) == [3, 5]


def _labels(page: Any, slot: str) -> list[str]:
    return list(page.evaluate(_AXIS, slot))


def test_a_short_range_labels_whole_seconds_in_utc(short: Path) -> None:
    """Four seconds of calls: the time axis reads 12:00:00, 12:00:01 … (UTC, even in a
    browser in Tokyo), never ``.500``."""
    with loaded(short, timezone="Asia/Tokyo") as page:
        assert page.page_errors == []
        for slot in ("time_split-0", "ttft", "stall_share"):
            labels = _labels(page, slot)
            assert len(labels) >= 3, (slot, labels)
            assert all(re.fullmatch(r"12:00:0\d", text) for text in labels), (slot, labels)
            assert len(set(labels)) == len(labels), (slot, labels)


def test_a_sparse_range_draws_two_steps_not_a_band(sparse: Path) -> None:
    """Two calls 75 s apart: the stacked area rises for the two buckets that hold a call and
    is zero in between and after (old: one flat band from the first call to the end); the
    time-to-first-chunk line does not bridge the 74 empty seconds."""
    with loaded(sparse) as page:
        assert page.page_errors == []
        labels = _labels(page, "time_split-0")
        assert all(re.fullmatch(r"12:0[01]:[0-5]\d", text) for text in labels), labels
        areas = page.evaluate(_PATHS, ["time_split-0", "area"])
        assert areas, "the stacked area is drawn"
        raised_widths = []
        for d in areas:
            points = _points(d)
            xs = [x for x, _ in points]
            base = max(y for _, y in points)
            width = max(xs) - min(xs)
            assert width > 300, (width, d[:200])
            raised = _raised_width(points, base)
            assert raised < width * 0.1, (raised, width)  # two 1 s buckets of 76
            raised_widths.append(raised)
        assert max(raised_widths) > 0, "net generation is drawn"
        lines = page.evaluate(_PATHS, ["ttft", "line"])
        assert lines
        for d in lines:
            pieces = [piece for piece in d.split("M") if piece]
            assert len(pieces) >= 2, ("a line bridges the empty minute", d[:200])
            for piece in pieces:
                xs = [x for x, _ in _points(piece)]
                assert max(xs) - min(xs) < 100, ("a line bridges the empty minute", d[:200])


def _raised_width(points: list[tuple[float, float]], base: float) -> float:
    """The total width over which a step path stands above its baseline ``base``."""
    total = 0.0
    for (x0, y0), (x1, _) in itertools.pairwise(points):
        if y0 < base - 0.5 and x1 > x0:
            total += x1 - x0
    return total


def test_bars_on_a_log_scale_with_zero_series_are_drawn(zeros: Path) -> None:
    """Attempts by outcome with no hedge and no other leg: on a log scale, one bar per
    non-zero value (ok and error), each of a height, side by side rather than a stack that
    has no bottom on a log scale."""
    with loaded(zeros) as page:
        assert page.page_errors == []
        bars = page.evaluate(_BARS, "outcomes")
        assert len(bars) == 2, bars
        for _, _, width, height in bars:
            assert width > 5
            assert height > 5
        heights = sorted(height for *_, height in bars)
        assert heights[1] > heights[0] * 1.5, "300 stands above 1"
        title, ticks = page.evaluate(
            """() => {
              const axis = [...document.querySelectorAll("#chart-outcomes svg g.role-axis")]
                .find(g => (g.getAttribute("aria-label") || "").startsWith("Y-axis"));
              const labels = [...axis.querySelectorAll(".role-axis-label text")];
              return [axis.querySelector(".role-axis-title text").textContent,
                      labels.map(t => t.textContent)]; }"""
        )
        assert "log scale" in title
        assert ticks == ["0", "1", "10", "100", "1,000"], "powers of ten, on a scale that has 0"


_MARKS = """(slot) => {
  const chart = document.querySelector(`#chart-${slot} svg`);
  return [...chart.querySelectorAll("g.role-mark path")].map(p => [
    p.closest("g.role-mark").getAttribute("class"),
    p.getAttribute("d") || "",
    p.getAttribute("transform") || "",
    p.closest("[clip-path]") !== null]);
}"""


def _visible_xs(marks: list[list[Any]]) -> list[float]:
    """Where the marks Vega drew show something: a line's pieces of two vertices or more (a
    piece of one vertex draws nothing), a symbol at its place — whole: a point on the plot's
    edge (the range's first bucket) that is clipped shows half of itself or less."""
    xs: list[float] = []
    for kind, d, transform, clipped in marks:
        if "mark-symbol" in kind:
            xs.extend(x for x, _ in _points(transform) if not (clipped and x <= 0.5))
            continue
        for piece in d.split("M"):
            points = set(_points(piece))
            if len(points) >= 2:
                xs.extend(x for x, _ in points)
    return xs


def test_a_percentile_alone_in_its_bucket_is_drawn(sparse: Path) -> None:
    """Two calls 75 s apart: each bucket's TTFT p50 / p95 / p99 has no neighbour to draw a line
    to, and is drawn as a point, whole even on the plot's edge, where the first bucket is (old:
    a line of one vertex, which draws nothing — the chart was empty though the page held the
    values)."""
    with loaded(sparse) as page:
        assert page.page_errors == []
        assert page.console == []
        xs = _visible_xs(page.evaluate(_MARKS, "ttft"))
        assert xs, "nothing of the time to first chunk is visible"
        assert min(xs) < 1, ("the first call's bucket is drawn whole, on the edge", xs)
        assert max(xs) - min(xs) > 300, ("both calls' buckets are drawn", xs)


@pytest.fixture(scope="module")
def stalled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One call that stalled 1.5 s and generated for less: both parts of the stack show."""
    folder = tmp_path_factory.mktemp("stalled")
    call = Scripted(stream(200.0, chunks=5, every_ms=50.0, silences={2: 1_500.0}), 1_950.0)
    return write_report(_store(folder / "store", [(NOON_NS, [call])]), folder / "report.html").path


_AREAS = """(slot) => {
  const chart = document.querySelector(`#chart-${slot} svg`);
  return [...chart.querySelectorAll("g.mark-area.role-mark path")]
    .map(p => [p.getAttribute("fill"), p.getAttribute("d") || ""]);
}"""


def _centroid_y(points: list[tuple[float, float]]) -> float:
    """The height of a polygon's centroid (y grows downwards), by the shoelace formula."""
    area = cy = 0.0
    for (x0, y0), (x1, y1) in itertools.pairwise([*points, points[0]]):
        cross = x0 * y1 - x1 * y0
        area += cross
        cy += (y0 + y1) * cross
    return cy / (3 * area)


def test_net_generation_is_stacked_below_the_stall(stalled: Path) -> None:
    """As the panel says ("net generation below, stall above") and Grafana draws it: the stall
    area sits on top of the net generation area (old: Vega-Lite stacked the colour domain in
    reverse, and the stall lay on the axis under the net generation)."""
    with loaded(stalled) as page:
        assert page.page_errors == []
        areas = dict(page.evaluate(_AREAS, "time_split-0"))
        net, stall = areas[PALETTE[0]], areas[PALETTE[1]]
        assert _centroid_y(_points(stall)) < _centroid_y(_points(net)), "stall above net"


@pytest.fixture(scope="module")
def hedged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two calls: one answered by its primary, one by a hedge leg (its primary cancelled)."""
    folder = tmp_path_factory.mktemp("hedged")
    loser = Scripted(stream(200.0, chunks=2), 300.0, outcome=sc.OUTCOME_HEDGE_CANCELLED)
    leg = Scripted(stream(200.0), 800.0, leg=sc.LEG_HEDGE, start_ms=100.0)
    calls = [(NOON_NS, [_ok()]), (NOON_NS + SECOND_NS, [loser, leg])]
    return write_report(_store(folder / "store", calls), folder / "report.html").path


_RECTS = """(slot) => {
  const chart = document.querySelector(`#chart-${slot} svg`);
  return [...chart.querySelectorAll("g.mark-rect.role-mark path")].map(p => {
    const r = p.getBBox(); return [p.getAttribute("fill"), r.x, r.y, r.height]; });
}"""


def test_stacked_bars_put_the_first_series_at_the_bottom(hedged: Path) -> None:
    """Attempts by outcome, as Grafana stacks them: primary attempts at the bottom of a bar,
    hedge attempts above (old: Vega-Lite stacked the colour domain from its end, the primary
    attempts on top)."""
    with loaded(hedged) as page:
        assert page.page_errors == []
        rects = [r for r in page.evaluate(_RECTS, "outcomes") if r[3] > 0]
        (hedge_x, hedge_y), *_ = [(x, y) for fill, x, y, _ in rects if fill == PALETTE[1]]
        primary = [y for fill, x, y, _ in rects if fill == PALETTE[0] and x == hedge_x]
        assert primary, ("the ok bar holds a primary attempt", rects)
        assert primary[0] > hedge_y, "the primary attempts below the hedge attempts"


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One call, 0.3 s after noon: a range of one one-second bucket."""
    folder = tmp_path_factory.mktemp("single")
    calls = [(NOON_NS + 3 * SECOND_NS // 10, [_ok()])]
    return write_report(_store(folder / "store", calls), folder / "report.html").path


_TICKS = """(slot) => {
  const chart = document.querySelector(`#chart-${slot} svg`);
  const axis = [...chart.querySelectorAll("g.role-axis")]
    .find(g => (g.getAttribute("aria-label") || "").startsWith("X-axis"));
  const ticks = [...axis.querySelectorAll(".role-axis-tick line")]
    .map(t => t.getAttribute("transform"));
  return [[...axis.querySelectorAll(".role-axis-label text")].map(t => t.textContent), ticks];
}"""


def test_every_tick_of_a_one_second_range_is_a_whole_second(single: Path) -> None:
    """One call: the range is one second, and its ticks are 12:00:00 and 12:00:01 at its two
    ends (old: Vega put ticks half a second apart, left out the first, and labelled the one in
    the middle, at 12:00:00.5, "12:00:00" — the call's point at the left edge seemed to come
    before it)."""
    with loaded(single) as page:
        assert page.page_errors == []
        assert page.console == []
        for slot in ("ttft", "time_split-0"):
            labels, ticks = page.evaluate(_TICKS, slot)
            assert labels == ["12:00:00", "12:00:01"], (slot, labels)
            xs = [x for t in ticks for x, _ in _points(t)]
            assert xs[0] == 0, (slot, ticks)


_Y_AXIS = """(slot) => {
  const chart = document.querySelector(`#chart-${slot} svg`);
  const axis = [...chart.querySelectorAll("g.role-axis")]
    .find(g => (g.getAttribute("aria-label") || "").startsWith("Y-axis"));
  return [...axis.querySelectorAll(".role-axis-label text")].map(t => t.textContent);
}"""


def test_a_share_that_is_zero_throughout_is_drawn_on_the_floor(sparse: Path) -> None:
    """No call hedged: the hedge rate is 0 % in every bucket, and its axis runs from 0 up (old:
    an axis of the one value 0, drawn half-way up the chart, where a 0 reads as some share)."""
    with loaded(sparse) as page:
        assert page.page_errors == []
        labels = page.evaluate(_Y_AXIS, "hedge_rate")
        assert len(labels) >= 2, labels
        assert float(labels[0]) == 0, labels
