"""observe_stream(): consumer-aware metering and one span end on every path."""

from __future__ import annotations

import asyncio
import copy
import gc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_llm import AsyncObservedStream, ObservedStream, observe_stream
from otel_llm import _semconv as sc
from otel_llm.testing import Spans, use_clock
from tests.support.stream_scripts import FakeClock, chunk, scripted


def attrs_of(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def observed(spans: Spans, stream: Any, threshold_ms: int = 100) -> Any:
    return observe_stream(
        stream,
        provider="sim",
        model="sim-model",
        stall_threshold_ms=threshold_ms,
        tracer_provider=spans.provider,
    )


def test_slow_consumer_on_smooth_stream_shows_no_stall(spans: Spans) -> None:
    """Time the application holds the stream between reads is not a stall (consumer-aware
    metering)."""
    clock = FakeClock()
    with use_clock(clock):
        stream = observed(spans, scripted(clock, [20, 5, 5, 5, 5]))
        for _ in stream:
            clock.advance(500)  # the application works 500 ms on every chunk
    (attempt,) = spans.attempts()
    a = attrs_of(attempt)
    assert (a[sc.STALL_COUNT], a[sc.STALL_MS]) == (0, 0)
    assert a[sc.CONSUMER_HOLD_MS] >= 3_000
    assert a[sc.CHUNK_COUNT] == 5
    assert a[sc.WALL_MS] == a[sc.GENERATION_MS], "held time is net generation, not stall"


def test_fast_consumer_on_stalling_stream_shows_the_stall(spans: Spans) -> None:
    """A provider silence is a stall when the consumer was waiting for the chunk."""
    clock = FakeClock()
    with use_clock(clock):
        for _ in observed(spans, scripted(clock, [20, 5, 2_000, 5, 5])):
            pass
    (attempt,) = spans.attempts()
    a = attrs_of(attempt)
    assert (a[sc.STALL_COUNT], a[sc.STALL_MS], a[sc.TTFT_MS]) == (1, 2_000, 20)
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    (call,) = spans.calls()
    assert attrs_of(call)[sc.STALL_MS] == 2_000


def test_items_inside_a_silence_do_not_hide_it(spans: Spans) -> None:
    """Empty deltas arriving during a provider silence do not shorten it (consumer-aware
    metering with keepalive-like items): the gap runs from the last chunk, minus only what the
    consumer held."""
    clock = FakeClock()

    def stream() -> Iterator[Any]:
        yield chunk("a")
        for _ in range(12):
            clock.advance(500)
            yield chunk(role="assistant")  # an item, not a chunk
        yield chunk("b")
        yield chunk(finish="stop")

    with use_clock(clock):
        for _ in observed(spans, stream()):
            pass
    a = attrs_of(spans.attempts()[0])
    assert (a[sc.STALL_COUNT], a[sc.STALL_MS], a[sc.MAX_INTER_CHUNK_MS]) == (1, 6_000, 6_000)


def test_consumer_hold_and_provider_silence_in_the_same_gap(spans: Spans) -> None:
    """Only the part of a gap the consumer spent waiting can be a stall."""
    clock = FakeClock()

    def stream() -> Iterator[Any]:
        yield chunk("a")
        clock.advance(3_000)  # the provider takes 3 s after the consumer asked
        yield chunk("b")
        yield chunk(finish="stop")

    with use_clock(clock):
        iterator = observed(spans, stream())
        next(iterator)
        clock.advance(1_000)  # held for 1 s first
        for _ in iterator:
            pass
    a = attrs_of(spans.attempts()[0])
    assert (a[sc.STALL_COUNT], a[sc.STALL_MS], a[sc.CONSUMER_HOLD_MS]) == (1, 3_000, 1_000)


def test_exception_mid_stream_ends_spans_as_error(spans: Spans) -> None:
    """An exception from the stream ends both spans with error and finish reason error."""

    def broken() -> Iterator[Any]:
        yield chunk("a")
        raise ConnectionResetError("peer reset")

    with pytest.raises(ConnectionResetError):
        for _ in observed(spans, broken()):
            pass
    a = attrs_of(spans.attempts()[0])
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.ERROR_TYPE] == "ConnectionResetError"
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)
    assert spans.calls()[0].status.status_code.name == "ERROR"


def test_early_break_then_close(spans: Spans) -> None:
    """Breaking out and closing ends the spans once, as closed, cut short."""
    clock = FakeClock()
    with use_clock(clock):
        stream = observed(spans, scripted(clock, [5] * 10))
        for _ in stream:
            break
        stream.close()
        stream.close()
    a = attrs_of(spans.attempts()[0])
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)


