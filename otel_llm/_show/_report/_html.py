"""The page of ``otel-llm report``: a responsive grid of the panels, each with its title, its
figures' definitions and its chart, table or numbers; the chart specs and the Vega runtime
inline.

Every value that comes from the store (a model or source name, an error type, a trace id) is
HTML-escaped where it is written as HTML, and JSON in a ``<script>`` block has ``<``, ``>`` and
``&`` escaped as ``\\u003c`` …, so no value can close the block or start markup.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from otel_llm._errors import ConfigurationError, OtelLLMError
from otel_llm._extras import install_hint
from otel_llm._show._dashboards._panels import SERIES, Panel
from otel_llm._show._report._charts import Frame, chart_spec, label
from otel_llm._show._report._data import PanelResult, ReportData
from otel_llm._show._report._hedging import hedging_section
from otel_llm._show._sql._grafana_macros import format_interval
from otel_llm._show._sql._table import as_utc
from otel_llm._version import __version__
from otel_llm._visible import visible

NO_DATA: Final = "no data in this range"
SPECS_ID: Final = "otel-llm-specs"
"""The id of the JSON block holding every chart's spec, by panel key."""

GLOBALS: Final = "window.vegaEmbed=vegaEmbed;window.vega=vega;window.vegaLite=vegaLite;"
"""The bundle's snippet (``vl-convert``'s default): the libraries as globals, so the bundle
is a classic script, not a module."""

_CSS: Final = """
:root { color-scheme: light; --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--ink); background: #f6f8fa; }
header { padding: 16px 24px 8px; }
header, .panel { overflow-wrap: anywhere; }
h1 { font-size: 22px; margin: 0 0 4px; }
.meta { color: var(--muted); margin: 0; }
.meta b { color: var(--ink); font-weight: 600; }
.grid { display: grid; grid-template-columns: repeat(24, minmax(0, 1fr)); gap: 16px;
  padding: 8px 24px 24px; max-width: 1800px; margin: 0 auto; }
.panel { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 14px; min-width: 0; }
.w24 { grid-column: span 24; } .w12 { grid-column: span 12; } .w8 { grid-column: span 8; }
@media (max-width: 1100px) { .w8 { grid-column: span 12; } }
@media (max-width: 800px) { .w8, .w12 { grid-column: span 24; } }
h2 { font-size: 15px; margin: 0 0 2px; }
.description { color: var(--muted); font-size: 12.5px; margin: 0 0 8px; }
.chart { width: 100%; min-width: 0; }
.no-data { color: var(--muted); font-style: italic; padding: 24px 0; text-align: center; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px;
  font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--line);
  white-space: nowrap; }
th { color: var(--muted); font-weight: 600; }
td.number, th.number { text-align: right; }
tr.chosen td { background: #fff8c5; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
.stats { display: flex; flex-wrap: wrap; gap: 12px 28px; }
.stat { min-width: 110px; }
.stat .value { font-size: 28px; font-weight: 600; line-height: 1.1; }
.stat .name { color: var(--muted); font-size: 12px; }
.chosen-call { font-size: 12.5px; margin: 0 0 6px; }
.not-repeated { font-size: 12.5px; margin: 8px 0 0; }
"""

_RENDER: Final = """
(function () {
  var specs = JSON.parse(document.getElementById("SPECS_ID").textContent);
  Object.keys(specs).forEach(function (key) {
    var target = document.getElementById("chart-" + key);
    vegaEmbed(target, specs[key], { actions: false, renderer: "svg" }).then(
      function () { target.setAttribute("data-rendered", "true"); },
      function (error) {
        target.setAttribute("data-rendered", "error");
        target.textContent = "This chart could not be drawn: " + error;
        console.error("otel-llm report: chart " + key + ": " + error);
      });
  });
})();
""".replace("SPECS_ID", SPECS_ID)


