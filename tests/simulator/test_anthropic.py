"""The anthropic SDK's Messages API against the simulated provider over loopback
(``otel_llm/simulator/_anthropic.py``): what it reads back, and how it surfaces each fault."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx2
import pytest
from anthropic.types import RawMessageStreamEvent

from otel_llm.simulator import SCRIPT_HEADER, Script, Silence, SimulatedProvider, ThreadedProvider

SCALE = 0.001
MESSAGES: list[Any] = [{"role": "user", "content": "say something"}]
KEEPALIVE_SILENCE = Silence(after_chunk=1, duration_s=30.0, keepalive_every_s=10.0)


def header(script: Script) -> dict[str, str]:
    return {SCRIPT_HEADER: script.model_dump_json()}


def words(stem: str, count: int) -> str:
    return " ".join(f"{stem}{k}" for k in range(count))


def chunk_events(events: list[RawMessageStreamEvent]) -> list[Any]:
    """The chunk events: content_block_delta with a thinking, text or tool-input delta."""
    return [
        event.delta
        for event in events
        if event.type == "content_block_delta" and event.delta.type != "signature_delta"
    ]


def text_of(events: list[RawMessageStreamEvent], kind: str) -> str:
    field = {"thinking_delta": "thinking", "text_delta": "text", "input_json_delta": "partial_json"}
    return "".join(
        getattr(delta, field[kind]) for delta in chunk_events(events) if delta.type == kind
    )


@pytest.fixture(scope="module")
def threaded() -> Iterator[ThreadedProvider]:
    with SimulatedProvider.start_in_thread(time_scale=SCALE) as running:
        yield running


@pytest.fixture
def sdk(threaded: ThreadedProvider) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=threaded.url, api_key="sim", max_retries=0) as client:
        yield client


@pytest.fixture
async def async_sdk() -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with SimulatedProvider(time_scale=SCALE) as running:
        client = anthropic.AsyncAnthropic(base_url=running.url, api_key="sim", max_retries=0)
        async with client:
            yield client


def stream(sdk: anthropic.Anthropic, script: Script) -> list[RawMessageStreamEvent]:
    return list(
        sdk.messages.create(
            model="sim-model",
            max_tokens=100,
            messages=MESSAGES,
            stream=True,
            extra_headers=header(script),
        )
    )


def test_streamed_message_carries_the_scripted_words(sdk: anthropic.Anthropic) -> None:
    """messages.create(stream=True): thinking and text deltas carry the scripted words in
    chunk_count content_block_delta events; a signature_delta closes the thinking block;
    input tokens come in message_start, output tokens and the stop reason in message_delta;
    the SDK drops every ping."""
    script = Script(
        chunk_count=5, reasoning_chunks=2, words_per_chunk=2, silences=(KEEPALIVE_SILENCE,)
    )
    events = stream(sdk, script)
    assert len(chunk_events(events)) == 5
    assert text_of(events, "thinking_delta") == words("thought", 4)
    assert text_of(events, "text_delta") == words("word", 6)
    assert [event.type for event in events].count("content_block_start") == 2
    assert (
        sum(
            event.type == "content_block_delta" and event.delta.type == "signature_delta"
            for event in events
        )
        == 1
    )
    start, delta, stop = events[0], events[-2], events[-1]
    assert start.type == "message_start"
    assert start.message.usage.input_tokens == 2
    assert delta.type == "message_delta"
    assert delta.delta.stop_reason == "end_turn"
    assert delta.usage.output_tokens == 10
    assert delta.usage.output_tokens_details is not None
    assert delta.usage.output_tokens_details.thinking_tokens == 4
    assert stop.type == "message_stop"
    assert "ping" not in {event.type for event in events}


def test_message_stream_text_stream_and_final_message(sdk: anthropic.Anthropic) -> None:
    """messages.stream(): text_stream yields the scripted words through a keepalive silence;
    the final message holds the thinking and text blocks, the stop reason and usage."""
    script = Script(chunk_count=4, reasoning_chunks=1, silences=(KEEPALIVE_SILENCE,))
    with sdk.messages.stream(
        model="sim-model", max_tokens=100, messages=MESSAGES, extra_headers=header(script)
    ) as events:
        text = "".join(events.text_stream)
        final = events.get_final_message()
    assert text == words("word", 3)
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == "thought0"  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (2, 4)


async def test_async_stream_of_a_tool_call(async_sdk: anthropic.AsyncAnthropic) -> None:
    """The async twin: a tool_use block whose input_json_delta pieces join into the scripted
    arguments, stop reason tool_use; the async messages.stream() reads the same."""
    script = Script(chunk_count=4, tool_call=True)
    events = [
        event
        async for event in await async_sdk.messages.create(
            model="sim-model",
            max_tokens=100,
            messages=MESSAGES,
            stream=True,
            extra_headers=header(script),
        )
    ]
    assert len(chunk_events(events)) == 4
    assert json.loads(text_of(events, "input_json_delta")) == {"query": words("arg", 4)}
    assert events[-2].type == "message_delta"
    assert events[-2].delta.stop_reason == "tool_use"
    async with async_sdk.messages.stream(
        model="sim-model", max_tokens=100, messages=MESSAGES, extra_headers=header(script)
    ) as helper:
        final = await helper.get_final_message()
    call = final.content[0]
    assert call.type == "tool_use"
    assert (call.name, call.input) == ("lookup", {"query": words("arg", 4)})


async def test_async_text_stream(async_sdk: anthropic.AsyncAnthropic) -> None:
    """The async text_stream yields the scripted words."""
    async with async_sdk.messages.stream(
        model="sim-model",
        max_tokens=100,
        messages=MESSAGES,
        extra_headers=header(Script(chunk_count=3)),
    ) as helper:
        text = [piece async for piece in helper.text_stream]
    assert "".join(text) == words("word", 3)


@pytest.mark.parametrize(
    ("finish", "stop_reason"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("content_filter", "refusal"),
        ("stop_sequence", "stop_sequence"),
    ],
)
def test_non_streamed_message_and_stop_reasons(
    sdk: anthropic.Anthropic, finish: str, stop_reason: str
) -> None:
    """messages.create(): the message's text, usage and the mapped stop reason (an Anthropic
    stop reason given in the script is sent as written)."""
    message = sdk.messages.create(
        model="sim-model",
        max_tokens=100,
        messages=MESSAGES,
        extra_body={"sim": {"chunk_count": 3, "finish_reason": finish}},
    )
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == words("word", 3)  # type: ignore[union-attr]
    assert message.stop_reason == stop_reason
    assert (message.usage.input_tokens, message.usage.output_tokens) == (2, 3)


def test_selection_by_header_body_and_model(threaded: ThreadedProvider) -> None:
    """The SDK selects scripts with default_headers, extra_body's `sim` and the model name."""

    def text(client: anthropic.Anthropic, model: str = "m", **extra: Any) -> str:
        message = client.messages.create(model=model, max_tokens=10, messages=MESSAGES, **extra)
        return message.content[0].text  # type: ignore[union-attr]

    headed = anthropic.Anthropic(
        base_url=threaded.url,
        api_key="sim",
        max_retries=0,
        default_headers=header(Script(chunk_count=2)),
    )
    with headed:
        assert text(headed) == words("word", 2)
    with anthropic.Anthropic(base_url=threaded.url, api_key="sim", max_retries=0) as plain:
        assert text(plain, extra_body={"sim": {"chunk_count": 4}}) == words("word", 4)
        assert len(text(plain, "smooth").split()) == 40


