"""The Grafana dashboards and provisioning (otel_llm/_show/_dashboards/_grafana.py): committed and
fresh, well-formed as Grafana's own schema (grafana-foundation-sdk 0.0.21) reads them, and the
DuckDB data source's initSql reading a real store.

The panels' SQL is run in DuckDB and chDB by tests/show/dashboards/test_panels.py."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins

from tests.support import REPOSITORY

with warnings.catch_warnings():
    # "Prefer dashboardv2": v2 is the new API's schema; file provisioning loads the v1 JSON
    # model, which is what the dashboards are.
    warnings.simplefilter("ignore", DeprecationWarning)
    from grafana_foundation_sdk.models.dashboard import Dashboard

from otel_llm._show._dashboards import _grafana as _dashboards
from otel_llm._show._dashboards._grafana import SOURCES, STORE_VARIABLE, dashboard, files, stale
from otel_llm._show._dashboards._panels import PANELS, TIME, TRACE_VIEW
from otel_llm._show._dashboards._prometheus import PROMETHEUS
from otel_llm._show._sql._exporter_sql import TRACE_ID_TS_SUFFIX, TRACE_ID_TS_TABLE
from otel_llm._show._sql._grafana_macros import grafana_interval
from otel_llm._show._sql._panel_sql import DATASOURCE, FILTERS
from otel_llm._show._store._access import reader_sql
from tests.support.duckdb_store import Store

register_default_plugins()  # panels' options and field config read by each panel's own model
ROOT = REPOSITORY
DASHBOARDS = ROOT / _dashboards.ROOT


def _dashboards_json() -> Iterator[tuple[str, dict[str, Any]]]:
    for source in SOURCES:
        path = DASHBOARDS / source.name / _dashboards.DASHBOARD_FILE
        yield source.name, json.loads(path.read_text(encoding="utf-8"))


def test_the_committed_files_are_the_generated_ones() -> None:
    """Every file under dashboards/ is what `python -m otel_llm._show._dashboards` writes: a
    change of the panel specification without regenerating fails here."""
    assert stale(DASHBOARDS) == [], "run: python -m otel_llm._show._dashboards"
    assert {p.relative_to(DASHBOARDS) for p in DASHBOARDS.rglob("*") if p.is_file()} == set(
        files()
    ), "a file under dashboards/ that the generator does not write"


def test_a_stale_file_is_found(tmp_path: Path) -> None:
    """The check sees a missing file and an edited one (it is not vacuous)."""
    _dashboards.write(tmp_path)
    edited = tmp_path / "duckdb" / _dashboards.DASHBOARD_FILE
    edited.write_text(edited.read_text(encoding="utf-8").replace("Worst", "Best"))
    (tmp_path / "provisioning" / "dashboards" / "otel-llm.yaml").unlink()
    assert sorted(stale(tmp_path)) == sorted(
        [Path("duckdb/otel-llm.json"), Path("provisioning/dashboards/otel-llm.yaml")]
    )
    assert _dashboards.main([str(tmp_path.parent / "nowhere"), "--check"]) == 1


def _differences(before: Any, after: Any, path: str = "") -> Iterator[str]:
    """What ``after`` lost or changed of ``before`` (keys it adds are Grafana's defaults)."""
    if isinstance(before, dict) and isinstance(after, dict):
        for key, value in before.items():
            if key not in after:
                yield f"lost {path}/{key}"
            else:
                yield from _differences(value, after[key], f"{path}/{key}")
    elif isinstance(before, list) and isinstance(after, list):
        if len(before) != len(after):
            yield f"{path}: {len(before)} items became {len(after)}"
        for i, (x, y) in enumerate(zip(before, after, strict=False)):
            yield from _differences(x, y, f"{path}[{i}]")
    elif before != after:
        yield f"changed {path}: {before!r} → {after!r}"


@pytest.mark.parametrize("name", [s.name for s in SOURCES])
def test_grafanas_schema_reads_every_field(name: str) -> None:
    """Read into grafana-foundation-sdk's dashboard model and written back, the dashboard loses
    and changes nothing: every key is one Grafana's schema knows, of the type it expects."""
    model = dict(_dashboards_json())[name]
    round_trip = json.loads(json.dumps(Dashboard.from_json(model), cls=JSONEncoder))
    assert list(_differences(model, round_trip)) == []


def test_the_round_trip_check_is_not_vacuous() -> None:
    """A key Grafana's schema does not know — of a panel, of a panel type's options, of its
    field config — is dropped by the model, and seen."""
    model = dict(_dashboards_json())["duckdb"]
    model["panels"][0]["gridPosition"] = model["panels"][0]["gridPos"]
    model["panels"][1]["options"]["legendd"] = {}
    model["panels"][2]["fieldConfig"]["defaults"]["custom"]["stacked"] = True
    round_trip = json.loads(json.dumps(Dashboard.from_json(model), cls=JSONEncoder))
    assert list(_differences(model, round_trip)) == [
        "lost /panels[0]/gridPosition",
        "lost /panels[1]/options/legendd",
        "lost /panels[2]/fieldConfig/defaults/custom/stacked",
    ]


def _datasource_refs(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "datasource":
                yield item
            yield from _datasource_refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _datasource_refs(item)


@pytest.mark.parametrize("name", [s.name for s in SOURCES])
def test_every_panel_query_and_variable_names_the_datasource_variable(name: str) -> None:
    """Every data source reference is the dashboard's ``${datasource}`` variable of the right
    plugin, so the dashboard works with whatever uid the data source has."""
    model = dict(_dashboards_json())[name]
    plugin = next(s for s in SOURCES if s.name == name).dialect.plugin
    refs = list(_datasource_refs(model["panels"])) + list(
        _datasource_refs(model["templating"]["list"])
    )
    assert refs
    assert all(ref == {"type": plugin, "uid": "${" + DATASOURCE + "}"} for ref in refs), refs
    (variable,) = (v for v in model["templating"]["list"] if v["type"] == "datasource")
    assert (variable["name"], variable["query"]) == (DATASOURCE, plugin)


@pytest.mark.parametrize("name", [s.name for s in SOURCES])
def test_the_layout_and_targets_are_well_formed(name: str) -> None:
    """uid and title; unique panel ids; every panel inside the 24 columns without overlapping
    another; every target has rawSql and an integer format; a time-series panel selects its
    time column first."""
    model = dict(_dashboards_json())[name]
    assert model["uid"] == f"otel-llm-{name}"
    assert model["title"]
    panels = model["panels"]
    ids = [p["id"] for p in panels]
    assert len(set(ids)) == len(ids) == len(PANELS) + (name == "clickhouse")
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0, panel["title"]
        assert 0 < grid["w"] <= 24 - grid["x"], panel["title"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
        for target in panel["targets"]:
            assert target["rawSql"].strip()
            assert isinstance(target["format"], int)
            assert not isinstance(target["format"], bool)
    for spec, panel in zip([*PANELS, TRACE_VIEW], panels, strict=False):
        assert (panel["type"], panel["title"]) == (spec.kind, spec.title)
        if spec.kind == "timeseries":
            assert spec.columns[0] == TIME
            assert panel["targets"][0]["format"] == 0
            select = re.split(r"(?m)^SELECT", panel["targets"][0]["rawSql"])[-1]
            first = select.split(",\n", 1)[0]
            assert first.strip().endswith(f"AS {TIME}"), first


@pytest.mark.parametrize("name", [s.name for s in SOURCES])
def test_the_variables(name: str) -> None:
    """Service, model and source are multi-value with All; the threshold offers 'as measured'
    and re-derivations; the chosen call is a single value; the DuckDB dashboards' All is the
    custom literal their SQL compares with, ClickHouse's the plugin's $__all."""
    variables = {v["name"]: v for v in dict(_dashboards_json())[name]["templating"]["list"]}
    for filter_name in FILTERS:
        v = variables[filter_name]
        assert (v["type"], v["multi"], v["includeAll"]) == ("query", True, True)
        assert ("allValue" in v) == (name == "duckdb")
        assert v["query"]["rawSql"] == v["definition"]
    assert variables["threshold"]["current"]["text"] == "as measured"
    assert re.fullmatch(r"as measured : 0(,\d+ ms : \d+)+", variables["threshold"]["query"])
    assert variables["trace_id"]["multi"] is False


def _provisioning(name: str) -> dict[str, Any]:
    text = (DASHBOARDS / "provisioning" / name).read_text(encoding="utf-8")
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def test_the_provisioning_is_yaml_grafana_reads() -> None:
    """The provisioning files parse as YAML with apiVersion 1, the data sources have the
    uids the dashboards' variables default to, and no ``$`` but the documented environment
    variables (Grafana expands ``$NAME`` in provisioning files)."""
    duck = _provisioning("datasources/duckdb.yaml")
    click = _provisioning("datasources/clickhouse.yaml")
    provider = _provisioning("dashboards/otel-llm.yaml")
    assert duck["apiVersion"] == click["apiVersion"] == provider["apiVersion"] == 1
    uids = {d["uid"] for d in duck["datasources"] + click["datasources"]}
    assert uids == {s.uid for s in SOURCES}
    for _, model in _dashboards_json():
        (variable,) = (v for v in model["templating"]["list"] if v["type"] == "datasource")
        assert variable["current"]["value"] in uids
    traces = click["datasources"][0]["jsonData"]["traces"]
    assert (traces["defaultDatabase"], traces["defaultTable"]) == ("otel", "otel_traces")
    assert [p["options"]["path"].rsplit("/", 1)[1] for p in provider["providers"]] == [
        *(s.name for s in SOURCES),
        PROMETHEUS.name,
    ]
    (prometheus,) = _provisioning("datasources/prometheus.yaml")["datasources"]
    assert (prometheus["uid"], prometheus["url"]) == (PROMETHEUS.uid, "${PROMETHEUS_URL}")
    for path in (DASHBOARDS / "provisioning").rglob("*.yaml"):
        names = set(re.findall(r"\$\{?(\w+)", path.read_text(encoding="utf-8")))
        assert names <= {
            STORE_VARIABLE,
            "OTEL_LLM_DASHBOARDS",
            "CLICKHOUSE_HOST",
            "CLICKHOUSE_PORT",
            "CLICKHOUSE_USER",
            "CLICKHOUSE_PASSWORD",
            "PROMETHEUS_URL",
        }, path


def test_the_duckdb_init_sql_reads_a_store_while_it_is_written(tmp_path: Path) -> None:
    """The provisioned initSql, with the store's path where Grafana substitutes it, is
    `otel-llm views`' SQL for that store: run on an in-memory DuckDB as the plugin runs it, it
    reads spans a writer sealed, and then the ones sealed after it connected."""
    init_sql = _provisioning("datasources/duckdb.yaml")["datasources"][0]["jsonData"]["initSql"]
    store_path = tmp_path / "store"
    expanded = init_sql.replace("${" + STORE_VARIABLE + "}", str(store_path))
    assert expanded.strip() == reader_sql(store_path).strip()
    store = Store(store_path)
    try:
        store.call()
        assert store.exporter.force_flush()
        conn = duckdb.connect(":memory:")
        conn.execute(expanded)
        assert conn.execute("SELECT count(*) FROM llm_calls").fetchone() == (1,)
        store.call()
        assert store.exporter.force_flush()
        assert conn.execute("SELECT count(*) FROM llm_calls").fetchone() == (2,)
        assert conn.execute("SELECT count(*) FROM llm_attempts_at(500)").fetchone() == (4,)
    finally:
        store.close()


def test_panel_keys_are_unique() -> None:
    """Every panel of the specification has its own key (the report's and tests' handle)."""
    keys = [panel.key for panel in (*PANELS, TRACE_VIEW)]
    assert len(set(keys)) == len(keys)


def test_the_trace_lookup_suffix_is_the_exporters() -> None:
    """Grafana's traceTimestampTableSuffix names the lookup table the exporter creates."""
    assert f'"%s"."%s{TRACE_ID_TS_SUFFIX}" %s (' in TRACE_ID_TS_TABLE


def test_the_worst_calls_link_keeps_the_dashboards_choices() -> None:
    """A trace id in the worst-calls table opens this dashboard on that call with the same
    time range, data source, filters and threshold (else the call may not be among the
    chosen-call options under the default filters)."""
    for _, model in _dashboards_json():
        (worst,) = (p for p in model["panels"] if p["title"] == "Worst stalled calls")
        (link,) = [
            link
            for override in worst["fieldConfig"]["overrides"]
            for prop in override["properties"]
            if prop["id"] == "links"
            for link in prop["value"]
        ]
        for name in (DATASOURCE, *FILTERS, "threshold"):
            assert "${" + name + ":queryparam}" in link["url"]
        assert "var-trace_id=${__value.raw}" in link["url"]


def test_the_dashboard_model_is_json_serialisable_and_stable() -> None:
    """Generating twice gives the same bytes (no ordering or set noise in the output)."""
    assert [json.dumps(dashboard(s)) for s in SOURCES] == [
        json.dumps(dashboard(s)) for s in SOURCES
    ]


WHOLE_MINUTES = "$__interval_s % 60 = 0"
"""How a ClickHouse panel over time chooses its rollup branch (else it reads the spans)."""


def test_the_clickhouse_panels_over_time_get_whole_minutes_at_any_range_and_width() -> None:
    """Each ClickHouse panel over time (the ones that read the rollups only in whole-minute
    buckets) sets a min interval of 1m, so the interval Grafana gives it is whole minutes — at
    the dashboard's default range (6 h), where it would be 10–30 s, and at any other, whatever
    the panel's width; the DuckDB panels set none."""
    model = dict(_dashboards_json())["clickhouse"]
    assert model["time"] == {"from": "now-6h", "to": "now"}
    rolled = [p for p in model["panels"] if WHOLE_MINUTES in p["targets"][0]["rawSql"]]
    assert {p["title"] for p in rolled} == {s.title for s in PANELS if s.kind == "timeseries"}
    assert all(p["interval"] == "1m" for p in rolled)
    assert all("interval" not in p for p in model["panels"] if p not in rolled)
    assert all("interval" not in p for p in dict(_dashboards_json())["duckdb"]["panels"])
    end = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    six_hours = end - timedelta(hours=6)
    assert grafana_interval(six_hours, end, 1000) == timedelta(seconds=20)  # without it
    for hours in (0.25, 1, 6, 24, 7 * 24, 30 * 24):
        for width_px in range(150, 4001, 10):
            interval = grafana_interval(
                end - timedelta(hours=hours), end, width_px, timedelta(minutes=1)
            )
            assert interval.total_seconds() % 60 == 0, (hours, width_px, interval)
