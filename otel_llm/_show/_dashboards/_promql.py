"""The Prometheus dashboard's panels: the SQL dashboards' story told in PromQL over the metrics the
Collector's ``prometheus_remote_write`` exporter writes.

A panel here has the key of the :data:`~otel_llm._show._dashboards._panels.PANELS` panel whose
figures it shows from the metrics (:data:`PROM_PANELS` keeps their order); the per-call panels
(the worst calls, a call's chunk timeline, the trace view) have no metric to read and are not
here; the panels only metrics can draw (stalls per attempt, the per-gap heatmap, breaker state
changes) have keys of their own. :mod:`._grafana` turns them into ``dashboards/prometheus/``.

Every metric name comes from the names table (:mod:`otel_llm._measure._metric_names`, current
names) translated the way the exporter translates them (:func:`prom_name`): dots to underscores,
the unit as a suffix (``_seconds``; an annotation such as ``{stall}`` adds nothing), ``_total``
for a counter, ``_bucket`` / ``_sum`` / ``_count`` for a histogram's series. Attribute keys
become labels the same way (``gen_ai.request.model`` → ``gen_ai_request_model``); the resource's
``service.name`` becomes ``job``.

Grafana fills in ``$__rate_interval`` (over time) and ``${__range_ms}`` (totals over the
dashboard's range: the exact range in milliseconds, where ``$__range`` would round it to whole
seconds) and the filter variables, each a regular expression (All: ``.*``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from otel_llm import _semconv as sc
from otel_llm._measure._metric_names import (
    ATTEMPTS,
    BREAKER_TRANSITIONS,
    CHUNK_GAP,
    DURATION,
    GENERATION,
    HEDGE_WASTED_CHUNKS,
    HEDGE_WASTED_REQUESTS,
    HEDGE_WASTED_TOKENS,
    HEDGES,
    STALL,
    STALL_COUNT,
    TIME_TO_FIRST_CHUNK,
    MetricName,
)
from otel_llm._show._sql._panel_sql import MODEL, SERVICE, SOURCE

PLUGIN: Final = "prometheus"
"""Grafana's Prometheus data source type."""
PROVIDER: Final = "provider"
"""The provider filter (the call-level metrics carry the provider, not the source)."""
PROM_FILTERS: Final = (SERVICE, PROVIDER, MODEL, SOURCE)
"""The dashboard's multi-value filter variables."""
ALL_REGEX: Final = ".*"
"""The filters' "All" value: every value, and no label at all."""


def label(attribute: str) -> str:
    """The Prometheus label of a metric attribute (``gen_ai.request.model`` →
    ``gen_ai_request_model``)."""
    return attribute.replace(".", "_")


JOB: Final = "job"
"""The label the exporter gives the resource's ``service.name``."""
FILTER_LABELS: Final = {
    SERVICE: JOB,
    PROVIDER: label(sc.GEN_AI_PROVIDER_NAME),
    MODEL: label(sc.GEN_AI_REQUEST_MODEL),
    SOURCE: label(sc.ATTEMPT_SOURCE),
}
"""Each filter variable's label."""

_UNIT_SUFFIXES: Final = {"s": "seconds"}
"""The exporter's word for each unit the names table uses (an annotation in braces, such as
``{stall}``, adds none); a unit not here is an error, not a guess."""

Series = Literal["", "bucket", "sum", "count"]


def prom_name(metric: MetricName, series: Series = "") -> str:
    """The name Prometheus stores ``metric`` under (its current name), or one series of a
    histogram (``bucket``, ``sum``, ``count``)."""
    name = metric.current.replace(".", "_")
    if metric.unit.startswith("{") and metric.unit.endswith("}"):
        unit = ""
    elif metric.unit in _UNIT_SUFFIXES:
        unit = _UNIT_SUFFIXES[metric.unit]
    else:
        raise ValueError(f"{metric.current}: no Prometheus suffix known for unit {metric.unit!r}")
    if unit and not name.endswith(f"_{unit}"):
        name = f"{name}_{unit}"
    if metric.instrument == "counter":
        name = f"{name}_total"
    return f"{name}_{series}" if series else name


RATE: Final = "$__rate_interval"
RANGE: Final = "${__range_ms}ms"
"""The two windows Grafana fills in: over time, and the dashboard's whole range."""

_CALL: Final = (SERVICE, PROVIDER, MODEL)
_ATTEMPT: Final = (SERVICE, PROVIDER, MODEL, SOURCE)
_HEDGE: Final = (SERVICE, PROVIDER, SOURCE)
_BREAKER: Final = (SERVICE, SOURCE)
"""The filters each kind of metric has the labels of."""


