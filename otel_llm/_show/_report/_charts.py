"""The Vega-Lite specification of every chart of ``otel-llm report``, from a panel
(:class:`~otel_llm._show._dashboards._panels.Panel`) and the rows its SQL returned.

Pure functions of the panel's metadata and the range (:class:`Frame`): its kind draws the mark
(a time series as lines broken at empty buckets, or as a step area stacked by
:attr:`Panel.stacked`, zero at empty buckets, with the other values drawn as a line over it;
a bar chart as bars, stacked when the panel says so; an xy chart as points), its unit names
the axis. The rows are inlined into the spec (a panel returns at most a few hundred aggregated
rows), reshaped to one row per plotted value. Tables and stats are not charts
(:func:`chart_spec` returns ``None``): the report writes them as HTML.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from otel_llm._show._dashboards._panels import SERIES, TIME, Panel
from otel_llm._visible import visible

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
"""A bar chart whose largest bar is this many times its smallest non-empty one is drawn on a
(symmetric) log scale, so the small bars stay visible (the axis says so; its zero values are
left out, its values side by side)."""
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


@dataclass(frozen=True, slots=True)
class Frame:
    """The range a time chart covers and its bucket, in epoch milliseconds."""

    start_ms: int
    end_ms: int
    step_ms: int

    def buckets(self, times: Sequence[int]) -> list[int]:
        """Every bucket of the range, aligned on the buckets the query returned (``times``):
        from the one holding the start to the one holding the end."""
        if not times or self.step_ms <= 0:
            return sorted(set(times))
        origin, step = min(times), self.step_ms
        first = origin + ((self.start_ms - origin) // step) * step
        last = origin + ((self.end_ms - origin) // step) * step
        found = range(first, max(first, last) + 1, step)
        return sorted({*found, *times})


TICK_STEPS: Final = (
    ("second", 1_000, (1, 2, 5, 10, 15, 30), "%H:%M:%S"),
    ("minute", 60_000, (1, 2, 5, 10, 15, 30), "%H:%M"),
    ("hour", 3_600_000, (1, 2, 3, 6, 12), "%d %b %H:%M"),
    ("day", 86_400_000, (1, 2, 7, 14), "%d %b"),
)
"""The tick intervals of a time axis, finest first, with the label format each needs: a
label always names a whole second or more (never ``.500``)."""
MAX_TICKS: Final = 8


def time_ticks(span_ms: int) -> tuple[int, int, str]:
    """For a time axis ``span_ms`` long: how many ticks, the least step between two (ms) and
    the label format — the finest step of :data:`TICK_STEPS` giving at most
    :data:`MAX_TICKS` steps (Vega may draw one tick more, at both ends), so that no two labels
    of a range shorter than a year read the same."""
    for _, unit_ms, steps, fmt in TICK_STEPS:
        for step in steps:
            every = unit_ms * step
            if span_ms / every <= MAX_TICKS:
                return max(2, int(span_ms // every)), every, fmt
    _, unit_ms, _, fmt = TICK_STEPS[-1]
    every = unit_ms * max(1, -(-span_ms // (unit_ms * MAX_TICKS)))
    return MAX_TICKS, every, fmt


_VEGA_UNITS: Final = {"second": "seconds", "minute": "minutes", "hour": "hours", "day": "day"}
"""Vega's names of the time units of :data:`TICK_STEPS` (vega-time's)."""


def tick_interval(every_ms: int) -> Spec | None:
    """A tick step of :data:`TICK_STEPS` as Vega's time interval (``{"interval": "minutes",
    "step": 15}``), which puts ticks on whole units of the (UTC) scale only; a step of 7 or 14
    days as weeks (days of the month would not be evenly apart). ``None`` for a longer step,
    which Vega picks itself from a count."""
    for unit, unit_ms, steps, _ in TICK_STEPS:
        for step in steps:
            if unit_ms * step == every_ms:
                if unit == "day" and step % 7 == 0:
                    return {"interval": "week", "step": step // 7}
                return {"interval": _VEGA_UNITS[unit], "step": step}
    return None


def _time_axis(frame: Frame | None, last_ms: int | None = None) -> Spec:
    """The x axis of a time chart: the whole range (to the end of its last bucket), ticks
    and labels for its length, in UTC."""
    axis: Spec = {"labelOverlap": True, "grid": False}
    scale: Spec = {"type": "utc"}
    if frame is not None:
        end = max(frame.end_ms, (last_ms or frame.end_ms) + frame.step_ms)
        scale["domain"] = [frame.start_ms, end]
        scale["nice"] = False
        count, every, axis["format"] = time_ticks(end - frame.start_ms)
        # a time interval where there is one, not a count: Vega reads a count as "about N
        # ticks" and picked half seconds on a one-second range, labelling 12:00:00.5 "12:00:00"
        axis["tickCount"] = tick_interval(every) or count
        axis["tickMinStep"] = every
    return {
        "field": TIME,
        "type": "temporal",
        "title": "started (UTC)",
        "scale": scale,
        "axis": axis,
    }


LEAST_TOP: Final = {"s": 0.001}
"""The top of the value axis of a chart whose values are all 0, by unit (else 1: one call, one
percent): it still runs from 0 up, not from 0 to 0, which Vega draws half-way up the chart,
where a 0 reads as some share."""


def _value_axis(
    panel: Panel, *, stack: bool = False, points: Sequence[Mapping[str, Any]] = ()
) -> Spec:
    axis: Spec = {
        "field": "value",
        "type": "quantitative",
        "title": UNIT_TITLES.get(panel.unit, panel.unit),
    }
    values = [p.get("value") for p in points]
    if points and not any(isinstance(v, int | float) and v > 0 for v in values):
        axis["scale"] = {"domain": [0, LEAST_TOP.get(panel.unit, 1)]}
    if not stack:
        axis["stack"] = None
    return axis


def _unscaled(axis: Spec) -> Spec:
    """``axis`` for a layer after the first: the layers share the scale the first sets (one
    set in two layers is a conflict Vega-Lite warns about, even when they agree)."""
    return {k: v for k, v in axis.items() if k != "scale"}


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
        series = visible(str(row.get(SERIES)))
        return f"{series} · {figure_name(column)}" if several else series
    return figure_name(column)


def _long(rows: Sequence[Row], panel: Panel, columns: Sequence[str]) -> list[dict[str, Any]]:
    """One row per (row, value column): its x, its legend entry, its value."""
    timed = TIME in panel.columns
    key = TIME if timed else panel.x or ""
    return [
        {
            TIME if timed else "x": _shown(row.get(key)),
            "label": _labelled(row, column, panel),
            "figure": figure_name(column),
            "series": visible(str(row.get(SERIES, ""))),
            "value": row.get(column),
        }
        for row in rows
        for column in columns
    ]


def _shown(value: Any) -> Any:
    """A value as a chart holds it: text from the store as :func:`visible` shows it (a raw line
    separator in a category or legend entry is a syntax error in the expression Vega compiles
    its sort order into, and the chart is not drawn), anything else as it is."""
    return visible(value) if isinstance(value, str) else value


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _filled(
    points: list[dict[str, Any]], frame: Frame | None, fill: float | None, *, close: bool
) -> list[dict[str, Any]]:
    """``points`` with a point of value ``fill`` for each empty bucket of the range beside a
    bucket a line has a value for (0 where the value is a sum, so an empty bucket reads as
    nothing; ``None`` where it is a statistic, so the line breaks instead of bridging the gap);
    for a sum also at the range's first and last bucket, so the line spans the range; and, with
    ``close``, one at the end of the last bucket (a step drawn after its point then ends where
    its bucket ends instead of running on). A line holds or breaks over the other empty
    buckets all the same, so they are left out: the page then grows with the values, not with
    lines × buckets (1,000 source/models over 120 buckets are 360,000 points)."""
    if frame is None or not points:
        return points
    times = [int(p[TIME]) for p in points if isinstance(p.get(TIME), int | float)]
    buckets = frame.buckets(times)
    if close and buckets:
        buckets = [*buckets, buckets[-1] + frame.step_ms]
    place = {bucket: index for index, bucket in enumerate(buckets)}
    ends = {buckets[0], buckets[-1]} if fill is not None and buckets else set()
    filled = list(points)
    by_label: dict[str, dict[int, dict[str, Any]]] = {}
    for point in points:
        if isinstance(point.get(TIME), int | float):
            by_label.setdefault(point["label"], {})[int(point[TIME])] = point
    for seen in by_label.values():
        model = next(iter(seen.values()))
        beside = set(ends)
        for time in seen:
            index = place[time]
            beside.update(buckets[max(0, index - 1) : index + 2])
        filled += [{**model, TIME: b, "value": fill} for b in sorted(beside) if b not in seen]
    return sorted(filled, key=lambda p: (str(p["label"]), p.get(TIME) or 0))


def _last_bucket(points: Sequence[Mapping[str, Any]]) -> int | None:
    times = [int(p[TIME]) for p in points if isinstance(p.get(TIME), int | float)]
    return max(times, default=None)


def _tooltip(*fields: tuple[str, str]) -> list[Spec]:
    tips: list[Spec] = []
    for field, kind in fields:
        tip: Spec = {"field": field, "type": kind}
        if kind == "temporal":
            tip["timeUnit"] = "utcyearmonthdatehoursminutesseconds"
            tip["format"] = "%Y-%m-%d %H:%M:%S"
        tips.append(tip)
    return tips


_ORDER: Final = {"field": "order", "type": "quantitative", "sort": "ascending"}
"""A stack's order: by :func:`_order`'s field, the first at the bottom."""


def _order(labels: Sequence[str]) -> Spec:
    """The transform numbering each row by its label's place in ``labels`` (Vega-Lite's own
    stack order runs from the end of the colour domain: the first value on top)."""
    return {"calculate": f"indexof({json.dumps(list(labels))}, datum.label)", "as": "order"}


def _stacked_time(panel: Panel, rows: Sequence[Row], frame: Frame | None) -> Spec:
    """An area per stacked value and series, the other values summed over the series and
    drawn as a dashed line over the stack (its top, when they add up); each bucket drawn as a
    step as wide as the bucket, an empty bucket as zero."""
    last = _last_bucket(rows)
    stacked = _filled(_long(rows, panel, panel.stacked), frame, 0.0, close=True)
    overlay_columns = [c for c in panel.values if c not in panel.stacked]
    totals: dict[tuple[object, str], float] = {}
    for row in rows:
        for column in overlay_columns:
            value = row.get(column)
            if isinstance(value, int | float):
                key = (row.get(TIME), column)
                totals[key] = totals.get(key, 0.0) + float(value)
    overlay = _filled(
        [
            {TIME: t, "label": figure_name(c), "figure": figure_name(c), "value": v}
            for (t, c), v in totals.items()
        ],
        frame,
        0.0,
        close=True,
    )
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
            # the first of the stacked values at the bottom (Vega-Lite's own order would stack
            # the colour domain from its end, the stall under the net generation)
            _order(stacked_labels),
        ],
        "mark": {"type": "area", "opacity": 0.85, "interpolate": "step-after", "clip": True},
        "encoding": {
            "x": _time_axis(frame, last),
            "y": {**_value_axis(panel, stack=True, points=[*stacked, *overlay]), "stack": "zero"},
            "color": _colour(domain, colours),
            "order": _ORDER,
            "tooltip": tooltip,
        },
    }
    line: Spec = {
        "transform": [{"filter": {"field": "label", "oneOf": overlay_labels}}],
        "mark": {
            "type": "line",
            "clip": True,
            "strokeDash": [6, 3],
            "strokeWidth": 1.5,
            "interpolate": "step-after",
        },
        "encoding": {
            "x": _time_axis(frame, last),
            "y": _unscaled(_value_axis(panel)),
            "color": _colour(domain, colours),
            "tooltip": tooltip,
        },
    }
    spec["layer"] = [area, line] if overlay_labels else [area]
    return spec


def _time_lines(panel: Panel, rows: Sequence[Row], frame: Frame | None) -> Spec:
    """A line per series (colour) and value column (dash when there are several of both),
    broken where a bucket has no value (a statistic of no call is no value, not zero)."""
    values = _filled(_long(rows, panel, panel.values), frame, None, close=False)
    with_series = SERIES in panel.columns
    several = len(panel.values) > 1
    encoding: Spec = {
        "x": _time_axis(frame, _last_bucket(rows)),
        "y": _value_axis(panel, points=values),
    }
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
    # points would hide the dashes in the legend: only lines of one dash get them
    dashed = "strokeDash" in encoding
    line: Spec = {
        "mark": {
            "type": "line",
            "clip": True,  # the first bucket may begin before the range
            "point": not dashed and {"size": 18},
            "strokeWidth": 1.5,
            "invalid": "break-paths-show-domains",
        },
        "encoding": encoding,
    }
    values = _mark_alone(values)
    spec = _base(panel, values)
    if not any(ALONE in v for v in values):
        spec.update(line)
        return spec
    # A value with no neighbour is a line of one vertex, which draws nothing (and a line's own
    # point at the range's first bucket, on the plot's edge, is half clipped away): a point of
    # its own, unclipped (a bucket that began before the range is at most one bucket out).
    alone: Spec = {
        "transform": [{"filter": {"field": ALONE, "equal": True}}],
        "mark": {"type": "point", "filled": True, "size": 24, "opacity": 1},
        "encoding": {
            **{k: v for k, v in encoding.items() if k != "strokeDash"},
            "y": _unscaled(encoding["y"]),
        },
    }
    spec["layer"] = [line, alone]
    return spec


ALONE: Final = "alone"
"""Marks a value of a line whose neighbouring buckets have none (so no line reaches it)."""


def _mark_alone(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``points`` (every gap in a line a ``None`` value) with :data:`ALONE` set on each value
    that has no value just before or after it in its line (its label, in time order)."""
    lines: dict[str, list[int]] = {}
    for index, point in enumerate(points):
        lines.setdefault(str(point["label"]), []).append(index)
    marked = list(points)
    for indexes in lines.values():
        indexes.sort(key=lambda i: points[i].get(TIME) or 0)
        for at, index in enumerate(indexes):
            if points[index]["value"] is None:
                continue
            neighbours = indexes[max(0, at - 1) : at] + indexes[at + 1 : at + 2]
            if all(points[i]["value"] is None for i in neighbours):
                marked[index] = {**points[index], ALONE: True}
    return marked


