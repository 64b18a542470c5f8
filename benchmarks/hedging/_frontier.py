"""The hedging frontier: the settings no other beats on both p99 and requests, and its picture.

:func:`frontier` picks the non-dominated rows; :func:`frontier_spec` draws p99 over the oracle's
against extra requests per call (requests per call − 1) as a Vega-Lite spec — the model's grid
as points, the frontier as a line through its non-dominated ones, and the client benchmark's
settings (``hedging_tail_latency.py --json``) measured beside the model's replay of the same
draws — and :func:`write_png` renders it with vl-convert, the library ``otel-llm report`` draws
its charts with (``vl_convert.vegalite_to_png``, no browser).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import vl_convert

from otel_llm._show._report._charts import PALETTE, SCHEMA

T = TypeVar("T")

Point = tuple[str, float, float]
"""(setting, requests per call, p99 over the oracle's p99)."""

MODEL_GRID = "model, full grid"
MODEL_FRONTIER = "model frontier"
CLIENT = "client, measured"
CLIENT_MODEL = "model, the client's draws"
SERIES = (MODEL_GRID, MODEL_FRONTIER, CLIENT_MODEL, CLIENT)
COLOURS = ("#bab0ac", PALETTE[0], PALETTE[1], PALETTE[3])


def frontier(rows: Sequence[T], key: Callable[[T], tuple[float, float]]) -> list[T]:
    """The rows no other row beats on both figures of ``key`` (requests, p99), by requests:
    each has a lower p99 than every row with fewer or as many requests."""
    ordered = sorted(rows, key=key)
    kept: list[T] = []
    for row in ordered:
        if not kept or key(row)[1] < key(kept[-1])[1]:
            kept.append(row)
    return kept


def load_client_rows(path: str | Path) -> list[tuple[Point, Point]]:
    """(measured, model) points of every row of a client benchmark's ``--json`` file, both over
    the scripted oracle's p99 (so the two differ exactly as their p99s do)."""
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    pairs = []
    for row in document["rows"]:
        client, model, oracle = row["client"], row["model"], row["model_oracle_p99"]
        pairs.append(
            (
                (row["name"], client["requests"], client["p99"] / oracle),
                (row["name"], model["requests"], model["p99"] / oracle),
            )
        )
    return pairs


def save_grid_points(points: Sequence[Point], path: str | Path) -> None:
    """The model grid's points as JSON (what :func:`load_grid_points` reads)."""
    rows = [
        {"name": name, "requests": requests, "p99_ratio": ratio} for name, requests, ratio in points
    ]
    Path(path).write_text(json.dumps({"rows": rows}, indent=1) + "\n", encoding="utf-8")


def load_grid_points(path: str | Path) -> list[Point]:
    """The points :func:`save_grid_points` wrote."""
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    return [(row["name"], row["requests"], row["p99_ratio"]) for row in document["rows"]]


def spaced(points: Sequence[Point], extra: float = 0.04, ratio: float = 1.1) -> list[Point]:
    """The points worth a label: each at least ``extra`` requests per call right of, or
    ``ratio`` times below, the last labelled one (``points`` by requests)."""
    kept: list[Point] = []
    for point in points:
        if not kept or point[1] - kept[-1][1] >= extra or kept[-1][2] / point[2] >= ratio:
            kept.append(point)
    return kept


def _value(series: str, point: Point, label: str = "") -> dict[str, Any]:
    name, requests, ratio = point
    return {
        "series": series,
        "setting": name,
        "extra": round(requests - 1.0, 6),
        "ratio": round(ratio, 6),
        "label": label,
    }


def frontier_spec(
    grid: Sequence[Point], client: Sequence[tuple[Point, Point]], title: str | None = None
) -> dict[str, Any]:
    """The picture: the model's ``grid`` points and frontier, the client's (measured, model)
    pairs."""
    best = frontier(grid, key=lambda point: (point[1], point[2]))
    named = set(spaced(best))
    values = [_value(MODEL_GRID, point) for point in grid]
    values += [_value(MODEL_FRONTIER, point, point[0] if point in named else "") for point in best]
    values += [_value(CLIENT_MODEL, model) for _, model in client]
    values += [
        _value(CLIENT, measured, str(number))
        for number, (measured, _) in enumerate(client, start=1)
    ]
    key = [f"{number} {measured[0]}" for number, (measured, _) in enumerate(client, start=1)]
    subtitle = [
        "+ the client's settings (1,000 calls), o the model on the same draws; "
        "all over the scripted oracle's p99",
        *("  ·  ".join(key[start : start + 6]) for start in range(0, len(key), 6)),
    ]
    colour = {
        "field": "series",
        "type": "nominal",
        "title": None,
        "scale": {"domain": list(SERIES), "range": list(COLOURS)},
    }
    x = {
        "field": "extra",
        "type": "quantitative",
        "title": "extra requests per call (requests per call − 1)",
        "axis": {"format": ".0%"},
    }
    y = {
        "field": "ratio",
        "type": "quantitative",
        "title": "p99 wall time / the oracle's p99 (log)",
        "scale": {"type": "log", "nice": False, "domain": [1.0, 16.0]},
        "axis": {"values": [1, 1.3, 1.5, 2, 3, 4, 6, 8, 12, 16]},
    }
    tooltip = [
        {"field": "series", "type": "nominal"},
        {"field": "setting", "type": "nominal"},
        {"field": "extra", "type": "quantitative", "format": ".1%"},
        {"field": "ratio", "type": "quantitative", "format": ".2f"},
    ]

    def only(*series: str) -> dict[str, Any]:
        return {"filter": {"field": "series", "oneOf": list(series)}}

    return {
        "$schema": SCHEMA,
        "title": {
            "text": title
            or "Hedging on the measured preset: p99 over the oracle's against extra requests",
            "subtitle": subtitle,
            "subtitleFontSize": 10,
        },
        "width": 760,
        "height": 460,
        "data": {"values": values},
        "encoding": {"x": x, "y": y, "color": colour, "tooltip": tooltip},
        "layer": [
            {
                "transform": [only(MODEL_GRID)],
                "mark": {"type": "point", "filled": True, "size": 30, "opacity": 0.7},
            },
            {
                "transform": [only(MODEL_FRONTIER)],
                "mark": {"type": "line", "point": {"filled": True, "size": 45}},
                "encoding": {"order": {"field": "extra", "type": "quantitative"}},
            },
            {
                "transform": [only(MODEL_FRONTIER)],
                "mark": {"type": "text", "align": "left", "dx": 6, "dy": -7, "fontSize": 9},
                "encoding": {"text": {"field": "label"}, "color": {"value": PALETTE[0]}},
            },
            {
                "transform": [only(CLIENT_MODEL)],
                "mark": {"type": "point", "shape": "circle", "size": 110, "strokeWidth": 1.5},
            },
            {
                "transform": [only(CLIENT)],
                "mark": {"type": "point", "shape": "cross", "filled": True, "size": 70},
            },
            {
                "transform": [only(CLIENT)],
                "mark": {
                    "type": "text",
                    "align": "right",
                    "dx": -6,
                    "dy": 9,
                    "fontSize": 10,
                    "fontWeight": "bold",
                },
                "encoding": {"text": {"field": "label"}, "color": {"value": COLOURS[3]}},
            },
        ],
        "config": {
            "legend": {"orient": "top-right", "labelFontSize": 11},
            "axis": {"labelFontSize": 11, "titleFontSize": 12},
            "view": {"stroke": None},
        },
    }


def write_png(spec: dict[str, Any], path: str | Path) -> None:
    """Render ``spec`` to a PNG file (twice the spec's pixels, for sharp text)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(vl_convert.vegalite_to_png(spec, scale=2))
