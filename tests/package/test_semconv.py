"""The GenAI semantic convention, checked once: every ``gen_ai.*`` name otel-llm emits — span
attributes, metric names, metric attributes — is one the convention defines, and the convention's
conditional rules hold (stream flag, request parameters, provider and response model on metrics).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import httpx2
import openai
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_llm import AllSourcesExhausted, Client, Source, instrument_openai, uninstrument_openai
from otel_llm.testing import Scripted, Spans, error, json_answer, sse_answer

CONVENTION = frozenset(
    {
        # client inference / embeddings spans (semantic-conventions-genai, development)
        "gen_ai.operation.name",
        "gen_ai.provider.name",
        "gen_ai.request.model",
        "gen_ai.request.stream",
        "gen_ai.request.max_tokens",
        "gen_ai.request.temperature",
        "gen_ai.request.top_p",
        "gen_ai.request.frequency_penalty",
        "gen_ai.request.presence_penalty",
        "gen_ai.request.seed",
        "gen_ai.request.choice.count",
        "gen_ai.request.stop_sequences",
        "gen_ai.response.model",
        "gen_ai.response.id",
        "gen_ai.response.finish_reasons",
        "gen_ai.response.time_to_first_chunk",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.reasoning.output_tokens",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        # metrics
        "gen_ai.client.operation.duration",
        "gen_ai.client.operation.time_to_first_chunk",
    }
)
PARAMS = {"max_tokens": 64, "temperature": 0.2, "top_p": 0.9, "seed": 7, "stop": ["END"]}


def gen_ai_names(attributes: Iterable[str]) -> set[str]:
    return {name for name in attributes if name.startswith("gen_ai.")}


def metric_records(reader: InMemoryMetricReader) -> list[tuple[str, dict[str, Any]]]:
    data = reader.get_metrics_data()
    assert data is not None
    return [
        (metric.name, dict(point.attributes or {}))
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        for point in metric.data.data_points
    ]


def source(name: str) -> Source:
    return Source(name=name, provider="sim", base_url=f"http://{name}.test/v1", model=f"{name}-m")


async def wrapped_stream(spans: Spans, meters: MeterProvider | None = None, **extra: Any) -> None:
    """One streamed call through the instrumented openai SDK, with :data:`PARAMS`."""
    instrument_openai(tracer_provider=spans.provider, meter_provider=meters)
    try:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda request: sse_answer()))
        async with openai.AsyncOpenAI(base_url="http://w.test/v1", api_key="sk-x",
                                      http_client=http) as sdk:  # fmt: skip
            stream = await sdk.chat.completions.create(
                model="w",
                messages=[{"role": "user", "content": "x"}],
                stream=True,
                **PARAMS,
                **extra,
            )
            async for _ in stream:
                pass
    finally:
        uninstrument_openai()


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.mark.parametrize("capture", [False, True], ids=["no-capture", "capture"])
async def test_every_emitted_gen_ai_name_is_in_the_convention(
    spans: Spans, reader: InMemoryMetricReader, monkeypatch: pytest.MonkeyPatch, capture: bool
) -> None:
    """Client calls (streamed, not, embeddings, failed) and wrapped openai calls, with content
    capture off and on: no gen_ai.* name outside the convention, on spans, events or metrics;
    the content names exactly when capture is on."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    if capture:
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    meters = MeterProvider(metric_readers=[reader])
    vectors = httpx2.Response(200, json={"data": [{"index": 0, "embedding": [0.1]}]})
    script = Scripted({"a": [sse_answer(), json_answer(), vectors], "b": [error(500)]})
    async with Client([source("a")], http_client=script.client(), tracer_provider=spans.provider,
                      meter_provider=meters) as client:  # fmt: skip
        await client.chat([{"role": "user", "content": "x"}], **PARAMS)
        await client.chat([{"role": "user", "content": "x"}], stream=False)
        await client.embed("x")
    async with Client([source("b")], http_client=script.client(), tracer_provider=spans.provider,
                      meter_provider=meters, max_attempts=1) as failing:  # fmt: skip
        with pytest.raises(AllSourcesExhausted):
            await failing.chat([{"role": "user", "content": "x"}])
    await wrapped_stream(spans, meters)
    emitted: set[str] = set()
    for span in spans.finished():
        emitted |= gen_ai_names(span.attributes or {})
        for event in span.events:
            emitted |= gen_ai_names(event.attributes or {})
    for name, attributes in metric_records(reader):
        emitted |= gen_ai_names([name, *attributes])
    assert emitted - CONVENTION == set()
    assert {"gen_ai.request.max_tokens", "gen_ai.request.stop_sequences"} <= emitted
    content = {"gen_ai.input.messages", "gen_ai.output.messages"}
    assert (content & emitted) == (content if capture else set())