def script_json(value: object) -> str:
    """``value`` as JSON safe inside a ``<script>`` element (no ``</script>``, no ``<!--``)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(raw, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


RUNTIME_EXTRA: Final = "report"
"""The extra that installs the charting runtime (``vl-convert-python``)."""


def check_runtime() -> None:
    """Raise :class:`ConfigurationError` unless the charting runtime is installed."""
    try:
        import vl_convert  # noqa: F401
    except ImportError:
        raise ConfigurationError(
            RUNTIME_EXTRA,
            "the report draws its charts with the Vega-Lite runtime of vl-convert-python, "
            f"which is not installed: {install_hint(RUNTIME_EXTRA)}",
        ) from None


def vega_runtime() -> str:
    """Vega, Vega-Lite and vega-embed as one classic script (``vl-convert-python``'s bundle,
    which sets ``window.vegaEmbed``)."""
    check_runtime()
    import vl_convert

    bundle: str = vl_convert.javascript_bundle(GLOBALS)
    lowered = bundle.lower()
    if "</script" in lowered or "<!--" in lowered:
        raise OtelLLMError("the Vega runtime cannot be inlined: it contains '</script' or '<!--'")
    return bundle


def _utc_text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def cell(value: object, column: str) -> str:
    """A value as a table shows it (escaped)."""
    if value is None:
        return "–"
    if isinstance(value, datetime):
        return _utc_text(as_utc(value))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        digits = 1 if column.endswith("_pct") else 3 if column.endswith("_s") else 2
        return f"{value:,.{digits}f}"
    return html.escape(str(value))


def _is_number(values: Sequence[object]) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in present
    )


def _table(result: PanelResult, chosen: str | None) -> str:
    columns = result.panel.columns
    numeric = [_is_number([row[i] for row in result.rows]) for i in range(len(columns))]
    head = "".join(
        f'<th class="number">{html.escape(label(c))}</th>'
        if numeric[i]
        else f"<th>{html.escape(label(c))}</th>"
        for i, c in enumerate(columns)
    )
    body = []
    trace = columns.index("trace_id") if "trace_id" in columns else None
    for row in result.rows:
        cells = "".join(
            f'<td class="number">{cell(v, c)}</td>'
            if numeric[i]
            else f"<td><code>{cell(v, c)}</code></td>"
            if c == "trace_id"
            else f"<td>{cell(v, c)}</td>"
            for i, (c, v) in enumerate(zip(columns, row, strict=True))
        )
        marked = trace is not None and chosen is not None and row[trace] == chosen
        body.append(f'<tr class="chosen">{cells}</tr>' if marked else f"<tr>{cells}</tr>")
    return (
        f'<div class="table-wrap"><table id="table-{result.slot}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _stat_value(value: object, column: str) -> str:
    text = cell(value, column)
    return f"{text} %" if column.endswith("_pct") and value is not None else text


def _stats(result: PanelResult) -> str:
    row = result.rows[0]
    items = "".join(
        f'<div class="stat"><div class="value">{_stat_value(v, c)}</div>'
        f'<div class="name">{html.escape(label(c).removesuffix(" (%)"))}</div></div>'
        for c, v in zip(result.panel.columns, row, strict=True)
    )
    return f'<div class="stats" id="stats-{result.slot}">{items}</div>'


def chosen_call_text(data: ReportData) -> str:
    """Which call the chunk timeline shows, and why (escaped HTML)."""
    if data.chosen_call is None and data.threshold_note is not None:
        return (
            f"No chosen call: at {data.threshold_ms} ms some calls' stall figures are unknown "
            "(see the note above), so whether they stalled is not known; no call whose figures "
            "are known stalled."
        )
    if data.chosen_call is None:
        return "No call in this range stalled, so there is no chosen call."
    text = f"Chosen call: trace <code>{html.escape(data.chosen_call)}</code>"
    worst = next((r for r in data.results if r.panel.key == "worst"), None)
    if worst is not None:
        columns = worst.panel.columns
        for row in worst.rows:
            found = dict(zip(columns, row, strict=True))
            if found.get("trace_id") == data.chosen_call:
                series = html.escape(visible(str(found.get(SERIES))))
                text += (
                    f" ({series}), the worst stalled call of this "
                    f"range: {cell(found.get('stall_s'), 'stall_s')} s of stall in "
                    f"{cell(found.get('wall_s'), 'wall_s')} s wall"
                )
                break
    return text + "."


def _frame(data: ReportData) -> Frame:
    """The range the time charts cover, as the queries saw it."""
    start, end = data.time_range.bounds
    step = int(data.interval.total_seconds() * 1000)
    return Frame(int(start.timestamp() * 1000), int(end.timestamp() * 1000), step)


def _body(result: PanelResult, data: ReportData, specs: dict[str, Any]) -> str:
    panel = result.panel
    intro = (
        f'<p class="chosen-call">{chosen_call_text(data)}</p>' if panel.key == "timeline" else ""
    )
    if not result.rows:
        return f'{intro}<p class="no-data">{NO_DATA}</p>'
    spec = chart_spec(panel, result.records(), _frame(data))
    if spec is not None:
        specs[result.slot] = spec
        return f'{intro}<div class="chart" id="chart-{result.slot}"></div>'
    if panel.kind == "stat":
        return intro + _stats(result)
    return intro + _table(result, data.chosen_call)


def _section(result: PanelResult, data: ReportData, specs: dict[str, Any]) -> str:
    panel: Panel = result.panel
    width = panel.width if panel.width in (8, 12, 24) else 24
    title = html.escape(panel.title)
    if result.repeat_value is not None:
        shown = html.escape(visible(result.repeat_value))
        title += f" · {html.escape(panel.repeat or '')} <b>{shown}</b>"
    return (
        f'<section class="panel w{width}" id="panel-{result.slot}" data-key="{panel.key}" '
        f'data-kind="{panel.kind}" data-rows="{len(result.rows)}">'
        f"<h2>{title}</h2>"
        f'<p class="description">{html.escape(panel.description)}</p>'
        f"{_body(result, data, specs)}{_not_repeated(result)}</section>"
    )


NAMED_OTHERS: Final = 100
"""Values a repeated panel's note names at most (then how many more)."""


