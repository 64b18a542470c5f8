"""Each API's chunk rule, read from its own SDK's objects and from plain dicts, and never broken
by hostile input: what counts as a chunk, what never does, where the finish and the usage come
from."""

from __future__ import annotations

import os
from typing import Any

import pytest
from anthropic.types import (
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
)
from google.genai import types as gemini
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseCreatedEvent,
    ResponseTextDeltaEvent,
)

from otel_llm._measure._response import Usage
from otel_llm._wrap._anthropic import AnthropicReader
from otel_llm._wrap._chunk_view import ResponseNotes, StreamReader
from otel_llm._wrap._google_genai import GeminiReader
from otel_llm._wrap._openai_responses import OUTPUT_DELTAS, ResponsesReader

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from the internet

READERS: dict[str, StreamReader] = {
    "responses": ResponsesReader(),
    "anthropic": AnthropicReader(),
    "gemini": GeminiReader(),
}


def _read(reader: StreamReader, events: list[Any]) -> tuple[list[bool], ResponseNotes]:
    notes = ResponseNotes()
    return [reader.read(event, notes) for event in events], notes


# --- Anthropic ----------------------------------------------------------------------------------


def _delta(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": 0, "delta": {"type": kind, **fields}}


def _start(block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": 0, "content_block": block}


@pytest.mark.parametrize(
    ("event", "chunk"),
    [
        (_delta("text_delta", text="Hi"), True),
        (_delta("thinking_delta", thinking="hmm"), True),
        (_delta("input_json_delta", partial_json='{"q"'), True),
        (_delta("text_delta", text=""), False),
        (_delta("input_json_delta", partial_json=""), False),
        (_delta("signature_delta", signature="c2ln"), False),
        (_delta("citations_delta", citation={}), False),
        ({"type": "ping"}, False),
        ({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}, False),
        (_start({"type": "text", "text": ""}), False),
        (_start({"type": "text", "text": "Hi"}), True),
        (_start({"type": "thinking", "thinking": "hmm"}), True),
        (_start({"type": "tool_use", "id": "t", "name": "f", "input": {}}), False),
        ({"type": "content_block_stop", "index": 0}, False),
        ({"type": "message_stop"}, False),
    ],
)
def test_anthropic_chunk_rule(event: dict[str, Any], chunk: bool) -> None:
    """Output deltas with something in them are chunks, and a block's start that carries text
    or thinking (the API starts blocks empty; a gateway may not, and the client counts such a
    start too); every other event is not."""
    assert _read(AnthropicReader(), [event])[0] == [chunk]


def test_a_block_start_carrying_text_is_a_chunk_as_sdk_objects_and_captured() -> None:
    """As the SDK's own event objects: a text block's start carrying text is a chunk, its
    text the answer's start when content is captured; a block started empty is not."""
    events = [
        RawContentBlockStartEvent.model_validate(
            {"type": "content_block_start", "index": 0, "content_block": block}
        )
        for block in ({"type": "text", "text": "Hel"}, {"type": "text", "text": ""})
    ]
    for capture in (False, True):
        notes = ResponseNotes(capture_text=capture)
        reader = AnthropicReader()
        chunks = [reader.read(event, notes) for event in events]
        chunks.append(reader.read(_delta("text_delta", text="lo"), notes))
        assert chunks == [True, False, True]
        assert notes.text == (["Hel", "lo"] if capture else [])


def test_anthropic_facts_from_sdk_objects() -> None:
    """Model, id and input usage from ``message_start``; the stop reason and output usage from
    ``message_delta``; cache reads and writes added to the input tokens."""
    start = RawMessageStartEvent.model_validate(
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 10,
                    "output_tokens": 1,
                    "cache_read_input_tokens": 5,
                    "cache_creation_input_tokens": 2,
                },
            },
        }
    )
    text = RawContentBlockDeltaEvent.model_validate(_delta("text_delta", text="word0"))
    end = RawMessageDeltaEvent.model_validate(
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 7},
        }
    )
    chunks, notes = _read(AnthropicReader(), [start, text, end])
    assert chunks == [False, True, False]
    facts = notes.facts()
    assert (facts.model, facts.response_id, facts.finish_reasons) == (
        "claude-x",
        "msg_1",
        ("end_turn",),
    )
    assert facts.usage == Usage(
        input_tokens=17, output_tokens=7, cache_read_tokens=5, cache_creation_tokens=2
    )
    assert notes.complete


