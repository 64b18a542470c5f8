"""Response facts read once for the client's assembler and the wrappers (``_measure._response``)."""

from __future__ import annotations

from typing import Any

from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

from otel_llm import Usage
from otel_llm._act._completion import StreamAssembler
from otel_llm._wrap._chunk_view import ResponseNotes


def _chunk(usage: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
    choices = (
        []
        if usage is not None
        else [{"index": 0, "delta": {"content": "x"}, "finish_reason": finish}]
    )
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": choices,
        "usage": usage,
    }


SPREAD = [  # usage spread over two frames, the second leaving the prompt count out
    _chunk(None, "stop"),
    _chunk({"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}),
    _chunk({"completion_tokens": 3, "completion_tokens_details": {"reasoning_tokens": 2}}),
]
EXPECTED = Usage(input_tokens=7, output_tokens=3, reasoning_tokens=2)
"""The second frame changed the output count without a total: the first frame's total (8) is
stale, and the total is the parts' sum (10)."""


def test_usage_spread_over_frames_is_merged_by_the_assembler() -> None:
    """A later usage frame updates the counts it reports and keeps the earlier ones."""
    assembler = StreamAssembler()
    for chunk in SPREAD:
        assembler.feed(chunk)
    assert assembler.usage == EXPECTED
    assert assembler.usage.total == 10


def test_usage_spread_over_frames_is_merged_by_the_wrapper() -> None:
    """The wrapper's reader merges alike, from dicts and from SDK objects (built as the SDK
    builds streamed chunks: without validation)."""
    objects = [construct_type(type_=ChatCompletionChunk, value=chunk) for chunk in SPREAD]
    for chunks in (SPREAD, objects):
        notes = ResponseNotes()
        for chunk in chunks:
            notes.feed_and_classify(chunk)
        assert notes.usage == EXPECTED
        assert notes.facts().usage == EXPECTED


def test_usage_of_the_wrong_type_is_left_out() -> None:
    """A count of the wrong type is ignored, never fatal, and never erases an earlier one."""
    earlier = Usage(input_tokens=7)
    usage = Usage.from_openai({"prompt_tokens": "7", "completion_tokens": True}, earlier=earlier)
    assert usage == Usage(input_tokens=7)
    assert usage.total == 7