def test_a_loop_left_early_leaves_the_stream_open_where_it_was(spans: Spans) -> None:
    """``for`` reads through a generator and ``next()`` through the stream: both share one
    position, leaving a loop ends nothing, and every chunk is counted once."""
    clock = FakeClock()
    with use_clock(clock):
        stream = observed(spans, scripted(clock, [5] * 6))
        first = []
        for item in stream:
            first.append(item)
            if len(first) == 2:
                break
        assert not stream.recorder.ended
        third = next(stream)
        rest = list(stream)
    assert [*first, third, *rest] == list(scripted(FakeClock(), [5] * 6))
    (attempt,) = spans.attempts()
    a = attrs_of(attempt)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert a[sc.CHUNK_COUNT] == 6


def test_a_stream_let_go_of_after_its_loop_was_closed_ends_as_closed(spans: Spans) -> None:
    """A generator around the stream closed part-way closes the loop over it and lets go of
    it: ``closed``, not ``dropped``."""
    clock = FakeClock()
    with use_clock(clock):

        def around(stream: Any) -> Iterator[Any]:
            yield from stream

        outer = around(observed(spans, scripted(clock, [5] * 6)))
        next(outer)
        outer.close()
    assert attrs_of(spans.attempts()[0])[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED


def test_a_deep_copy_is_the_wrapped_objects_own_and_ends_nothing(spans: Spans) -> None:
    """``copy.deepcopy`` gives what deep-copying the wrapped object gives, unmetered; the
    stream's spans stay open until it is read to its end."""
    clock = FakeClock()
    with use_clock(clock):
        items = list(scripted(clock, [5] * 3))
        stream = observed(spans, items)
        assert copy.deepcopy(stream) == items
        gc.collect()
        assert not stream.recorder.ended
        assert list(stream) == items
    assert attrs_of(spans.attempts()[0])[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK


def test_context_manager_exit_closes(spans: Spans) -> None:
    """Leaving a with block before the end closes the stream and ends the spans."""
    clock = FakeClock()
    with use_clock(clock), observed(spans, scripted(clock, [5] * 10)) as stream:
        next(stream)
    assert attrs_of(spans.attempts()[0])[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED


def test_dropped_stream_is_ended_when_collected(spans: Spans) -> None:
    """A stream dropped without being consumed or closed ends its spans as dropped."""
    clock = FakeClock()
    with use_clock(clock):
        stream = observed(spans, scripted(clock, [5, 5]))
        next(stream)
        del stream
        gc.collect()
    a = attrs_of(spans.attempts()[0])
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_DROPPED
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)


def test_stream_without_finish_reason_is_recorded_as_truncated(spans: Spans) -> None:
    """A stream that just stops, without a finish reason, was cut short: error, not ok."""
    clock = FakeClock()
    with use_clock(clock):
        for _ in observed(spans, scripted(clock, [5, 5], finish=False)):
            pass
    a = attrs_of(spans.attempts()[0])
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert a[sc.ERROR_TYPE] == "TruncatedStream"
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("error",)


class _Stream:
    """A stand-in for an SDK stream with its own attributes."""

    def __init__(self, items: list[Any]) -> None:
        self._items = iter(items)
        self.response = "the HTTP response"
        self.closed = False

    def __iter__(self) -> Iterator[Any]:
        return self._items

    def close(self) -> None:
        self.closed = True


def test_wrapper_is_transparent(spans: Spans) -> None:
    """The wrapper passes isinstance, forwards attributes and closes the wrapped stream."""
    inner = _Stream([chunk("a"), chunk(finish="stop")])
    stream = observed(spans, inner)
    assert isinstance(stream, _Stream)
    assert isinstance(stream, ObservedStream)
    assert stream.response == "the HTTP response"
    assert [c["choices"][0]["delta"] for c in stream] == [{"content": "a"}, {}]
    stream.close()
    assert inner.closed
    assert attrs_of(spans.attempts()[0])[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK


def test_classifier_hook_for_anthropic_style_events(spans: Spans) -> None:
    """Another provider's event shapes are metered through a classifier."""
    clock = FakeClock()

    def anthropic_events() -> Iterator[dict[str, Any]]:
        yield {"type": "message_start", "message": {"model": "claude-x"}}
        yield {"type": "content_block_start", "index": 0}
        for gap in (30, 10, 1_500, 10):
            clock.advance(gap)
            yield {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "x"}}
        yield {"type": "ping"}
        yield {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}
        yield {"type": "message_stop"}

    def is_chunk(event: dict[str, Any]) -> bool:
        return event["type"] == "content_block_delta" and event["delta"]["type"] in (
            "text_delta",
            "thinking_delta",
            "input_json_delta",
        )

    def stop_reason(event: dict[str, Any]) -> str | None:
        return event["delta"]["stop_reason"] if event["type"] == "message_delta" else None

    with use_clock(clock):
        stream = observe_stream(
            anthropic_events(),
            provider="anthropic",
            model="claude-x",
            classifier=is_chunk,
            finish_reason=stop_reason,
            stall_threshold_ms=1000,
            tracer_provider=spans.provider,
        )
        for _ in stream:
            pass
    a = attrs_of(spans.attempts()[0])
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert spans.calls()[0].status.status_code.name == "UNSET"
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT], a[sc.STALL_MS], a[sc.TTFT_MS]) == (
        4,
        1,
        1_500,
        30,
    )
    assert a[sc.GEN_AI_PROVIDER_NAME] == "anthropic"


