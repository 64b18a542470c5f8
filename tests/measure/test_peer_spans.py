"""Spans other GenAI instrumentations make pass through the deriving processor untouched:
OpenLLMetry's and the OpenTelemetry contrib openai instrumentation's, over real HTTP on
loopback, and GenAI semantic-convention spans made by hand with the SDK."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from opentelemetry.trace import SpanKind

from otel_llm.simulator import Script, SimulatedProvider
from otel_llm.testing import Spans

# The peers' own deprecation warnings (pydantic v1-style config inside them) are not ours.
pytestmark = [
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:opentelemetry.instrumentation"),
]

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
def peers() -> Iterator[Spans]:
    """OpenLLMetry and the contrib instrumentation (not otel-llm's) on a deriving pipeline;
    the openai SDK restored afterwards (neither peer fully unwraps this release)."""
    from openai.resources.chat.completions.completions import AsyncCompletions, Completions
    from openai.resources.embeddings import AsyncEmbeddings, Embeddings
    from openai.resources.responses.responses import AsyncResponses, Responses
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as Contrib

    classes = (Completions, AsyncCompletions, Embeddings, AsyncEmbeddings, Responses)
    pristine = {
        (cls, name): cls.__dict__[name]
        for cls in (*classes, AsyncResponses)
        for name in ("create", "parse", "stream")
        if name in cls.__dict__
    }
    spans = Spans()
    OpenLLMetry().instrument(tracer_provider=spans.provider)
    Contrib().instrument(tracer_provider=spans.provider)
    try:
        yield spans
    finally:
        Contrib().uninstrument()
        OpenLLMetry().uninstrument()
        for (cls, name), method in pristine.items():
            setattr(cls, name, method)


def test_peer_instrumentations_spans_pass_untouched(peers: Spans) -> None:
    """A streamed and a plain call recorded by both peers: every span reaches the exporter
    as the peer wrote it — no ``otel_llm.`` attribute added, the very span object."""
    script = Script(first_chunk_delay_s=0.0, chunk_interval_s=0.002, chunk_count=6)
    with (
        SimulatedProvider.start_in_thread(scripts={"smooth": script}) as running,
        openai.OpenAI(base_url=running.base_url, api_key="sk-x", max_retries=0) as client,
    ):
        stream = client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        client.chat.completions.create(model="smooth", messages=MESSAGES)
    finished = peers.finished()
    assert len(finished) == 4  # two calls, each recorded by both peers
    for span in finished:
        assert type(span).__name__ == "ReadableSpan"  # not the processor's enriched copy
        assert [key for key in span.attributes or {} if key.startswith("otel_llm.")] == []
    peers.check()


def test_hand_made_genai_spans_pass_untouched() -> None:
    """GenAI semantic-convention spans made with the SDK, with chunk-like events of their own
    and ``gen_ai.*`` attributes otel-llm also writes, are not taken for otel-llm's."""
    spans = Spans()
    with spans.tracer.start_as_current_span(
        "chat gpt-4o",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.request.stream": True,
            "gen_ai.response.time_to_first_chunk": -3.5,
            "gen_ai.usage.output_tokens": 12,
        },
    ) as span:
        for index in range(300):  # past the SDK's 128: some dropped
            span.add_event("gen_ai.choice", {"index": index, "otel_llm.chunk.index": index})
    (ended,) = spans.finished()
    assert type(ended).__name__ == "ReadableSpan"
    assert [key for key in ended.attributes or {} if key.startswith("otel_llm.")] == []
    assert ended.dropped_events == 300 - 128