def test_anthropic_stream_without_a_stop_reason_is_incomplete() -> None:
    """``message_start`` and chunks but no ``message_delta``: cut short."""
    start = {"type": "message_start", "message": {"id": "m", "model": "c", "usage": {}}}
    _, notes = _read(AnthropicReader(), [start, _delta("text_delta", text="a")])
    assert not notes.complete


# --- Responses ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(OUTPUT_DELTAS))
def test_responses_output_deltas_are_chunks_when_not_empty(kind: str) -> None:
    """Every output delta kind counts when its delta has something in it, and not when empty."""
    assert _read(ResponsesReader(), [{"type": kind, "delta": "x"}])[0] == [True]
    assert _read(ResponsesReader(), [{"type": kind, "delta": ""}])[0] == [False]


@pytest.mark.parametrize(
    "kind",
    [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ],
)
def test_responses_lifecycle_events_are_not_chunks(kind: str) -> None:
    """Lifecycle events never count, whatever they carry."""
    assert _read(ResponsesReader(), [{"type": kind, "delta": "x", "response": {}}])[0] == [False]


def _response(status: str, **more: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "gpt-x",
        "status": status,
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        **more,
    }


def test_responses_facts_from_sdk_objects() -> None:
    """Identity from ``response.created``, usage and ``stop`` from ``response.completed``."""
    created = ResponseCreatedEvent.model_validate(
        {"type": "response.created", "sequence_number": 0, "response": _response("in_progress")}
    )
    delta = ResponseTextDeltaEvent.model_validate(
        {
            "type": "response.output_text.delta",
            "sequence_number": 1,
            "item_id": "i",
            "output_index": 0,
            "content_index": 0,
            "delta": "word0",
            "logprobs": [],
        }
    )
    usage = {
        "input_tokens": 3,
        "output_tokens": 9,
        "total_tokens": 12,
        "input_tokens_details": {"cached_tokens": 1, "cache_write_tokens": 2},
        "output_tokens_details": {"reasoning_tokens": 4},
    }
    completed = ResponseCompletedEvent.model_validate(
        {
            "type": "response.completed",
            "sequence_number": 2,
            "response": _response("completed", usage=usage),
        }
    )
    chunks, notes = _read(ResponsesReader(), [created, delta, completed])
    assert chunks == [False, True, False]
    facts = notes.facts()
    assert (facts.model, facts.response_id, facts.finish_reasons) == ("gpt-x", "resp_1", ("stop",))
    assert facts.usage == Usage(
        input_tokens=3,
        output_tokens=9,
        reasoning_tokens=4,
        total_tokens=12,
        cache_read_tokens=1,
        cache_creation_tokens=2,
    )
    assert notes.complete
    assert notes.failure is None


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (_response("incomplete", incomplete_details={"reason": "max_output_tokens"}), "length"),
        (
            _response("incomplete", incomplete_details={"reason": "content_filter"}),
            "content_filter",
        ),
        (_response("completed", output=[{"type": "function_call", "name": "f"}]), "tool_call"),
    ],
)
def test_responses_finish_reasons(response: dict[str, Any], reason: str) -> None:
    """The convention's finish reason from the response's status and output."""
    kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    _, notes = _read(ResponsesReader(), [{"type": kind, "response": response}])
    assert notes.facts().finish_reasons == (reason,)


def test_responses_failure_and_error_events_are_the_providers_error() -> None:
    """``response.failed`` and an ``error`` event leave a failure to record, with its code."""
    failed = _response("failed", error={"code": "server_error", "message": "it broke"})
    _, notes = _read(ResponsesReader(), [{"type": "response.failed", "response": failed}])
    assert notes.failure == ("server_error", "it broke")
    _, notes = _read(ResponsesReader(), [{"type": "error", "code": "rate", "message": "slow"}])
    assert notes.failure == ("rate", "slow")


# --- Gemini -------------------------------------------------------------------------------------


def _candidate(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"index": 0, "content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finish_reason"] = finish
    return candidate


@pytest.mark.parametrize(
    ("response", "chunk"),
    [
        ({"candidates": [_candidate({"text": "Hi"})]}, True),
        ({"candidates": [_candidate({"text": "hmm", "thought": True})]}, True),
        ({"candidates": [_candidate({"function_call": {"name": "f", "args": {}}})]}, True),
        ({"candidates": [_candidate({"text": ""})]}, False),
        ({"candidates": [_candidate(finish="STOP")]}, False),
        ({"usage_metadata": {"prompt_token_count": 3}}, False),
        ({"candidates": []}, False),
        ({}, False),
    ],
)
def test_gemini_chunk_rule(response: dict[str, Any], chunk: bool) -> None:
    """A response is a chunk when a candidate carries output; usage-only and empty are not."""
    assert _read(GeminiReader(), [response])[0] == [chunk]


