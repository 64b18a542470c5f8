"""The report's "What hedging would buy" panel: ``otel-llm tune`` on the report's range.

The store's own attempts replayed through the hedging model (:mod:`otel_llm._tune._tuning`):
the frontier's p99 and p50 wall time of a call against the extra requests each setting costs,
the recommended point for the default budget marked, and the configuration to paste — or, when
the range holds too little data, the refusal and the rule. Grafana has no such panel: it is
computed in Python, not SQL.
"""

from __future__ import annotations

import html
from typing import Any, Final

from otel_llm._show._report._charts import PALETTE, SCHEMA, Spec
from otel_llm._tune._replay import Figures, seconds_json
from otel_llm._tune._sample import RULE, recording_advice
from otel_llm._tune._tuning import Setting, Tuning, recommend

KEY: Final = "hedging_frontier"
TITLE: Final = "What hedging would buy"
DESCRIPTION: Final = (
    "The calls of this range replayed through the hedging model of otel-llm tune: each call "
    "meets its own recorded first attempt, hedge and retry legs are drawn from the other "
    "sources' recorded attempts, under the client's rules (one hedge per round, the hedge "
    "budget). Each point is a setting no other beats on both p99 and requests (the frontier): "
    "its p99 and p50 wall time of a call against the extra requests it costs; the ringed point "
    "is the recommendation for the budget. Censored attempts (hedge losers, cancelled calls) "
    "and attempts with incomplete metering are left out."
)
RECOMMENDED: Final = "recommended"
NO_CALLS: Final = "no streamed call to replay in this range"
FIGURES: Final = (("p99_s", "p99"), ("p50_s", "p50"))


def setting_label(setting: Setting) -> str:
    """A setting in a few words (``stall 4 s · first token 2.5 s · ratio 0.25``)."""
    rules = setting.rules
    parts = []
    if rules.stall_after_s is not None:
        parts.append(f"stall {rules.stall_after_s:g} s")
    if rules.after_s is not None:
        parts.append(f"first token {rules.after_s:g} s")
    if rules.watchdog_s is not None:
        parts.append(f"watchdog {rules.watchdog_s:g} s")
    if rules.hedging:
        parts.append(f"ratio {rules.ratio:g}")
    else:
        parts.insert(0, "unhedged")
    return " · ".join(parts)


def frontier_rows(tuning: Tuning) -> list[dict[str, Any]]:
    """One row per frontier setting and figure: extra requests (%), the figure, its seconds."""
    rows = []
    for setting in tuning.frontier:
        extra = round((setting.figures.requests_per_call - 1.0) * 100, 2)
        for column, figure in FIGURES:
            seconds = seconds_json(getattr(setting.figures, column))
            if seconds is None:  # the figure falls on a failed call: no time to plot
                continue
            rows.append(
                {
                    "extra_requests_pct": extra,
                    "figure": figure,
                    "seconds": seconds,
                    "setting": setting_label(setting),
                    RECOMMENDED: setting is tuning.recommendation,
                }
            )
    return rows


def frontier_spec(tuning: Tuning, height: int = 260) -> Spec:
    """Lines and points of p99 and p50 against extra requests; the recommendation ringed."""
    rows = frontier_rows(tuning)
    figures = [figure for _, figure in FIGURES]
    colour = {
        "field": "figure",
        "type": "nominal",
        "title": None,
        "sort": figures,
        "scale": {"domain": figures, "range": list(PALETTE[: len(figures)])},
    }
    x = {
        "field": "extra_requests_pct",
        "type": "quantitative",
        "title": "extra requests (% of calls)",
    }
    y = {"field": "seconds", "type": "quantitative", "title": "wall time of a call (s)"}
    tooltip = [
        {"field": "setting", "type": "nominal"},
        {"field": "figure", "type": "nominal"},
        {"field": "seconds", "type": "quantitative", "format": ".2f"},
        {"field": "extra_requests_pct", "type": "quantitative", "format": ".1f"},
    ]
    layers: list[Spec] = [
        {
            "mark": {"type": "line", "point": {"size": 40}, "strokeWidth": 1.5},
            "encoding": {"x": x, "y": y, "color": colour, "tooltip": tooltip},
        },
        {
            "transform": [{"filter": {"field": RECOMMENDED, "equal": True}}],
            "mark": {"type": "point", "size": 260, "strokeWidth": 2.5, "color": "#222222"},
            "encoding": {"x": x, "y": y, "tooltip": tooltip},
        },
        {
            "transform": [
                {"filter": {"field": RECOMMENDED, "equal": True}},
                {"filter": {"field": "figure", "equal": "p99"}},
            ],
            "mark": {"type": "text", "dy": -16, "fontSize": 11, "color": "#222222"},
            "encoding": {"x": x, "y": y, "text": {"value": RECOMMENDED}},
        },
    ]
    return {
        "$schema": SCHEMA,
        "width": "container",
        "height": height,
        "autosize": {"type": "fit-x", "contains": "padding"},
        "data": {"values": rows},
        "config": {
            "legend": {"orient": "bottom"},
            "axis": {"labelFontSize": 11, "titleFontSize": 11},
            "view": {"stroke": None},
        },
        "layer": layers,
    }


