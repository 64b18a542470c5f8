"""Histograms beside the spans: names, units, the boundary at the default threshold."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

from otel_llm import Client, Source
from otel_llm._measure._clock import use_clock
from otel_llm._measure._metrics import (
    GENERATION_DURATION,
    OPERATION_DURATION,
    STALL_DURATION,
    TIME_TO_FIRST_CHUNK,
)
from otel_llm._wrap._observe import observe_stream
from otel_llm.testing import Scripted, error, sse_answer
from tests.conftest import Spans
from tests.stream_scripts import FakeClock, scripted


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


def points(reader: InMemoryMetricReader) -> dict[str, list[HistogramDataPoint]]:
    data = reader.get_metrics_data()
    out: dict[str, list[HistogramDataPoint]] = {}
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                out[metric.name] = list(metric.data.data_points)  # type: ignore[arg-type]
    return out


def test_wrapped_stream_records_the_four_histograms(
    spans: Spans, reader: InMemoryMetricReader
) -> None:
    """A wrapped stream records duration, TTFT, stall and net generation in seconds."""
    provider = MeterProvider(metric_readers=[reader])
    clock = FakeClock()
    with use_clock(clock):
        for _ in observe_stream(
            scripted(clock, [40, 5, 2_000, 5]),
            provider="sim",
            model="m",
            tracer_provider=spans.provider,
            meter_provider=provider,
        ):
            pass
    got = points(reader)
    assert set(got) == {
        OPERATION_DURATION,
        TIME_TO_FIRST_CHUNK,
        STALL_DURATION,
        GENERATION_DURATION,
    }
    (stall,) = got[STALL_DURATION]
    assert stall.sum == pytest.approx(2.0)
    assert 1.0 in stall.explicit_bounds, "a bucket boundary at the default threshold"
    (ttft,) = got[TIME_TO_FIRST_CHUNK]
    assert ttft.sum == pytest.approx(0.04)
    (duration,) = got[OPERATION_DURATION]
    assert dict(duration.attributes or {})["gen_ai.operation.name"] == "chat"
    provider.shutdown()


async def test_client_records_calls_and_failures(
    spans: Spans, reader: InMemoryMetricReader
) -> None:
    """The client records each call once; a failed call records its duration and error.type."""
    provider = MeterProvider(metric_readers=[reader])
    script = Scripted({"a": [sse_answer(), error(400)]})
    source = Source(name="a", provider="sim", base_url="http://a.test/v1", model="m")
    async with Client(
        [source],
        http_client=script.client(),
        tracer_provider=spans.provider,
        meter_provider=provider,
    ) as client:
        await client.chat([{"role": "user", "content": "x"}])
        with pytest.raises(Exception, match="400"):
            await client.chat([{"role": "user", "content": "x"}])
    durations = points(reader)[OPERATION_DURATION]
    kinds: dict[Any, int] = {}
    for point in durations:
        kinds[dict(point.attributes or {}).get("error.type")] = point.count
    assert kinds == {None: 1, "BadRequest": 1}
    provider.shutdown()
