"""Content capture, the same on every path: with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` the call span of an
``otel_llm.Client`` call (streamed or not, hedged: the winner's answer only), of a wrapped
openai call and of ``observe_stream`` carries ``gen_ai.input.messages`` and
``gen_ai.output.messages`` in one format; without it no span, attribute or event holds the
prompt or the answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_llm import (
    AllSourcesExhausted,
    InvalidRequest,
    instrument_openai,
    observe_stream,
    uninstrument_openai,
)
from otel_llm import _semconv as sc
from otel_llm._env import OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
from otel_llm.testing import Scripted, Spans, error, json_answer, run_virtual, sse_answer
from tests.support.scripted_clients import client, source

PROMPT = "what is the capital of Peru"
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "answer briefly"},
    {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
]
INPUT = [
    {"role": "system", "parts": [{"type": "text", "content": "answer briefly"}]},
    {"role": "user", "parts": [{"type": "text", "content": PROMPT}]},
]
CONTENT_KEYS = (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES)


def output(text: str, finish_reason: str | None = "stop") -> list[dict[str, Any]]:
    """``gen_ai.output.messages`` of one assistant answer, parsed."""
    parts = [{"type": "text", "content": text}]
    return [{"role": "assistant", "parts": parts, "finish_reason": finish_reason}]


def content_of(span: ReadableSpan) -> dict[str, Any]:
    """The content attributes of ``span``, parsed from their JSON."""
    attributes = span.attributes or {}
    return {key: json.loads(str(attributes[key])) for key in CONTENT_KEYS if key in attributes}


def assert_no_content(spans: Spans, *texts: str) -> None:
    """No span has a content attribute, and no span — attributes and events — holds ``texts``."""
    for span in spans.finished():
        assert not set(CONTENT_KEYS) & set(span.attributes or {}), span.name
        dumped = span.to_json()
        for text in texts:
            assert text not in dumped, f"{text!r} in {span.name}"


@pytest.fixture(params=[True, False], ids=["capture", "no-capture"])
def capture(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Content capture on (the standard variable ``true``) or off (unset)."""
    monkeypatch.delenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, raising=False)
    if request.param:
        monkeypatch.setenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, "true")
    return bool(request.param)


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
async def test_a_client_call_records_content_only_when_asked(
    spans: Spans, capture: bool, stream: bool
) -> None:
    """A client chat call's span carries the prompt and the answer exactly when capture is on;
    the attempt spans never do."""
    answer = sse_answer(["Li", "ma"]) if stream else json_answer("Lima")
    script = Scripted({"a": [answer]})
    async with client(script, spans, source("a")) as c:
        result = await c.chat(MESSAGES, stream=stream)
    assert result.text == "Lima"
    (call,) = spans.calls()
    if capture:
        assert content_of(call) == {
            sc.GEN_AI_INPUT_MESSAGES: INPUT,
            sc.GEN_AI_OUTPUT_MESSAGES: output("Lima"),
        }
        assert all(content_of(attempt) == {} for attempt in spans.attempts())
    else:
        assert_no_content(spans, PROMPT, "Lima", "answer briefly")


