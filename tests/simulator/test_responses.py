"""The openai SDK's Responses API against the simulated provider over loopback
(``otel_llm/simulator/_responses.py``): what it reads back, and how it surfaces each fault."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseStreamEvent

from otel_llm.simulator import SCRIPT_HEADER, Script, Silence, SimulatedProvider, ThreadedProvider

SCALE = 0.001
CHUNK_EVENTS = {
    "response.output_text.delta",
    "response.refusal.delta",
    "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta",
    "response.function_call_arguments.delta",
}
"""The Responses API's chunk events (every other event is lifecycle, not output)."""

KEEPALIVE_SILENCE = Silence(after_chunk=1, duration_s=30.0, keepalive_every_s=10.0)


def header(script: Script) -> dict[str, str]:
    return {SCRIPT_HEADER: script.model_dump_json()}


def words(stem: str, count: int) -> str:
    return " ".join(f"{stem}{k}" for k in range(count))


def deltas(events: list[ResponseStreamEvent], kind: str) -> str:
    return "".join(getattr(event, "delta", "") for event in events if event.type == kind)


@pytest.fixture(scope="module")
def threaded() -> Iterator[ThreadedProvider]:
    with SimulatedProvider.start_in_thread(time_scale=SCALE) as running:
        yield running


@pytest.fixture
def sdk(threaded: ThreadedProvider) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=threaded.base_url, api_key="sim", max_retries=0) as client:
        yield client


@pytest.fixture
async def async_sdk() -> AsyncIterator[openai.AsyncOpenAI]:
    async with SimulatedProvider(time_scale=SCALE) as running:
        client = openai.AsyncOpenAI(base_url=running.base_url, api_key="sim", max_retries=0)
        async with client:
            yield client


def stream(sdk: openai.OpenAI, script: Script, **extra: Any) -> list[ResponseStreamEvent]:
    return list(
        sdk.responses.create(
            model="sim-model", input="say something", stream=True, extra_headers=header(script)
        )
    )


def test_streamed_response_carries_the_scripted_words(sdk: openai.OpenAI) -> None:
    """responses.create(stream=True): reasoning-summary and text deltas carry the scripted words
    in chunk_count chunk events; usage and status come from response.completed; keepalives are
    invisible to the SDK."""
    script = Script(
        chunk_count=5, reasoning_chunks=2, words_per_chunk=2, silences=(KEEPALIVE_SILENCE,)
    )
    events = stream(sdk, script)
    assert sum(event.type in CHUNK_EVENTS for event in events) == 5
    assert deltas(events, "response.reasoning_summary_text.delta") == words("thought", 4)
    assert deltas(events, "response.output_text.delta") == words("word", 6)
    assert [event.type for event in events[:2]] == ["response.created", "response.in_progress"]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    completed = events[-1]
    assert completed.type == "response.completed"
    response = completed.response
    assert response.status == "completed"
    assert response.output_text == words("word", 6)
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (2, 10)
    assert response.usage.output_tokens_details.reasoning_tokens == 4
    assert response.usage.total_tokens == 12


async def test_async_stream_of_reasoning_text_and_a_tool_call(
    async_sdk: openai.AsyncOpenAI,
) -> None:
    """The async twin: reasoning-text deltas, then the function call's argument deltas joined
    into the scripted JSON; the completed response holds the call."""
    script = Script(chunk_count=5, reasoning_chunks=1, tool_call=True, responses_reasoning="text")
    events = [
        event
        async for event in await async_sdk.responses.create(
            model="sim-model", input="say something", stream=True, extra_headers=header(script)
        )
    ]
    assert sum(event.type in CHUNK_EVENTS for event in events) == 5
    assert deltas(events, "response.reasoning_text.delta") == "thought0"
    arguments = deltas(events, "response.function_call_arguments.delta")
    assert json.loads(arguments) == {"query": words("arg", 4)}
    assert sum(event.type == "response.function_call_arguments.delta" for event in events) == 4
    completed = events[-1]
    assert completed.type == "response.completed"
    call = completed.response.output[-1]
    assert call.type == "function_call"
    assert (call.name, call.arguments) == ("lookup", arguments)


def test_stream_helper_accumulates_the_final_response(sdk: openai.OpenAI) -> None:
    """client.responses.stream(): the helper's text deltas and final response agree with the
    script, through a keepalive silence."""
    script = Script(chunk_count=4, reasoning_chunks=1, silences=(KEEPALIVE_SILENCE,))
    with sdk.responses.stream(
        model="sim-model", input="say something", extra_headers=header(script)
    ) as events:
        text = "".join(
            event.delta for event in events if event.type == "response.output_text.delta"
        )
        final = events.get_final_response()
    assert text == final.output_text == words("word", 3)
    assert final.usage is not None
    assert final.usage.output_tokens_details.reasoning_tokens == 1
    assert [item.type for item in final.output] == ["reasoning", "message"]


