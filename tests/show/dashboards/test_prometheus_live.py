"""The Prometheus dashboard against a real Prometheus (Debian's ``prometheus`` 2.x, with its
remote-write receiver) fed by the real Collector (``collector/duckdb.yaml``'s metrics pipeline
sending by remote write) fed by real SDK traffic: ``otel_llm.Client`` against the simulator with
scripted stalls, a hedge, a watchdog kill and a breaker that opens.

The traffic runs twice. The first run makes every series exist and its metrics are exported once
(T0); the second run's metrics are exported once more (T1); each run's spans and both runs' go
into stores. Each query of the generated dashboard, with Grafana's variables filled in as
Grafana fills them, runs on Prometheus' /api/v1/query at the end of a dashboard range from T0
and must return data, in the panel's unit, agreeing with the store's figures for the second run:
a total over the range ending at T1 exactly (its window starts and ends on a sample: Prometheus
extrapolates nothing), and a total over a range holding a series' first export counts it;
a rate at the instant its window starts on T0, where Prometheus extrapolates every series alike,
so a ratio of rates exactly too; TTFT p95 within the bucket of the store's p95."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    InMemoryMetricReader,
    MetricExportResult,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource

from otel_llm import Client, SegmentSpanExporter, Source
from otel_llm import _env as env
from otel_llm import _semconv as sc
from otel_llm._measure._metric_names import GAP_BOUNDARIES, SECONDS_BOUNDARIES
from otel_llm._show._dashboards import _grafana
from otel_llm._show._dashboards._prometheus import PROMETHEUS, SCRAPE_INTERVAL
from otel_llm._show._dashboards._promql import ALL_REGEX, FILTER_LABELS, PROM_FILTERS
from otel_llm._show._sql._views import winner_on
from otel_llm._show._store._breakdown import run_query
from otel_llm.cli._collector import CollectorRun, Ports, collector_dir, free_port
from otel_llm.simulator import Script, Silence, SimulatedProvider
from otel_llm.testing import Spans
from tests.conftest import require
from tests.support import REPOSITORY

SERVICE: Final = "prom-live"
MESSAGES: Final = [{"role": "user", "content": "hi"}]
_STREAM: Final[dict[str, Any]] = {"chunk_interval_s": 0.005, "chunk_count": 20}
SCRIPTS: Final = {
    "quick": Script(first_chunk_delay_s=0.05, **_STREAM),
    "slow-start": Script(first_chunk_delay_s=0.2, **_STREAM),
    "stalls": Script(
        first_chunk_delay_s=0.05,
        **_STREAM,
        silences=(Silence(after_chunk=3, duration_s=0.15), Silence(after_chunk=9, duration_s=0.45)),
    ),
    "stall": Script(
        first_chunk_delay_s=0.05,
        **_STREAM,
        silences=(Silence(after_chunk=3, duration_s=3.0, keepalive_every_s=0.05),),
    ),
    "dead": Script(
        first_chunk_delay_s=0.05, **_STREAM, silences=(Silence(after_chunk=4, duration_s=2.0),)
    ),
    "fail": Script(error_status=500),
}
"""The simulated answers, by the model a source asks for: TTFT 50 ms or 200 ms (each well inside
one bucket of the histogram), two stalls, a long stall a hedge cuts short, a dead stream the
watchdog kills, a failure that opens a breaker."""
THRESHOLD_MS: Final = 100
WINNERS: Final = f"llm_calls c JOIN llm_attempts a ON {winner_on('c', 'a')}"
"""Each call with its winning attempt, whose source's provider and model the call's metrics
carry."""
DASHBOARD: Final = REPOSITORY / _grafana.ROOT / PROMETHEUS.name / _grafana.DASHBOARD_FILE
START_TIMEOUT_S: Final = 60.0
ARRIVAL_TIMEOUT_S: Final = 30.0


# --- Prometheus, the process ------------------------------------------------------------------


def _http_json(url: str, data: dict[str, str] | None = None) -> Any:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with urllib.request.urlopen(url, data=body, timeout=10) as answer:
        return json.loads(answer.read())


@contextlib.contextmanager
def _prometheus(folder: Path) -> Iterator[str]:
    """Debian's prometheus on a free 127.0.0.1 port with the remote-write receiver, its data in
    ``folder`` and no scrape jobs; its base URL while the block runs."""
    binary = shutil.which("prometheus")
    require(binary is not None, "prometheus (Debian's package; ./dev test installs it)")
    assert binary is not None
    port = free_port()
    config = folder / "prometheus.yml"
    config.write_text("global: {}\n")
    log = (folder / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-remote-write-receiver",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert process.poll() is None, (folder / "prometheus.log").read_text()
            with (
                contextlib.suppress(urllib.error.URLError, OSError),
                urllib.request.urlopen(f"{base}/-/ready", timeout=1) as answer,
            ):
                if answer.status == 200:
                    break
            assert time.monotonic() < deadline, "prometheus did not get ready"
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _query(base: str, expr: str, at_s: float) -> list[dict[str, Any]]:
    """``expr`` on /api/v1/query at ``at_s`` (Unix seconds, millisecond precision): its vector,
    or a failure naming Prometheus' error."""
    try:
        answer = _http_json(f"{base}/api/v1/query", {"query": expr, "time": f"{at_s:.3f}"})
    except urllib.error.HTTPError as exc:
        pytest.fail(f"{expr}: {exc.read().decode(errors='replace')}")
    assert answer["status"] == "success", answer
    assert answer["data"]["resultType"] == "vector", expr
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def _samples(base: str) -> dict[str, set[int]]:
    """The timestamps (ms) of the samples of each of the service's series (by its labels)."""
    now = time.time()
    answer = _http_json(
        f"{base}/api/v1/query", {"query": f'{{job="{SERVICE}"}}[1h]', "time": f"{now:.3f}"}
    )
    return {
        json.dumps(series["metric"], sort_keys=True): {
            round(float(ts) * 1000) for ts, _ in series["values"]
        }
        for series in answer["data"]["result"]
    }


