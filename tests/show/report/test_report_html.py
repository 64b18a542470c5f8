"""The report's page and chart specs (``otel_llm/_show/_report/_html.py``,
``otel_llm/_show/_report/_charts.py``): escaping, the inlined runtime, each panel's mark."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from otel_llm._show._dashboards._panels import PANELS, SERIES, TIME, Panel
from otel_llm._show._report._charts import OVERLAY_COLOUR, Frame, chart_spec, label
from otel_llm._show._report._hedging import NO_CALLS, frontier_spec, hedging_section
from otel_llm._show._report._html import cell, script_json, vega_runtime
from otel_llm._tune._hedging_model import Rules
from otel_llm._tune._replay import Figures
from otel_llm._tune._sample import Sample
from otel_llm._tune._tuning import Setting, Tuning

BY_KEY = {panel.key: panel for panel in PANELS}
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON_VALUES)
def test_script_json_is_the_same_json_and_never_markup(value: Any) -> None:
    """Any value comes back from the script block's JSON unchanged, and the text has no
    ``<``, ``>`` or ``&`` a browser could read as the end of the block or a comment."""
    text = script_json(value)
    assert json.loads(text) == value
    assert not set("<>&") & set(text)
    assert "\u2028" not in text
    assert "\u2029" not in text


@given(st.text())
def test_a_table_cell_is_escaped_text(value: str) -> None:
    """A text cell has no markup of its own: every ``<``, ``&`` and quote is escaped."""
    text = cell(value, "series")
    assert "<" not in text
    assert '"' not in text
    assert (
        text.replace("&amp;", "")
        .replace("&lt;", "")
        .replace("&gt;", "")
        .replace("&quot;", "")
        .replace("&#x27;", "")
        .count("&")
        == 0
    )


def test_cells_format_numbers_by_unit() -> None:
    """Seconds with three decimals, percentages with one, counts with thousands, none as –."""
    assert cell(12.3456, "stall_s") == "12.346"
    assert cell(23.04, "hedged_pct") == "23.0"
    assert cell(1234567, "calls") == "1,234,567"
    assert cell(None, "ttft_s") == "–"


def test_the_runtime_is_a_classic_script_setting_vega_embed() -> None:
    """The inlined bundle is not an ES module (no import or export), sets window.vegaEmbed,
    and cannot close its script element."""
    bundle = vega_runtime()
    assert "window.vegaEmbed=" in bundle
    assert "</script" not in bundle.lower()
    assert not any(line.startswith(("import ", "export ")) for line in bundle.splitlines())
    assert 500_000 < len(bundle) < 1_500_000


def _rows(panel: Panel, n: int = 3) -> list[dict[str, object]]:
    values: dict[str, object] = {"time": 1_700_000_000_000, "series": "sim-a/m"}
    return [
        {
            c: values.get(c, f"{c}-{i}" if c in ("stalls", "gap", "outcome") else i + 1.0)
            for c in panel.columns
        }
        for i in range(n)
    ]


def test_the_time_split_stacks_net_and_stall_under_the_wall_line() -> None:
    """Net and stall are stacked areas; wall is a dashed line of its own colour over them,
    summed over the series (the top of the stack)."""
    panel = replace(BY_KEY["time_split"], columns=(TIME, SERIES, "net_s", "stall_s", "wall_s"))
    rows = [
        {"time": t * 1000, "series": s, "net_s": 1.0, "stall_s": 0.5, "wall_s": 1.5 * t}
        for t in (1, 2, 3)
        for s in ("sim-a/m", "sim-b/m")
    ]
    spec = chart_spec(panel, rows)
    assert spec is not None
    area, line = spec["layer"]
    assert area["mark"]["type"] == "area"
    assert area["encoding"]["y"]["stack"] == "zero"
    assert line["mark"]["type"] == "line"
    assert line["mark"]["strokeDash"]
    assert line["encoding"]["y"]["stack"] is None
    colours = dict(
        zip(*(area["encoding"]["color"]["scale"][k] for k in ("domain", "range")), strict=True)
    )
    assert colours["wall"] == OVERLAY_COLOUR
    assert {"sim-a/m · net", "sim-a/m · stall"} <= set(colours)
    walls = [v for v in spec["data"]["values"] if v["label"] == "wall"]
    assert len(walls) == 3, "one wall line over the series"
    assert [(w["time"], w["value"]) for w in walls] == [(1000, 3.0), (2000, 6.0), (3000, 9.0)]


def test_without_series_the_stack_is_named_by_its_figures() -> None:
    """A panel of one source (a repeated copy) stacks "net" and "stall" under "wall"."""
    panel = BY_KEY["time_split"]
    spec = chart_spec(panel, [{"time": 0, "net_s": 1.0, "stall_s": 0.5, "wall_s": 1.5}])
    assert spec is not None
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == ["net", "stall", "wall"]


def test_every_panel_gets_its_mark() -> None:
    """Time series as lines (or areas), bar charts as bars, the timeline as points; tables
    and stats are not charts."""
    marks = {}
    for panel in PANELS:
        spec = chart_spec(panel, _rows(panel))
        if spec is None:
            marks[panel.kind] = None
            continue
        layers = spec.get("layer", [spec])
        marks[panel.key] = layers[0]["mark"]["type"]
    assert marks["ttft"] == "line"
    assert marks["stall_counts"] == "bar"
    assert marks["outcomes"] == "bar"
    assert marks["timeline"] == "point"
    assert marks["table"] is None
    assert marks["stat"] is None


def test_skewed_bars_go_on_a_log_scale() -> None:
    """A bar chart whose bars span more than 100× is drawn on a log scale and says so."""
    panel = BY_KEY["chunk_gaps"]
    even = chart_spec(panel, [{"gap": "a", "gaps": 10}, {"gap": "b", "gaps": 20}])
    skewed = chart_spec(panel, [{"gap": "a", "gaps": 10_000}, {"gap": "b", "gaps": 3}])
    assert even is not None
    assert skewed is not None
    assert "scale" not in even["layer"][0]["encoding"]["y"]
    assert skewed["layer"][0]["encoding"]["y"]["scale"] == {"type": "symlog", "domain": [0, 10_000]}
    assert "log scale" in skewed["layer"][0]["encoding"]["y"]["title"]


def test_labels_name_the_unit() -> None:
    """Column names read as words with their unit."""
    assert label("stall_s") == "stall (s)"
    assert label("hedged_pct") == "hedged (%)"
    assert label("primary_attempts") == "primary attempts"


def _tuning(recommended: int | None) -> Tuning:
    """A tuning whose frontier is three settings, one of them recommended."""
    frontier = tuple(
        Setting(Rules(stall_after_s=stall, ratio=0.25), Figures(2.0, 9.0, p99, requests))
        for stall, p99, requests in ((None, 30.0, 1.0), (10.0, 22.0, 1.1), (4.0, 19.0, 1.24))
    )
    data = Sample((), (), {}, {}, 0, 0, {}, 100, (), None, 0)
    chosen = frontier[recommended] if recommended is not None else None
    return Tuning(data, 1.25, 1, 10, frontier, frontier, chosen, None, None)


def test_the_hedging_frontier_is_p99_and_p50_against_extra_requests() -> None:
    """Two lines with points (p99, p50) over the extra requests in %, the recommended point
    ringed and labelled; no ring when nothing is recommended."""
    spec = frontier_spec(_tuning(2))
    line, ring, text = spec["layer"]
    assert line["mark"]["type"] == "line"
    assert line["encoding"]["color"]["scale"]["domain"] == ["p99", "p50"]
    assert ring["transform"] == [{"filter": {"field": "recommended", "equal": True}}]
    assert text["encoding"]["text"] == {"value": "recommended"}
    values = spec["data"]["values"]
    assert [v["extra_requests_pct"] for v in values if v["figure"] == "p99"] == [0.0, 10.0, 24.0]
    assert [v["seconds"] for v in values if v["figure"] == "p99"] == [30.0, 22.0, 19.0]
    assert [v["setting"] for v in values if v["recommended"]] == ["stall 4 s · ratio 0.25"] * 2
    assert values[0]["setting"] == "unhedged"
    assert not any(v["recommended"] for v in frontier_spec(_tuning(None))["data"]["values"])
    assert NO_CALLS in hedging_section(None, {})


def test_many_series_fill_only_the_gaps_beside_their_values() -> None:
    """1,000 source/models with one call each, over 120 buckets: each line holds its values,
    the empty bucket on each side of them (what breaks it, or steps it down to zero) and the
    range's ends — not every empty bucket of every line (old: 1,000 × 3 figures × 120 buckets,
    20 MB of TTFT rows in the page). The line still breaks between values buckets apart."""
    step, buckets = 1_000, 120
    frame = Frame(0, (buckets - 1) * step, step)
    ttft = BY_KEY["ttft"]
    rows = [
        {"time": (n % buckets) * step, "series": f"src-{n}/m", **dict.fromkeys(ttft.values, 0.5)}
        for n in range(1_000)
    ]
    rows.append({"time": 7 * step, "series": "src-0/m", **dict.fromkeys(ttft.values, 0.7)})
    spec = chart_spec(ttft, rows, frame)
    assert spec is not None
    values = spec["data"]["values"]
    assert len(values) <= 3 * len(rows) * len(ttft.values), len(values)
    line = sorted((v["time"], v["value"]) for v in values if v["label"] == "src-0/m · ttft p50")
    assert [v for _, v in line if v is not None] == [0.5, 0.7]
    between = [v for t, v in line if 0 < t < 7 * step]
    assert between, "a break between bucket 0 and bucket 7"
    assert all(v is None for v in between), "no line from bucket 0 to bucket 7"
    split = BY_KEY["time_split"]
    one = [{"time": 50 * step, "net_s": 1.0, "stall_s": 0.5, "wall_s": 1.5}]
    stacked = chart_spec(split, one, frame)
    assert stacked is not None
    zeros = [v for v in stacked["data"]["values"] if v["label"] == "net"]
    assert len(zeros) <= 5, zeros
    assert min(v["time"] for v in zeros) == 0, "the stack spans the range from its start"
    assert {(v["time"], v["value"]) for v in zeros} >= {(50 * step, 1.0), (51 * step, 0.0)}
