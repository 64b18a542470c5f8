"""The Prometheus dashboard (otel_llm/_show/_dashboards/_promql.py, _prometheus.py) as the SQL
dashboards are checked: committed and fresh (test_dashboards.py checks every generated file),
well-formed as Grafana's schema reads it, every reference the data source variable, a layout
inside the grid, the SQL panels' story in their order, and every metric name the names table's.

Its queries run on a real Prometheus in test_prometheus_live.py."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # "Prefer dashboardv2": see test_dashboards
    from grafana_foundation_sdk.models.dashboard import Dashboard

from otel_llm._measure._metric_names import (
    ATTEMPTS,
    CHUNK_GAP,
    DURATION,
    HEDGES,
    METRICS,
    STALL,
    STALL_COUNT,
    MetricName,
)
from otel_llm._show._dashboards import _grafana
from otel_llm._show._dashboards._panels import PANELS
from otel_llm._show._dashboards._prometheus import PROMETHEUS, dashboard
from otel_llm._show._dashboards._promql import (
    ALL_REGEX,
    FILTER_LABELS,
    PLUGIN,
    PROM_FILTERS,
    PROM_PANELS,
    label,
    prom_name,
)
from otel_llm._show._sql._panel_sql import DATASOURCE
from tests.support import REPOSITORY

register_default_plugins()
PATH = REPOSITORY / _grafana.ROOT / PROMETHEUS.name / _grafana.DASHBOARD_FILE
METRICS_ONLY = {"stalls_per_attempt", "breaker"}
"""Panels the metrics draw and the SQL dashboards do not (the SQL ones have per-call panels
instead: the worst calls, a call's timeline, the trace view)."""


def _model() -> dict[str, Any]:
    model: dict[str, Any] = json.loads(PATH.read_text(encoding="utf-8"))
    return model


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


def test_the_committed_file_is_the_generated_one() -> None:
    """dashboards/prometheus/otel-llm.json is what the generator writes now."""
    assert PATH.read_text(encoding="utf-8") == json.dumps(dashboard(), indent=2) + "\n"


def test_grafanas_schema_reads_every_field() -> None:
    """Read into grafana-foundation-sdk's dashboard model (the Prometheus query, the heatmap,
    bar gauge, stat, table and time-series options) and written back, the dashboard loses and
    changes nothing."""
    model = _model()
    round_trip = json.loads(json.dumps(Dashboard.from_json(model), cls=JSONEncoder))
    assert list(_differences(model, round_trip)) == []


def test_the_round_trip_check_sees_a_query_key_grafana_does_not_know() -> None:
    """A misspelt key of a Prometheus query is dropped by the model, and seen."""
    model = _model()
    model["panels"][0]["targets"][0]["legendFormatt"] = "x"
    round_trip = json.loads(json.dumps(Dashboard.from_json(model), cls=JSONEncoder))
    assert list(_differences(model, round_trip)) == ["lost /panels[0]/targets[0]/legendFormatt"]


def _refs(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "datasource":
                yield item
            yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def test_every_reference_is_the_datasource_variable() -> None:
    """Every panel, query and variable names the dashboard's ``${datasource}`` of the
    Prometheus plugin, whose default is the provisioned data source."""
    model = _model()
    refs = list(_refs(model["panels"])) + list(_refs(model["templating"]["list"]))
    assert refs
    assert all(ref == {"type": PLUGIN, "uid": "${" + DATASOURCE + "}"} for ref in refs), refs
    (variable,) = (v for v in model["templating"]["list"] if v["type"] == "datasource")
    assert (variable["name"], variable["query"]) == (DATASOURCE, PLUGIN)
    assert variable["current"]["value"] == PROMETHEUS.uid


def test_the_layout_and_targets_are_well_formed() -> None:
    """uid and title; unique ids; every panel inside the 24 columns without overlapping
    another; every target has an expression, its own refId, a format Grafana knows, and is
    instant exactly when it is not a range query."""
    model = _model()
    assert model["uid"] == "otel-llm-prometheus"
    panels = model["panels"]
    ids = [p["id"] for p in panels]
    assert len(set(ids)) == len(ids) == len(PROM_PANELS)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0
        assert 0 < grid["w"] <= 24 - grid["x"], panel["title"]
        mine = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs)
        for target in panel["targets"]:
            assert target["expr"].strip()
            assert target["format"] in ("time_series", "table", "heatmap")
            assert target["instant"] is not target["range"]
    for spec, panel in zip(PROM_PANELS, panels, strict=True):
        assert (panel["type"], panel["title"]) == (spec.kind, spec.title)


def test_the_sql_dashboards_story_in_its_order() -> None:
    """Every panel tells a SQL panel's figures under its key, in the SQL dashboards' order, or
    is one of the metrics-only panels; the SQL panels left out are the per-call ones."""
    sql_keys = [p.key for p in PANELS]
    shared = [p.key for p in PROM_PANELS if p.key not in METRICS_ONLY]
    assert set(shared) <= set(sql_keys)
    assert shared == sorted(shared, key=sql_keys.index)
    assert set(sql_keys) - set(shared) == {"worst", "timeline"}
    assert {p.key for p in PROM_PANELS} - set(shared) == METRICS_ONLY


_NAME = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}")
_CALL = ("service", "provider", "model")
_ATTEMPT = ("service", "provider", "model", "source")