def _flushed(base: str, provider: MeterProvider, before: int | None) -> int:
    """Export the metrics now and wait until Prometheus has them: their one timestamp (ms).
    After an earlier export (at ``before``), wait until every series it had has a sample at
    the new time too (a cumulative export sends every series again, and the Collector may have
    split the export into more than one remote-write request)."""
    assert provider.force_flush(30_000)
    deadline = time.monotonic() + ARRIVAL_TIMEOUT_S
    while True:
        samples = _samples(base)
        stamps = set().union(*samples.values()) - ({before} if before is not None else set())
        if stamps:
            (stamp,) = stamps  # one collection, one timestamp for every series
            earlier = {key for key, times in samples.items() if before in times}
            if all(stamp in samples[key] for key in earlier):
                return stamp
        assert time.monotonic() < deadline, "the metrics never all reached Prometheus"
        time.sleep(0.2)


# --- the traffic ------------------------------------------------------------------------------


def _src(provider: SimulatedProvider, name: str, model: str, **fields: Any) -> Source:
    return Source(
        name=name,
        provider=fields.pop("vendor", "sim"),
        base_url=provider.base_url,
        model=model,
        **fields,
    )


async def _traffic(sim: SimulatedProvider, spans: Spans, meters: MeterProvider) -> None:
    options: dict[str, Any] = {
        "stall_threshold_ms": THRESHOLD_MS,
        "backoff_base_s": 0.01,
        "tracer_provider": spans.provider,
        "meter_provider": meters,
    }

    async def quick() -> None:
        async with Client([_src(sim, "a", "quick")], **options) as client:
            for _ in range(3):
                await client.chat(MESSAGES)
            await client.chat(MESSAGES, stream=False)

    async def slow_start() -> None:
        async with Client([_src(sim, "a", "slow-start")], **options) as client:
            for _ in range(2):
                await client.chat(MESSAGES)

    async def stalls() -> None:
        async with Client([_src(sim, "eu", "stalls", vendor="sim-eu")], **options) as client:
            for _ in range(2):
                await client.chat(MESSAGES)

    async def hedged() -> None:
        legs = [_src(sim, "a", "stall"), _src(sim, "b", "quick", priority=1)]
        async with Client(legs, hedge_stall_after_s=0.2, **options) as client:
            await client.chat(MESSAGES)

    async def breaker() -> None:
        legs = [_src(sim, "a", "fail"), _src(sim, "b", "stalls", priority=1)]
        async with Client(
            legs, breaker_failure_threshold=1, same_source_retries=0, **options
        ) as client:
            await client.chat(MESSAGES)

    async def killed() -> None:
        legs = [
            _src(sim, "a", "dead", inter_token_timeout_s=0.25),
            _src(sim, "b", "quick", priority=1),
        ]
        async with Client(legs, same_source_retries=0, **options) as client:
            await client.chat(MESSAGES)

    await asyncio.gather(quick(), slow_start(), stalls(), hedged(), breaker(), killed())


async def _run(spans: Spans, meters: MeterProvider) -> None:
    async with SimulatedProvider(scripts=SCRIPTS) as sim:
        await _traffic(sim, spans, meters)


# --- the run ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Live:
    """Prometheus with two exports of the traffic's metrics, and the spans in stores: the
    second run's (``store``), the first run's and both runs'."""

    base: str
    store: Path
    t0_ms: int
    t1_ms: int
    first_store: Path
    both_store: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        return _query(self.base, expr, self.t1_ms / 1000)

    def store_rows(self, sql: str, store: Path | None = None) -> list[tuple[Any, ...]]:
        return list(run_query(store or self.store, sql, canned=True).rows)