def _selector(filters: tuple[str, ...], *more: str) -> str:
    matchers = [f'{FILTER_LABELS[name]}=~"${name}"' for name in filters]
    return "{" + ", ".join([*matchers, *more]) + "}"


def _over(
    function: str, metric: MetricName, series: Series, filters: tuple[str, ...], window: str
) -> str:
    return f"{function}({prom_name(metric, series)}{_selector(filters)}[{window}])"


def _total(metric: MetricName, series: Series, filters: tuple[str, ...], *more: str) -> str:
    """What a counter (or a histogram's series) of each label set counted within the
    dashboard's range, read from the samples themselves, not ``increase``: a series is born
    with its first export holding everything counted before it (a process's first export, a
    label set's first, such as a new error type), which ``increase`` never counts (it reads
    the growth between samples in its window; a series with one sample has none). So, per
    series: its last sample in the range minus its last one before the range (within a range's
    length of its start, or Prometheus' lookback, 5 minutes by default, for a range shorter
    than the export interval, whose window before may hold no sample); the last sample whole
    when there is none before (born in the range), or when the counter went back (its process
    restarted under the same labels, between the two); ``increase`` over the range when it went
    back within the range."""
    x = f"{prom_name(metric, series)}{_selector(filters, *more)}"
    last = f"last_over_time({x}[{RANGE}])"
    before = f"(last_over_time({x}[{RANGE}] offset {RANGE}) or {x} offset {RANGE})"
    resets = f"resets({x}[{RANGE}])"
    return (
        f"(({last} - {before} >= 0) unless {resets} > 0)"
        f" or (increase({x}[{RANGE}]) unless {resets} == 0)"
        f" or {last}"
    )


_BY_MODEL: Final = f"{FILTER_LABELS[PROVIDER]}, {FILTER_LABELS[MODEL]}"
_MODEL_LEGEND: Final = "{{" + FILTER_LABELS[PROVIDER] + "}}/{{" + FILTER_LABELS[MODEL] + "}}"
_TRIGGER: Final = label(sc.HEDGE_TRIGGER)
_OUTCOME: Final = label(sc.ATTEMPT_OUTCOME)
_LEG: Final = label(sc.ATTEMPT_LEG)
_HEDGE_OUTCOME: Final = label(sc.HEDGE_OUTCOME)
_ERROR: Final = label(sc.ERROR_TYPE)
_STATE: Final = label(sc.BREAKER_STATE)

Format = Literal["time_series", "table", "heatmap"]
Kind = Literal["timeseries", "bargauge", "stat", "table", "heatmap"]
Unit = Literal["s", "percent", "short"]


@dataclass(frozen=True, slots=True)
class PromTarget:
    """One PromQL query of a panel."""

    expr: str
    legend: str
    instant: bool = False
    """One value at the range's end (totals over the range) instead of a series over time."""
    format: Format = "time_series"
    """``heatmap``: Grafana turns a histogram's cumulative buckets into per-bucket counts."""


@dataclass(frozen=True, slots=True)
class PromPanel:
    """One panel of the Prometheus dashboard."""

    key: str
    """The key of the SQL panel whose figures it shows, or its own for a metrics-only panel."""
    title: str
    kind: Kind
    description: str
    targets: tuple[PromTarget, ...]
    unit: Unit
    """``s``: seconds (the ``_seconds`` metrics); ``percent``: 100 × a ratio; ``short``: a
    count."""
    width: int = 12
    height: int = 8
    stacked: tuple[str, ...] = ()
    """Legends drawn stacked; the other series of a stacked panel are dashed lines over them."""

    @property
    def legends(self) -> tuple[str, ...]:
        return tuple(t.legend for t in self.targets)


def _time_split() -> tuple[PromTarget, ...]:
    calls = f"sum({_over('rate', DURATION, 'count', _CALL, RATE)})"
    return tuple(
        PromTarget(f"sum({_over('rate', metric, 'sum', _CALL, RATE)}) / {calls}", legend)
        for metric, legend in ((GENERATION, "net_s"), (STALL, "stall_s"), (DURATION, "wall_s"))
    )


def _stall_share() -> tuple[PromTarget, ...]:
    stall = f"sum by ({_BY_MODEL}) ({_over('rate', STALL, 'sum', _CALL, RATE)})"
    net = f"sum by ({_BY_MODEL}) ({_over('rate', GENERATION, 'sum', _CALL, RATE)})"
    return (PromTarget(f"100 * {stall} / ({stall} + {net})", _MODEL_LEGEND),)


def _quantile(q: float, metric: MetricName, filters: tuple[str, ...], by: str) -> str:
    buckets = f"sum by (le, {by}) ({_over('rate', metric, 'bucket', filters, RATE)})"
    return f"histogram_quantile({q}, {buckets})"