async def test_the_conventions_conditions_hold(spans: Spans, reader: InMemoryMetricReader) -> None:
    """``gen_ai.request.stream`` only on streaming requests; the request parameters on the call
    span; the metrics carry the provider on success and failure and the response model."""
    meters = MeterProvider(metric_readers=[reader])
    script = Scripted({"a": [sse_answer(model="resp-m"), json_answer()], "b": [error(500)]})
    async with Client([source("a")], http_client=script.client(), tracer_provider=spans.provider,
                      meter_provider=meters) as client:  # fmt: skip
        await client.chat([{"role": "user", "content": "x"}], **PARAMS)
        await client.chat([{"role": "user", "content": "x"}], stream=False)
    async with Client([source("b")], http_client=script.client(), tracer_provider=spans.provider,
                      meter_provider=meters, max_attempts=1) as failing:  # fmt: skip
        with pytest.raises(AllSourcesExhausted):
            await failing.chat([{"role": "user", "content": "x"}])
    streamed, unstreamed, failed = spans.calls()
    assert streamed.attributes["gen_ai.request.stream"] is True  # type: ignore[index]
    assert "gen_ai.request.stream" not in (unstreamed.attributes or {})
    assert streamed.attributes["gen_ai.request.max_tokens"] == 64  # type: ignore[index]
    assert streamed.attributes["gen_ai.request.temperature"] == 0.2  # type: ignore[index]
    assert streamed.attributes["gen_ai.request.stop_sequences"] == ("END",)  # type: ignore[index]
    durations = [attrs for name, attrs in metric_records(reader)
                 if name == "gen_ai.client.operation.duration"]  # fmt: skip
    assert all(attrs["gen_ai.provider.name"] == "sim" for attrs in durations)
    assert any(attrs.get("gen_ai.response.model") == "resp-m" for attrs in durations)
    assert any(attrs.get("error.type") == "AllSourcesExhausted" for attrs in durations)
    assert failed.attributes["gen_ai.provider.name"] == "sim"  # type: ignore[index]
    ttft = [name for name, _ in metric_records(reader)
            if name == "gen_ai.client.operation.time_to_first_chunk"]  # fmt: skip
    assert len(ttft) == 1, "time to first chunk is reported for streaming calls only"


async def test_wrapped_calls_carry_the_request_parameters(spans: Spans) -> None:
    """A wrapped openai call span carries the GenAI request parameters like the client's; the
    SDK's "not given" marks and ``None`` are never written."""
    await wrapped_stream(
        spans, frequency_penalty=openai.NOT_GIVEN, n=openai.omit, presence_penalty=None
    )
    (call,) = spans.calls()
    attributes = dict(call.attributes or {})
    assert attributes["gen_ai.request.max_tokens"] == 64
    assert attributes["gen_ai.request.temperature"] == 0.2
    assert attributes["gen_ai.request.top_p"] == 0.9
    assert attributes["gen_ai.request.seed"] == 7
    assert attributes["gen_ai.request.stop_sequences"] == ("END",)
    assert "gen_ai.request.frequency_penalty" not in attributes
    assert "gen_ai.request.presence_penalty" not in attributes
    assert "gen_ai.request.choice.count" not in attributes