def _not_repeated(result: PanelResult) -> str:
    """Which values of a repeated panel's variable have no copy of their own (escaped HTML)."""
    others = result.others
    if not others:
        return ""
    kind = html.escape(result.panel.repeat or "value")
    names = ", ".join(html.escape(visible(name)) for name in others[:NAMED_OTHERS])
    if len(others) > NAMED_OTHERS:
        names += f" and {len(others) - NAMED_OTHERS:,} more"
    return (
        f'<p class="not-repeated">{len(others):,} more {kind}s, with less wall time in this '
        f"range, are not drawn one by one (their calls are in every other panel): {names}.</p>"
    )


def _meta(data: ReportData) -> str:
    span = data.time_range
    since = f" (--since {html.escape(data.since)})" if data.since else " (everything in the store)"
    threshold = (
        f"stalls re-derived at <b>{data.threshold_ms} ms</b>"
        if data.threshold_ms
        else "stalls <b>as measured</b> (each attempt at its own threshold)"
    )
    interval = format_interval(data.interval) if data.interval > timedelta(0) else "–"
    return (
        f'<p class="meta">Store <b>{html.escape(str(data.store))}</b> · '
        f"<b>{data.calls:,}</b> calls from <b>{_utc_text(span.start)}</b> to "
        f"<b>{_utc_text(span.end)}</b> UTC{since} · {threshold} · time buckets of "
        f"{interval} · service, model, source: all</p>"
        + (
            f'<p class="meta threshold-note">{html.escape(data.threshold_note)}</p>'
            if data.threshold_note
            else ""
        )
        + f'<p class="meta">Generated {_utc_text(data.generated_at)} UTC by otel-llm '
        f"{html.escape(__version__)}; the panels of the Grafana dashboards, same SQL.</p>"
    )


def render(data: ReportData) -> str:
    """The whole page."""
    specs: dict[str, Any] = {}
    sections = "\n".join(_section(result, data, specs) for result in data.results)
    sections += "\n" + hedging_section(data.hedging, specs, data.hedging_error)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>otel-llm report</title>
<style>{_CSS}</style>
</head>
<body>
<header><h1>otel-llm report: where the time of the streamed LLM calls went</h1>
{_meta(data)}</header>
<main class="grid">
{sections}
</main>
<script type="application/json" id="{SPECS_ID}">{script_json(specs)}</script>
<script>{vega_runtime()}</script>
<script>{_RENDER}</script>
</body>
</html>
"""
