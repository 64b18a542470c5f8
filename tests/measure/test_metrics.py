"""Histograms beside the spans: names, units, the boundary at the default threshold."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx2
import pytest
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import StatusCode

from otel_llm import AllSourcesExhausted, Client, Source, observe_stream
from otel_llm import _semconv as sc
from otel_llm._measure._metric_names import (
    ATTEMPTS,
    BREAKER_TRANSITIONS,
    DURATION,
    GENERATION,
    STALL,
    STALL_COUNT,
)
from otel_llm._measure._metric_names import TIME_TO_FIRST_CHUNK as TTFT
from otel_llm.testing import Scripted, Spans, error, sse_answer, use_clock
from tests.support.stream_scripts import FakeClock, scripted


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


def test_wrapped_stream_records_the_call_and_the_attempt(
    spans: Spans, reader: InMemoryMetricReader
) -> None:
    """A wrapped stream records duration, TTFT, stall and net generation in seconds, and its
    attempt: counted by outcome, with its stalls (one here, of 2 s); no gaps unless asked."""
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
        DURATION.current,
        TTFT.current,
        STALL.current,
        GENERATION.current,
        ATTEMPTS.current,
        STALL_COUNT.current,
    }
    (attempts,) = got[ATTEMPTS.current]
    assert attempts.value == 1  # type: ignore[attr-defined]
    assert dict(attempts.attributes or {})[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    (stalls,) = got[STALL_COUNT.current]
    assert (stalls.count, stalls.sum) == (1, 1)
    assert stalls.explicit_bounds[:3] == (0.0, 1.0, 2.0)
    (stall,) = got[STALL.current]
    assert stall.sum == pytest.approx(2.0)
    assert 1.0 in stall.explicit_bounds, "a bucket boundary at the default threshold"
    (ttft,) = got[TTFT.current]
    assert ttft.sum == pytest.approx(0.04)
    (duration,) = got[DURATION.current]
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
    durations = points(reader)[DURATION.current]
    kinds: dict[Any, int] = {}
    for point in durations:
        kinds[dict(point.attributes or {}).get("error.type")] = point.count
    assert kinds == {None: 1, "BadRequest": 1}
    provider.shutdown()


class _SlowStart(SpanProcessor):
    """A processor slow to see a span start, as any is on a busy machine."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        time.sleep(0.005)


async def test_a_failed_call_s_duration_lies_within_its_span(
    spans: Spans, reader: InMemoryMetricReader
) -> None:
    """The duration metric of a failed call, as of an answered one, is whole milliseconds on
    the client's clock read once the call's span has started: never more than the span's own
    duration, however long starting the span took (it was read before, and exact, so a failed
    call's metric exceeded its span by the span's start)."""
    spans.provider.add_span_processor(_SlowStart())
    provider = MeterProvider(metric_readers=[reader])
    script = Scripted({"a": [error(400)]})
    source = Source(name="a", provider="sim", base_url="http://a.test/v1", model="m")
    async with Client(
        [source],
        http_client=script.client(),
        tracer_provider=spans.provider,
        meter_provider=provider,
    ) as client:
        with pytest.raises(Exception, match="400"):
            await client.chat([{"role": "user", "content": "x"}])
    (point,) = points(reader)[DURATION.current]
    (call,) = spans.calls()
    assert call.end_time is not None
    assert call.start_time is not None
    milliseconds = point.sum * 1000
    assert milliseconds == round(milliseconds), "whole milliseconds"
    assert point.sum * 1e9 <= call.end_time - call.start_time
    provider.shutdown()