async def test_the_api_key_header_and_version_are_accepted() -> None:
    """A request with x-api-key and anthropic-version, as the real API takes it, is answered."""
    async with (
        SimulatedProvider(time_scale=SCALE) as running,
        httpx2.AsyncClient(base_url=running.url) as http,
    ):
        answer = await http.post(
            "/v1/messages",
            json={"model": "m", "max_tokens": 5, "messages": MESSAGES, "sim": {"chunk_count": 1}},
            headers={"x-api-key": "sim", "anthropic-version": "2023-06-01"},
        )
    assert answer.status_code == 200
    assert answer.json()["content"] == [{"type": "text", "text": "word0"}]


# Faults, as the SDK surfaces them.


def test_truncated_stream_ends_silently(sdk: anthropic.Anthropic) -> None:
    """truncate: the raw stream just ends (no message_delta or message_stop), and
    messages.stream() hands back the partial message with stop_reason None — no error."""
    script = Script(chunk_count=4, fault="truncate", fault_after_chunk=1)
    events = stream(sdk, script)
    assert text_of(events, "text_delta") == words("word", 2)
    assert not {"message_delta", "message_stop"} & {event.type for event in events}
    with sdk.messages.stream(
        model="m", max_tokens=10, messages=MESSAGES, extra_headers=header(script)
    ) as helper:
        final = helper.get_final_message()
    assert final.stop_reason is None
    assert final.content[0].text == words("word", 2)  # type: ignore[union-attr]


def test_malformed_event_raises_a_json_error(sdk: anthropic.Anthropic) -> None:
    """malformed: the SDK raises json.JSONDecodeError from the iteration (not an anthropic
    error)."""
    with pytest.raises(json.JSONDecodeError):
        stream(sdk, Script(chunk_count=4, fault="malformed", fault_after_chunk=1))


def test_error_event_is_an_api_status_error(sdk: anthropic.Anthropic) -> None:
    """error: `event: error` with overloaded_error raises anthropic.APIStatusError carrying the
    type — with the stream's HTTP status 200, so not the OverloadedError class a 529 gets."""
    script = Script(chunk_count=4, fault="error", fault_after_chunk=1, fault_status=529)
    with pytest.raises(anthropic.APIStatusError) as raised:
        stream(sdk, script)
    assert type(raised.value) is anthropic.APIStatusError
    assert raised.value.status_code == 200
    assert raised.value.type == "overloaded_error"
    assert raised.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "simulated provider error"},
    }


def test_reset_is_a_connection_error(sdk: anthropic.Anthropic) -> None:
    """reset: anthropic.APIConnectionError mid-stream."""
    with pytest.raises(anthropic.APIConnectionError):
        stream(sdk, Script(chunk_count=4, fault="reset", fault_after_chunk=1))


@pytest.mark.parametrize(
    ("status", "error", "kind"),
    [
        (529, anthropic.OverloadedError, "overloaded_error"),
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (503, anthropic.ServiceUnavailableError, "api_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (400, anthropic.BadRequestError, "invalid_request_error"),
    ],
)
@pytest.mark.parametrize("streamed", [True, False])
def test_error_statuses_map_to_the_sdk_s_classes(
    sdk: anthropic.Anthropic,
    status: int,
    error: type[anthropic.APIStatusError],
    kind: str,
    streamed: bool,
) -> None:
    """Scripted HTTP errors have Anthropic's body and type; 529 is OverloadedError (an
    InternalServerError), 429 RateLimitError with Retry-After."""
    script = Script(error_status=status, retry_after="7")
    with pytest.raises(error) as raised:
        sdk.messages.create(
            model="m",
            max_tokens=10,
            messages=MESSAGES,
            stream=streamed,
            extra_headers=header(script),
        )
    assert raised.value.status_code == status
    assert raised.value.type == kind
    assert raised.value.response.headers["retry-after"] == "7"
    assert isinstance(raised.value, anthropic.InternalServerError) == (status >= 500)
