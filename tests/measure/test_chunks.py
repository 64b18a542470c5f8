"""The incremental-chunk rule and the chunk clock (monotonic arrival times, consumer-aware)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from openai.types.chat import ChatCompletionChunk

from otel_llm._act._completion import StreamAssembler
from otel_llm._measure._chunks import ChunkClock, is_incremental
from otel_llm._wrap._chunk_view import ResponseNotes, openai_classifier


def chunk(**delta: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


@pytest.mark.parametrize(
    ("payload", "incremental"),
    [
        pytest.param(chunk(content="hi"), True, id="content"),
        pytest.param(chunk(reasoning_content="thinking"), True, id="reasoning_content"),
        pytest.param(chunk(reasoning="thinking"), True, id="reasoning"),
        pytest.param(
            chunk(tool_calls=[{"index": 0, "function": {"arguments": "{"}}]), True, id="tool"
        ),
        pytest.param(chunk(function_call={"name": "f", "arguments": ""}), True, id="function"),
        pytest.param(chunk(function_call={"arguments": '{"a"'}), True, id="function-arguments"),
        pytest.param(
            chunk(function_call={"name": "", "arguments": ""}), False, id="function-empty"
        ),
        pytest.param(chunk(audio={"id": "a", "transcript": "hi"}), True, id="audio-transcript"),
        pytest.param(chunk(audio={"id": "a", "data": "UklGR"}), True, id="audio-data"),
        pytest.param(chunk(audio={"id": "a", "expires_at": 1}), False, id="audio-no-output"),
        pytest.param(chunk(role="assistant"), False, id="role-only"),
        pytest.param(chunk(role="assistant", content=""), False, id="empty-content"),
        pytest.param(chunk(), False, id="empty-delta"),
        pytest.param(chunk(tool_calls=[]), False, id="empty-tool-calls"),
        pytest.param({"choices": [], "usage": {"total_tokens": 3}}, False, id="usage-only"),
        pytest.param(
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, False, id="finish"
        ),
        pytest.param({"choices": None}, False, id="choices-null"),
        pytest.param({}, False, id="no-choices"),
        pytest.param(
            {"choices": [{"index": 1, "delta": {"content": "x"}}]}, True, id="second-choice"
        ),
    ],
)
def test_incremental_chunk_rule(payload: dict[str, Any], incremental: bool) -> None:
    """Only chunks carrying generated output are incremental chunks — and every place that
    applies the rule (transport assembly, wrapped-stream classifier, the fused wrapped-stream
    reader, on dicts and on openai SDK objects) agrees."""
    assert is_incremental(payload) is incremental
    assert StreamAssembler().feed(payload) is incremental
    assert openai_classifier(payload) is incremental
    assert ResponseNotes().feed_and_classify(payload) is incremental
    sdk_chunk = ChatCompletionChunk.model_validate(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [
                dict(
                    choice, index=choice.get("index", 0), finish_reason=choice.get("finish_reason")
                )
                for choice in (payload.get("choices") or [])
            ],
        }
    )
    assert openai_classifier(sdk_chunk) is incremental
    assert ResponseNotes().feed_and_classify(sdk_chunk) is incremental
    assert ResponseNotes(capture_text=True).feed_and_classify(sdk_chunk) is incremental
    # objects that lack fields: the SDK's unvalidated chunks, or another library's objects
    constructed = ChatCompletionChunk.construct(**payload)
    assert ResponseNotes().feed_and_classify(constructed) is incremental
    assert ResponseNotes().feed_and_classify(as_object(payload)) is incremental


def as_object(value: Any) -> Any:
    """A dict turned into plain attribute objects that have only the keys the dict has."""
    if isinstance(value, dict):
        return SimpleNamespace(**{key: as_object(item) for key, item in value.items()})
    if isinstance(value, list):
        return [as_object(item) for item in value]
    return value


def test_objects_missing_fields_are_read_with_defaults() -> None:
    """A chunk object without ``usage`` or ``finish_reason`` attributes is still read whole:
    the finish reason and usage of the objects that have them are noted, nothing twice."""
    notes = ResponseNotes(capture_text=True)
    notes.feed_and_classify(as_object(chunk(content="a")))
    notes.feed_and_classify(
        as_object({"choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": "stop"}]})
    )
    notes.feed_and_classify(as_object({"usage": {"prompt_tokens": 3, "completion_tokens": 2}}))
    assert notes.text == ["a", "b"]
    assert notes.finish_reasons == {0: "stop"}
    assert notes.usage is not None
    assert (notes.usage.input_tokens, notes.usage.output_tokens) == (3, 2)
    # an object whose choices are plain dicts (pydantic's model_construct leaves them so)
    mixed = SimpleNamespace(choices=[{"index": 0, "delta": {"content": "x"}}], usage=None)
    assert ResponseNotes().feed_and_classify(mixed) is True
    assert openai_classifier(mixed) is True


async def test_mark_records_and_sets_signal() -> None:
    """mark() appends a monotonic timestamp and sets the signal."""
    signal = asyncio.Event()
    clock = ChunkClock(signal=signal)
    clock.mark()
    clock.mark()
    assert signal.is_set()
    assert clock.count == 2
    assert clock.arrivals_ns[0] >= clock.start_ns
    assert clock.arrivals_ns[1] >= clock.arrivals_ns[0]


def test_gaps_are_arrival_differences() -> None:
    """Without consumer awareness a gap is the difference of consecutive arrivals."""
    clock = ChunkClock(start_ns=0)
    for t in (100, 150, 1250):
        clock.mark_at(t)
    assert clock.gaps_ns() == [50, 1100]
    timeline = clock.timeline(1300)
    assert (timeline.ttft_ns, timeline.chunk_count, timeline.wall_ns) == (100, 3, 1300)


def test_consumer_hold_is_not_a_gap() -> None:
    """Time the consumer held the stream between reads is not silence."""
    clock = ChunkClock(start_ns=0, consumer_aware=True)
    clock.mark_with_hold(10, 0)
    # the consumer then held the stream 5_000; the next chunk was already buffered (5_011)
    clock.mark_with_hold(5_011, 5_000)
    # then the provider was silent 4_000 while the consumer waited
    clock.mark_with_hold(9_020, 5_009)
    assert clock.gaps_ns() == [1, 4_000]


def test_mark_with_hold_needs_consumer_aware_clock() -> None:
    """A plain clock refuses consumer-aware marks instead of mis-metering."""
    with pytest.raises(RuntimeError, match="consumer_aware"):
        ChunkClock().mark_with_hold(0, 1)


def test_not_streamed_timeline_has_no_chunks() -> None:
    """A non-streamed timeline carries only the wall time."""
    clock = ChunkClock(start_ns=10)
    timeline = clock.timeline(110, streamed=False)
    assert (timeline.streamed, timeline.wall_ns, timeline.chunk_count) == (False, 100, 0)


def _sse_server(body: bytes) -> Any:
    """A server on loopback that answers every POST with ``body`` as an event stream."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.mark.parametrize(
    ("kind", "finish"),
    [
        pytest.param(lambda i: {"function_call": {"arguments": f'"{i}'}}, "function_call", id="fn"),
        pytest.param(lambda i: {"audio": {"id": "a", "transcript": f"w{i} "}}, "stop", id="audio"),
    ],
)
def test_a_function_call_or_audio_stream_has_its_chunks(spans: Any, kind: Any, finish: str) -> None:
    """A wrapped openai stream of a legacy function call (``functions=``) or of an audio
    answer, over HTTP on loopback: its deltas are output, so the attempt has its chunks and
    its time to first chunk (it had none, and said so as exact)."""
    import json
    import threading

    import openai

    from otel_llm import _semconv as sc
    from otel_llm import instrument_openai, uninstrument_openai

    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    deltas = [{"role": "assistant"}, *(kind(i) for i in range(5)), {}]
    frames = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        for delta in deltas
    ]
    frames[-1]["choices"][0]["finish_reason"] = finish
    body = "".join(f"data: {json.dumps(frame)}\n\n" for frame in frames) + "data: [DONE]\n\n"
    server = _sse_server(body.encode())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    instrument_openai(tracer_provider=spans.provider)
    try:
        host, port = server.server_address[:2]
        with openai.OpenAI(
            base_url=f"http://{host}:{port}/v1", api_key="sk-x", max_retries=0
        ) as client:
            stream = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}], stream=True
            )
            assert len(list(stream)) == 7
    finally:
        uninstrument_openai()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    (attempt,) = spans.attempts()
    attributes = attempt.attributes or {}
    assert attributes[sc.METERING_STATUS] == sc.METERING_EXACT
    assert attributes[sc.CHUNK_COUNT] == 5
    assert attributes[sc.TTFT_MS] is not None