@dataclass(frozen=True)
class _Fd:
    """A file descriptor to close (the collector's log: the child has its own copy)."""

    fd: int

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture(scope="module")
def collector_binary() -> Path:
    """The collector ./dev test built (a skip locally without it, a failure in CI)."""
    named = os.environ.get(env.OTEL_LLM_COLLECTOR_BIN, "")
    require(
        bool(named) and Path(named).is_file(),
        f"the collector binary (collector/build.sh, then {env.OTEL_LLM_COLLECTOR_BIN}=PATH; "
        "./dev test does both)",
    )
    return Path(named)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, collector_binary: Path) -> Iterator[Live]:
    """Prometheus ← the Collector (duckdb.yaml, metrics to prometheus_remote_write) ← the
    traffic, twice; the second run's spans in a store."""
    folder = tmp_path_factory.mktemp("prom-live")
    with _prometheus(folder) as base, pytest.MonkeyPatch.context() as patch:
        patch.setenv(env.OTEL_LLM_METRICS_CHUNK_GAPS, "true")
        ports = Ports.free()
        log = os.open(folder / "collector.log", os.O_WRONLY | os.O_CREAT, 0o644)
        run = CollectorRun(
            collector_binary,
            collector_dir() / "duckdb.yaml",
            store=folder / "collector-store",  # its own (no spans are sent to it)
            ports=ports,
            log=log,
            extra_env={
                env.OTEL_LLM_COLLECTOR_METRICS_EXPORTERS: "[prometheus_remote_write]",
                env.OTEL_LLM_PROMETHEUS_REMOTE_WRITE_URL: f"{base}/api/v1/write",
            },
        )
        with contextlib.closing(_Fd(log)), run:
            exporter = OTLPMetricExporter(endpoint=f"http://127.0.0.1:{ports.http}/v1/metrics")
            reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
            meters = MeterProvider(
                metric_readers=[reader], resource=Resource.create({"service.name": SERVICE})
            )
            try:
                first = Spans()
                asyncio.run(_run(first, meters))
                first.check()
                first_spans = first.finished()
                first.provider.shutdown()
                t0 = _flushed(base, meters, None)
                second = Spans()
                asyncio.run(_run(second, meters))
                second.check()
                spans = second.finished()
                second.provider.shutdown()
                t1 = _flushed(base, meters, t0)
            finally:
                meters.shutdown()
        stores = {"store": spans, "first-store": first_spans, "both-store": first_spans + spans}
        for name, held in stores.items():
            writer = SegmentSpanExporter(folder / name)
            writer.export(held)
            assert writer.force_flush(60_000)
            writer.shutdown()
        yield Live(base, folder / "store", t0, t1, folder / "first-store", folder / "both-store")


# --- Grafana's substitution --------------------------------------------------------------------


def _go_duration(ms: int) -> str:
    """A duration as Go's time.Duration.String writes it for whole seconds (``4m0s``), which
    Grafana puts in place of ``$__rate_interval``."""
    seconds = ms // 1000
    assert seconds * 1000 == ms
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{minutes}m{seconds}s"
    return f"{seconds}s"


def _seconds(text: str) -> int:
    match = re.fullmatch(r"(\d+)s", text)
    assert match, text
    return int(match[1])


MAX_DATA_POINTS: Final = 1000
_METACHARACTERS: Final = re.compile(r"[$^*{}\[\]+?.()|]")


def _regex_escape(value: str) -> str:
    """A chosen value as Grafana's prometheusSpecialRegexEscape writes it into a PromQL string:
    a backslash as four, a regex metacharacter after two (one for the string, one for the
    regex)."""
    return _METACHARACTERS.sub(lambda m: "\\\\" + m[0], value.replace("\\", "\\" * 4))


SCRAPE_MS: Final = _seconds(SCRAPE_INTERVAL) * 1000


def _intervals(range_ms: int) -> tuple[int, int]:
    """``$__interval`` and ``$__rate_interval`` (ms) for a range: the interval is the data
    source's scrape interval when the range over the panel's points is shorter, as here."""
    assert range_ms / MAX_DATA_POINTS < SCRAPE_MS  # the data source's minimum wins
    interval_ms = SCRAPE_MS
    return interval_ms, max(interval_ms + SCRAPE_MS, 4 * SCRAPE_MS)


RATE_MS: Final = _intervals(0)[1]
"""``$__rate_interval`` of every range the tests use (four scrape intervals: 4 min)."""


