"""What ``otel-llm tune`` prints: the data it used, the baseline, the frontier and the
recommendation with its configuration lines (``table``), or one JSON document (``json``)."""

from __future__ import annotations

import json
from typing import Final

from otel_llm._show._store._breakdown import Table
from otel_llm._tune._hedging_model import FAILED_S
from otel_llm._tune._replay import Figures
from otel_llm._tune._sample import (
    CANCELLED,
    FLOOR_ABOVE,
    HEDGE_LOSER,
    INCOMPLETE,
    NOT_STREAMED,
    RULE,
    recording_advice,
)
from otel_llm._tune._tuning import Setting, Tuning
from otel_llm._visible import visible
from otel_llm.cli._render import Output

TUNE_NOT_ENOUGH_EXIT: Final = 3
"""Exit code of ``otel-llm tune`` when it recommends nothing — the data are too few, every
replayed call failed, or no setting keeps within the budget (errors exit 2)."""


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return "failed" if value >= FAILED_S else f"{value:.2f}"


def _in_s(value: float) -> str:
    return "failed" if value >= FAILED_S else f"{value:.2f} s"


def _trigger(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


_COLUMNS: Final = (
    "first_token_s",
    "stall_s",
    "watchdog_s",
    "ratio",
    "p50_s",
    "p95_s",
    "p99_s",
    "req/call",
    "",
)


def _row(setting: Setting, marked: Setting | None) -> tuple[str, ...]:
    rules, f = setting.rules, setting.figures
    return (
        _trigger(rules.after_s),
        _trigger(rules.stall_after_s),
        _trigger(rules.watchdog_s),
        f"{rules.ratio:g}" if rules.hedging else "-",
        _seconds(f.p50_s),
        _seconds(f.p95_s),
        _seconds(f.p99_s),
        f"{f.requests_per_call:.3f}",
        "<- recommended" if setting is marked else "",
    )


def _figures(figures: Figures) -> str:
    failed = f", {figures.failed_share:.1%} of calls failed" if figures.failed_share else ""
    return (
        f"p50 {_in_s(figures.p50_s)}, p95 {_in_s(figures.p95_s)}, "
        f"p99 {_in_s(figures.p99_s)}, {figures.requests_per_call:.3f} requests per call" + failed
    )


def data_lines(tuning: Tuning) -> list[str]:
    """How much data the run used, in words."""
    s = tuning.sample
    left = s.left_out
    scope = f"source {visible(s.source)}" if s.source else "all sources"
    if tuning.service is not None:
        scope += f" of service {visible(tuning.service)}"
    capped = (
        f" (the newest {tuning.max_calls:,} of {s.calls_in_range:,} calls in the range)"
        if s.calls_in_range > tuning.max_calls
        else ""
    )
    sources = ", ".join(f"{visible(name)} {count:,}" for name, count in sorted(s.sources.items()))
    return [
        f"Data: {s.calls:,} calls replayed through their first attempt ({scope}){capped}; "
        f"{s.attempts_used:,} usable attempts ({sources or 'none'}).",
        f"Left out: {s.censored:,} censored attempts (hedge losers {left.get(HEDGE_LOSER, 0):,}, "
        f"cancelled {left.get(CANCELLED, 0):,}), {left.get(INCOMPLETE, 0):,} with incomplete "
        f"metering, {left.get(NOT_STREAMED, 0):,} not streamed, {left.get(FLOOR_ABOVE, 0):,} "
        "with a chunk-event floor above the common one; "
        f"{left.get('calls_left_out', 0):,} calls whose first attempt is not usable"
        + (
            " (a hedge's losing primary is usually the slow one: leaving such calls out makes "
            "the replay optimistic; tune is most faithful on unhedged traffic)."
            if left.get("calls_left_out", 0) and left.get(HEDGE_LOSER, 0)
            else "."
        ),
        f"Chunk-event floor {s.floor_ms} ms (the one most attempts share): only gaps above it "
        "are known, so no trigger or watchdog at or below it is tried or recommended.",
        f"Rule: {'met' if s.enough else 'not met'} — {RULE}.",
        *([] if s.enough else [recording_advice(s)]),
        *(f"Note: {visible(note)}." for note in s.notes),
    ]


def render_table(tuning: Tuning, out: Output) -> None:
    """The human-readable report of ``tuning`` on ``out``."""
    write = out.stream.write
    write("\n".join(data_lines(tuning)) + "\n\n")
    baseline = tuning.baseline
    if baseline is None:
        write("No call to replay in the range.\n")
        out.stream.flush()
        return
    write(f"Baseline (unhedged, replayed): {_figures(baseline.figures)}\n")
    if tuning.recorded is not None:
        write(
            f"As recorded (the same calls):  {_figures(tuning.recorded)} (a failed call counts "
            "as failed in both)\n"
        )
    write(
        f"{len(tuning.settings)} settings replayed (seed {tuning.seed}); the frontier, no "
        "setting better on both p99 and requests:\n\n"
    )
    marked = tuning.recommendation
    rows = [_row(setting, marked) for setting in tuning.frontier]
    out.table(Table(_COLUMNS, rows), "Frontier")
    write("\n")
    if marked is None or tuning.config is None:
        write(f"No recommendation: {visible(tuning.verdict)}.\n")
        out.stream.flush()
        return
    if marked not in tuning.frontier:
        write(
            "Recommended (off the frontier: what beats it there has a budget ratio above "
            "budget - 1, so its hedge bucket would let hedges exceed the budget):\n"
        )
        out.table(Table(_COLUMNS, [_row(marked, marked)]))
    write(
        f"Recommended for --budget {tuning.budget:g} ({visible(tuning.verdict)}): "
        f"{_figures(marked.figures)}.\n"
    )
    if marked.figures.p99_interval_s is not None:
        low, high = marked.figures.p99_interval_s
        write(
            f"Its p99 rests on {tuning.sample.calls:,} recorded calls: another sample of as many "
            f"could put it anywhere in {_seconds(low)}–{_seconds(high)} s (95 % interval).\n"
        )
    if not tuning.config.env:
        write("Leave the hedge keys unset (hedging off).\n")
    else:
        write("Environment:\n" + "".join(f"  {line}\n" for line in tuning.config.env))
        if tuning.config.client_kwargs or tuning.config.source_kwargs:
            write("Or in code:\n")
        if tuning.config.client_kwargs:
            args = ", ".join(f"{k}={v}" for k, v in tuning.config.client_kwargs.items())
            write(f"  Client(sources, {args})\n")
        if tuning.config.source_kwargs:
            args = ", ".join(f"{k}={v}" for k, v in tuning.config.source_kwargs.items())
            write(f"  Source(..., {args})  # every source\n")
    out.stream.flush()


def render_json(tuning: Tuning, out: Output) -> None:
    """``tuning`` as one JSON document on ``out``."""
    out.stream.write(json.dumps(tuning.as_json(), indent=2, allow_nan=False) + "\n")
    out.stream.flush()
