"""The Grafana dashboards and their provisioning, generated from the one panel specification
(:mod:`otel_llm._show._dashboards._panels`) for the DuckDB and the ClickHouse data source.

``python -m otel_llm._show._dashboards [ROOT] [--check]`` writes (or checks) ``dashboards/`` under
ROOT (default: the current directory):

- ``duckdb/otel-llm.json`` and ``clickhouse/otel-llm.json``: one dashboard per data source, the
  same panels in the same places; only the SQL's dialect and a ClickHouse trace-view panel differ;
- ``provisioning/datasources/{duckdb,clickhouse}.yaml``: the data sources (DuckDB: an in-memory
  database whose ``initSql`` reads the store at ``$OTEL_LLM_STORE``; ClickHouse: the server in
  ``$CLICKHOUSE_HOST`` with trace settings on the exporter's ``otel_traces``);
- ``provisioning/dashboards/otel-llm.yaml``: the dashboard provider for both folders.
- ``import/otel-llm-{duckdb,clickhouse}.json``: each dashboard in Grafana's export-for-sharing
  form (the data source an input), to import from a file or from grafana.com.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from otel_llm._show._dashboards._importable import importable
from otel_llm._show._dashboards._panels import FORMATS, PANELS, TRACE_VIEW, Panel, variable_sql
from otel_llm._show._dashboards._promql import PromPanel
from otel_llm._show._sql._clickhouse import DATABASE
from otel_llm._show._sql._exporter_sql import TRACE_ID_TS_SUFFIX
from otel_llm._show._sql._grafana_macros import format_interval
from otel_llm._show._sql._panel_sql import (
    ALL_VALUE,
    AS_MEASURED,
    CALL,
    DATASOURCE,
    FILTERS,
    PANEL_DIALECTS,
    THRESHOLD,
    PanelDialect,
)
from otel_llm._show._sql._rollup import GRAIN, THRESHOLD_OPTIONS_MS
from otel_llm._show._sql._table import TABLE
from otel_llm._show._store._access import reader_sql

ROOT: Final = Path("dashboards")
DASHBOARD_FILE: Final = "otel-llm.json"
IMPORT_FOLDER: Final = Path("import")
"""The importable dashboards (``import/otel-llm-<source>.json``, :mod:`._importable`)."""
STORE_VARIABLE: Final = "OTEL_LLM_STORE"
"""The environment variable Grafana's provisioning reads the store's path from."""
_STORE_PLACEHOLDER: Final = "/__otel_llm_store__"
GRID_WIDTH: Final = 24
THRESHOLDS_MS: Final = THRESHOLD_OPTIONS_MS
"""The threshold variable's options besides "as measured"."""
FOLDER: Final = "otel-llm"


@dataclass(frozen=True, slots=True)
class Source:
    """One data source's dashboard: folder name, title, its data source's provisioned uid."""

    name: str
    title: str
    uid: str

    @property
    def dialect(self) -> PanelDialect:
        return PANEL_DIALECTS[self.name]


SOURCES: Final = (
    Source("duckdb", "DuckDB", "otel-llm-duckdb"),
    Source("clickhouse", "ClickHouse", "otel-llm-clickhouse"),
)


def _datasource(source: Source) -> dict[str, str]:
    return {"type": source.dialect.plugin, "uid": "${" + DATASOURCE + "}"}


def _target(source: Source, panel: Panel) -> dict[str, Any]:
    sql = panel.sql(source.dialect)
    target: dict[str, Any] = {
        "refId": "A",
        "datasource": _datasource(source),
        "rawSql": sql,
        "format": panel.format_code,
    }
    if source.name == "clickhouse":
        query_type = {"time_series": "timeseries", "table": "table", "traces": "traces"}
        target |= {
            "editorType": "sql",
            "queryType": query_type[panel.format],
            "pluginVersion": "4.20.0",
        }
    else:
        target |= {"editorMode": "code", "rawQuery": True}
    return target


def _overrides(panel: Panel) -> list[dict[str, Any]]:
    """Value columns that are not stacked are lines over the stack (the wall time)."""
    if not panel.stacked:
        return []
    lines = [c for c in panel.values if c not in panel.stacked]
    return [
        {
            "matcher": {"id": "byRegexp", "options": f"^{column}"},
            "properties": [
                {"id": "custom.stacking", "value": {"mode": "none", "group": "A"}},
                {"id": "custom.fillOpacity", "value": 0},
                {"id": "custom.lineWidth", "value": 2},
                {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
            ],
        }
        for column in lines
    ]


def _field_config(panel: Panel) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": panel.unit}
    if panel.unit == "percent":
        defaults |= {"min": 0, "max": 100}
    if panel.kind == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 40 if panel.stacked else 0,
            "showPoints": "auto",
            "spanNulls": False,
            "stacking": {"mode": "normal" if panel.stacked else "none", "group": "A"},
        }
    elif panel.kind == "barchart":
        defaults["custom"] = {"fillOpacity": 80, "lineWidth": 1}
    elif panel.kind == "xychart":
        defaults["custom"] = {"show": "points", "pointSize": {"fixed": 6}}
    return {"defaults": defaults, "overrides": _overrides(panel)}