async def test_a_cancelled_client_call_records_no_duration(
    spans: Spans, reader: InMemoryMetricReader
) -> None:
    """A call whose task is cancelled ends its span (``CancelledError``, marked cancelled, an
    ERROR status, no exception event) and records no duration: cancelling is the caller's
    choice, not a duration of the provider's; its attempt is counted, as cancelled."""
    provider = MeterProvider(metric_readers=[reader])
    asked = asyncio.Event()

    async def hang(request: httpx2.Request) -> httpx2.Response:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    source = Source(name="a", provider="sim", base_url="http://a.test/v1", model="m")
    async with Client(
        [source],
        http_client=Scripted({"a": [hang]}).client(),
        tracer_provider=spans.provider,
        meter_provider=provider,
    ) as client:
        task = asyncio.ensure_future(client.chat([{"role": "user", "content": "x"}]))
        await asked.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    (call,) = spans.calls()
    attributes = dict(call.attributes or {})
    assert attributes["error.type"] == "CancelledError"
    assert attributes[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CANCELLED
    assert call.status.status_code is StatusCode.ERROR
    assert [event.name for event in call.events] == []
    got = points(reader)
    assert set(got) == {ATTEMPTS.current}, "no call metric, not even a duration"
    (attempts,) = got[ATTEMPTS.current]
    assert attempts.value == 1  # type: ignore[attr-defined]
    assert dict(attempts.attributes or {})[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CANCELLED
    provider.shutdown()


async def test_a_failed_client_call_carries_one_exception_event(
    spans: Spans, reader: InMemoryMetricReader
) -> None:
    """A failed call span carries the error's type, an ``exception`` event with the raised
    error's own traceback (never its chain), and an ERROR status — the wrappers' shape."""
    script = Scripted({"a": [error(500)]})
    source = Source(name="a", provider="sim", base_url="http://a.test/v1", model="m")
    async with Client(
        [source], http_client=script.client(), tracer_provider=spans.provider, max_attempts=1
    ) as client:
        with pytest.raises(AllSourcesExhausted):
            await client.chat([{"role": "user", "content": "x"}])
    (call,) = spans.calls()
    (event,) = call.events
    assert event.name == "exception"
    assert dict(event.attributes or {})["exception.type"] == "AllSourcesExhausted"
    stack = str(dict(event.attributes or {})["exception.stacktrace"])
    assert "AllSourcesExhausted" in stack
    assert "direct cause" not in stack
    assert "ExceptionGroup" not in stack
    assert call.status.status_code is StatusCode.ERROR


def test_a_closed_wrapped_stream_is_not_an_error(
    spans: Spans, reader: InMemoryMetricReader
) -> None:
    """A wrapped stream the application closes early: ``error.type = closed`` on the span and
    the metric, but no ERROR status and no exception event — nothing failed."""
    provider = MeterProvider(metric_readers=[reader])
    clock = FakeClock()
    with use_clock(clock):
        stream = observe_stream(
            scripted(clock, [40, 5, 5, 5]),
            provider="sim",
            model="m",
            tracer_provider=spans.provider,
            meter_provider=provider,
        )
        next(iter(stream))
        stream.close()
    (call,) = spans.calls()
    assert dict(call.attributes or {})["error.type"] == sc.OUTCOME_CLOSED
    assert call.status.status_code is StatusCode.UNSET
    assert list(call.events) == []
    (duration,) = points(reader)[DURATION.current]
    assert dict(duration.attributes or {})["error.type"] == sc.OUTCOME_CLOSED
    provider.shutdown()


async def test_a_breaker_opening_is_counted(spans: Spans, reader: InMemoryMetricReader) -> None:
    """A source that fails opens its breaker (threshold 1): one transition to ``open`` for that
    source, counted; the call fails over to the next source and answers."""
    provider = MeterProvider(metric_readers=[reader])
    script = Scripted({"a": [error(500)], "b": [sse_answer()]})
    sources = [
        Source(name="a", provider="sim", base_url="http://a.test/v1", model="m"),
        Source(name="b", provider="sim", base_url="http://b.test/v1", model="m", priority=1),
    ]
    async with Client(sources, http_client=script.client(), tracer_provider=spans.provider,
                      meter_provider=provider, breaker_failure_threshold=1,
                      same_source_retries=0) as client:  # fmt: skip
        result = await client.chat([{"role": "user", "content": "x"}])
    assert result.source == "b"
    (moved,) = points(reader)[BREAKER_TRANSITIONS.current]
    assert dict(moved.attributes or {}) == {sc.ATTEMPT_SOURCE: "a", sc.BREAKER_STATE: "open"}
    assert moved.value == 1  # type: ignore[attr-defined]
    provider.shutdown()


class _MeterOfAnOlderApi(metrics.NoOpMeter):
    """A meter written against an OpenTelemetry API before histograms took bucket advice."""

    def create_histogram(  # type: ignore[override]
        self, name: str, unit: str = "", description: str = ""
    ) -> metrics.Histogram:
        return super().create_histogram(name, unit, description)


class _MeterProviderOfAnOlderApi(metrics.NoOpMeterProvider):
    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> metrics.Meter:
        return _MeterOfAnOlderApi(name)


class _BrokenMeterProvider(metrics.NoOpMeterProvider):
    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> metrics.Meter:
        raise RuntimeError("no meter for you")


@pytest.mark.parametrize("meters", [_MeterProviderOfAnOlderApi(), _BrokenMeterProvider()])
async def test_a_meter_provider_that_cannot_make_the_instruments_costs_the_client_nothing(
    spans: Spans, meters: metrics.MeterProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """A meter provider that raises when asked for a meter or an instrument (one written
    against an older API refuses the histograms' bucket advice with a TypeError) neither
    fails Client(...) nor its calls: the client records no metrics, says so once, and its
    spans are as ever."""
    source = Source(name="a", provider="sim", base_url="http://a.test/v1", model="m")
    async with Client(
        [source],
        http_client=Scripted({"a": [sse_answer()]}).client(),
        tracer_provider=spans.provider,
        meter_provider=meters,
    ) as client:
        await client.chat([{"role": "user", "content": "x"}])
    (call,) = spans.calls()
    assert call.status.status_code is not StatusCode.ERROR
    assert "could not make otel-llm's metrics; none are recorded" in caplog.text