def test_custom_classifier_without_finish_hook_ends_ok(spans: Spans) -> None:
    """Without a finish-reason hook, a custom-shaped stream that ends is complete, not cut."""
    events = [{"type": "delta", "text": "a"}, {"type": "delta", "text": "b"}, {"type": "end"}]
    for _ in observe_stream(
        iter(events),
        provider="x",
        classifier=lambda e: e["type"] == "delta",
        tracer_provider=spans.provider,
    ):
        pass
    a = attrs_of(spans.attempts()[0])
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert a[sc.CHUNK_COUNT] == 2


def test_a_broken_classifier_never_breaks_the_stream(spans: Spans) -> None:
    """A classifier that raises is logged; the application still gets every item."""

    def broken(item: Any) -> bool:
        raise KeyError("type")

    stream = observe_stream(
        iter([chunk("a"), chunk(finish="stop")]),
        provider="x",
        classifier=broken,
        tracer_provider=spans.provider,
    )
    assert len(list(stream)) == 2


async def scripted_async(clock: FakeClock, gaps_ms: list[float]) -> AsyncIterator[Any]:
    for item in scripted(clock, gaps_ms):
        yield item


async def test_async_stream_meters_like_sync(spans: Spans) -> None:
    """An async iterator is metered the same way."""
    clock = FakeClock()
    with use_clock(clock):
        stream = observed(spans, scripted_async(clock, [20, 5, 2_000, 5]))
        assert isinstance(stream, AsyncObservedStream)
        async for _ in stream:
            clock.advance(300)
    a = attrs_of(spans.attempts()[0])
    assert (a[sc.STALL_COUNT], a[sc.STALL_MS]) == (1, 2_000)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK


async def test_async_task_cancellation_ends_spans_as_cancelled(spans: Spans) -> None:
    """Cancelling the consuming task ends the spans as cancelled and propagates."""
    reading = asyncio.Event()

    async def endless() -> AsyncIterator[Any]:
        yield chunk("a")
        reading.set()
        await asyncio.Event().wait()
        yield chunk("never")

    async def consume() -> None:
        async for _ in observed(spans, endless()):
            pass

    task = asyncio.create_task(consume())
    await reading.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    a = attrs_of(spans.attempts()[0])
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CANCELLED
    assert sc.STALL_MS not in a


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_ctrl_c_or_exit_while_reading_ends_the_call_as_cancelled(
    spans: Spans, stop: type[BaseException]
) -> None:
    """Ctrl-C (or the process exiting) while a sync stream waits for its next chunk, or while
    the application's ``with`` block handles one, ends the call as cancelled, as a cancelled
    task does: the user's doing, no error of the provider's. Another exception is still one."""

    def interrupted() -> Iterator[Any]:
        yield chunk("a")
        raise stop

    with pytest.raises(stop):
        for _ in observed(spans, interrupted()):
            pass

    def handle(items: list[Any], raised: BaseException) -> None:
        with observed(spans, iter(items)) as stream:
            next(stream)
            raise raised

    with pytest.raises(stop):
        handle([chunk("a"), chunk("b")], stop())
    with pytest.raises(ValueError, match="bad"):
        handle([chunk("a")], ValueError("bad"))
    outcomes = [attrs_of(span)[sc.ATTEMPT_OUTCOME] for span in spans.attempts()]
    assert outcomes == [sc.OUTCOME_CANCELLED, sc.OUTCOME_CANCELLED, sc.OUTCOME_ERROR]