def grafana_expr(
    expr: str, *, from_ms: int, to_ms: int, filters: dict[str, list[str]] | None = None
) -> str:
    """``expr`` as Grafana's Prometheus data source sends it for the range ``from_ms`` ..
    ``to_ms`` (its interpolateVariables: ``$__interval`` as :func:`_intervals` says;
    ``$__rate_interval`` max(interval + scrape interval, 4 × scrape interval), written as Go
    writes a duration; ``$__range_ms`` the range in ms;
    ``$__range`` its seconds, rounded), then the filter variables: All is the variables'
    ``allValue`` (``.*``), chosen values escaped as Grafana escapes them and joined with
    ``|``."""
    range_ms = to_ms - from_ms
    interval_ms, rate_ms = _intervals(range_ms)
    range_s = round(range_ms / 1000)
    for name, value in (
        ("__interval_ms", str(interval_ms)),
        ("__interval", _go_duration(interval_ms)),
        ("__range_ms", str(range_ms)),
        ("__range_s", str(range_s)),
        ("__range", f"{range_s}s"),
        ("__rate_interval", _go_duration(rate_ms)),
    ):
        expr = expr.replace(f"${name}", value).replace(f"${{{name}}}", value)
    chosen = filters or {}
    for name in PROM_FILTERS:
        values = chosen.get(name)
        text = ALL_REGEX if values is None else "|".join(_regex_escape(v) for v in values)
        if values is not None and len(values) > 1:
            text = f"({text})"
        expr = expr.replace(f"${name}", text).replace(f"${{{name}}}", text)
    assert "$" not in expr, expr
    return expr


def test_grafana_substitution_fills_every_variable() -> None:
    """Every variable of every query of the dashboard is filled in (none left for Prometheus to
    refuse), the windows as Grafana writes them."""
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    filled = [grafana_expr(e, from_ms=1_000, to_ms=5_321) for e in exprs]
    assert any("[4m0s]" in e for e in filled)
    assert any("[4321ms]" in e for e in filled)
    one = grafana_expr('x{job=~"$service"}', from_ms=0, to_ms=1, filters={"service": ["a.b"]})
    assert one == r'x{job=~"a\\.b"}'


# --- the checks -------------------------------------------------------------------------------


def _panels() -> list[dict[str, Any]]:
    board: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    panels: list[dict[str, Any]] = board["panels"]
    return panels


Window = tuple[int, int]
"""A dashboard range, from and to (Unix ms)."""


def _as_grafana(
    live: Live, target: dict[str, Any], window: Window | None = None, **filters: list[str]
) -> list[dict[str, Any]]:
    """``target`` run as Grafana runs it at the end of a dashboard range that starts at T0: a
    total over the range (an instant query) with the range ending at T1, so its window starts
    and ends on a sample and Prometheus extrapolates nothing; a rate (a point of a chart) at
    the instant its window starts on T0, so Prometheus extrapolates every series alike (by half
    the time between the samples, at the window's end: T0 and T1 are both in it) and a ratio of
    rates is the ratio of what the second run added. ``window``: a total over that range
    instead."""
    to_ms = live.t1_ms if target["instant"] else live.t0_ms + RATE_MS
    from_ms = live.t0_ms
    if window is not None:
        assert target["instant"]
        from_ms, to_ms = window
    expr = grafana_expr(target["expr"], from_ms=from_ms, to_ms=to_ms, filters=filters)
    return _query(live.base, expr, to_ms / 1000)


