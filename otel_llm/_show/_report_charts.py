"""The Vega-Lite specification of every chart of ``otel-llm report``, from a panel
(:class:`~otel_llm._show._panels.Panel`) and the rows its SQL returned.

Pure functions of the panel's metadata: its kind draws the mark (a time series as lines, or as
an area stacked by :attr:`Panel.stacked` with the other values drawn as a line over the stack;
a bar chart as bars, stacked when the panel says so; an xy chart as points), its unit names
the axis. The rows are inlined into the spec (a panel returns at most a few hundred aggregated
rows), reshaped to one row per plotted value. Tables and stats are not charts
(:func:`chart_spec` returns ``None``): the report writes them as HTML.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from otel_llm._show._panels import SERIES, TIME, Panel

Row = Mapping[str, Any]
"""One row of a panel's result, JSON-ready: numbers, text, None; times in epoch milliseconds."""
Spec = dict[str, Any]

SCHEMA: Final = "https://vega.github.io/schema/vega-lite/v6.json"
"""Only a name: the runtime is inlined, nothing is fetched."""
PALETTE: Final = (
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#e45756",
    "#72b7b2",
    "#b279a2",
    "#eeca3b",
    "#9d755d",
    "#ff9da6",
    "#bab0ac",
)
"""Vega's tableau10: the stacked parts, the lines, the bars."""
OVERLAY_COLOUR: Final = "#222222"
"""The line drawn over a stack (wall over net + stall)."""
DASHES: Final = ([1, 0], [6, 3], [2, 2], [8, 2, 2, 2], [1, 3])
"""Stroke dashes of the value columns when colour already tells the series apart."""
SKEWED: Final = 100
"""A bar chart whose largest bar is this many times its smallest non-empty one is drawn on a log
scale, so the small bars stay visible (the axis says so; the bars are never empty: no
category of zero is returned)."""
ROW_PX: Final = 26
"""Pixels of plot height per Grafana grid row of the panel."""
UNIT_TITLES: Final = {"s": "seconds", "percent": "%", "short": "count", "none": ""}

_SUFFIXES: Final = (("_pct", " (%)"), ("_s", " (s)"))


def label(column: str) -> str:
    """A column as a reader names it: ``stall_s`` → ``stall (s)``, ``hedged_pct`` →
    ``hedged (%)``, ``primary_attempts`` → ``primary attempts``."""
    for suffix, unit in _SUFFIXES:
        if column.endswith(suffix):
            return column.removesuffix(suffix).replace("_", " ") + unit
    return column.replace("_", " ")


def figure_name(column: str) -> str:
    """A value column without its unit, for a legend (``ttft_p95_s`` → ``ttft p95``)."""
    for suffix, _ in _SUFFIXES:
        column = column.removesuffix(suffix)
    return column.replace("_", " ")


def chart_height(panel: Panel) -> int:
    """The plot's height for the panel's Grafana height (title and legend come on top)."""
    return max(120, (panel.height - 3) * ROW_PX)


def _base(panel: Panel, values: list[dict[str, Any]]) -> Spec:
    return {
        "$schema": SCHEMA,
        "width": "container",
        "height": chart_height(panel),
        "autosize": {"type": "fit-x", "contains": "padding"},
        "data": {"values": values},
        "config": {
            "legend": {"orient": "bottom", "labelLimit": 320, "columns": 3},
            "axis": {"labelFontSize": 11, "titleFontSize": 11},
            "view": {"stroke": None},
        },
    }


def _time_axis() -> Spec:
    return {
        "field": TIME,
        "type": "temporal",
        "title": "started (UTC)",
        "scale": {"type": "utc"},
        "axis": {"labelOverlap": True, "grid": False},
    }


def _value_axis(panel: Panel, *, stack: bool = False) -> Spec:
    axis: Spec = {
        "field": "value",
        "type": "quantitative",
        "title": UNIT_TITLES.get(panel.unit, panel.unit),
    }
    if not stack:
        axis["stack"] = None
    return axis


def _colour(domain: Sequence[str], range_: Sequence[str] | None = None) -> Spec:
    colours = list(range_) if range_ is not None else [PALETTE[i % 10] for i in range(len(domain))]
    return {
        "field": "label",
        "type": "nominal",
        "title": None,
        "scale": {"domain": list(domain), "range": colours},
        "sort": list(domain),
    }