def _bars(panel: Panel, rows: Sequence[Row]) -> Spec:
    """Bars in the query's order of its category; several values stacked (or side by side
    when the panel does not stack them, or the scale is logarithmic: a stack on a log scale
    has no bottom, and would draw nothing)."""
    values = _long(rows, panel, panel.values)
    categories = _unique([str(r["x"]) for r in values])
    log = _skewed(rows, panel)
    stack = bool(panel.stacked) and not log
    y = _value_axis(panel, stack=stack, points=values)
    if log:
        values = [v for v in values if isinstance(v["value"], int | float) and v["value"] > 0]
        top = _power_above(max(float(v["value"]) for v in values))
        powers = [0, *(10**k for k in range(len(str(top))))]
        # symmetric log: log(1) is 0, so on a log scale a bar of 1 would have no height
        y["scale"] = {"type": "symlog", "domain": [0, top]}
        y["axis"] = {"format": ",.0f", "formatType": "number", "values": powers}
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
    bars: Spec = {"mark": {"type": "bar"}, "encoding": encoding}
    if len(panel.values) > 1:
        figures = [figure_name(c) for c in panel.values]
        encoding["color"] = _colour(figures)
        if stack:  # the first value at the bottom, as Grafana stacks them
            bars["transform"] = [_order(figures)]
            encoding["order"] = _ORDER
        else:
            encoding["xOffset"] = {"field": "label", "sort": figures}
    else:
        encoding["color"] = {"value": PALETTE[0]}
    spec = _base(panel, values)
    if len(panel.values) > 1:
        spec.update(bars)
        return spec
    counts: Spec = {  # one bar per category: its count above it
        "mark": {"type": "text", "dy": -6, "fontSize": 11, "color": "#333"},
        "encoding": {
            "x": encoding["x"],
            "y": _unscaled(encoding["y"]),
            "text": {"field": "value", "type": "quantitative", "format": ","},
        },
    }
    spec["layer"] = [bars, counts]
    return spec


def _power_above(value: float) -> int:
    """The least power of ten at or above ``value`` (at least 10)."""
    power = 10
    while power < value:
        power *= 10
    return power


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
    rows = [{column: _shown(value) for column, value in row.items()} for row in rows]
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


def chart_spec(panel: Panel, rows: Sequence[Row], frame: Frame | None = None) -> Spec | None:
    """The Vega-Lite spec drawing ``rows`` as ``panel`` says, a time series over ``frame``
    (``None``: over its rows); ``None`` for a table or a stat."""
    if panel.kind == "timeseries":
        if panel.stacked:
            return _stacked_time(panel, rows, frame)
        return _time_lines(panel, rows, frame)
    if panel.kind == "barchart":
        return _bars(panel, rows)
    if panel.kind == "xychart":
        return _points(panel, rows)
    return None
