"""Hostile streams (hypothesis) through the Anthropic and Gemini readers: random events —
valid ones, wrong types, garbage, non-UTF-8, error events, refusals, keepalives, fields the API
may add later — written with random line endings, cut at a random byte (cleanly or with a
reset) and delivered in random pieces.

Each generated event carries what a correct reader must make of it, so the property is exact:
the transport returns the answer's text the delivered events add up to, or raises the error
they call for, and counts exactly their incremental chunks — never an exception outside the
library's hierarchy, never a hang, never an incomplete stream presented as an answer.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_llm import Source
from otel_llm import _errors as e
from tests.support.hostile_sse import (
    BAD_BYTE,
    DEEP,
    Event,
    Stream,
    counted_through_transport,
    expected,
    expected_chunks,
    fail,
    serving,
    skip,
    streams,
)

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)

# --- Anthropic --------------------------------------------------------------------------------

CLAUDE = Source(name="fuzz", provider="anthropic", base_url="http://fuzz.test/v1", model="m")


def named(kind: str, **fields: Any) -> tuple[bytes, ...]:
    """``event: kind`` and its JSON data (``type`` = kind)."""
    return (f"event: {kind}".encode(), b"data: " + json.dumps({"type": kind, **fields}).encode())


def delta(kind: str, key: str, value: Any) -> tuple[bytes, ...]:
    return named("content_block_delta", index=0, delta={"type": kind, key: value})


ANTHROPIC_WRONG = st.sampled_from(
    [
        delta("text_delta", "text", 3),
        delta("text_delta", "text", ["x"]),
        delta("thinking_delta", "thinking", {"a": 1}),
        delta("input_json_delta", "partial_json", 1),
        named("content_block_delta", index="0", delta={"type": "text_delta", "text": "x"}),
        named("content_block_delta", index=0, delta=["x"]),
        named("content_block_delta", index=0, delta={"type": 7}),
        named("content_block_start", index=0, content_block="text"),
        named("content_block_start", index=0, content_block={"type": "tool_use", "name": 5}),
        named("message_delta", delta={"stop_reason": 1}),
        named("message_delta", delta="end_turn"),
        (b"event: content_block_delta", b'data: {"type": 5}'),
    ]
)


ANTHROPIC_BENIGN = ["text"] * 6 + [
    "thinking", "signature", "tool-start", "tool-args", "start", "block-start", "block-stop",
    "ping", "ping-garbage", "comment", "field", "future", "empty", "stop", "stop", "no-stop",
    "message-stop",
]  # fmt: skip
ANTHROPIC_HOSTILE = ["refusal", "wrong", "junk", "not-object", "overloaded", "invalid",
                     "error-text", "error-in-data"]  # fmt: skip


@st.composite
def anthropic_events(draw: st.DrawFn, hostile: bool = True) -> Event:
    """One Messages API event (``hostile=False``: none that fails the stream)."""
    kind = draw(st.sampled_from(ANTHROPIC_BENIGN + (ANTHROPIC_HOSTILE if hostile else [])))
    if kind == "text":
        text = draw(words)
        lines = delta("text_delta", "text", text)
        shown = text
        if text and draw(st.booleans()):  # an undecodable byte inside the text
            lines = (lines[0], lines[1].replace(b'"text": "', b'"text": "' + BAD_BYTE, 1))
            shown = "\ufffd" + text
        return Event(lines, "chunk", shown, incremental=bool(shown))
    if kind == "thinking":
        thought = draw(words)
        return Event(delta("thinking_delta", "thinking", thought), "chunk",
                     incremental=bool(thought))  # fmt: skip
    if kind == "signature":
        return skip(*delta("signature_delta", "signature", "c2ln"))
    if kind == "tool-start":
        block = {"type": "tool_use", "id": "t", "name": "f", "input": {}}
        return skip(*named("content_block_start", index=1, content_block=block))
    if kind == "tool-args":
        piece = draw(words)
        return Event(named("content_block_delta", index=1,
                           delta={"type": "input_json_delta", "partial_json": piece}),
                     "chunk", incremental=bool(piece))  # fmt: skip
    if kind == "start":
        message = {"id": "m1", "model": "m", "usage": {"input_tokens": 1, "output_tokens": 1}}
        return skip(*named("message_start", message=message))
    if kind == "block-start":
        return skip(*named("content_block_start", index=0, content_block={"type": "text",
                                                                          "text": ""}))  # fmt: skip
    if kind == "block-stop":
        return skip(*named("content_block_stop", index=0))
    if kind == "ping":
        return skip(*named("ping"))
    if kind == "ping-garbage":  # a ping is never parsed, whatever it carries
        return skip(b"event: ping", b"data: {not json")
    if kind == "comment":
        return skip(b": keepalive")
    if kind == "field":
        return skip(draw(st.sampled_from([b"id: 7", b"retry: 1000", b"foo: bar", b"x"])))
    if kind == "future":  # an event type the API may add later
        return skip(*named("content_block_annotation", index=0, note={"a": 1}))
    if kind == "empty":
        return skip(b"data:")
    if kind == "stop":
        reason = draw(st.sampled_from(["end_turn", "max_tokens", "tool_use", "pause_turn"]))
        lines = named("message_delta", delta={"stop_reason": reason},
                      usage={"output_tokens": 3})  # fmt: skip
        return Event(lines, "chunk", finished=(0,), seen=(0,))
    if kind == "no-stop":
        return skip(
            *named("message_delta", delta={"stop_reason": None}, usage={"output_tokens": 1})
        )
    if kind == "refusal":
        return fail(e.ContentFiltered, *named("message_delta", delta={"stop_reason": "refusal"}))
    if kind == "message-stop":
        return Event(named("message_stop"), "end")
    if kind == "wrong":
        return fail(e.MalformedStream, *draw(ANTHROPIC_WRONG))
    if kind == "junk":
        junk = draw(st.sampled_from([b"{", b"nope", b'{"a": ', b"[1,", DEEP]))
        return fail(e.MalformedStream, b"event: content_block_delta", b"data: " + junk)
    if kind == "not-object":
        value = json.dumps(draw(st.sampled_from([[1], "s", 3, None]))).encode()
        return fail(e.MalformedStream, b"event: content_block_delta", b"data: " + value)
    if kind == "overloaded":
        error = {"type": "overloaded_error", "message": "Overloaded"}
        return fail(e.ServerError, *named("error", error=error))
    if kind == "invalid":
        error = {"type": "invalid_request_error", "message": "bad"}
        return fail(e.BadRequest, *named("error", error=error))
    if kind == "error-text":  # an error event whose data is not JSON: its text is the message
        text = draw(st.sampled_from([b"boom", DEEP]))
        return fail(e.ServerError, b"event: error", b"data: " + text)
    error = {"type": "rate_limit_error", "message": "slow down"}
    return fail(e.RateLimited, b"event: message", b"data: " + json.dumps(
        {"type": "error", "error": error}).encode())  # fmt: skip


def run(source: Source, stream: Stream) -> tuple[str | type[BaseException], int]:
    return asyncio.run(counted_through_transport(source, serving(stream)))


def mixed(events: Any) -> st.SearchStrategy[Stream]:
    """Streams of events that may fail them, and (as often) streams of benign events only, so
    that whole answers — and what they add up to — are common too."""
    return st.booleans().flatmap(lambda hostile: streams(events(hostile)))


@FUZZ
@given(mixed(anthropic_events))
def test_anthropic_reader_reads_hostile_streams_exactly(stream: Stream) -> None:
    """Any Messages API stream: the exact answer or the exact library error, and exactly its
    chunks; nothing else, no hang, no stream without its stop reason taken for an answer."""
    assert run(CLAUDE, stream) == (expected(stream), expected_chunks(stream))


# --- Gemini -----------------------------------------------------------------------------------

GEMINI = Source(name="fuzz", provider="gemini", base_url="http://fuzz.test/v1", model="m")


def data(payload: Any) -> tuple[bytes, ...]:
    return (b"data: " + json.dumps(payload).encode(),)


def response(parts: list[Any], *, index: int = 0, finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"index": index, "content": {"role": "model", "parts": parts}}
    if finish is not None:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "m"}


GEMINI_WRONG = st.sampled_from(
    [
        {"candidates": 5},
        {"candidates": "x"},
        {"candidates": [7]},
        {"candidates": [{"index": "0"}]},
        {"candidates": [{"content": []}]},
        {"candidates": [{"content": {"parts": {"text": "x"}}}]},
        {"candidates": [{"content": {"parts": [3]}}]},
        {"candidates": [{"content": {"parts": [{"text": ["x"]}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "x", "thought": 1}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": "f"}]}}]},
        {"candidates": [{"finishReason": ["STOP"]}]},
        {"candidates": [{"index": True}]},
    ]
)


GEMINI_BENIGN = ["text"] * 6 + [
    "thought", "call", "empty-text", "no-parts", "usage", "finish", "finish", "comment",
    "field", "typed", "empty",
]  # fmt: skip
GEMINI_HOSTILE = ["filtered", "blocked", "wrong", "junk", "not-object", "unavailable",
                  "exhausted", "invalid", "error-event"]  # fmt: skip


@st.composite
def gemini_events(draw: st.DrawFn, hostile: bool = True) -> Event:
    """One Gemini event (``hostile=False``: none that fails the stream)."""
    kind = draw(st.sampled_from(GEMINI_BENIGN + (GEMINI_HOSTILE if hostile else [])))
    index = draw(st.sampled_from([0, 0, 0, 1]))
    if kind == "text":
        text = draw(words)
        lines = data(response([{"text": text}], index=index))
        shown = text if index == 0 else ""
        if text and index == 0 and draw(st.booleans()):
            lines = (lines[0].replace(b'"text": "', b'"text": "' + BAD_BYTE, 1),)
            shown = "\ufffd" + text
        return Event(lines, "chunk", shown, seen=(index,), incremental=bool(text))
    if kind == "thought":
        thought = draw(words)
        return Event(data(response([{"text": thought, "thought": True}], index=index)), "chunk",
                     seen=(index,), incremental=bool(thought))  # fmt: skip
    if kind == "call":
        call = {"functionCall": {"name": "f", "args": {"q": draw(words)}}}
        return Event(data(response([call], index=index)), "chunk", seen=(index,),
                     incremental=True)  # fmt: skip
    if kind == "empty-text":
        return Event(data(response([{"text": ""}], index=index)), "chunk", seen=(index,))
    if kind == "no-parts":
        return Event(data({"candidates": [{"index": index}]}), "chunk", seen=(index,))
    if kind == "usage":
        return skip(*data({"usageMetadata": {"promptTokenCount": 1, "totalTokenCount": 2}}))
    if kind == "finish":
        reason = draw(st.sampled_from(["STOP", "MAX_TOKENS", "OTHER"]))
        return Event(data(response([], index=index, finish=reason)), "chunk",
                     finished=(index,), seen=(index,))  # fmt: skip
    if kind == "filtered":
        reason = draw(st.sampled_from(["SAFETY", "RECITATION", "PROHIBITED_CONTENT"]))
        return fail(e.ContentFiltered, *data(response([], index=index, finish=reason)))
    if kind == "blocked":
        return fail(e.ContentFiltered, *data({"promptFeedback": {"blockReason": "SAFETY"}}))
    if kind == "comment":
        return skip(b": keepalive")
    if kind == "field":
        return skip(draw(st.sampled_from([b"id: 7", b"retry: 1000", b"foo: bar", b"x"])))
    if kind == "typed":  # another event type is not a chunk, whatever it carries
        return skip(b"event: ping", b"data: {not json")
    if kind == "empty":
        return skip(b"data:")
    if kind == "wrong":
        return fail(e.MalformedStream, *data(draw(GEMINI_WRONG)))
    if kind == "junk":
        junk = draw(st.sampled_from([b"{", b"nope", b"[DONE]", b"[1,", DEEP]))
        return fail(e.MalformedStream, b"data: " + junk)
    if kind == "not-object":
        return fail(e.MalformedStream, *data(draw(st.sampled_from([[1], "s", 3, None]))))
    if kind == "unavailable":
        error = {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}
        return fail(e.ServerError, *data({"error": error}))
    if kind == "exhausted":
        error = {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}
        return fail(e.RateLimited, *data({"error": error}))
    if kind == "invalid":
        error = {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}
        return fail(e.BadRequest, *data({"error": error}))
    return fail(e.ServerError, b"event: error", b'data: {"message": "boom"}')


@FUZZ
@given(mixed(gemini_events))
def test_gemini_reader_reads_hostile_streams_exactly(stream: Stream) -> None:
    """Any Gemini stream: the exact answer or the exact library error, and exactly its chunks;
    nothing else, no hang, no stream whose candidates did not all finish taken for an
    answer."""
    assert run(GEMINI, stream) == (expected(stream), expected_chunks(stream))


def outcomes_of(events: Any) -> set[object]:
    """The outcomes ``expected`` gives over 1000 generated streams of ``events`` (the same
    streams on every run)."""
    outcomes: set[object] = set()

    @settings(max_examples=1000, deadline=None, database=None, derandomize=True)
    @given(mixed(events))
    def collect(stream: Stream) -> None:
        result = expected(stream)
        outcomes.add(str if isinstance(result, str) else result)

    collect()
    return outcomes


def test_the_fuzzers_cover_every_outcome() -> None:
    """Both generators reach answers and every error their properties distinguish."""
    errors = {e.MalformedStream, e.ServerError, e.BadRequest, e.RateLimited, e.ContentFiltered}
    common = {str, e.ProviderConnectionError, e.TruncatedStream}
    assert outcomes_of(anthropic_events) == common | errors
    assert outcomes_of(gemini_events) == common | errors