def _labelled(row: Row, column: str, panel: Panel) -> str:
    """The legend entry of one value column of one row: the series and the figure."""
    several = len(panel.values) > 1
    if SERIES in panel.columns:
        series = str(row.get(SERIES))
        return f"{series} · {figure_name(column)}" if several else series
    return figure_name(column)


def _long(rows: Sequence[Row], panel: Panel, columns: Sequence[str]) -> list[dict[str, Any]]:
    """One row per (row, value column): its x, its legend entry, its value."""
    timed = TIME in panel.columns
    key = TIME if timed else panel.x or ""
    return [
        {
            TIME if timed else "x": row.get(key),
            "label": _labelled(row, column, panel),
            "figure": figure_name(column),
            "series": str(row.get(SERIES, "")),
            "value": row.get(column),
        }
        for row in rows
        for column in columns
    ]


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _tooltip(*fields: tuple[str, str]) -> list[Spec]:
    tips: list[Spec] = []
    for field, kind in fields:
        tip: Spec = {"field": field, "type": kind}
        if kind == "temporal":
            tip["timeUnit"] = "utcyearmonthdatehoursminutesseconds"
            tip["format"] = "%Y-%m-%d %H:%M:%S"
        tips.append(tip)
    return tips


def _stacked_time(panel: Panel, rows: Sequence[Row]) -> Spec:
    """An area per stacked value and series, the other values summed over the series and
    drawn as a dashed line over the stack (its top, when they add up)."""
    stacked = _long(rows, panel, panel.stacked)
    overlay_columns = [c for c in panel.values if c not in panel.stacked]
    totals: dict[tuple[object, str], float] = {}
    for row in rows:
        for column in overlay_columns:
            value = row.get(column)
            if isinstance(value, int | float):
                key = (row.get(TIME), column)
                totals[key] = totals.get(key, 0.0) + float(value)
    overlay = [
        {TIME: t, "label": figure_name(c), "figure": figure_name(c), "value": v}
        for (t, c), v in totals.items()
    ]
    stacked_labels = _unique([r["label"] for r in stacked])
    overlay_labels = [figure_name(c) for c in overlay_columns]
    domain = stacked_labels + overlay_labels
    colours = [PALETTE[i % 10] for i in range(len(stacked_labels))]
    colours += [OVERLAY_COLOUR] * len(overlay_labels)
    tooltip = _tooltip((TIME, "temporal"), ("label", "nominal"), ("value", "quantitative"))
    spec = _base(panel, [*stacked, *overlay])
    area: Spec = {
        "transform": [
            {"filter": {"field": "label", "oneOf": stacked_labels}},
            {"impute": "value", "key": TIME, "groupby": ["label"], "value": 0},
        ],
        "mark": {"type": "area", "opacity": 0.85, "interpolate": "step-after"},
        "encoding": {
            "x": _time_axis(),
            "y": {**_value_axis(panel, stack=True), "stack": "zero"},
            "color": _colour(domain, colours),
            "tooltip": tooltip,
        },
    }
    line: Spec = {
        "transform": [{"filter": {"field": "label", "oneOf": overlay_labels}}],
        "mark": {
            "type": "line",
            "strokeDash": [6, 3],
            "strokeWidth": 1.5,
            "interpolate": "step-after",
        },
        "encoding": {
            "x": _time_axis(),
            "y": _value_axis(panel),
            "color": _colour(domain, colours),
            "tooltip": tooltip,
        },
    }
    spec["layer"] = [area, line] if overlay_labels else [area]
    return spec