def _results(live: Live, **filters: list[str]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every target of every panel, by (panel title, legend), run as Grafana would."""
    return {
        (panel["title"], target["legendFormat"]): _as_grafana(live, target, **filters)
        for panel in _panels()
        for target in panel["targets"]
    }


def _value(series: dict[str, Any]) -> float:
    return float(series["value"][1])


def _by(results: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    return {tuple(r["metric"].get(x, "") for x in labels): _value(r) for r in results}


def _panel(title: str) -> dict[str, Any]:
    (panel,) = (p for p in _panels() if p["title"] == title)
    return panel


def _target(
    live: Live, title: str, index: int = 0, window: Window | None = None, **filters: list[str]
) -> list[dict[str, Any]]:
    return _as_grafana(live, _panel(title)["targets"][index], window, **filters)


def test_every_query_returns_data(live: Live) -> None:
    """Every PromQL query of the generated dashboard runs on Prometheus and returns series --
    but the losing legs' wasted tokens, which no hedge of this traffic knows (its losers are
    cancelled mid-stream), exactly as the store has none."""
    results = _results(live)
    empty = sorted(key for key, found in results.items() if not found)
    assert empty == [
        ("Hedging: fired, won and waste, per trigger", "wasted tokens ({{otel_llm_hedge_trigger}})")
    ]
    ((tokens,),) = live.store_rows("SELECT sum(hedge_waste_tokens) FROM llm_calls WHERE hedges > 0")
    assert tokens is None
    assert len(results) == sum(len(p["targets"]) for p in _panels())


def test_the_units(live: Live) -> None:
    """A panel in seconds reads _seconds metrics and gives seconds (the p95 TTFT of the 200 ms
    script at least 0.2, far below 200); a percentage is 100 × a ratio, between 0 and 100; a
    count is a whole number of _total or bucket series."""
    for panel in _panels():
        unit = panel["fieldConfig"]["defaults"]["unit"]
        for target in panel["targets"]:
            names = set(re.findall(r"([a-z_]+)\{", target["expr"]))
            if panel["type"] == "heatmap":
                assert panel["options"]["yAxis"]["unit"] == "s"
                assert all(n.endswith("_seconds_bucket") for n in names), names
            elif unit == "s":
                assert all("_seconds_" in n for n in names), names
            elif unit == "percent":
                assert target["expr"].startswith("100 * ")
                for series in _target(live, panel["title"], panel["targets"].index(target)):
                    # PromQL's float arithmetic may land a hair beyond 100 (100.00000000000001)
                    assert 0 <= _value(series) <= 100 + 1e-9, series
            else:
                assert unit == "short"
                assert not any("_seconds_" in n and not n.endswith("_bucket") for n in names)
    (slow,) = [
        s
        for s in _target(live, "Time to first chunk: p50 / p95 / p99", 1)
        if s["metric"].get(FILTER_LABELS["model"]) == "slow-start"
    ]
    # Seconds, not milliseconds: its scripted first-chunk delay is 200 ms, so at least 0.2, and
    # far below the 200 a figure in milliseconds would be; a loaded machine may add a second or
    # more (test_ttft_p95_from_the_buckets holds the exact bucket, against the store's p95).
    assert 0.2 <= _value(slow) < 20


def _check_totals(live: Live, window: Window, store: Path, runs: int) -> None:
    """The totals over ``window`` — attempts by outcome and leg, by stall count, errors by type,
    hedges fired and won, their wasted requests and chunks, the breaker's moves — are the
    figures of the ``runs`` runs ``store`` holds."""

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return live.store_rows(sql, store)

    outcomes = _by(
        _target(live, "Attempts by outcome", window=window),
        "otel_llm_attempt_outcome",
        "otel_llm_attempt_leg",
    )
    found = rows("SELECT outcome, leg, count(*) FROM llm_attempts GROUP BY 1, 2")
    assert outcomes == {(o, leg): float(n) for o, leg, n in found}
    assert {sc.OUTCOME_OK, sc.OUTCOME_ERROR, sc.OUTCOME_HEDGE_CANCELLED} <= {o for o, _ in outcomes}

    buckets = _by(_target(live, "Attempts by number of stalls", window=window), "le")
    counts = [n for (n,) in rows(
        "SELECT stall_count FROM llm_attempts WHERE stall_count IS NOT NULL"
    )]  # fmt: skip
    assert buckets == {
        (le,): float(sum(1 for n in counts if le == "+Inf" or n <= float(le))) for (le,) in buckets
    }
    assert buckets[("+Inf",)] > buckets[("0",)] > 0

    errors = _by(
        _target(live, "Errors by type", window=window),
        "gen_ai_provider_name",
        "gen_ai_request_model",
        "otel_llm_attempt_outcome",
        "error_type",
    )
    not_errors = ", ".join(f"'{o}'" for o in sorted(sc.OUTCOMES_WITHOUT_FIGURES))
    found = rows(
        "SELECT provider, model, outcome, error_type, count(*) FROM llm_attempts "
        f"WHERE error_type IS NOT NULL AND outcome NOT IN ({not_errors}) GROUP BY 1, 2, 3, 4"
    )
    assert errors == {tuple(r[:4]): float(r[4]) for r in found}
    assert len(errors) >= 2  # the failed source and the watchdog's kill

    title = "Hedging: fired, won and waste, per trigger"
    hedging = {
        t["legendFormat"].split(" (")[0]: _by(
            _target(live, title, i, window=window), "otel_llm_hedge_trigger"
        )
        for i, t in enumerate(_panel(title)["targets"])
    }
    ((hedges, won, chunks),) = rows(
        "SELECT sum(hedges), count_if(hedge_won), sum(hedge_waste_chunks) FROM llm_calls "
        "WHERE hedges > 0"
    )
    ((losers,),) = rows(
        f"SELECT count(*) FROM llm_attempts WHERE outcome = '{sc.OUTCOME_HEDGE_CANCELLED}'"
    )
    assert hedging["hedges"] == {("stall",): float(hedges)}
    assert hedging["won"] == {("stall",): float(won)}
    assert hedging["wasted requests"] == {("stall",): float(losers)}
    assert hedging["wasted chunks"] == {("stall",): float(chunks)}
    assert hedges > 0
    assert won > 0
    assert chunks > 0

    breaker = _by(
        _target(live, "Breaker state changes", window=window),
        "otel_llm_attempt_source",
        "otel_llm_breaker_state",
    )
    assert breaker == {("a", "open"): float(runs)}  # the failing source, once a run


def test_totals_over_the_range_equal_the_stores(live: Live) -> None:
    """Over the range T0..T1 (both samples in the window: nothing extrapolated), every total is
    the store's figure for the second run."""
    _check_totals(live, (live.t0_ms, live.t1_ms), live.store, runs=1)


BEFORE_MS: Final = 10 * 60_000
"""How long before T0 the ranges that hold the first export start (Grafana's "last 10 minutes"
seen at T0)."""