def _names(expr: str) -> set[str]:
    return set(_NAME.findall(expr))


def _every_series_name() -> dict[str, MetricName]:
    names = {}
    for metric in METRICS:
        if metric.instrument == "counter":
            names[prom_name(metric)] = metric
        else:
            for series in ("bucket", "sum", "count"):
                names[prom_name(metric, series)] = metric  # type: ignore[arg-type]
    return names


def test_every_metric_name_is_the_tables() -> None:
    """Every metric a query or a variable reads is a name of the names table as the exporter
    translates it; together they read every metric the table has."""
    known = _every_series_name()
    model = _model()
    exprs = [t["expr"] for p in model["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in model["templating"]["list"] if v["type"] == "query"]
    read = set().union(*(_names(e) for e in exprs))
    assert read <= set(known), read - set(known)
    assert {known[name].key for name in read} == {m.key for m in METRICS}


def test_the_translation_of_names() -> None:
    """Dots become underscores; the unit ``s`` adds ``_seconds``, an annotation nothing; a
    counter ends in ``_total``; a histogram's series end in ``_bucket``/``_sum``/``_count`` --
    the names the remote-write exporter gave these metrics on a real Prometheus."""
    assert prom_name(DURATION, "bucket") == "gen_ai_client_operation_duration_seconds_bucket"
    assert prom_name(CHUNK_GAP, "count") == (
        "gen_ai_client_operation_time_per_output_chunk_seconds_count"
    )
    assert prom_name(STALL, "sum") == "otel_llm_client_stall_duration_seconds_sum"
    assert prom_name(STALL_COUNT, "bucket") == "otel_llm_client_attempt_stalls_bucket"
    assert prom_name(ATTEMPTS) == "otel_llm_client_attempts_total"
    assert prom_name(HEDGES) == "otel_llm_client_hedges_total"
    assert label("gen_ai.request.model") == "gen_ai_request_model"
    with pytest.raises(ValueError, match="no Prometheus suffix known for unit 'ms'"):
        prom_name(dataclasses.replace(DURATION, unit="ms"))  # a new unit: checked, not guessed


def test_the_variables() -> None:
    """Service (the job label), provider, model and source: multi-value, All as ``.*`` (every
    value and no label at all), options from ``label_values`` of a table metric; every query
    filters by the variables whose labels its metric has."""
    variables = {v["name"]: v for v in _model()["templating"]["list"]}
    for name in PROM_FILTERS:
        v = variables[name]
        assert (v["type"], v["multi"], v["includeAll"], v["allValue"]) == (
            "query",
            True,
            True,
            ALL_REGEX,
        )
        assert v["definition"] == v["query"]["query"]
        assert v["definition"].startswith("label_values(")
        assert v["definition"].endswith(f", {FILTER_LABELS[name]})")
    wanted = {
        **dict.fromkeys(("duration", "time_to_first_chunk", "stall", "generation"), _CALL),
        **dict.fromkeys(("attempts", "stall_count", "time_per_output_chunk"), _ATTEMPT),
        **dict.fromkeys(
            ("hedges", "hedge_wasted_requests", "hedge_wasted_chunks", "hedge_wasted_tokens"),
            ("service", "provider", "source"),
        ),
        "breaker_transitions": ("service", "source"),
    }
    assert set(wanted) == {m.key for m in METRICS}
    # Hedges per 100 calls: the calls within the filters the hedges have too.
    against_hedges = {("Hedge rate and win rate", "duration"): ("service", "provider")}
    known = _every_series_name()
    for panel in _model()["panels"]:
        for target in panel["targets"]:
            for name, selector in _SELECTOR.findall(target["expr"]):
                key = known[name].key
                filters = against_hedges.get((panel["title"], key), wanted[key])
                matchers = {f'{FILTER_LABELS[f]}=~"${f}"' for f in filters}
                assert matchers <= {m.strip() for m in selector.split(",")}, (name, selector)


@pytest.mark.parametrize("spec", PROM_PANELS, ids=[p.key for p in PROM_PANELS])
def test_units_match_what_the_queries_read(spec: Any) -> None:
    """A panel in seconds reads only seconds metrics; a percentage is 100 × a ratio; a count
    reads counters, buckets or the stall-count histogram."""
    for target in spec.targets:
        names = _names(target.expr)
        if spec.unit == "s":
            assert all("_seconds_" in n for n in names), names
        elif spec.unit == "percent":
            assert target.expr.startswith("100 * ")
        else:
            assert all(
                n.endswith(("_total", "_bucket")) or n.startswith("otel_llm_client_attempt_stalls")
                for n in names
            ), names


def test_the_docs_list_every_name_as_prometheus_sees_it() -> None:
    """docs/dashboards.md's Prometheus names table has a row per metric of the table, with the
    name the exporter gives it."""
    text = (REPOSITORY / "docs" / "dashboards.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([a-z_.]+)` \| `([a-z_]+)`", text, flags=re.MULTILINE))
    for metric in METRICS:
        series = "" if metric.instrument == "counter" else "bucket"
        assert rows.get(metric.current) == prom_name(metric, series), metric.current  # type: ignore[arg-type]