def test_gemini_facts_from_sdk_objects() -> None:
    """The finish reason's name, the model version, the last usage (thoughts in output)."""
    first = gemini.GenerateContentResponse.model_validate(
        {"candidates": [_candidate({"text": "word0"})], "model_version": "gemini-x",
         "response_id": "r1", "usage_metadata": {"prompt_token_count": 4}}
    )  # fmt: skip
    last = gemini.GenerateContentResponse.model_validate(
        {
            "candidates": [_candidate({"text": " word1"}, finish="MAX_TOKENS")],
            "usage_metadata": {
                "prompt_token_count": 4,
                "candidates_token_count": 2,
                "thoughts_token_count": 3,
                "total_token_count": 9,
            },
        }
    )
    chunks, notes = _read(GeminiReader(), [first, last])
    assert chunks == [True, True]
    facts = notes.facts()
    assert (facts.model, facts.response_id, facts.finish_reasons) == (
        "gemini-x",
        "r1",
        ("MAX_TOKENS",),
    )
    assert facts.usage == Usage(input_tokens=4, output_tokens=5, reasoning_tokens=3, total_tokens=9)


def test_a_blocked_gemini_prompt_finishes_with_its_block_reason() -> None:
    """No candidates, a ``block_reason``: complete, finished with that reason."""
    _, notes = _read(GeminiReader(), [{"prompt_feedback": {"block_reason": "SAFETY"}}])
    assert notes.complete
    assert notes.facts().finish_reasons == ("SAFETY",)


# --- hostile input ------------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_KEYS = st.sampled_from(
    ["type", "delta", "text", "message", "usage", "candidates", "content", "parts", "response",
     "status", "output", "index", "finish_reason", "stop_reason", "prompt_feedback", "error"]
)  # fmt: skip
_SHAPED = st.recursive(
    _JSON,
    lambda inner: (
        st.dictionaries(_KEYS | st.sampled_from(sorted(OUTPUT_DELTAS)), inner, max_size=5)
        | st.lists(inner, max_size=3)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(READERS)), events=st.lists(_SHAPED, max_size=8))
def test_no_input_breaks_a_reader(name: str, events: list[Any]) -> None:
    """Whatever a stream carries — wrong types at any depth — a reader answers a bool and
    leaves notes that can be turned into span attributes."""
    chunks, notes = _read(READERS[name], events)
    assert all(isinstance(chunk, bool) for chunk in chunks)
    notes.facts(cut_short=True).attributes()
    READERS[name].read_answer(events[0] if events else {}, ResponseNotes())


# --- the SDKs' objects read as their dicts ------------------------------------------------------
# Each reader reads an SDK's own objects by plain attribute access (the hot path) and anything
# else the careful way: over the streams an API sends, both must note the very same facts.

_TEXT = st.sampled_from(["", "Hi", " there"])
_COUNT = st.none() | st.integers(min_value=0, max_value=50)


def _facts(notes: ResponseNotes) -> tuple[Any, ...]:
    return (notes.facts(), sorted(notes.choices_seen), notes.complete)


def _counts(**names: Any) -> dict[str, Any]:
    return {name: value for name, value in names.items() if value is not None}


_ANTHROPIC_EVENT = st.one_of(
    st.builds(
        lambda kind, text: _delta(kind, **{_ANTHROPIC_FIELD[kind]: text}),
        st.sampled_from(sorted(_ANTHROPIC_FIELD := {
            "text_delta": "text", "thinking_delta": "thinking",
            "input_json_delta": "partial_json", "signature_delta": "signature",
        })),
        _TEXT,
    ),
    st.builds(
        lambda tokens, read: {
            "type": "message_start",
            "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                        "content": [], "stop_reason": None, "stop_sequence": None,
                        "usage": {"input_tokens": tokens or 0, "output_tokens": 1,
                                  **_counts(cache_read_input_tokens=read)}},
        },
        _COUNT, _COUNT,
    ),
    st.builds(
        lambda reason, tokens: {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": tokens or 0},
        },
        st.sampled_from([None, "end_turn", "max_tokens", "tool_use"]), _COUNT,
    ),
    st.just({"type": "content_block_stop", "index": 0}),
    st.just({"type": "message_stop"}),
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(events=st.lists(_ANTHROPIC_EVENT, max_size=8))
def test_anthropic_sdk_objects_read_as_their_dicts(events: list[dict[str, Any]]) -> None:
    """The anthropic SDK's event objects give the chunks and facts their dicts give."""
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    objects = [adapter.validate_python(event) for event in events]
    from_objects, object_notes = _read(AnthropicReader(), objects)
    from_dicts, dict_notes = _read(AnthropicReader(), events)
    assert from_objects == from_dicts
    assert _facts(object_notes) == _facts(dict_notes)