def _data_text(tuning: Tuning) -> str:
    s = tuning.sample
    capped = (
        f" (the newest {tuning.max_calls:,} of {s.calls_in_range:,})"
        if s.calls_in_range > tuning.max_calls
        else ""
    )
    notes = "".join(f" <b>Note:</b> {html.escape(note)}." for note in s.notes)
    return (
        f"Data: <b>{s.calls:,}</b> calls{capped}, {s.attempts_used:,} usable attempts; "
        f"{s.censored:,} censored attempts left out; chunk-event floor {s.floor_ms} ms (no "
        f"trigger at or below it is tried).{notes}"
    )


def _recommendation_text(tuning: Tuning) -> str:
    chosen, config = tuning.recommendation, tuning.config
    baseline = tuning.baseline
    if chosen is None or config is None or baseline is None:
        return f"<p>No recommendation: {html.escape(tuning.verdict)}.</p>"
    f, b = chosen.figures, baseline.figures
    lines = "\n".join(config.env) or "(leave the hedge keys unset)"
    return (
        f"<p>Recommended for {tuning.budget:g} requests per call: "
        f"<b>{html.escape(setting_label(chosen))}</b> — p99 {_at(f.p99_s)} (unhedged "
        f"{_at(b.p99_s)}), p50 {_at(f.p50_s)}, {f.requests_per_call:.3f} requests per call."
        f"</p><pre><code>{html.escape(lines)}</code></pre>"
    )


def _interval(figures: Figures) -> str:
    interval = figures.p99_interval_s
    if interval is None:
        return ""
    low, high = interval
    if seconds_json(low) is None:  # both ends on failed calls: no time at all
        return " (95 % interval: failed calls at both ends)"
    if seconds_json(high) is None:  # an end on a failed call is no time
        return f" (95 % interval {_s(low)} to a failed call)"
    return f" (95 % interval {low:.2f}–{high:.2f} s)"


def _s(value: float) -> str:
    """A wall time as the page says it: in seconds, or "failed" where it falls on a failed
    call (the replay's stand-in for one is no time)."""
    shown = seconds_json(value)
    return "failed" if shown is None else f"{shown:.2f} s"


def _at(value: float) -> str:
    """Where a percentile falls, as a sentence says it: ``at 2.02 s``, or ``on a failed call``
    (old: "the p99 at failed")."""
    return "on a failed call" if seconds_json(value) is None else f"at {_s(value)}"


def _estimate_text(tuning: Tuning) -> str:
    """Below the rule: what the replay says all the same, with the p99's sampling interval,
    labelled an estimate and no setting to paste (empty when nothing was replayed)."""
    baseline = tuning.baseline
    if baseline is None:
        return ""
    b = baseline.figures
    text = (
        f"<b>Estimate, not a recommendation</b> ({tuning.sample.calls:,} calls): the replay "
        f"puts the unhedged p99 {_at(b.p99_s)}{_interval(b)}"
    )
    best = recommend(tuning.settings, tuning.budget)
    if best is not None and best.rules.hedging:
        f = best.figures
        hedged, unhedged = f.p99_interval_s, b.p99_interval_s
        overlap = hedged is not None and unhedged is not None and hedged[1] >= unhedged[0]
        text += (
            f"; the best setting within {tuning.budget:g} requests per call, "
            f"{html.escape(setting_label(best))}, {_at(f.p99_s)}{_interval(f)}, "
            f"{f.requests_per_call:.3f} requests per call"
        )
        text += (
            ". The intervals overlap: on this few calls the difference may be noise."
            if overlap
            else "."
        )
    else:
        text += "; no hedge setting within the budget beats it on these calls."
    return f'<p class="estimate">{text}</p>'


def hedging_section(tuning: Tuning | None, specs: dict[str, Any], error: str | None = None) -> str:
    """The panel's HTML; its chart's spec goes into ``specs`` (none when it refuses). ``error``:
    why tune could not run on the range (the panel shows it instead of a chart)."""
    rows = len(tuning.frontier) if tuning is not None and tuning.sample.enough else 0
    head = (
        f'<section class="panel w24" id="panel-{KEY}" data-key="{KEY}" data-kind="xychart" '
        f'data-rows="{rows}"><h2>{TITLE}</h2>'
        f'<p class="description">{html.escape(DESCRIPTION)}</p>'
    )
    if error is not None:
        return (
            f'{head}<p class="no-data">otel-llm tune could not run on this range: '
            f"{html.escape(error)}</p></section>"
        )
    if tuning is None:
        return f'{head}<p class="no-data">{NO_CALLS}</p></section>'
    data = f'<p class="chosen-call">{_data_text(tuning)}</p>'
    if not tuning.sample.enough:
        refusal = html.escape("; ".join(tuning.sample.problems))
        return (
            f'{head}{data}<p class="no-data">Too little data to say what hedging would buy '
            f"({refusal}): otel-llm tune recommends only from {html.escape(RULE)}. "
            f"{html.escape(recording_advice(tuning.sample))}</p>{_estimate_text(tuning)}"
            "</section>"
        )
    specs[KEY] = frontier_spec(tuning)
    return (
        f'{head}{data}<div class="chart" id="chart-{KEY}"></div>'
        f"{_recommendation_text(tuning)}</section>"
    )
