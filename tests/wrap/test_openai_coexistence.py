"""instrument_openai() beside the other openai instrumentations (OpenLLMetry, OTel contrib)."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as Contrib

from otel_llm import _semconv as sc
from otel_llm import instrument_openai, uninstrument_openai
from otel_llm.simulator import Script, SimulatedProvider, ThreadedProvider
from otel_llm.testing import Spans

MESSAGES = [{"role": "user", "content": "hello"}]

# The peers' own deprecation warnings (pydantic v1-style config inside them) are not ours.
pytestmark = [
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:opentelemetry.instrumentation"),
]


@pytest.fixture
def threaded() -> Iterator[ThreadedProvider]:
    script = Script(first_chunk_delay_s=0.0, chunk_interval_s=0.002, chunk_count=8)
    with SimulatedProvider.start_in_thread(scripts={"smooth": script}) as running:
        yield running


@pytest.fixture
def client(threaded: ThreadedProvider) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=threaded.base_url, api_key="sk-x", max_retries=0) as c:
        yield c


@pytest.fixture(params=["ours-last", "ours-first"])
def peers(request: pytest.FixtureRequest, spans: Spans) -> Iterator[Spans]:
    """Both peer instrumentations and ours, in either order."""
    from openai.resources.chat.completions.completions import AsyncCompletions, Completions
    from openai.resources.embeddings import AsyncEmbeddings, Embeddings
    from openai.resources.responses.responses import AsyncResponses, Responses

    classes = (Completions, AsyncCompletions, Embeddings, AsyncEmbeddings)
    pristine = {
        (cls, name): cls.__dict__[name]
        for cls in (*classes, Responses, AsyncResponses)
        for name in ("create", "parse", "stream")
        if name in cls.__dict__
    }
    if request.param == "ours-first":
        instrument_openai(tracer_provider=spans.provider)
    OpenLLMetry().instrument(tracer_provider=spans.provider)
    Contrib().instrument(tracer_provider=spans.provider)
    if request.param == "ours-last":
        instrument_openai(tracer_provider=spans.provider)
    yield spans
    # Undo in reverse order: the peers' unwrap only works when theirs is the outermost wrapper.
    if request.param == "ours-last":
        uninstrument_openai()
    Contrib().uninstrument()
    OpenLLMetry().uninstrument()
    uninstrument_openai()
    # Neither peer fully undoes its wrapping of this openai release (OpenLLMetry leaves its
    # wrapper, the contrib one leaves a bound wrapper): restore the SDK for the next tests.
    for (cls, name), method in pristine.items():
        setattr(cls, name, method)


def scopes(spans: Spans) -> list[str]:
    return sorted(
        span.instrumentation_scope.name for span in spans.finished() if span.instrumentation_scope
    )


def test_all_three_record_the_same_stream(peers: Spans, client: openai.OpenAI) -> None:
    """With all three active the app's stream is intact and each records its spans."""
    stream = client.chat.completions.create(model="smooth", messages=MESSAGES, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text.startswith("word0")
    names = scopes(peers)
    assert names.count("otel_llm") == 2
    assert any("openai" in name for name in names if name != "otel_llm")
    assert any("genai" in name or "openai_v2" in name for name in names)
    (attempt,) = peers.attempts()
    assert (attempt.attributes or {})[sc.CHUNK_COUNT] == 8
    assert (attempt.attributes or {})[sc.METERING_STATUS] == sc.METERING_EXACT


def test_uninstrumenting_ours_keeps_theirs(peers: Spans, client: openai.OpenAI) -> None:
    """After uninstrument_openai() the peers still record and ours records nothing."""
    uninstrument_openai()
    client.chat.completions.create(model="smooth", messages=MESSAGES)
    names = scopes(peers)
    assert "otel_llm" not in names
    assert len(names) >= 2
