"""The same stream gives the same figures through otel-llm's own transport, instrument_openai()
and observe_stream(): all three are fed one scripted SSE timeline on a fake clock."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import openai
import pytest

from otel_llm import Source, instrument_openai, observe_stream, uninstrument_openai
from otel_llm import _semconv as sc
from otel_llm._act._attempt import Attempt
from otel_llm._act._pool import Pool
from otel_llm._measure._stalls import NS_PER_MS, StallFigures
from otel_llm.testing import Spans, use_clock
from otel_llm.testing import figures_of as derived

GAPS_MS = [150, 20, 20, 1_500, 20, 3_000, 20, 999, 1_001]
"""Time to first chunk, then the gap before each following chunk (two stalls at 1000 ms;
999 is not one; 1001 is)."""


class FakeClock:
    def __init__(self) -> None:
        self.ns = 5_000 * NS_PER_MS

    def __call__(self) -> int:
        return self.ns


def events() -> list[tuple[int, dict[str, Any] | str]]:
    """(gap before it in ms, the event) for the whole stream."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out: list[tuple[int, dict[str, Any] | str]] = [(0, chunk({"role": "assistant"}))]
    for i, gap in enumerate(GAPS_MS):
        if gap == 1_500:  # a silence with empty deltas inside it: they are not chunks
            out += [(500, chunk({})), (500, chunk({"content": ""}))]
            gap -= 1_000
        out.append((gap, chunk({"content": f"w{i} "})))
    out.append((0, chunk({}, "stop")))
    usage = {"prompt_tokens": 3, "completion_tokens": 9, "total_tokens": 12}
    out.append((0, {**base, "choices": [], "usage": usage}))
    out.append((0, "[DONE]"))
    return out


def sse(event: dict[str, Any] | str) -> bytes:
    data = event if isinstance(event, str) else json.dumps(event)
    return f"data: {data}\n\n".encode()


async def body(clock: FakeClock) -> AsyncIterator[bytes]:
    for gap, event in events():
        clock.ns += gap * NS_PER_MS
        yield sse(event)


def figures_of(spans: Spans) -> StallFigures:
    (attempt,) = spans.attempts()
    assert (attempt.attributes or {})[sc.METERING_STATUS] == sc.METERING_EXACT
    return derived(attempt)


async def via_transport(clock: FakeClock, spans: Spans) -> StallFigures:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=body(clock)
        )

    source = Source(name="m", provider="openai", base_url="http://sim.test/v1", model="m")
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
        attempt = Attempt(spans.tracer, source, number=1, stream=True, threshold_ms=1000)
        await attempt.run(Pool(client=http), {"messages": [{"role": "user", "content": "x"}]})
    assert attempt.figures is not None
    assert figures_of(spans) == attempt.figures
    return attempt.figures


async def via_openai(clock: FakeClock, spans: Spans) -> StallFigures:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=body(clock)
        )

    instrument_openai(tracer_provider=spans.provider, stall_threshold_ms=1000)
    try:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        async with openai.AsyncOpenAI(
            base_url="http://sim.test/v1", api_key="sk-x", http_client=http
        ) as client:
            stream = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}], stream=True
            )
            async for _ in stream:
                pass
    finally:
        uninstrument_openai()
    return figures_of(spans)


async def via_observe(clock: FakeClock, spans: Spans) -> StallFigures:
    async def chunks() -> AsyncIterator[dict[str, Any]]:
        for gap, event in events():
            clock.ns += gap * NS_PER_MS
            if isinstance(event, dict):
                yield event

    async for _ in observe_stream(
        chunks(), provider="openai", model="m", tracer_provider=spans.provider
    ):
        pass
    return figures_of(spans)


@pytest.fixture
def fresh() -> Iterator[list[Spans]]:
    made: list[Spans] = []
    yield made
    for pipeline in made:
        pipeline.provider.shutdown()


async def test_three_paths_give_identical_figures(fresh: list[Spans]) -> None:
    """Transport, instrument_openai() and observe_stream() agree to the millisecond."""
    results = []
    for path in (via_transport, via_openai, via_observe):
        clock = FakeClock()
        spans = Spans()
        fresh.append(spans)
        with use_clock(clock):
            results.append(await path(clock, spans))
    transport, sdk, observed = results
    assert transport == sdk == observed
    assert transport == StallFigures(
        wall_ms=sum(GAPS_MS),
        generation_ms=sum(GAPS_MS) - 5_501,
        stall_ms=5_501,
        stall_count=3,
        ttft_ms=150,
        max_inter_chunk_ms=3_000,
        chunk_count=len(GAPS_MS),
    )
