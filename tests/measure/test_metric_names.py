"""The metric-name table against what is emitted, under each ``OTEL_SEMCONV_STABILITY_OPT_IN``."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import httpx2
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)

from otel_llm import Client, Source, observe_stream
from otel_llm import _semconv as sc
from otel_llm._env import OTEL_LLM_METRICS_CHUNK_GAPS, OTEL_SEMCONV_STABILITY_OPT_IN
from otel_llm._measure._metric_names import (
    BOTH_TOKEN,
    CLIENT_METRICS,
    METRICS,
    RENAMED_TOKEN,
    MetricName,
    Naming,
    naming_from_env,
)
from otel_llm.testing import Scripted, Spans, json_answer, sse_answer
from tests.support import REPOSITORY

BY_CURRENT = {metric.current: metric for metric in METRICS}
Point = HistogramDataPoint | NumberDataPoint


def points(reader: InMemoryMetricReader) -> dict[str, list[Point]]:
    data = reader.get_metrics_data()
    out: dict[str, list[Point]] = defaultdict(list)
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out[metric.name] += metric.data.data_points  # type: ignore[arg-type]
    return out


def _how_many(point: Point) -> float:
    """A histogram point's count, a counter's value."""
    return point.count if isinstance(point, HistogramDataPoint) else point.value


def _kind(point: Point) -> tuple[str, float]:
    operation = (point.attributes or {}).get(sc.GEN_AI_OPERATION_NAME)
    return str(operation), _how_many(point)


async def emitted(spans: Spans) -> dict[str, list[Point]]:
    """Every kind of call that records metrics: a streamed and a non-streamed chat, an
    embeddings call through the client, and a wrapped stream."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    vectors = httpx2.Response(200, json={"data": [{"index": 0, "embedding": [0.1]}]})
    script = Scripted({"a": [sse_answer(), json_answer(), vectors]})
    source = Source(name="a", provider="sim", base_url="http://a.test/v1", model="m")
    async with Client([source], http_client=script.client(), tracer_provider=spans.provider,
                      meter_provider=meters) as client:  # fmt: skip
        await client.chat([{"role": "user", "content": "x"}])
        await client.chat([{"role": "user", "content": "x"}], stream=False)
        await client.embed("x")
    chunks = [{"choices": [{"index": 0, "delta": {"content": "hi"}}]}] * 3
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    for _ in observe_stream(iter(chunks), provider="sim", model="m",
                            tracer_provider=spans.provider, meter_provider=meters):  # fmt: skip
        pass
    return points(reader)


@pytest.mark.parametrize(
    ("opt_in", "naming"),
    [
        (None, Naming.CURRENT),
        ("http/dup", Naming.CURRENT),
        (RENAMED_TOKEN, Naming.RENAMED),
        (f"http, {RENAMED_TOKEN}", Naming.RENAMED),
        (BOTH_TOKEN, Naming.BOTH),
        (f"{RENAMED_TOKEN},{BOTH_TOKEN}", Naming.BOTH),
    ],
)
async def test_the_emitted_names_are_the_tables(
    spans: Spans, monkeypatch: pytest.MonkeyPatch, opt_in: str | None, naming: Naming
) -> None:
    """Each kind of point (metric and operation) a run records under the current names is
    recorded under exactly the names the table gives for the chosen naming, as many times: a
    name emitted that the table does not give, or one it gives that is missing, fails."""
    monkeypatch.delenv(OTEL_SEMCONV_STABILITY_OPT_IN, raising=False)
    monkeypatch.setenv(OTEL_LLM_METRICS_CHUNK_GAPS, "true")  # every metric there is
    baseline = await emitted(spans)
    assert set(baseline) == {m.current for m in METRICS if m not in CLIENT_METRICS}
    if opt_in is not None:
        monkeypatch.setenv(OTEL_SEMCONV_STABILITY_OPT_IN, opt_in)
    assert naming_from_env() is naming
    got = await emitted(spans)
    expected: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for current, found in baseline.items():
        metric = BY_CURRENT[current]  # a name the table does not own fails here
        for point in found:
            operation = (point.attributes or {}).get(sc.GEN_AI_OPERATION_NAME)
            assert isinstance(operation, str)
            for name in metric.names(naming, operation):
                expected[name].append((operation, _how_many(point)))
    assert {name: sorted(map(_kind, found)) for name, found in got.items()} == {
        name: sorted(values) for name, values in expected.items()
    }
    assert {sc.OPERATION_CHAT, sc.OPERATION_EMBEDDINGS} <= {
        (p.attributes or {}).get(sc.GEN_AI_OPERATION_NAME) for found in got.values() for p in found
    }


def test_the_renamed_names() -> None:
    """The new names of the conventions' draft: inference metrics under
    ``gen_ai.client.inference.*``, an embeddings call's duration under its own name, otel-llm's
    own metrics unchanged."""
    renamed = {
        (metric.key, operation): metric.names(Naming.RENAMED, operation)
        for metric in METRICS
        for operation in (sc.OPERATION_CHAT, sc.OPERATION_EMBEDDINGS)
    }
    assert renamed[("duration", sc.OPERATION_CHAT)] == ("gen_ai.client.inference.duration",)
    assert renamed[("duration", sc.OPERATION_EMBEDDINGS)] == ("gen_ai.client.embeddings.duration",)
    assert renamed[("time_to_first_chunk", sc.OPERATION_CHAT)] == (
        "gen_ai.client.inference.time_to_first_chunk",
    )
    assert all(
        metric.names(naming) == (metric.current,)
        for metric in METRICS
        if metric.current.startswith("otel_llm.")
        for naming in Naming
    )
    assert all(metric.current.startswith("otel_llm.") for metric in CLIENT_METRICS)


def _documented(metric: MetricName) -> list[str]:
    return [metric.current, *dict.fromkeys(metric.all_names(Naming.RENAMED))]


def test_the_docs_table_lists_every_name() -> None:
    """docs/telemetry.md's metric table has one row per metric with its current name and every
    new name the table gives it."""
    text = (Path(REPOSITORY) / "docs" / "telemetry.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    for metric in METRICS:
        row = next((line for line in rows if line.startswith(f"| `{metric.current}`")), None)
        assert row is not None, metric.current
        assert all(f"`{name}`" in row for name in _documented(metric)), row