def test_a_hedged_call_records_only_the_winners_answer(
    spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the hedge wins, the call span's output is the hedge's answer; the cancelled
    primary's never appears."""
    monkeypatch.setenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, "true")

    async def late(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(30)
        return sse_answer(["primary", " answer"])

    script = Scripted({"a": [late], "b": [sse_answer(["hedge", " answer"])]})

    async def main() -> str:
        async with client(script, spans, source("a"), source("b"), hedge_after_s=1.0) as c:
            result = await c.chat(MESSAGES)
        assert result.stats.hedge_won
        return result.text

    assert run_virtual(main()) == "hedge answer"
    (call,) = spans.calls()
    assert content_of(call)[sc.GEN_AI_OUTPUT_MESSAGES] == output("hedge answer")
    assert all("primary answer" not in span.to_json() for span in spans.finished())


async def test_a_failed_call_records_the_prompt_and_no_answer(
    spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that gave up records what was asked and no output."""
    monkeypatch.setenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, "true")
    script = Scripted({"a": [error(500)]})
    async with client(script, spans, source("a"), max_attempts=1) as c:
        with pytest.raises(AllSourcesExhausted):
            await c.chat(MESSAGES)
    (call,) = spans.calls()
    assert content_of(call) == {sc.GEN_AI_INPUT_MESSAGES: INPUT}


async def test_embeddings_record_no_messages(spans: Spans, monkeypatch: pytest.MonkeyPatch) -> None:
    """An embeddings call has no chat messages: nothing is recorded as one, capture on or not."""
    monkeypatch.setenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, "true")
    vectors = httpx2.Response(200, json={"data": [{"index": 0, "embedding": [0.1]}]})
    async with client(Scripted({"a": [vectors]}), spans, source("a")) as c:
        await c.embed(PROMPT)
    assert_no_content(spans)


async def test_a_wrapped_openai_call_records_content_in_the_same_format(
    spans: Spans, capture: bool
) -> None:
    """A wrapped openai stream: the same attributes, in the same format, under the same rule."""
    instrument_openai(tracer_provider=spans.provider)
    try:
        http = httpx2.AsyncClient(
            transport=httpx2.MockTransport(lambda request: sse_answer(["Li", "ma"]))
        )
        async with openai.AsyncOpenAI(base_url="http://w.test/v1", api_key="sk-x",
                                      http_client=http) as sdk:  # fmt: skip
            stream = await sdk.chat.completions.create(
                model="w",
                messages=MESSAGES,  # type: ignore[arg-type]
                stream=True,
            )
            async for _ in stream:  # type: ignore[union-attr]
                pass
    finally:
        uninstrument_openai()
    (call,) = spans.calls()
    if capture:
        assert content_of(call) == {
            sc.GEN_AI_INPUT_MESSAGES: INPUT,
            sc.GEN_AI_OUTPUT_MESSAGES: output("Lima"),
        }
    else:
        assert_no_content(spans, PROMPT, "Lima")


def chunks(*words: str) -> Iterator[dict[str, Any]]:
    """OpenAI-shaped chunks of ``words``, then a finish."""
    for word in words:
        yield {"choices": [{"index": 0, "delta": {"content": word}}]}
    yield {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


@pytest.mark.parametrize("given", [True, False], ids=["with-messages", "without-messages"])
def test_observe_stream_records_the_output_and_the_prompt_it_is_given(
    spans: Spans, capture: bool, given: bool
) -> None:
    """``observe_stream`` records the streamed text; the prompt only when passed
    ``messages`` (a stream cannot know it); nothing without capture."""
    stream = observe_stream(
        chunks("Li", "ma"),
        provider="x",
        tracer_provider=spans.provider,
        messages=MESSAGES if given else None,
    )
    assert [item["choices"][0]["delta"].get("content") for item in stream] == ["Li", "ma", None]
    (call,) = spans.calls()
    if not capture:
        assert_no_content(spans, PROMPT, "Lima")
        return
    expected: dict[str, Any] = {sc.GEN_AI_OUTPUT_MESSAGES: output("Lima")}
    if given:
        expected[sc.GEN_AI_INPUT_MESSAGES] = INPUT
    assert content_of(call) == expected


async def test_a_prompt_that_is_not_json_is_left_out_not_fatal(
    spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Telemetry never breaks the call: a prompt part that cannot be written as JSON is not
    recorded, and the call still fails as the library says (InvalidRequest), span ended."""
    monkeypatch.setenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, "true")
    odd = [{"role": "user", "content": [{"type": "text", "text": object()}]}]
    async with client(Scripted({"a": [sse_answer()]}), spans, source("a")) as c:
        with pytest.raises(InvalidRequest):
            await c.chat(odd)
    (call,) = spans.calls()
    assert sc.GEN_AI_INPUT_MESSAGES not in (call.attributes or {})


@pytest.mark.parametrize(
    ("value", "recorded"),
    [
        ("true", True),
        ("TRUE", True),
        ("SPAN_ONLY", True),
        ("span_and_event", True),
        ("EVENT_ONLY", False),
        ("NO_CONTENT", False),
        ("false", False),
        ("1", False),
    ],
)
async def test_the_capturing_modes_of_opentelemetrys_genai_utilities_are_honoured(
    spans: Spans, monkeypatch: pytest.MonkeyPatch, value: str, recorded: bool
) -> None:
    """The variable's values as OpenTelemetry's GenAI instrumentations read it now — the
    capturing modes SPAN_ONLY and SPAN_AND_EVENT put content on spans, EVENT_ONLY and
    NO_CONTENT do not — beside the ``true`` of its first form: an application that set
    SPAN_ONLY for those instrumentations had no content from otel-llm's spans."""
    monkeypatch.setenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, value)
    script = Scripted({"a": [sse_answer(["Li", "ma"])]})
    async with client(script, spans, source("a")) as c:
        await c.chat(MESSAGES, stream=True)
    (call,) = spans.calls()
    if recorded:
        assert content_of(call) == {
            sc.GEN_AI_INPUT_MESSAGES: INPUT,
            sc.GEN_AI_OUTPUT_MESSAGES: output("Lima"),
        }
    else:
        assert_no_content(spans, PROMPT, "Lima", "answer briefly")