def _time_lines(panel: Panel, rows: Sequence[Row]) -> Spec:
    """A line per series (colour) and value column (dash when there are several of both)."""
    values = _long(rows, panel, panel.values)
    with_series = SERIES in panel.columns
    several = len(panel.values) > 1
    encoding: Spec = {"x": _time_axis(), "y": _value_axis(panel)}
    if with_series and several:
        series = _unique([r["series"] for r in values])
        encoding["color"] = {**_colour(series), "field": "series"}
        figures = [figure_name(c) for c in panel.values]
        encoding["strokeDash"] = {
            "field": "figure",
            "type": "nominal",
            "title": None,
            "sort": figures,
            "scale": {"domain": figures, "range": DASHES[: len(figures)]},
        }
    else:
        encoding["color"] = _colour(_unique([r["label"] for r in values]))
    encoding["tooltip"] = _tooltip(
        (TIME, "temporal"), ("label", "nominal"), ("value", "quantitative")
    )
    spec = _base(panel, values)
    # points would hide the dashes in the legend: only lines of one dash get them
    dashed = "strokeDash" in encoding
    spec["mark"] = {"type": "line", "point": not dashed and {"size": 18}, "strokeWidth": 1.5}
    spec["encoding"] = encoding
    return spec


def _bars(panel: Panel, rows: Sequence[Row]) -> Spec:
    """Bars in the query's order of its category; several values stacked (or side by side
    when the panel does not stack them)."""
    values = _long(rows, panel, panel.values)
    categories = _unique([str(r["x"]) for r in values])
    y = _value_axis(panel, stack=bool(panel.stacked))
    if _skewed(rows, panel):
        y["scale"] = {"type": "log"}
        y["axis"] = {"format": "~s", "tickCount": 4}
        y["title"] = f"{y['title']} (log scale)"
    encoding: Spec = {
        "x": {
            "field": "x",
            "type": "ordinal",
            "title": label(panel.x or ""),
            "sort": categories,
            "axis": {"labelAngle": 0 if len(categories) <= 4 else -35, "labelLimit": 120},
        },
        "y": y,
        "tooltip": _tooltip(("x", "nominal"), ("label", "nominal"), ("value", "quantitative")),
    }
    if len(panel.values) > 1:
        encoding["color"] = _colour([figure_name(c) for c in panel.values])
        if not panel.stacked:
            encoding["xOffset"] = {"field": "label"}
    else:
        encoding["color"] = {"value": PALETTE[0]}
    spec = _base(panel, values)
    bars: Spec = {"mark": {"type": "bar"}, "encoding": encoding}
    if len(panel.values) > 1:
        spec.update(bars)
        return spec
    counts: Spec = {  # one bar per category: its count above it
        "mark": {"type": "text", "dy": -6, "fontSize": 11, "color": "#333"},
        "encoding": {
            "x": encoding["x"],
            "y": encoding["y"],
            "text": {"field": "value", "type": "quantitative", "format": ","},
        },
    }
    spec["layer"] = [bars, counts]
    return spec


def _skewed(rows: Sequence[Row], panel: Panel) -> bool:
    """Whether the bars' totals span more than :data:`SKEWED` times."""
    totals = [
        sum(float(v) for c in panel.values if isinstance(v := row.get(c), int | float))
        for row in rows
    ]
    present = [t for t in totals if t > 0]
    return bool(present) and max(present) > SKEWED * min(present)


def _points(panel: Panel, rows: Sequence[Row]) -> Spec:
    """Each row a point at (x, the first value column), coloured by the first text column."""
    x = panel.x or panel.columns[0]
    y = next(c for c in panel.values if c != x)
    groups = [c for c in panel.columns if rows and isinstance(rows[0].get(c), str)]
    encoding: Spec = {
        "x": {"field": x, "type": "quantitative", "title": label(x)},
        "y": {"field": y, "type": "quantitative", "title": label(y)},
        "tooltip": [
            {"field": c, "type": "nominal" if c in groups else "quantitative"}
            for c in panel.columns
        ],
    }
    if groups:
        domain = _unique([str(row.get(groups[0])) for row in rows])
        encoding["color"] = {**_colour(domain), "field": groups[0]}
    spec = _base(panel, [dict(row) for row in rows])
    spec["mark"] = {"type": "point", "filled": True, "size": 36, "opacity": 0.8}
    spec["encoding"] = encoding
    return spec


def chart_spec(panel: Panel, rows: Sequence[Row]) -> Spec | None:
    """The Vega-Lite spec drawing ``rows`` as ``panel`` says; ``None`` for a table or a stat."""
    if panel.kind == "timeseries":
        return _stacked_time(panel, rows) if panel.stacked else _time_lines(panel, rows)
    if panel.kind == "barchart":
        return _bars(panel, rows)
    if panel.kind == "xychart":
        return _points(panel, rows)
    return None