def test_totals_count_a_series_from_its_first_export(live: Live) -> None:
    """A series is born with its first export (a process's first, or a label set's first: a new
    error type), holding what was counted before it: a range that holds that export counts it.
    Over the 10 minutes up to T0 every total is the first run's figure (each series has one
    sample there), and over the 10 minutes before T0 up to T1 both runs' figures."""
    _check_totals(live, (live.t0_ms - BEFORE_MS, live.t0_ms), live.first_store, runs=1)
    _check_totals(live, (live.t0_ms - BEFORE_MS, live.t1_ms), live.both_store, runs=2)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9)


def test_rates_agree_with_the_store(live: Live) -> None:
    """Over the rate interval (both exports in it), the mean call's net and stall seconds, the
    stall share and the stalls per attempt by provider/model, and hedges per 100 calls and their
    win rate are the store's (to float precision: every series is extrapolated alike, so each
    ratio is the second run's); the mean call's wall seconds too, within the 5 ms a call by which
    the duration metric's clock and the span's timestamps differ."""
    ((calls, net_ms, stall_ms, wall_ns),) = live.store_rows(
        "SELECT count(*), sum(coalesce(generation_ms, 0)), sum(coalesce(stall_ms, 0)), "
        "sum(duration_ns) FROM llm_calls WHERE coalesce(error_type, '') <> 'CancelledError'"
    )
    title = "Where the time went: net generation + stall, per call"
    split = {
        t["legendFormat"]: _value(_target(live, title, i)[0])
        for i, t in enumerate(_panel(title)["targets"])
    }
    assert _close(split["net_s"], net_ms / 1000 / calls), (split, net_ms / calls)
    assert _close(split["stall_s"], stall_ms / 1000 / calls), (split, stall_ms / calls)
    # The duration metric is the call's whole milliseconds on the client's clock; the span's
    # duration its timestamps', which start before that clock and end after it.
    wall_s = wall_ns / 1e9 / calls
    assert wall_s - 0.005 <= split["wall_s"] <= wall_s, (split, wall_s)

    share = _by(
        _target(live, "Stall share of wall time"), "gen_ai_provider_name", "gen_ai_request_model"
    )
    rows = live.store_rows(
        f"SELECT a.provider, a.model, sum(c.stall_ms), sum(c.generation_ms) FROM {WINNERS} "
        "WHERE c.stall_ms IS NOT NULL GROUP BY 1, 2"
    )
    expected: dict[tuple[str, ...], float] = {
        (p, m): 100 * s / (s + g) for p, m, s, g in rows if s + g > 0
    }
    assert share.keys() == expected.keys()
    for key, value in share.items():
        assert math.isclose(value, expected[key], rel_tol=1e-9), (key, value, expected[key])
    assert max(share.values()) > 10

    per_attempt = _by(
        _target(live, "Stalls per attempt"), "gen_ai_provider_name", "gen_ai_request_model"
    )
    rows = live.store_rows(
        "SELECT provider, model, avg(stall_count) FROM llm_attempts "
        "WHERE stall_count IS NOT NULL GROUP BY 1, 2"
    )
    assert per_attempt.keys() == {(p, m) for p, m, _ in rows}
    for p, m, mean in rows:
        assert math.isclose(per_attempt[(p, m)], mean, rel_tol=1e-9), (
            p,
            m,
            per_attempt[(p, m)],
            mean,
        )

    title = "Hedge rate and win rate"
    per_100 = _by(_target(live, title, 0), "otel_llm_hedge_trigger")
    win = _by(_target(live, title, 1), "otel_llm_hedge_trigger")
    ((hedges, won),) = live.store_rows(
        "SELECT sum(hedges), count_if(hedge_won) FROM llm_calls WHERE hedges > 0"
    )
    assert _close(per_100[("stall",)], 100 * hedges / calls)
    assert _close(win[("stall",)], 100 * won / hedges)


def _bucket(value: float, edges: tuple[float, ...]) -> int:
    return next((i for i, edge in enumerate(edges) if value <= edge), len(edges))


def test_ttft_p95_from_the_buckets(live: Live) -> None:
    """Per provider/model, histogram_quantile's p95 of TTFT falls in the histogram bucket of the
    store's p95 of the calls' TTFT (nearest rank: the value a 95th-percentile rank reaches,
    which is the observation histogram_quantile interpolates inside the bucket of)."""
    p95 = _by(
        _target(live, "Time to first chunk: p50 / p95 / p99", 1),
        "gen_ai_provider_name",
        "gen_ai_request_model",
    )
    ttfts: dict[tuple[str, str], list[float]] = {}
    for provider, model, ms in live.store_rows(
        f"SELECT a.provider, a.model, c.ttft_ms FROM {WINNERS} WHERE c.ttft_ms IS NOT NULL"
    ):
        ttfts.setdefault((provider, model), []).append(ms / 1000)
    assert p95.keys() == ttfts.keys()
    for key, values in ttfts.items():
        ranked = sorted(values)[math.ceil(0.95 * len(values)) - 1]
        found = p95[key]
        assert _bucket(found, SECONDS_BOUNDARIES) == _bucket(ranked, SECONDS_BOUNDARIES), (
            key,
            found,
            sorted(values),
        )


