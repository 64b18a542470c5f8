"""The Prometheus dashboard and its data source's provisioning, generated from the PromQL panels
(:mod:`otel_llm._show._dashboards._promql`) with the SQL dashboards' layout and styles
(:mod:`otel_llm._show._dashboards._grafana` writes them beside the others):

- ``prometheus/otel-llm.json``: the dashboard (Grafana's Prometheus data source);
- ``provisioning/datasources/prometheus.yaml``: the data source at ``$PROMETHEUS_URL``, its scrape
  interval the SDK's metric export interval (60 s by default), which ``$__rate_interval`` is
  four times.
"""

from __future__ import annotations

from typing import Any, Final

from otel_llm._show._dashboards._grafana import (
    FOLDER,
    Source,
    _layout,
    _provisioning_header,
    _yaml,
)
from otel_llm._show._dashboards._promql import (
    ALL_REGEX,
    PLUGIN,
    PROM_FILTERS,
    PROM_PANELS,
    PromPanel,
    PromTarget,
    variable_query,
)
from otel_llm._show._sql._panel_sql import DATASOURCE

PROMETHEUS: Final = Source("prometheus", "Prometheus", "otel-llm-prometheus")
"""The Prometheus dashboard's folder, title and provisioned data source uid (not among
:data:`~._grafana.SOURCES`, whose panels are SQL)."""
URL_VARIABLE: Final = "PROMETHEUS_URL"
"""The environment variable Grafana's provisioning reads Prometheus' URL from."""
SCRAPE_INTERVAL: Final = "60s"
"""The data source's scrape interval: the SDK's default metric export interval
(``OTEL_METRIC_EXPORT_INTERVAL``, 60000 ms), how often a series gets a sample."""


def _datasource() -> dict[str, str]:
    return {"type": PLUGIN, "uid": "${" + DATASOURCE + "}"}


def _target(target: PromTarget, ref: str) -> dict[str, Any]:
    return {
        "refId": ref,
        "datasource": _datasource(),
        "expr": target.expr,
        "legendFormat": target.legend or "__auto",
        "instant": target.instant,
        "range": not target.instant,
        "format": target.format,
        "editorMode": "code",
    }


def _overrides(panel: PromPanel) -> list[dict[str, Any]]:
    """Series that are not stacked are dashed lines over the stack."""
    if not panel.stacked:
        return []
    return [
        {
            "matcher": {"id": "byName", "options": legend},
            "properties": [
                {"id": "custom.stacking", "value": {"mode": "none", "group": "A"}},
                {"id": "custom.fillOpacity", "value": 0},
                {"id": "custom.lineWidth", "value": 2},
                {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
            ],
        }
        for legend in panel.legends
        if legend not in panel.stacked
    ]


def _field_config(panel: PromPanel) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": "short" if panel.kind == "heatmap" else panel.unit}
    if panel.unit == "percent":
        defaults["min"] = 0
    if panel.kind == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 40 if panel.stacked else 0,
            "showPoints": "auto",
            "spanNulls": False,
            "stacking": {"mode": "normal" if panel.stacked else "none", "group": "A"},
        }
    return {"defaults": defaults, "overrides": _overrides(panel)}


def _options(panel: PromPanel) -> dict[str, Any]:
    legend = {"displayMode": "list", "placement": "bottom", "showLegend": True, "calcs": []}
    reduce = {"calcs": ["lastNotNull"], "fields": "", "values": False}
    if panel.kind == "timeseries":
        return {"legend": legend, "tooltip": {"mode": "multi", "sort": "desc"}}
    if panel.kind == "bargauge":
        return {
            "reduceOptions": reduce,
            "orientation": "horizontal",
            "displayMode": "gradient",
            "valueMode": "color",
            "namePlacement": "auto",
            "showUnfilled": True,
            "sizing": "auto",
            "minVizWidth": 8,
            "minVizHeight": 16,
            "maxVizHeight": 300,
        }
    if panel.kind == "stat":
        return {
            "reduceOptions": reduce,
            "colorMode": "value",
            "graphMode": "none",
            "justifyMode": "auto",
            "textMode": "value_and_name",
            "orientation": "auto",
        }
    if panel.kind == "table":
        return {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}}
    return {  # heatmap: the histogram's own buckets (no re-bucketing), seconds up the y axis
        "calculate": False,
        "yAxis": {"unit": panel.unit, "axisPlacement": "left"},
        "rowsFrame": {"layout": "le"},
        "cellValues": {"unit": "short"},
        "color": {"mode": "scheme", "scheme": "Oranges", "scale": "exponential", "exponent": 0.5},
        "tooltip": {"mode": "single", "yHistogram": True},
        "legend": {"show": True},
    }