def _ttft() -> tuple[PromTarget, ...]:
    return tuple(
        PromTarget(
            _quantile(q, TIME_TO_FIRST_CHUNK, _CALL, _BY_MODEL),
            f"p{round(q * 100)} {_MODEL_LEGEND}",
        )
        for q in (0.5, 0.95, 0.99)
    )


def _stall_counts() -> tuple[PromTarget, ...]:
    buckets = f"sum by (le) ({_total(STALL_COUNT, 'bucket', _ATTEMPT)})"
    return (PromTarget(buckets, "{{le}}", instant=True, format="heatmap"),)


def _stalls_per_attempt() -> tuple[PromTarget, ...]:
    total = f"sum by ({_BY_MODEL}) ({_over('rate', STALL_COUNT, 'sum', _ATTEMPT, RATE)})"
    attempts = f"sum by ({_BY_MODEL}) ({_over('rate', STALL_COUNT, 'count', _ATTEMPT, RATE)})"
    return (PromTarget(f"{total} / {attempts}", _MODEL_LEGEND),)


def _chunk_gaps() -> tuple[PromTarget, ...]:
    buckets = f"sum by (le) ({_over('increase', CHUNK_GAP, 'bucket', _ATTEMPT, RATE)})"
    return (PromTarget(buckets, "{{le}}", format="heatmap"),)


def _outcomes() -> tuple[PromTarget, ...]:
    counted = f"sum by ({_OUTCOME}, {_LEG}) ({_total(ATTEMPTS, '', _ATTEMPT)})"
    legend = "{{" + _OUTCOME + "}} ({{" + _LEG + "}})"
    return (PromTarget(counted, legend, instant=True),)


def _hedge_total(metric: MetricName, *more: str) -> str:
    return f"sum by ({_TRIGGER}) ({_total(metric, '', _HEDGE, *more)})"


def _hedging() -> tuple[PromTarget, ...]:
    trigger = " ({{" + _TRIGGER + "}})"
    won = f'{_HEDGE_OUTCOME}="{sc.HEDGE_WON}"'
    return tuple(
        PromTarget(expr, legend + trigger, instant=True)
        for expr, legend in (
            (_hedge_total(HEDGES), "hedges"),
            (_hedge_total(HEDGES, won), "won"),
            (_hedge_total(HEDGE_WASTED_REQUESTS), "wasted requests"),
            (_hedge_total(HEDGE_WASTED_CHUNKS), "wasted chunks"),
            (_hedge_total(HEDGE_WASTED_TOKENS), "wasted tokens"),
        )
    )


def _hedge_rate() -> tuple[PromTarget, ...]:
    def hedges(*more: str) -> str:
        inner = f"{prom_name(HEDGES)}{_selector(_HEDGE, *more)}[{RATE}]"
        return f"sum by ({_TRIGGER}) (rate({inner}))"

    # The calls within the filters the hedges have too (a hedge carries no model, a call no
    # source): with a model or source chosen, hedges and calls still count the same traffic.
    calls = f"scalar(sum({_over('rate', DURATION, 'count', (SERVICE, PROVIDER), RATE)}))"
    won = f'{_HEDGE_OUTCOME}="{sc.HEDGE_WON}"'
    trigger = " ({{" + _TRIGGER + "}})"
    return (
        PromTarget(f"100 * {hedges()} / {calls}", "hedges per 100 calls" + trigger),
        PromTarget(f"100 * {hedges(won)} / {hedges()}", "won" + trigger),
    )


_NOT_ERRORS: Final = "|".join(sorted(sc.OUTCOMES_WITHOUT_FIGURES))
"""Outcomes that carry an ``error.type`` but are no error: a hedge's loser, a call given up."""


def _errors() -> tuple[PromTarget, ...]:
    errors = (_ERROR + '!=""', _OUTCOME + '!~"' + _NOT_ERRORS + '"')
    counted = _total(ATTEMPTS, "", _ATTEMPT, *errors)
    by = f"{_BY_MODEL}, {_OUTCOME}, {_ERROR}"
    return (PromTarget(f"sum by ({by}) ({counted}) > 0", "", instant=True, format="table"),)


def _breaker() -> tuple[PromTarget, ...]:
    source = FILTER_LABELS[SOURCE]
    moved = _total(BREAKER_TRANSITIONS, "", _BREAKER)
    legend = "{{" + source + "}} → {{" + _STATE + "}}"
    return (PromTarget(f"sum by ({source}, {_STATE}) ({moved})", legend, instant=True),)