def test_the_chunk_gap_heatmap(live: Live) -> None:
    """The heatmap's buckets are the gap histogram's edges; its gaps per call (both counted over
    the same rate window) are the store's: every gap between two chunks of every attempt."""
    buckets = _by(_target(live, "Gaps between chunks"), "le")
    assert {float(le) for (le,) in buckets} == {*GAP_BOUNDARIES, math.inf}
    calls = _as_grafana(
        live,
        {
            "expr": 'sum(increase(gen_ai_client_operation_duration_seconds_count{job=~"$service"}'
            "[$__rate_interval]))",
            "instant": False,
        },
    )
    received = f"TRY_CAST(\"SpanAttributes\"['{sc.CHUNK_COUNT_RECORDED}'] AS BIGINT)"
    ((gaps,),) = live.store_rows(
        f"SELECT sum(greatest(coalesce({received}, 0) - 1, 0)) FROM otel_traces "
        f"WHERE \"LlmRole\" = '{sc.SPAN_ROLE_ATTEMPT}'"
    )
    ((stored_calls,),) = live.store_rows(
        "SELECT count(*) FROM llm_calls WHERE coalesce(error_type, '') <> 'CancelledError'"
    )
    assert _close(buckets[("+Inf",)] / _value(calls[0]), gaps / stored_calls)


def test_a_filter_keeps_only_its_values(live: Live) -> None:
    """Filtered by one model (as Grafana sends a chosen value: regex-escaped), the outcomes are
    that model's attempts only, and the call panels that model's calls."""
    outcomes = _by(
        _target(live, "Attempts by outcome", model=["slow-start"]), "otel_llm_attempt_outcome"
    )
    assert outcomes == {(sc.OUTCOME_OK,): 2.0}
    share = _target(live, "Stall share of wall time", model=["stalls"])
    assert {s["metric"]["gen_ai_request_model"] for s in share} == {"stalls"}
    assert _target(live, "Stall share of wall time", model=["nothing-like-this"]) == []


def test_an_unreachable_prometheus_costs_the_app_nothing(
    collector_binary: Path, tmp_path: Path
) -> None:
    """The ClickHouse config with its metrics to a Prometheus that is not there: the app's
    metrics export is answered at once with success, and the collector keeps running."""
    ports = Ports.free()
    closed = free_port()
    run = CollectorRun(
        collector_binary,
        collector_dir() / "clickhouse.yaml",
        store=None,
        ports=ports,
        log=subprocess.DEVNULL,
        extra_env={
            env.OTEL_LLM_CLICKHOUSE_ENDPOINT: f"tcp://127.0.0.1:{free_port()}",
            env.OTEL_LLM_COLLECTOR_METRICS_EXPORTERS: "[prometheus_remote_write]",
            env.OTEL_LLM_PROMETHEUS_REMOTE_WRITE_URL: f"http://127.0.0.1:{closed}/api/v1/write",
        },
    )
    with run:
        reader = InMemoryMetricReader()
        meters = MeterProvider(
            metric_readers=[reader], resource=Resource.create({"service.name": SERVICE})
        )
        meters.get_meter("t").create_counter("otel_llm.test.points").add(1)
        data = reader.get_metrics_data()
        assert data is not None
        exporter = OTLPMetricExporter(endpoint=f"http://127.0.0.1:{ports.http}/v1/metrics")
        started = time.monotonic()
        assert exporter.export(data) is MetricExportResult.SUCCESS
        assert time.monotonic() - started < 10.0
        exporter.shutdown()
        meters.shutdown()
        assert run.running
    with socket.socket() as probe:  # nothing ever listened there
        assert probe.connect_ex(("127.0.0.1", closed)) != 0


def test_the_store_agrees_with_itself(live: Live) -> None:
    """The store holds the second run only: its calls are the traffic's (11 a run)."""
    ((calls,),) = live.store_rows("SELECT count(*) FROM llm_calls")
    assert calls == 11
    assert Counter(m for (m,) in live.store_rows("SELECT model FROM llm_calls"))["quick"] >= 4


def _label_values(live: Live, definition: str) -> list[str]:
    """A variable's ``label_values(selector, label)`` as Grafana's Prometheus data source asks
    for it: /api/v1/label/<label>/values with the selector as ``match[]``, over the range (a
    Grafana that does not know the server's version reads /api/v1/series: the same values)."""
    match = re.fullmatch(r"label_values\((.+), (\w+)\)", definition)
    assert match, definition
    selector = grafana_expr(match[1], from_ms=live.t0_ms, to_ms=live.t1_ms)
    query = urllib.parse.urlencode(
        {
            "match[]": selector,
            "start": f"{live.t0_ms / 1000:.3f}",
            "end": f"{live.t1_ms / 1000:.3f}",
        }
    )
    answer = _http_json(f"{live.base}/api/v1/label/{match[2]}/values?{query}")
    assert answer["status"] == "success", answer
    values: list[str] = answer["data"]
    return values