def _panel(panel: PromPanel, panel_id: int, grid: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": _datasource(),
        "gridPos": grid,
        "fieldConfig": _field_config(panel),
        "options": _options(panel),
        "targets": [_target(target, chr(ord("A") + n)) for n, target in enumerate(panel.targets)],
    }
    if panel.kind == "table":
        out["transformations"] = [{"id": "organize", "options": {"excludeByName": {"Time": True}}}]
    return out


def _variable(name: str) -> dict[str, Any]:
    query = variable_query(name)
    return {
        "type": "query",
        "name": name,
        "label": name,
        "datasource": _datasource(),
        "query": {"query": query, "refId": f"{name}-options"},
        "definition": query,
        "refresh": 2,  # on time range change
        "sort": 1,
        "multi": True,
        "includeAll": True,
        "allValue": ALL_REGEX,
        "current": {"text": "All", "value": "$__all"},
        "options": [],
    }


def dashboard() -> dict[str, Any]:
    """The Prometheus dashboard as Grafana's JSON model."""
    grids = _layout(PROM_PANELS)
    source = PROMETHEUS
    return {
        "uid": f"otel-llm-{source.name}",
        "title": f"otel-llm: streamed LLM calls ({source.title})",
        "description": "Where the time of streamed LLM calls went — first chunk, net "
        "generation, stalls — and what hedging cost and won, from otel-llm's metrics "
        "(remote-written by the Collector). Generated by python -m otel_llm._show._dashboards; "
        "edit the panel specification, not this file.",
        "tags": ["otel-llm", "llm", source.name],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 42,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "templating": {
            "list": [
                {
                    "type": "datasource",
                    "name": DATASOURCE,
                    "label": "data source",
                    "query": PLUGIN,
                    "current": {"text": f"otel-llm {source.title}", "value": source.uid},
                    "options": [],
                    "refresh": 1,
                    "regex": "",
                },
                *(_variable(name) for name in PROM_FILTERS),
            ]
        },
        "annotations": {"list": []},
        "links": [],
        "panels": [
            _panel(panel, panel_id, grid)
            for panel_id, (panel, grid) in enumerate(zip(PROM_PANELS, grids, strict=True), start=1)
        ],
    }


def datasource() -> str:
    """The Prometheus data source at ``$PROMETHEUS_URL``."""
    config = {
        "datasources": [
            {
                "name": f"otel-llm {PROMETHEUS.title}",
                "uid": PROMETHEUS.uid,
                "type": PLUGIN,
                "access": "proxy",
                "url": "${" + URL_VARIABLE + "}",
                "editable": True,
                "jsonData": {"timeInterval": SCRAPE_INTERVAL, "httpMethod": "POST"},
            }
        ]
    }
    return (
        _provisioning_header(
            "otel-llm's metrics in Prometheus (or Mimir, Thanos: any PromQL endpoint), written\n"
            "# by the Collector's prometheus_remote_write exporter: set PROMETHEUS_URL (e.g.\n"
            "# http://prometheus:9090) in Grafana's environment. timeInterval is the SDK's metric\n"
            "# export interval (OTEL_METRIC_EXPORT_INTERVAL): change both together."
        )
        + "\n".join(_yaml(config))
        + "\n"
    )


def provider() -> dict[str, Any]:
    """The dashboard provider entry of the Prometheus folder."""
    return {
        "name": f"otel-llm {PROMETHEUS.title}",
        "orgId": 1,
        "folder": FOLDER,
        "type": "file",
        "disableDeletion": False,
        "allowUiUpdates": True,
        "updateIntervalSeconds": 60,
        "options": {"path": f"${{OTEL_LLM_DASHBOARDS}}/{PROMETHEUS.name}"},
    }
