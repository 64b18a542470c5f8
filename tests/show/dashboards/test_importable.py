"""The importable dashboards (otel_llm/_show/_dashboards/_importable.py), read back from
dashboards/import/: Grafana's export-for-sharing form, the data source an input that every panel,
query and variable reads, the plugins and panel types required, the rest the provisioned board."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # "Prefer dashboardv2": see test_dashboards
    from grafana_foundation_sdk.models.dashboard import Dashboard

from otel_llm._show._dashboards import _grafana
from otel_llm._show._dashboards._grafana import SOURCES, dashboard
from otel_llm._show._dashboards._importable import PLUGINS, importable, input_name
from otel_llm._show._dashboards._prometheus import PROMETHEUS
from otel_llm._show._dashboards._promql import PLUGIN
from otel_llm._show._sql._panel_sql import DATASOURCE
from tests.support import REPOSITORY

register_default_plugins()
FOLDER = REPOSITORY / _grafana.ROOT / _grafana.IMPORT_FOLDER
NAMES = [*(source.name for source in SOURCES), PROMETHEUS.name]
PLUGIN_OF = {source.name: source.dialect.plugin for source in SOURCES} | {PROMETHEUS.name: PLUGIN}


def _read(name: str) -> dict[str, Any]:
    return json.loads((FOLDER / f"otel-llm-{name}.json").read_text(encoding="utf-8"))


def _provisioned(name: str) -> dict[str, Any]:
    path = REPOSITORY / _grafana.ROOT / name / _grafana.DASHBOARD_FILE
    return json.loads(path.read_text(encoding="utf-8"))


def _refs(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "datasource":
                yield item
            yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_every_data_source_has_an_importable_file() -> None:
    """dashboards/import/ holds one file per data source of the generator, and nothing else."""
    assert sorted(p.name for p in FOLDER.iterdir()) == sorted(f"otel-llm-{n}.json" for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_panel_reads_the_input(name: str) -> None:
    """The one input is a data source of the dashboard's plugin, and every data source
    reference of the panels, their queries and the variables is that input: no reference to
    the provisioned dashboard's variable is left."""
    board = _read(name)
    plugin = PLUGIN_OF[name]
    (source_input,) = board["__inputs"]
    assert (source_input["type"], source_input["pluginId"]) == ("datasource", plugin)
    assert source_input["pluginName"] == PLUGINS[plugin][0]
    assert source_input["name"] == input_name(source_input["label"])
    reference = {"type": plugin, "uid": "${" + source_input["name"] + "}"}
    refs = list(_refs(board["panels"])) + list(_refs(board["templating"]["list"]))
    assert len(refs) >= 2 * len(board["panels"])  # each panel and its target, and the variables
    assert all(ref == reference for ref in refs), refs
    assert not [s for s in _strings(board) if "${" + DATASOURCE in s]
    assert DATASOURCE not in [v["name"] for v in board["templating"]["list"]]


@pytest.mark.parametrize("name", NAMES)
def test_the_requirements_name_the_plugin_and_every_panel_type(name: str) -> None:
    """__requires lists Grafana, the data source plugin with its version and every panel type
    the dashboard draws; id is null so an import creates the dashboard."""
    board = _read(name)
    plugin = board["__inputs"][0]["pluginId"]
    required = {(r["type"], r["id"]): r for r in board["__requires"]}
    assert ("grafana", "grafana") in required
    assert required["datasource", plugin]["version"] == PLUGINS[plugin][1]
    panel_types = {p["type"] for p in board["panels"]}
    assert {i for t, i in required if t == "panel"} == panel_types
    assert board["id"] is None
    assert board["__elements"] == {}


@pytest.mark.parametrize("name", NAMES)
def test_imported_with_a_data_source_it_is_the_provisioned_dashboard(name: str) -> None:
    """Import replaces the input by the data source picked; the result is the provisioned
    dashboard with that data source chosen: the same panels, SQL, layout and variables."""
    board = _read(name)
    ref = "${" + board["__inputs"][0]["name"] + "}"
    text = json.dumps({k: v for k, v in board.items() if not k.startswith("__") and k != "id"})
    imported = json.loads(text.replace(ref, "${" + DATASOURCE + "}"))
    provisioned = _provisioned(name)
    provisioned["templating"]["list"] = [
        v for v in provisioned["templating"]["list"] if v["name"] != DATASOURCE
    ]
    provisioned_text = json.dumps(provisioned).replace("${" + DATASOURCE + ":queryparam}&", "")
    assert imported == json.loads(provisioned_text)


@pytest.mark.parametrize("name", NAMES)
def test_grafanas_schema_reads_the_importable_body(name: str) -> None:
    """Grafana's dashboard model reads the importable form's dashboard without losing a panel,
    a target or a variable."""
    board = _read(name)
    body = {k: v for k, v in board.items() if not k.startswith("__") and k != "id"}
    round_trip = json.loads(json.dumps(Dashboard.from_json(body), cls=JSONEncoder))
    assert len(round_trip["panels"]) == len(body["panels"])
    query = "expr" if name == PROMETHEUS.name else "rawSql"
    assert [p["targets"][0][query] for p in round_trip["panels"]] == [
        p["targets"][0][query] for p in body["panels"]
    ]
    assert [v["name"] for v in round_trip["templating"]["list"]] == [
        v["name"] for v in body["templating"]["list"]
    ]


def test_a_dashboard_without_the_variable_is_refused() -> None:
    """A dashboard with no data source variable has nothing to turn into an input: a clear
    ValueError, not a file that still names a variable it lacks."""
    board = dashboard(SOURCES[0])
    variables = board["templating"]["list"]
    board["templating"]["list"] = [v for v in variables if v["type"] != "datasource"]
    with pytest.raises(ValueError, match="no 'datasource' data source variable"):
        importable(board)