def _options(panel: Panel) -> dict[str, Any]:
    legend = {"displayMode": "list", "placement": "bottom", "showLegend": True, "calcs": []}
    if panel.kind == "timeseries":
        return {"legend": legend, "tooltip": {"mode": "multi", "sort": "desc"}}
    if panel.kind == "barchart":
        return {
            "legend": legend,
            "tooltip": {"mode": "multi", "sort": "none"},
            "xField": panel.x,
            "stacking": "normal" if panel.stacked else "none",
            "orientation": "auto",
            "showValue": "auto",
            "barWidth": 0.9,
            "xTickLabelRotation": 0,
        }
    if panel.kind == "stat":
        return {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "none",
            "justifyMode": "auto",
            "textMode": "value_and_name",
            "orientation": "auto",
        }
    if panel.kind == "table":
        return {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}}
    if panel.kind == "xychart":
        return {
            "legend": legend,
            "tooltip": {"mode": "single", "sort": "none"},
            "mapping": "manual",
            "series": [
                {
                    "frame": {"matcher": {"id": "byIndex", "options": 0}},
                    "x": {"matcher": {"id": "byName", "options": panel.x}},
                    "y": {"matcher": {"id": "byName", "options": panel.values[0]}},
                }
            ],
        }
    return {}


def _links(panel: Panel) -> list[dict[str, Any]]:
    """The worst-calls table's trace ids open this dashboard on that call, with the same time
    range, data source, filters and threshold."""
    if "trace_id" not in panel.columns or panel.kind != "table":
        return []
    kept = "&".join("${" + name + ":queryparam}" for name in (DATASOURCE, *FILTERS, THRESHOLD))
    url = "/d/${__dashboard.uid}?${__url_time_range}&" + kept + "&var-" + CALL + "=${__value.raw}"
    return [{"title": "Show this call's chunk timeline", "url": url}]


def min_interval(source: Source, panel: Panel) -> timedelta | None:
    """The panel's min interval (its ``interval``), if it sets one: a rollup's grain for a panel
    over time that reads the rollups in whole-grain buckets and the spans otherwise — Grafana
    rounds a range over the panel's width to a step that is often less (20 s at 6 h), which
    would send every query to the spans; above a minute its steps are whole minutes."""
    if panel.kind != "timeseries" or not source.dialect.rollup:
        return None
    spans_only = dataclasses.replace(source.dialect, rollup=False)
    return GRAIN if panel.sql(source.dialect) != panel.sql(spans_only) else None


def _panel(source: Source, panel: Panel, panel_id: int, grid: dict[str, int]) -> dict[str, Any]:
    field_config = _field_config(panel)
    links = _links(panel)
    if links:
        field_config["overrides"].append(
            {
                "matcher": {"id": "byName", "options": "trace_id"},
                "properties": [{"id": "links", "value": links}],
            }
        )
    out: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": _datasource(source),
        "gridPos": grid,
        "fieldConfig": field_config,
        "options": _options(panel),
        "targets": [_target(source, panel)],
    }
    interval = min_interval(source, panel)
    if interval is not None:
        out["interval"] = format_interval(interval)
    if panel.repeat is not None:
        out |= {"repeat": panel.repeat, "repeatDirection": "h", "maxPerRow": 2}
    return out


def _layout(panels: Sequence[Panel | PromPanel]) -> list[dict[str, int]]:
    """Left to right, a new row when a panel does not fit in the 24 columns."""
    x = y = row_height = 0
    grids: list[dict[str, int]] = []
    for panel in panels:
        if x + panel.width > GRID_WIDTH:
            x, y, row_height = 0, y + row_height, 0
        grids.append({"x": x, "y": y, "w": panel.width, "h": panel.height})
        x += panel.width
        row_height = max(row_height, panel.height)
    return grids


def _query_variable(source: Source, name: str, *, multi: bool) -> dict[str, Any]:
    sql = variable_sql(source.dialect, name)
    variable: dict[str, Any] = {
        "type": "query",
        "name": name,
        "label": name.replace("_", " "),
        "datasource": _datasource(source),
        "query": {"rawSql": sql, "format": FORMATS["table"], "refId": f"{name}-options"},
        "definition": sql,
        "refresh": 2,  # on time range change
        "sort": 0 if name == CALL else 1,
        "multi": multi,
        "includeAll": multi,
        "current": {"text": "All", "value": "$__all"} if multi else {},
        "options": [],
    }
    if multi and source.name == "duckdb":
        variable["allValue"] = ALL_VALUE
    return variable


