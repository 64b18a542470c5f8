"""Our wrappers of anthropic, google-genai and the Responses API beside the peer instrumentations
of the same SDKs (OpenLLMetry's, the OpenTelemetry contrib's), in either order: the application's
stream intact, each instrumentation recording its own spans, ours exact, and ours removable."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types
from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor
from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor
from opentelemetry.instrumentation.google_generativeai import GoogleGenerativeAiInstrumentor
from opentelemetry.instrumentation.openai import OpenAIInstrumentor

from otel_llm import _semconv as sc
from otel_llm import (
    instrument_anthropic,
    instrument_google_genai,
    instrument_openai,
    uninstrument_anthropic,
    uninstrument_google_genai,
    uninstrument_openai,
)
from otel_llm.simulator import Script, SimulatedProvider, ThreadedProvider
from otel_llm.testing import Spans

pytestmark = [  # the peers' own warnings are not ours
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

SCRIPT = Script(first_chunk_delay_s=0.0, chunk_interval_s=0.002, chunk_count=8)


@pytest.fixture(scope="module")
def threaded() -> Iterator[ThreadedProvider]:
    with SimulatedProvider.start_in_thread(default=SCRIPT) as running:
        yield running


def _anthropic(url: str) -> str:
    with anthropic.Anthropic(base_url=url, api_key="sk-x", max_retries=0) as client:
        stream = client.messages.create(
            model="m", max_tokens=50, messages=[{"role": "user", "content": "hi"}], stream=True
        )
        return "".join(
            event.delta.text
            for event in stream
            if event.type == "content_block_delta" and event.delta.type == "text_delta"
        )


def _gemini(url: str) -> str:
    with genai.Client(api_key="k", http_options=types.HttpOptions(base_url=url)) as client:
        stream = client.models.generate_content_stream(model="m", contents="hi")
        return "".join(response.text or "" for response in stream)


def _responses(url: str) -> str:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="sk-x", max_retries=0) as client:
        return "".join(
            event.delta
            for event in client.responses.create(model="m", input="hi", stream=True)
            if event.type == "response.output_text.delta"
        )


Case = tuple[Callable[..., None], Callable[[], None], Callable[[], Any], Callable[[str], str]]
CASES: dict[str, Case] = {
    "anthropic/openllmetry": (
        instrument_anthropic,
        uninstrument_anthropic,
        AnthropicInstrumentor,
        _anthropic,
    ),
    "google-genai/contrib": (
        instrument_google_genai,
        uninstrument_google_genai,
        GoogleGenAiSdkInstrumentor,
        _gemini,
    ),
    "google-genai/openllmetry": (
        instrument_google_genai,
        uninstrument_google_genai,
        GoogleGenerativeAiInstrumentor,
        _gemini,
    ),
    "responses/openllmetry": (
        instrument_openai,
        uninstrument_openai,
        OpenAIInstrumentor,
        _responses,
    ),
}


@pytest.fixture(autouse=True)
def pristine_sdks() -> Iterator[None]:
    """The SDKs' methods put back after each test: the peers do not all remove their own
    wrappers on ``uninstrument()``."""
    from anthropic.resources.messages.messages import AsyncMessages, Messages
    from google.genai.models import AsyncModels, Models
    from openai.resources.responses.responses import AsyncResponses, Responses

    kept = {
        (cls, name): value
        for cls in (Messages, AsyncMessages, Models, AsyncModels, Responses, AsyncResponses)
        for name, value in list(vars(cls).items())
        if callable(value) and not name.startswith("__")
    }
    yield
    for (cls, name), value in kept.items():
        if vars(cls).get(name) is not value:
            setattr(cls, name, value)


@pytest.mark.parametrize("order", ["ours-last", "ours-first"])
@pytest.mark.parametrize("sdk", sorted(CASES))
def test_ours_beside_the_peer(
    spans: Spans, threaded: ThreadedProvider, sdk: str, order: str
) -> None:
    """Both active, in either order: the text intact, the peer's spans and ours recorded, ours
    exact; after both are removed nothing of ours records."""
    ours, undo_ours, peer_class, call = CASES[sdk]
    peer = peer_class()
    if order == "ours-first":
        ours(tracer_provider=spans.provider)
    # the contrib google-genai instrumentation declares google-genai < 3 and does nothing with
    # this release unless its version check is skipped (it then works)
    peer.instrument(tracer_provider=spans.provider, skip_dep_check=True)
    if order == "ours-last":
        ours(tracer_provider=spans.provider)
    try:
        text = call(threaded.url)
    finally:
        if order == "ours-last":
            undo_ours()
        peer.uninstrument()
        undo_ours()
    assert text.startswith("word0 word1")
    scopes = [s.instrumentation_scope.name for s in spans.finished() if s.instrumentation_scope]
    assert scopes.count("otel_llm") == 2
    assert any(name != "otel_llm" for name in scopes), scopes
    (attempt,) = spans.attempts()
    assert (attempt.attributes or {})[sc.CHUNK_COUNT] == 8
    before = len(spans.finished())
    call(threaded.url)
    assert [
        s for s in spans.finished()[before:] if s.instrumentation_scope.name == "otel_llm"
    ] == []
