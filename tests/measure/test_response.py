"""Response facts read once for the client's assembler and the wrappers (``_measure._response``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

from otel_llm import Usage
from otel_llm._act._completion import StreamAssembler
from otel_llm._measure._response import MOST_TOKENS
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


def test_counts_no_provider_could_mean_are_left_out() -> None:
    """A negative token count, or one past 2**32 - 1, is left out of the usage, whichever API
    reported it: it is no count a provider can mean (it would charge admission a debt no
    refill repays, and sink the OTLP metrics export: next test)."""
    huge = 2**70
    usage = Usage.from_openai(
        {"prompt_tokens": -5, "completion_tokens": huge, "total_tokens": MOST_TOKENS + 1}
    )
    assert usage == Usage()
    assert usage.total is None
    assert Usage.from_openai({"prompt_tokens": MOST_TOKENS}).input_tokens == MOST_TOKENS
    anthropic = Usage.from_anthropic({"input_tokens": 3, "cache_read_input_tokens": huge})
    assert (anthropic.input_tokens, anthropic.cache_read_tokens) == (3, None)
    sdk_object = SimpleNamespace(
        prompt_token_count=-1,
        candidates_token_count=huge,
        thoughts_token_count=2,
        total_token_count=None,
        cached_content_token_count=None,
    )
    gemini = Usage.from_gemini(sdk_object)
    assert (gemini.input_tokens, gemini.output_tokens, gemini.reasoning_tokens) == (None, 2, 2)
    assert Usage.from_gemini({"promptTokenCount": huge}).input_tokens is None


def test_a_huge_count_from_a_losing_leg_leaves_the_metrics_export_working() -> None:
    """The tokens a losing hedge leg used are a counter: a count past 64 bits made every
    later OTLP export of the process's metrics fail to encode, all metrics with it."""
    from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from otel_llm._measure._metrics import LlmMetrics

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    metrics = LlmMetrics(provider)
    loser = Usage.from_openai({"prompt_tokens": 2**64, "completion_tokens": 2**64})
    metrics.record_hedge("stall", "won", (1, 3, loser.total), {"gen_ai.operation.name": "chat"})
    data = reader.get_metrics_data()
    assert data is not None
    assert encode_metrics(data).SerializeToString()
    provider.shutdown()


GEMINI_FIELDS = (
    "prompt_token_count",
    "candidates_token_count",
    "thoughts_token_count",
    "total_token_count",
    "cached_content_token_count",
)
COUNTS = st.one_of(
    st.none(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([-1, 0, MOST_TOKENS, MOST_TOKENS + 1, 2**63, -(2**63)]),
)


@settings(max_examples=300, deadline=None)
@given(counts=st.tuples(*[COUNTS] * len(GEMINI_FIELDS)))
def test_gemini_counts_of_an_sdk_object_are_read_as_one_by_one(
    counts: tuple[int | None, ...],
) -> None:
    """The SDK object's counts are checked in one step (per chunk of a wrapped google-genai
    stream): what it keeps is what reading each count on its own keeps, a mapping of them."""
    sdk_object = SimpleNamespace(**dict(zip(GEMINI_FIELDS, counts, strict=True)))
    mapping = dict(zip(GEMINI_FIELDS, counts, strict=True))
    assert Usage.from_gemini(sdk_object) == Usage.from_gemini(mapping)