def test_the_variables_offer_the_stores_values(live: Live) -> None:
    """The filter variables' options, asked for as Grafana asks: the service, the providers and
    models of the calls' winners (the call metrics' labels), the sources of the attempts."""
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    variables = {
        v["name"]: v["definition"] for v in board["templating"]["list"] if "definition" in v
    }
    assert set(variables) == set(PROM_FILTERS)
    winners = live.store_rows(f"SELECT DISTINCT a.provider, a.model FROM {WINNERS}")
    sources = live.store_rows("SELECT DISTINCT source FROM llm_attempts")
    assert _label_values(live, variables["service"]) == [SERVICE]
    assert _label_values(live, variables["provider"]) == sorted({p for p, _ in winners})
    assert _label_values(live, variables["model"]) == sorted({m for _, m in winners})
    assert _label_values(live, variables["source"]) == sorted(s for (s,) in sources)


# --- totals on crafted samples -------------------------------------------------------------------

EXPORT_S: Final = 60
"""The crafted series' export interval."""
CRAFTED: Final[dict[str, tuple[dict[int, int], float]]] = {
    # a series exported all along: what it grew by within the range
    "steady": ({t: t // 30 for t in range(0, 1201, EXPORT_S)}, 40 - 20),
    # born in the range (a process's first exports): everything it holds
    "born": ({t: 5 + i for i, t in enumerate(range(660, 1201, EXPORT_S))}, 14),
    # one export in the range: what it holds
    "once": ({900: 3}, 3),
    # its process restarted under the same labels within the range: 8 before, 6 after
    "restarted": (
        {**{t: 20 + 2 * i for i, t in enumerate(range(600, 841, EXPORT_S))}, 900: 1, 960: 2}
        | {t: 3 + i for i, t in enumerate(range(1020, 1201, EXPORT_S))},
        14,
    ),
    # restarted between its last sample before the range and its first in it: the new process's
    "restarted-before": (
        {570: 20} | {t: 1 + i for i, t in enumerate(range(660, 1201, EXPORT_S))},
        10,
    ),
    # no sample in the range: nothing
    "gone": ({t: t // 60 for t in range(0, 541, EXPORT_S)}, math.nan),
}
"""Each crafted series (by its outcome label): its samples (seconds after the base: value) and
what it counted within the range 600..1200 s."""


def test_totals_on_crafted_samples(tmp_path: Path) -> None:
    """The totals' query on series backfilled into a real Prometheus (promtool), over the range
    600..1200 s after a base: a series' growth, a born series' whole value, a single sample's
    value, a counter that restarted within or just before the range counted from its restart;
    exactly, where ``increase`` loses a series' first export and extrapolates the rest."""
    expected = {(case,): total for case, (_, total) in CRAFTED.items() if not math.isnan(total)}
    assert _crafted_totals(tmp_path, CRAFTED, 600, 1200) == expected


def test_a_range_shorter_than_the_export_interval_counts_growth_not_the_whole(
    tmp_path: Path,
) -> None:
    """A dashboard range of 20 s over a series exported every 60 s (zoomed in on a spike): its
    one sample in the range less the one before it (the last export's growth), not the
    whole counter the process held, as if the series were born in those 20 s."""
    steady = {t: t // 30 for t in range(0, 1201, EXPORT_S)}
    crafted = {"steady": (steady, 40 - 38), "once": ({1190: 3}, 3)}
    expected = {(case,): total for case, (_, total) in crafted.items()}
    assert _crafted_totals(tmp_path, crafted, 1180, 1200) == expected


def _crafted_totals(
    tmp_path: Path, crafted: dict[str, tuple[dict[int, int], float]], from_s: int, to_s: int
) -> dict[tuple[str, ...], float]:
    """The attempts' totals (by outcome) over ``from_s..to_s`` after a base, of ``crafted``
    series backfilled with promtool."""
    promtool = shutil.which("promtool")
    require(promtool is not None, "promtool (Debian's prometheus package)")
    assert promtool is not None
    base_s = (int(time.time()) // 3600 - 2) * 3600  # well inside the retention, in the past
    lines = ["# TYPE otel_llm_client_attempts counter"]
    for case, (samples, _) in crafted.items():
        labels = f'job="crafted",otel_llm_attempt_outcome="{case}",otel_llm_attempt_leg="x"'
        lines += [
            f"otel_llm_client_attempts_total{{{labels}}} {value} {base_s + t}"
            for t, value in sorted(samples.items())
        ]
    text = tmp_path / "crafted.om"
    text.write_text("\n".join([*lines, "# EOF", ""]))
    data = tmp_path / "data"
    made = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(text), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    with _prometheus(tmp_path) as base:
        (target,) = _panel("Attempts by outcome")["targets"]
        from_ms, to_ms = (base_s + from_s) * 1000, (base_s + to_s) * 1000
        expr = grafana_expr(target["expr"], from_ms=from_ms, to_ms=to_ms)
        return _by(_query(base, expr, to_ms / 1000), "otel_llm_attempt_outcome")