_PART = st.one_of(
    st.builds(lambda text: {"text": text}, _TEXT),
    st.builds(lambda text: {"text": text, "thought": True}, _TEXT),
    st.just({"function_call": {"name": "f", "args": {"q": 1}}}),
)
_GEMINI_RESPONSE = st.builds(
    lambda candidates, usage, blocked, model: {
        **({"candidates": candidates} if candidates is not None else {}),
        **({"usage_metadata": usage} if usage is not None else {}),
        **({"prompt_feedback": {"block_reason": blocked}} if blocked else {}),
        **({"model_version": model} if model else {}),
    },
    st.none() | st.lists(
        st.builds(
            lambda index, parts, finish: {
                **({"index": index} if index is not None else {}),
                **({"content": {"role": "model", "parts": parts}} if parts is not None else {}),
                **({"finish_reason": finish} if finish else {}),
            },
            st.none() | st.integers(min_value=0, max_value=2),
            st.none() | st.lists(_PART, max_size=3),
            st.sampled_from([None, "STOP", "MAX_TOKENS", "SAFETY"]),
        ),
        max_size=2,
    ),
    st.none() | st.builds(
        lambda prompt, candidates, thoughts, total, cached: _counts(
            prompt_token_count=prompt, candidates_token_count=candidates,
            thoughts_token_count=thoughts, total_token_count=total,
            cached_content_token_count=cached,
        ),
        _COUNT, _COUNT, _COUNT, _COUNT, _COUNT,
    ),
    st.sampled_from([None, "SAFETY"]),
    st.sampled_from([None, "gemini-x"]),
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(responses=st.lists(_GEMINI_RESPONSE, max_size=6))
def test_gemini_sdk_objects_read_as_their_dicts(responses: list[dict[str, Any]]) -> None:
    """google-genai's response objects give the chunks and facts their dicts give (usage
    merged over the stream: a count a later response leaves out keeps its earlier value)."""
    objects = [gemini.GenerateContentResponse.model_validate(response) for response in responses]
    from_objects, object_notes = _read(GeminiReader(), objects)
    from_dicts, dict_notes = _read(GeminiReader(), responses)
    assert from_objects == from_dicts
    assert _facts(object_notes) == _facts(dict_notes)


_CHAT_CHUNK = st.builds(
    lambda deltas, finish, usage: {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [
            {"index": index, "delta": delta, "finish_reason": finish if index == 0 else None}
            for index, delta in enumerate(deltas)
        ],
        **({"usage": usage} if usage else {}),
    },
    st.lists(
        st.one_of(
            st.builds(lambda text: {"role": "assistant", "content": text}, _TEXT),
            st.builds(lambda text: {"content": text}, _TEXT),
            st.builds(lambda text: {"reasoning_content": text}, _TEXT),
            st.builds(lambda text: {"refusal": text}, _TEXT),
            st.just({"tool_calls": [{"index": 0, "id": "t1", "type": "function",
                                     "function": {"name": "f", "arguments": "{"}}]}),
            st.just({}),
        ),
        max_size=2,
    ),
    st.sampled_from([None, "stop", "length"]),
    st.none() | st.builds(
        lambda prompt, completion: {"prompt_tokens": prompt, "completion_tokens": completion,
                                    "total_tokens": prompt + completion},
        st.integers(0, 9), st.integers(0, 9),
    ),
)  # fmt: skip


@pytest.mark.filterwarnings("ignore:Items? .* (are|is) using the `ReadOnly` qualifier")
@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(_CHAT_CHUNK, max_size=6))
def test_litellm_chunks_read_as_openai_chunks(chunks: list[dict[str, Any]]) -> None:
    """LiteLLM's chunk objects (most delta values kept as pydantic extras) give the chunks and
    facts the same chunks give as OpenAI dicts."""
    from litellm.types.utils import ModelResponseStream

    from otel_llm._wrap._litellm import LiteLLMReader

    objects = [ModelResponseStream(**chunk) for chunk in chunks]
    notes = ResponseNotes()
    from_dicts = [notes.feed_and_classify(chunk) for chunk in chunks]
    from_objects, object_notes = _read(LiteLLMReader(), objects)
    assert from_objects == from_dicts
    assert _facts(object_notes) == _facts(notes)