def _templating(source: Source) -> list[dict[str, Any]]:
    options = [{"text": "as measured", "value": str(AS_MEASURED), "selected": True}] + [
        {"text": f"{ms} ms", "value": str(ms), "selected": False} for ms in THRESHOLDS_MS
    ]
    custom = ",".join(
        ["as measured : " + str(AS_MEASURED)] + [f"{ms} ms : {ms}" for ms in THRESHOLDS_MS]
    )
    return [
        {
            "type": "datasource",
            "name": DATASOURCE,
            "label": "data source",
            "query": source.dialect.plugin,
            "current": {"text": f"otel-llm {source.title}", "value": source.uid},
            "options": [],
            "refresh": 1,
            "regex": "",
        },
        *(_query_variable(source, name, multi=True) for name in FILTERS),
        {
            "type": "custom",
            "name": THRESHOLD,
            "label": "stall threshold",
            "description": "Re-derive the stall figures from the stored chunk events at this "
            "threshold (as measured: each attempt at the threshold it ran with).",
            "query": custom,
            "current": {"text": "as measured", "value": str(AS_MEASURED)},
            "options": options,
            "multi": False,
            "includeAll": False,
        },
        _query_variable(source, CALL, multi=False) | {"label": "chosen call"},
    ]


def dashboard(source: Source) -> dict[str, Any]:
    """The dashboard of ``source`` as Grafana's JSON model."""
    panels = [*PANELS, TRACE_VIEW] if source.name == "clickhouse" else list(PANELS)
    grids = _layout(panels)
    return {
        "uid": f"otel-llm-{source.name}",
        "title": f"otel-llm: streamed LLM calls ({source.title})",
        "description": "Where the time of every streamed LLM call went — first chunk, net "
        "generation, stalls — and what hedging cost and won. Generated by "
        "python -m otel_llm._show._dashboards; edit the panel specification, not this file.",
        "tags": ["otel-llm", "llm", source.name],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 42,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "1m",
        "templating": {"list": _templating(source)},
        "annotations": {"list": []},
        "links": [],
        "panels": [
            _panel(source, panel, panel_id, grid)
            for panel_id, (panel, grid) in enumerate(zip(panels, grids, strict=True), start=1)
        ],
    }


def _yaml_scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a YAML string


def _yaml(value: object, indent: int = 0) -> list[str]:
    """A small YAML writer for the provisioning files: mappings, lists, scalars, and
    multi-line strings as literal blocks (``|-``)."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, Mapping | list):
                lines.append(f"{pad}{key}:")
                lines.extend(_yaml(item, indent + 2))
            elif isinstance(item, str) and "\n" in item:
                lines.append(f"{pad}{key}: |-")
                lines.extend(f"{pad}  {line}".rstrip() for line in item.split("\n"))
            else:
                lines.append(f"{pad}{key}: {_yaml_scalar(item)}")
    elif isinstance(value, list):
        for item in value:
            inner = _yaml(item, indent + 2)
            lines.append(f"{pad}- {inner[0].lstrip()}")
            lines.extend(inner[1:])
    else:
        lines.append(pad + _yaml_scalar(value))
    return lines


def _provisioning_header(what: str) -> str:
    return (
        f"# {what}\n# Generated by python -m otel_llm._show._dashboards; do not edit.\n"
        "apiVersion: 1\n"
    )


def duckdb_datasource() -> str:
    """The DuckDB data source: an in-memory database reading the store at
    ``$OTEL_LLM_STORE`` (Grafana substitutes the environment variable when it provisions)."""
    init_sql = reader_sql(_STORE_PLACEHOLDER).replace(
        _STORE_PLACEHOLDER, "${" + STORE_VARIABLE + "}"
    )
    config = {
        "datasources": [
            {
                "name": "otel-llm DuckDB",
                "uid": SOURCES[0].uid,
                "type": SOURCES[0].dialect.plugin,
                "access": "proxy",
                "editable": True,
                "jsonData": {"path": "", "initSql": init_sql.rstrip()},
            }
        ]
    }
    return (
        _provisioning_header(
            "otel-llm's store for Grafana's DuckDB data source (motherduck-duckdb-datasource):\n"
            f"# set {STORE_VARIABLE} to the store's absolute path in Grafana's environment. The\n"
            "# database is in memory; initSql makes it read the store's segments (the output of\n"
            "# `otel-llm views --db PATH`), so writers keep writing while Grafana reads."
        )
        + "\n".join(_yaml(config))
        + "\n"
    )


def clickhouse_datasource() -> str:
    """The ClickHouse data source, with the trace view on the exporter's ``otel_traces``."""
    config = {
        "datasources": [
            {
                "name": "otel-llm ClickHouse",
                "uid": SOURCES[1].uid,
                "type": SOURCES[1].dialect.plugin,
                "access": "proxy",
                "editable": True,
                "jsonData": {
                    "host": "${CLICKHOUSE_HOST}",
                    "port": "${CLICKHOUSE_PORT}",
                    "protocol": "native",
                    "secure": False,
                    "username": "${CLICKHOUSE_USER}",
                    "defaultDatabase": DATABASE,
                    "traces": {
                        "defaultDatabase": DATABASE,
                        "defaultTable": TABLE,
                        "otelEnabled": True,
                        "otelVersion": "latest",
                        "durationUnit": "nanoseconds",
                        "traceTimestampTableSuffix": TRACE_ID_TS_SUFFIX,
                    },
                },
                "secureJsonData": {"password": "${CLICKHOUSE_PASSWORD}"},
            }
        ]
    }
    return (
        _provisioning_header(
            "otel-llm's ClickHouse (the Collector's clickhouse exporter, schema\n"
            "# collector/clickhouse/schema.sql) for grafana-clickhouse-datasource: set\n"
            "# CLICKHOUSE_HOST, CLICKHOUSE_PORT (native protocol: 9000, or 9440 with secure:\n"
            "# true for TLS), CLICKHOUSE_USER and CLICKHOUSE_PASSWORD in Grafana's environment.\n"
            "# The trace settings open a call with its attempts in Grafana's trace view."
        )
        + "\n".join(_yaml(config))
        + "\n"
    )


