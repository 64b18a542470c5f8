"""A dashboard in Grafana's export-for-sharing form, to import from a file or from grafana.com.

The provisioned dashboards (``dashboards/<source>/otel-llm.json``) pick their data source through
the ``datasource`` template variable. The importable form (``dashboards/import/``) is what
Grafana's "Export for sharing externally" writes: the data source is an *input* of the
dashboard (``__inputs``: ``${DS_…}``, which Grafana's import page asks for), every panel, query
and variable reads it, ``__requires`` lists Grafana, the data source plugin and the panel types,
and ``id`` is null so the import creates the dashboard. It is derived from the provisioned
dashboard's JSON alone (the plugin is the ``datasource`` variable's query), so it follows every
data source the generator knows.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Final

from otel_llm._show._sql._panel_sql import DATASOURCE

GRAFANA_VERSION: Final = "12.0.0"
"""The Grafana the dashboards are tested with (``deploy/``'s default image)."""

PLUGINS: Final = {
    "motherduck-duckdb-datasource": ("DuckDB", "0.4.5"),
    "grafana-clickhouse-datasource": ("ClickHouse", "4.20.0"),
    "prometheus": ("Prometheus", "1.0.0"),
}
"""Each data source plugin's name and the version the dashboards are written for (Grafana's
export gives a core plugin such as Prometheus the version 1.0.0)."""

PANEL_NAMES: Final = {
    "barchart": "Bar chart",
    "bargauge": "Bar gauge",
    "heatmap": "Heatmap",
    "stat": "Stat",
    "table": "Table",
    "timeseries": "Time series",
    "traces": "Traces",
    "xychart": "XY Chart",
}
"""Grafana's names of the core panel types."""

_VARIABLE: Final = "${" + DATASOURCE + "}"
_LINK_PARAMETER: Final = re.compile(r"\$\{" + DATASOURCE + r":queryparam\}&?")


def input_name(label: str) -> str:
    """The input's name as Grafana's export spells it: ``DS_`` and the data source's name."""
    return "DS_" + re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_").upper()


def _datasource_variable(board: dict[str, Any]) -> dict[str, Any]:
    for variable in board["templating"]["list"]:
        if variable.get("type") == "datasource" and variable.get("name") == DATASOURCE:
            return dict(variable)
    raise ValueError(f"the dashboard has no {DATASOURCE!r} data source variable")


def _replace(value: Any, reference: str) -> Any:
    """``value`` with the data source variable read as the input (and no longer passed on in
    links: the imported dashboard has no such variable)."""
    if isinstance(value, dict):
        return {key: _replace(item, reference) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace(item, reference) for item in value]
    if isinstance(value, str):
        return _LINK_PARAMETER.sub("", value).replace(_VARIABLE, reference)
    return value


def importable(board: dict[str, Any]) -> dict[str, Any]:
    """``board`` (a provisioned dashboard) in the export-for-sharing form."""
    variable = _datasource_variable(board)
    plugin = str(variable["query"])
    plugin_name, plugin_version = PLUGINS[plugin]
    label = str(variable["current"]["text"])
    name = input_name(label)
    body = copy.deepcopy(board)
    body["templating"]["list"] = [
        v for v in body["templating"]["list"] if v.get("name") != DATASOURCE
    ]
    body = dict(_replace(body, "${" + name + "}"))
    panel_types = sorted({panel["type"] for panel in body["panels"]})
    requires = [
        {"type": "grafana", "id": "grafana", "name": "Grafana", "version": GRAFANA_VERSION},
        {"type": "datasource", "id": plugin, "name": plugin_name, "version": plugin_version},
        *(
            {"type": "panel", "id": kind, "name": PANEL_NAMES.get(kind, kind), "version": ""}
            for kind in panel_types
        ),
    ]
    kept = "metrics" if plugin == "prometheus" else "spans"
    inputs = [
        {
            "name": name,
            "label": label,
            "description": f"The {plugin_name} data source otel-llm's {kept} are in.",
            "type": "datasource",
            "pluginId": plugin,
            "pluginName": plugin_name,
        }
    ]
    return {"__inputs": inputs, "__elements": {}, "__requires": requires, "id": None} | body
