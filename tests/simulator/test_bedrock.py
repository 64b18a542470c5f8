"""Anthropic's Messages API through Bedrock's envelope (``otel_llm/simulator/_bedrock.py``):
the same events as ``/v1/messages`` for the same script, each one AWS event stream message
that botocore — what the anthropic SDK's Bedrock client reads them with — accepts."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import pytest
from botocore.eventstream import EventStreamBuffer

from otel_llm.simulator import SCRIPT_HEADER, Script, Silence, SimulatedProvider, ThreadedProvider

SCALE = 0.001
BODY: dict[str, Any] = {
    "anthropic_version": "bedrock-2023-05-31",
    "max_tokens": 50,
    "messages": [{"role": "user", "content": "say something"}],
}
SCRIPT = Script(
    chunk_count=6,
    reasoning_chunks=2,
    silences=(Silence(after_chunk=2, duration_s=30.0, keepalive_every_s=10.0),),
)


@pytest.fixture(scope="module")
def threaded() -> Iterator[ThreadedProvider]:
    with SimulatedProvider.start_in_thread(time_scale=SCALE) as running:
        yield running


def _header(script: Script) -> dict[str, str]:
    return {SCRIPT_HEADER: script.model_dump_json()}


def _bedrock_events(url: str, script: Script) -> tuple[str, list[tuple[dict[str, Any], Any]]]:
    """The content type and every message (headers, payload) of a Bedrock stream."""
    answer = httpx2.post(
        f"{url}/model/sim-model/invoke-with-response-stream", json=BODY, headers=_header(script)
    )
    buffer = EventStreamBuffer()
    buffer.add_data(answer.content)  # each message's two CRCs are checked as it is read
    return answer.headers["content-type"], [
        (dict(message.headers), json.loads(message.payload)) for message in buffer
    ]


def _anthropic_events(url: str, script: Script) -> list[dict[str, Any]]:
    """The data of every event ``/v1/messages`` streams for ``script``, keepalives left out."""
    answer = httpx2.post(
        f"{url}/v1/messages",
        json={**BODY, "model": "sim-model", "stream": True},
        headers=_header(script),
    )
    events = [
        json.loads(line.removeprefix("data: "))
        for line in answer.text.splitlines()
        if line.startswith("data: ")
    ]
    return [event for event in events if event["type"] != "ping"]


def _anonymous(event: dict[str, Any]) -> dict[str, Any]:
    """``event`` without the message id (each answer has its own)."""
    if event["type"] == "message_start":
        return {**event, "message": {**event["message"], "id": None}}
    return event


def test_a_stream_is_anthropics_events_in_event_stream_messages(
    threaded: ThreadedProvider,
) -> None:
    """Each of Anthropic's events, in order, base64 in a ``chunk`` message; no keepalive."""
    content_type, messages = _bedrock_events(threaded.url, SCRIPT)
    assert content_type == "application/vnd.amazon.eventstream"
    assert {tuple(sorted(headers.items())) for headers, _ in messages} == {
        (
            (":content-type", "application/json"),
            (":event-type", "chunk"),
            (":message-type", "event"),
        )
    }
    decoded = [json.loads(base64.b64decode(payload["bytes"])) for _, payload in messages]
    assert [_anonymous(e) for e in decoded if e["type"] != "ping"] == [
        _anonymous(e) for e in _anthropic_events(threaded.url, SCRIPT)
    ]
    assert sum(event["type"] == "content_block_delta" for event in decoded) == 6 + 1  # signature


@pytest.mark.parametrize(
    ("status", "exception"),
    [
        (529, "serviceUnavailableException"),
        (429, "throttlingException"),
        (500, "modelStreamErrorException"),
    ],
)
def test_a_mid_stream_error_is_an_exception_message(
    threaded: ThreadedProvider, status: int, exception: str
) -> None:
    """The ``error`` fault is Bedrock's exception message, named as Bedrock names it."""
    script = Script(chunk_count=6, fault="error", fault_after_chunk=3, fault_status=status)
    _, messages = _bedrock_events(threaded.url, script)
    headers, payload = messages[-1]
    assert headers[":message-type"] == "exception"
    assert headers[":exception-type"] == exception
    assert payload["message"]
    assert all(h[":message-type"] == "event" for h, _ in messages[:-1])


def test_the_sdk_reads_the_stream_and_the_complete_answer(threaded: ThreadedProvider) -> None:
    """The anthropic SDK's Bedrock client reads both routes: the stream's text and stop
    reason equal the complete answer's."""
    sdk = anthropic.AnthropicBedrock(
        base_url=threaded.url,
        aws_region="us-east-1",
        aws_access_key="AKIAEXAMPLE",
        aws_secret_key="secret",
        max_retries=0,
        default_headers=_header(Script(chunk_count=6)),
    )
    with sdk.messages.stream(model="sim-model", max_tokens=50, messages=BODY["messages"]) as s:
        streamed = s.get_final_message()
    whole = sdk.messages.create(model="sim-model", max_tokens=50, messages=BODY["messages"])
    sdk.close()
    assert [b.model_dump(exclude={"parsed_output"}) for b in streamed.content] == [
        b.model_dump() for b in whole.content
    ]
    assert (streamed.stop_reason, whole.stop_reason) == ("end_turn", "end_turn")
    assert streamed.usage.output_tokens == whole.usage.output_tokens == 6