def dashboard_provider() -> str:
    config = {
        "providers": [
            {
                "name": f"otel-llm {source.title}",
                "orgId": 1,
                "folder": FOLDER,
                "type": "file",
                "disableDeletion": False,
                "allowUiUpdates": True,
                "updateIntervalSeconds": 60,
                "options": {"path": f"${{OTEL_LLM_DASHBOARDS}}/{source.name}"},
            }
            for source in SOURCES
        ]
    }
    from otel_llm._show._dashboards import _prometheus  # it builds on this module

    config["providers"].append(_prometheus.provider())
    return (
        _provisioning_header(
            "otel-llm's dashboards: set OTEL_LLM_DASHBOARDS to this repository's dashboards/\n"
            "# folder as Grafana sees it (e.g. /etc/grafana/otel-llm); remove the provider of the\n"
            "# data source you do not use."
        )
        + "\n".join(_yaml(config))
        + "\n"
    )


def files() -> dict[Path, str]:
    """Every generated file, by its path under the dashboards folder."""
    out = {
        Path(source.name) / DASHBOARD_FILE: json.dumps(dashboard(source), indent=2) + "\n"
        for source in SOURCES
    }
    for source in SOURCES:  # the export-for-sharing form, outside the provisioned folders
        board = importable(dashboard(source))
        out[IMPORT_FOLDER / f"otel-llm-{source.name}.json"] = json.dumps(board, indent=2) + "\n"
    from otel_llm._show._dashboards import _prometheus  # it builds on this module

    prometheus = _prometheus.dashboard()
    name = _prometheus.PROMETHEUS.name
    out[Path(name) / DASHBOARD_FILE] = json.dumps(prometheus, indent=2) + "\n"
    shared = importable(prometheus)
    out[IMPORT_FOLDER / f"otel-llm-{name}.json"] = json.dumps(shared, indent=2) + "\n"
    provisioning = Path("provisioning")
    out[provisioning / "datasources" / "duckdb.yaml"] = duckdb_datasource()
    out[provisioning / "datasources" / "clickhouse.yaml"] = clickhouse_datasource()
    out[provisioning / "datasources" / f"{name}.yaml"] = _prometheus.datasource()
    out[provisioning / "dashboards" / "otel-llm.yaml"] = dashboard_provider()
    return out


def stale(root: Path) -> list[Path]:
    """The generated files under ``root`` that are missing or differ from what is generated."""
    return [
        path
        for path, text in files().items()
        if not (root / path).is_file() or (root / path).read_text(encoding="utf-8") != text
    ]


def write(root: Path) -> list[Path]:
    """Write every generated file under ``root``; the paths written."""
    written = []
    for path, text in files().items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path("."))
    parser.add_argument("--check", action="store_true", help="fail if a file is stale")
    args = parser.parse_args(argv)
    root = args.root / ROOT
    if args.check:
        paths = stale(root)
        for path in paths:
            print(f"stale: {root / path}", file=sys.stderr)
        return 1 if paths else 0
    for target in write(root):
        print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