async def test_async_context_manager_and_aclose(spans: Spans) -> None:
    """async with and aclose() end an unfinished stream as closed."""
    clock = FakeClock()
    with use_clock(clock):
        async with observed(spans, scripted_async(clock, [5] * 5)) as stream:
            await stream.__anext__()
    assert attrs_of(spans.attempts()[0])[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED


async def test_an_async_loop_left_early_leaves_the_stream_open_where_it_was(
    spans: Spans,
) -> None:
    """``async for`` reads through an async generator and ``anext()`` through the stream: both
    share one position, leaving a loop ends nothing, and every chunk is counted once."""
    clock = FakeClock()
    with use_clock(clock):
        stream = observed(spans, scripted_async(clock, [5] * 6))
        first = []
        async for item in stream:
            first.append(item)
            if len(first) == 2:
                break
        assert not stream.recorder.ended
        third = await anext(stream)
        rest = [item async for item in stream]
    assert [*first, third, *rest] == list(scripted(FakeClock(), [5] * 6))
    (attempt,) = spans.attempts()
    a = attrs_of(attempt)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert a[sc.CHUNK_COUNT] == 6


async def test_an_async_stream_let_go_of_after_its_loop_was_closed_ends_as_closed(
    spans: Spans,
) -> None:
    """An async generator around the stream closed part-way lets go of the stream with its
    loop: ``closed``, not ``dropped`` (the event loop finalizes the loop's generator, so the
    spans end once it has run)."""
    clock = FakeClock()
    with use_clock(clock):

        async def around(stream: Any) -> AsyncIterator[Any]:
            async for item in stream:
                yield item

        outer = around(observed(spans, scripted_async(clock, [5] * 6)))
        await anext(outer)
        await outer.aclose()
        for _ in range(100):
            if spans.attempts():
                break
            await asyncio.sleep(0)
    assert attrs_of(spans.attempts()[0])[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED


async def test_an_async_stream_dropped_without_a_loop_still_ends_as_dropped(
    spans: Spans,
) -> None:
    """Read with ``anext()`` only and let go of: ``dropped``, as before."""
    clock = FakeClock()
    with use_clock(clock):
        stream = observed(spans, scripted_async(clock, [5] * 6))
        await anext(stream)
        del stream
        gc.collect()
    assert attrs_of(spans.attempts()[0])[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_DROPPED


def test_content_is_captured_only_when_asked(spans: Spans, monkeypatch: pytest.MonkeyPatch) -> None:
    """Output text reaches the span only with the standard capture variable set."""
    for _ in observed(spans, iter([chunk("secret answer"), chunk(finish="stop")])):
        pass
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    for _ in observed(spans, iter([chunk("shared answer"), chunk(finish="stop")])):
        pass
    first, second = spans.calls()
    assert "secret answer" not in first.to_json()
    assert "shared answer" in str(attrs_of(second)[sc.GEN_AI_OUTPUT_MESSAGES])


def test_threshold_comes_from_the_same_key_as_the_client(
    spans: Spans, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wrapped streams read LLM__STREAM__STALL_THRESHOLD_MS like the client does."""
    monkeypatch.setenv("LLM__STREAM__STALL_THRESHOLD_MS", "2500")
    stream = observe_stream(
        iter([chunk("a"), chunk(finish="stop")]), provider="x", tracer_provider=spans.provider
    )
    for _ in stream:
        pass
    assert attrs_of(spans.attempts()[0])[sc.STALL_THRESHOLD_MS] == 2500
    monkeypatch.setenv("LLM__STREAM__STALL_THRESHOLD_MS", "0")
    with pytest.raises(ValueError, match="LLM__STREAM__STALL_THRESHOLD_MS"):
        observe_stream(iter([]), provider="x", tracer_provider=spans.provider)


class Unopenable:
    """A stream whose iterator cannot even be created."""

    def __iter__(self) -> Iterator[Any]:
        raise RuntimeError("no connection")


class AsyncUnopenable:
    """An async stream whose iterator cannot even be created."""

    def __aiter__(self) -> AsyncIterator[Any]:
        raise RuntimeError("no connection")


@pytest.mark.parametrize("stream", [Unopenable(), AsyncUnopenable()], ids=["sync", "async"])
def test_a_stream_that_cannot_be_iterated_ends_its_spans_as_an_error(
    spans: Spans, stream: Any
) -> None:
    """iter() / __aiter__() raising: the caller gets the error, the spans end once, as errors."""
    with pytest.raises(RuntimeError, match="no connection"):
        observed(spans, stream)
    gc.collect()
    attempt = attrs_of(spans.attempts()[0])
    assert attempt[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert len(spans.calls()) == 1  # and the fixture checks that each span ended exactly once