_RATES: Final = (
    "Rates over Grafana's rate interval ($__rate_interval: set the data source's scrape "
    "interval to the SDK's metric export interval, 60 s by default)."
)
_TOTALS: Final = "Totals over the dashboard's time range."

PROM_PANELS: Final = (
    PromPanel(
        "time_split",
        "Where the time went: net generation + stall, per call",
        "timeseries",
        "The mean call's seconds, stacked: net generation below, stall above; the dashed line "
        "is the mean call's whole duration. What lies between the stack and the line is time "
        "outside the winning attempt's streamed generation (calls not streamed, failed "
        "attempts, backoff). net generation: the winning attempt's wall time minus its stalls; "
        "stall: the gaps between two chunks longer than the stall threshold. " + _RATES,
        _time_split(),
        "s",
        width=24,
        height=9,
        stacked=("net_s", "stall_s"),
    ),
    PromPanel(
        "stall_share",
        "Stall share of wall time",
        "timeseries",
        "Per provider/model: 100 × stall / (net generation + stall), the share of the winning "
        "attempts' wall time lost to stalls. " + _RATES,
        _stall_share(),
        "percent",
    ),
    PromPanel(
        "ttft",
        "Time to first chunk: p50 / p95 / p99",
        "timeseries",
        "Per provider/model, the percentiles of TTFT (request issued to the first incremental "
        "chunk) estimated from the histogram's buckets (histogram_quantile: within a bucket, "
        "linear). " + _RATES,
        _ttft(),
        "s",
    ),
    PromPanel(
        "stall_counts",
        "Attempts by number of stalls",
        "bargauge",
        "How many attempts stalled 0, 1, 2 … times: a bar labelled n holds the attempts with "
        "more stalls than the bar before it and at most n. " + _TOTALS,
        _stall_counts(),
        "short",
        width=8,
    ),
    PromPanel(
        "stalls_per_attempt",
        "Stalls per attempt",
        "timeseries",
        "Per provider/model, the mean number of stalls of an attempt. " + _RATES,
        _stalls_per_attempt(),
        "short",
        width=8,
    ),
    PromPanel(
        "chunk_gaps",
        "Gaps between chunks",
        "heatmap",
        "Every provider-side gap between two chunks, by bucket over time (one bucket edge at "
        "the default stall threshold, 1 s). Recorded only with OTEL_LLM_METRICS_CHUNK_GAPS=true "
        "(one point per gap: on long streams it costs as much again as reading the stream).",
        _chunk_gaps(),
        "s",
        width=8,
    ),
    PromPanel(
        "outcomes",
        "Attempts by outcome",
        "bargauge",
        "Every attempt (primary and hedge legs, retries) by how it ended and its leg: ok, "
        "error, watchdog_killed, hedge_cancelled (a leg that lost its hedged round), "
        "cancelled, closed, dropped. " + _TOTALS,
        _outcomes(),
        "short",
    ),
    PromPanel(
        "hedging",
        "Hedging: fired, won and waste, per trigger",
        "stat",
        "hedges: hedge legs started; won: rounds a hedge leg won; wasted requests: the legs "
        "that lost; wasted chunks: what the losing legs had streamed when they were "
        "cancelled; wasted tokens: where the provider reported them (no data: none known). "
        + _TOTALS,
        _hedging(),
        "short",
        height=5,
    ),
    PromPanel(
        "hedge_rate",
        "Hedge rate and win rate",
        "timeseries",
        "Per trigger: hedges started per 100 calls, and the share of hedges a hedge leg "
        "won. Hedges carry no model: the model filter leaves them (and the calls they are "
        "counted against) alone. " + _RATES,
        _hedge_rate(),
        "percent",
        height=5,
    ),
    PromPanel(
        "errors",
        "Errors by type",
        "table",
        "Attempts that ended with an error type (error.type), by provider/model and outcome; "
        "a hedge's cancelled loser and an attempt its caller gave up are no errors. " + _TOTALS,
        _errors(),
        "short",
    ),
    PromPanel(
        "breaker",
        "Breaker state changes",
        "bargauge",
        "How often each source's breaker moved to each state (open, half_open, closed). " + _TOTALS,
        _breaker(),
        "short",
    ),
)
"""The Prometheus dashboard's panels, in order."""


def variable_query(name: str) -> str:
    """The options of filter ``name``: the label's values on the metric that has it, within the
    filters before it (Grafana's ``label_values``)."""
    metric = prom_name(ATTEMPTS) if name == SOURCE else prom_name(DURATION, "count")
    before = PROM_FILTERS[: PROM_FILTERS.index(name)]
    scope = _selector(before) if before else ""
    return f"label_values({metric}{scope}, {FILTER_LABELS[name]})"