async def test_async_stream_helper(async_sdk: openai.AsyncOpenAI) -> None:
    """The async stream helper reads a refusal: refusal deltas are the chunks."""
    script = Script(chunk_count=3, refusal=True)
    async with async_sdk.responses.stream(
        model="sim-model", input="say something", extra_headers=header(script)
    ) as events:
        refusal = [event.delta async for event in events if event.type == "response.refusal.delta"]
        final = await events.get_final_response()
    assert "".join(refusal) == words("word", 3)
    assert final.output[0].content[0].type == "refusal"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("finish", "status", "reason"),
    [
        ("stop", "completed", None),
        ("length", "incomplete", "max_output_tokens"),
        ("content_filter", "incomplete", "content_filter"),
    ],
)
def test_non_streamed_response_and_finish_mapping(
    sdk: openai.OpenAI, finish: str, status: str, reason: str | None
) -> None:
    """responses.create(): the answer's text, usage and status; length and content_filter end
    it incomplete with the matching reason."""
    response = sdk.responses.create(
        model="sim-model",
        input="say something",
        extra_body={"sim": {"chunk_count": 3, "finish_reason": finish}},
    )
    assert response.output_text == words("word", 3)
    assert response.status == status
    found = response.incomplete_details.reason if response.incomplete_details else None
    assert found == reason
    assert response.usage is not None
    assert response.usage.output_tokens == 3


def test_selection_by_header_body_and_model(threaded: ThreadedProvider) -> None:
    """The SDK selects scripts with default_headers, extra_body's `sim` and the model name."""
    with openai.OpenAI(
        base_url=threaded.base_url,
        api_key="sim",
        max_retries=0,
        default_headers=header(Script(chunk_count=2)),
    ) as headed:
        assert headed.responses.create(model="m", input="x").output_text == words("word", 2)
    with openai.OpenAI(base_url=threaded.base_url, api_key="sim", max_retries=0) as plain:
        body = plain.responses.create(model="m", input="x", extra_body={"sim": {"chunk_count": 4}})
        assert body.output_text == words("word", 4)
        assert len(plain.responses.create(model="smooth", input="x").output_text.split()) == 40


# Faults, as the SDK surfaces them.


def test_truncated_stream_ends_without_a_terminal_event(sdk: openai.OpenAI) -> None:
    """truncate: the raw stream just ends (no response.completed, no error); the stream helper
    raises RuntimeError only when asked for the final response."""
    script = Script(chunk_count=4, fault="truncate", fault_after_chunk=1)
    events = stream(sdk, script)
    assert deltas(events, "response.output_text.delta") == words("word", 2)
    assert not {"response.completed", "response.incomplete", "response.failed"} & {
        event.type for event in events
    }
    with sdk.responses.stream(model="m", input="x", extra_headers=header(script)) as helper:
        assert len(list(helper)) == len(events)
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            helper.get_final_response()


def test_malformed_event_raises_a_json_error(sdk: openai.OpenAI) -> None:
    """malformed: the SDK raises json.JSONDecodeError from the iteration (not an openai error)."""
    with pytest.raises(json.JSONDecodeError):
        stream(sdk, Script(chunk_count=4, fault="malformed", fault_after_chunk=1))


def test_error_fault_is_yielded_as_events(sdk: openai.OpenAI) -> None:
    """error: the SDK yields an `error` event and `response.failed` (with the code and message)
    and raises nothing; the stream helper's final response is a RuntimeError."""
    script = Script(
        chunk_count=4,
        fault="error",
        fault_after_chunk=1,
        error_message="upstream overloaded",
        fault_status=503,
    )
    events = stream(sdk, script)
    error, failed = events[-2:]
    assert error.type == "error"
    assert (error.code, error.message) == ("server_error", "upstream overloaded")
    assert failed.type == "response.failed"
    assert failed.response.status == "failed"
    assert failed.response.error is not None
    assert failed.response.error.code == "server_error"
    assert failed.response.output_text == words("word", 2)
    with sdk.responses.stream(model="m", input="x", extra_headers=header(script)) as helper:
        list(helper)
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            helper.get_final_response()


def test_reset_is_a_connection_error(sdk: openai.OpenAI) -> None:
    """reset: openai.APIConnectionError mid-stream."""
    with pytest.raises(openai.APIConnectionError):
        stream(sdk, Script(chunk_count=4, fault="reset", fault_after_chunk=1))


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (429, openai.RateLimitError),
        (503, openai.InternalServerError),
        (400, openai.BadRequestError),
    ],
)
def test_error_statuses_map_to_the_sdk_s_classes(
    sdk: openai.OpenAI, status: int, error: type[openai.APIStatusError]
) -> None:
    """Scripted HTTP errors are the SDK's status errors, with the OpenAI body and Retry-After."""
    script = Script(error_status=status, retry_after="7", error_code="scripted")
    with pytest.raises(error) as raised:
        stream(sdk, script)
    assert raised.value.status_code == status
    assert raised.value.code == "scripted"
    assert raised.value.response.headers["retry-after"] == "7"
