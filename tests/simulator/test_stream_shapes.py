"""Stream shapes real providers send that the conformance suite needs: keepalives before the
first chunk, empty-delta keepalives, several choices, and ``[DONE]`` without a finish reason
(``Script.first_chunk_keepalive_every_s``, ``keepalive``, ``choices``, ``finish_chunk``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from pydantic import ValidationError

from otel_llm.simulator import (
    SCRIPT_HEADER,
    Script,
    Silence,
    SimulatedProvider,
    ThreadedProvider,
    scripted_figures,
)
from otel_llm.simulator._chat import stream_plan
from otel_llm.simulator._frames import Pause, Reply, Send
from otel_llm.simulator._gemini import gemini_plan

REPLY = Reply(id="chatcmpl-sim000001", created=0, model="m", prompt_tokens=1)
MESSAGES: list[Any] = [{"role": "user", "content": "go"}]


def data_lines(script: Script, reply: Reply = REPLY) -> list[Any]:
    """The data of every event of the chat plan, parsed (``[DONE]`` as text)."""
    sent = [step.data for step in stream_plan(script, reply) if isinstance(step, Send)]
    return [text if text == "[DONE]" else json.loads(text) for text in sent]


@pytest.fixture(scope="module")
def provider() -> Iterator[ThreadedProvider]:
    with SimulatedProvider.start_in_thread(time_scale=0.001) as running:
        yield running


def test_first_chunk_delay_carries_keepalives() -> None:
    """The first-chunk delay is one pause with the script's keepalive period; without it none."""
    with_pings = Script(chunk_count=2, first_chunk_delay_s=3.0, first_chunk_keepalive_every_s=1.0)
    pauses = [step for step in stream_plan(with_pings, REPLY) if isinstance(step, Pause)]
    assert pauses[0] == Pause(3.0, 1.0, cadence=True)
    assert pauses[0].keepalive_count() == 2
    plain = [step for step in stream_plan(Script(chunk_count=2), REPLY) if isinstance(step, Pause)]
    assert plain[0].keepalive_every_s is None


def test_first_chunk_keepalives_are_bounded() -> None:
    """A keepalive period that would send more than 10,000 pings is refused at construction."""
    with pytest.raises(ValidationError, match="first_chunk_keepalive_every_s"):
        Script(first_chunk_delay_s=100.0, first_chunk_keepalive_every_s=0.001)


def test_several_choices_send_a_chunk_and_a_finish_per_choice() -> None:
    """choices=3: each scripted chunk goes out once per choice (index 0, 1, 2), then a finish
    chunk per choice; the truth counts a chunk per choice and the same stalls as one choice."""
    script = Script(chunk_count=4, choices=3, silences=(Silence(after_chunk=1, duration_s=2.0),))
    frames = [line for line in data_lines(script) if line != "[DONE]"]
    indices = [frame["choices"][0]["index"] for frame in frames]
    assert indices == [0, *[0, 1, 2] * 4, 0, 1, 2]
    finishes = [frame["choices"][0]["finish_reason"] for frame in frames[-3:]]
    assert finishes == ["stop"] * 3
    truth = scripted_figures(script, threshold_s=1.0)
    assert (truth.chunk_count, truth.stall_count) == (12, 1)
    assert scripted_figures(script, threshold_s=1.0, wire="anthropic").chunk_count == 4


def test_done_without_a_finish_reason() -> None:
    """finish_chunk=False: usage frame and [DONE] still come, no chunk names a finish reason."""
    lines = data_lines(Script(chunk_count=3, finish_chunk=False), REPLY)
    assert lines[-1] == "[DONE]"
    reasons = [frame["choices"][0]["finish_reason"] for frame in lines[:-1] if frame["choices"]]
    assert reasons == [None] * 4  # the role chunk and three chunks


def test_empty_delta_keepalive_is_the_chat_framing() -> None:
    """keepalive="empty_delta" makes the chat keepalive an empty-content chunk of the answer;
    the default stays the ``: ping`` comment."""
    from otel_llm.simulator._server import WIRES

    chat = WIRES["chat"]
    empty = Reply(id="chatcmpl-x", created=0, model="m", prompt_tokens=1, empty_keepalive=True)
    written = chat.framing(empty).keepalive.decode()
    assert written.startswith("data: ")
    assert written.endswith("\n\n")
    frame = json.loads(written.removeprefix("data: "))
    assert frame["choices"][0]["delta"] == {"content": ""}
    assert chat.framing(REPLY).keepalive == b": ping\n\n"


def test_gemini_ignores_the_chat_only_shapes() -> None:
    """Gemini's plan is the same with the chat-only fields set (one candidate, its finish)."""
    base = Script(chunk_count=3)
    shaped = base.model_copy(update={"choices": 2, "finish_chunk": False})
    reply = Reply(id="sim1", created=0, model="m", prompt_tokens=1)
    assert gemini_plan(shaped, reply) == gemini_plan(base, reply)


def test_the_openai_sdk_reads_choices_and_empty_keepalives(provider: ThreadedProvider) -> None:
    """Through the openai SDK over loopback: two choices stream interleaved with their finish
    reasons, and empty-delta keepalives during a silence arrive as chunks with empty content."""
    script = Script(
        chunk_count=3,
        choices=2,
        keepalive="empty_delta",
        silences=(Silence(after_chunk=0, duration_s=10.0, keepalive_every_s=3.0),),
    )
    client = openai.OpenAI(base_url=provider.base_url, api_key="sim", max_retries=0)
    with client:
        stream = client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,
            extra_headers={SCRIPT_HEADER: script.model_dump_json()},
        )
        chunks = list(stream)
    contents = [(c.choices[0].index, c.choices[0].delta.content) for c in chunks if c.choices]
    empties = [pair for pair in contents if pair == (0, "")]
    assert len(empties) == 3  # keepalives at 3, 6 and 9 s of the 10 s silence
    texts = {k: "".join(t or "" for i, t in contents if i == k) for k in (0, 1)}
    assert texts == {0: "word0 word1 word2", 1: "word0 word1 word2"}
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices][-2:]
    assert finishes == ["stop", "stop"]
