"""``observe_stream()``: meter any sync or async iterator of chunks without changing it.

The wrapper yields exactly the items of the wrapped stream, forwards every other attribute to
it (``stream.response``, ``stream.close()`` …) and passes ``isinstance`` checks for the wrapped
type. It ends the spans exactly once: at the end of the stream, on an exception, on ``close()``
or leaving a ``with`` block early, on task cancellation, or — if the stream is dropped without
being consumed or closed — when it is garbage-collected (outcome ``dropped``).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Generic, SupportsIndex, TypeVar, overload

from opentelemetry import metrics, trace

from otel_llm._measure import _clock
from otel_llm._measure._metrics import LlmMetrics
from otel_llm._measure._stalls import resolve_threshold_ms
from otel_llm._version import __version__
from otel_llm._wrap._chunk_view import Classifier, FinishReason, openai_classifier
from otel_llm._wrap._recorder import CallRecorder

T = TypeVar("T")


class _Proxy:
    """Forwards unknown attributes to the wrapped stream and claims its class."""

    _wrapped: Any
    _recorder: CallRecorder
    _loop_closed = False
    """Set when the generator of a loop over the stream was closed at a chunk and the stream
    was not read since: collected now, it was closed by what closed that loop."""

    def __getattr__(self, name: str) -> Any:
        if name in ("_wrapped", "_recorder", "_step"):
            raise AttributeError(name)  # not yet set: never recurse
        return getattr(self._wrapped, name)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # isinstance(observed, openai.Stream) stays true
        return type(self._wrapped)

    @property
    def recorder(self) -> CallRecorder:
        """The spans of this stream."""
        return self._recorder

    def __copy__(self) -> Any:
        """A second handle on the same stream, as a shallow copy of the SDK's stream is: one
        position, every chunk metered once whichever handle reads it. The spans end by the last
        handle collected, not the first: the copy, or the original, may be read on."""
        handles = self.__dict__.setdefault("_handles", [1])
        handles[0] += 1
        copied = object.__new__(type(self))
        copied.__dict__.update(self.__dict__)
        return copied

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        """What deep-copying the SDK's own object gives (for a live stream, the error its open
        response or generator raises); never a second metered call."""
        return copy.deepcopy(self._wrapped, memo)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        """Pickled as the SDK's own object would be: a live stream fails as it fails."""
        return self._wrapped.__reduce_ex__(protocol)

    def __del__(self) -> None:
        handles = self.__dict__.get("_handles")
        if handles is not None:
            handles[0] -= 1
            if handles[0] > 0:
                return  # another handle on the stream lives on
        self._collected()

    def _collected(self) -> None:
        """The last handle was collected: spans not ended yet end as dropped — or as closed,
        when a loop over the stream was closed part-way."""
        recorder = self.__dict__.get("_recorder")
        if recorder is not None and not recorder.ended:
            if self._loop_closed:
                recorder.end_closed()
            else:
                recorder.end_dropped()


class ObservedStream(_Proxy, Generic[T]):
    """A metered synchronous stream (an iterator and a context manager)."""

    def __init__(self, wrapped: Iterable[T], recorder: CallRecorder) -> None:
        self._wrapped = wrapped
        self._recorder = recorder
        try:
            iterator = iter(wrapped)
        except BaseException as exc:
            recorder.end_raised(exc)
            raise
        self._step: tuple[Iterator[T], Callable[[Any, int, int], None], CallRecorder] = (
            iterator,
            recorder.on_item,
            recorder,
        )
        """What each read needs, in one attribute: with ``__getattr__`` defined on the class,
        every attribute read in ``__next__`` takes the slow path (``on_item`` bound once)."""

    def __iter__(self) -> Iterator[T]:
        """A generator over the same items (``for item in stream`` resumes a generator per
        item, cheaper than calling :meth:`__next__`); it and ``next(stream)`` share one
        position. Leaving a ``for`` loop early ends nothing: the stream is still open."""
        return self._items()

    def _items(self) -> Iterator[T]:
        # __next__'s twin, kept apart on purpose: this generator holds the stream while a
        # loop runs (``for x in sdk.create(...)`` keeps no other reference, and a stream
        # collected early ends as dropped); one generator stored on the stream would be a
        # reference cycle, and __next__ calling it a second frame per item.
        # A loop's generator closed at a chunk (``GeneratorExit``: a generator around the stream
        # closed, or a ``for`` left and its generator collected) ends nothing: the stream may be
        # read on. Collected without another read, the stream was closed by it (``__del__``).
        iterator, on_item, recorder = self._step
        self._loop_closed = False
        while True:
            wait_start = _clock.now_ns()
            try:
                item = next(iterator)
            except StopIteration:
                recorder.end_ok()
                return
            except BaseException as exc:
                recorder.end_raised(exc)
                raise
            on_item(item, wait_start, _clock.now_ns())
            try:
                yield item
            except GeneratorExit:
                self._loop_closed = True
                raise

    def __next__(self) -> T:
        iterator, on_item, recorder = self._step
        if self._loop_closed:
            self._loop_closed = False
        wait_start = _clock.now_ns()
        try:
            item = next(iterator)
        except StopIteration:
            recorder.end_ok()
            raise
        except BaseException as exc:
            recorder.end_raised(exc)
            raise
        on_item(item, wait_start, _clock.now_ns())
        return item

    def close(self) -> None:
        """Close the wrapped stream; spans of an unfinished stream end as ``closed``."""
        if not self._recorder.ended:
            self._recorder.end_closed()
        close = getattr(self._wrapped, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> ObservedStream[T]:
        enter = getattr(self._wrapped, "__enter__", None)
        if callable(enter):
            enter()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None and not self._recorder.ended:
            self._recorder.end_raised(exc)
        self.close()


class AsyncObservedStream(_Proxy, Generic[T]):
    """A metered asynchronous stream (an async iterator and an async context manager)."""

    def __init__(self, wrapped: AsyncIterable[T], recorder: CallRecorder) -> None:
        self._wrapped = wrapped
        self._recorder = recorder
        try:
            iterator = wrapped.__aiter__()
        except BaseException as exc:
            recorder.end_raised(exc)
            raise
        self._step: tuple[AsyncIterator[T], CallRecorder] = (iterator, recorder)

    def __aiter__(self) -> AsyncIterator[T]:
        """An async generator over the same items, sharing one position with
        ``anext(stream)`` (see :meth:`ObservedStream.__iter__`). Leaving an ``async for`` loop
        early ends nothing: the stream is still open."""
        return self._items()

    async def _items(self) -> AsyncIterator[T]:
        # __anext__'s twin, as ObservedStream._items is __next__'s. A loop's generator closed
        # at a chunk (``GeneratorExit``: an async generator around the stream closed, or an
        # ``async for`` left and its generator finalized by the event loop) ends nothing; the
        # stream collected without another read was closed by it (``__del__``).
        iterator, recorder = self._step
        self._loop_closed = False
        while True:
            wait_start = _clock.now_ns()
            try:
                item = await iterator.__anext__()
            except StopAsyncIteration:
                recorder.end_ok()
                return
            except BaseException as exc:
                recorder.end_raised(exc)
                raise
            recorder.on_item(item, wait_start, _clock.now_ns())
            try:
                yield item
            except GeneratorExit:
                self._loop_closed = True
                raise

    async def __anext__(self) -> T:
        iterator, recorder = self._step
        if self._loop_closed:
            self._loop_closed = False
        wait_start = _clock.now_ns()
        try:
            item = await iterator.__anext__()
        except StopAsyncIteration:
            recorder.end_ok()
            raise
        except BaseException as exc:
            recorder.end_raised(exc)
            raise
        recorder.on_item(item, wait_start, _clock.now_ns())
        return item

    async def aclose(self) -> None:
        """Close the wrapped stream; spans of an unfinished stream end as ``closed``."""
        if not self._recorder.ended:
            self._recorder.end_closed()
        for name in ("aclose", "close"):
            close = getattr(self._wrapped, name, None)
            if callable(close):
                result = close()
                if inspect.isawaitable(result):
                    await result
                return

    def close(self) -> Any:
        """Close the wrapped stream by its own ``close()`` and return what that returns: an
        awaitable for ``openai.AsyncStream`` and ``anthropic.AsyncStream``, ``None`` for a
        stream whose ``close()`` is synchronous (LiteLLM's). Spans of an unfinished stream end
        as ``closed`` at the call, whether or not the result is awaited. A stream without a
        ``close()`` is closed by :meth:`aclose` (an awaitable)."""
        close = getattr(self._wrapped, "close", None)
        if not callable(close):
            return self.aclose()
        if not self._recorder.ended:
            self._recorder.end_closed()
        return close()

    async def __aenter__(self) -> AsyncObservedStream[T]:
        enter = getattr(self._wrapped, "__aenter__", None)
        if callable(enter):
            await enter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None and not self._recorder.ended:
            self._recorder.end_raised(exc)
        await self.aclose()


@overload
def observe_stream(
    stream: AsyncIterable[T],
    *,
    provider: str,
    model: str | None = None,
    operation: str = ...,
    classifier: Classifier = ...,
    finish_reason: FinishReason | None = ...,
    stall_threshold_ms: int = ...,
    tracer_provider: trace.TracerProvider | None = ...,
    meter_provider: metrics.MeterProvider | None = ...,
    started_ns: int | None = ...,
    messages: Sequence[Any] | None = ...,
) -> AsyncObservedStream[T]: ...


@overload
def observe_stream(
    stream: Iterable[T],
    *,
    provider: str,
    model: str | None = None,
    operation: str = ...,
    classifier: Classifier = ...,
    finish_reason: FinishReason | None = ...,
    stall_threshold_ms: int = ...,
    tracer_provider: trace.TracerProvider | None = ...,
    meter_provider: metrics.MeterProvider | None = ...,
    started_ns: int | None = ...,
    messages: Sequence[Any] | None = ...,
) -> ObservedStream[T]: ...


def observe_stream(
    stream: Iterable[T] | AsyncIterable[T],
    *,
    provider: str,
    model: str | None = None,
    operation: str = "chat",
    classifier: Classifier = openai_classifier,
    finish_reason: FinishReason | None = None,
    stall_threshold_ms: int | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    started_ns: int | None = None,
    messages: Sequence[Any] | None = None,
) -> ObservedStream[T] | AsyncObservedStream[T]:
    """Meter ``stream`` — any sync or async iterator of chunks — as one call.

    ``classifier(item)`` says whether an item is an incremental chunk; the default understands
    OpenAI-shaped chunks (dicts or SDK objects). With another classifier, ``finish_reason(item)``
    tells where the stream says it finished (without it, a stream that simply stops counts as
    complete; with it, or with OpenAI chunks, a stream without a finish reason was cut short).
    ``started_ns`` (``time.monotonic_ns()`` when the
    request was sent) makes the time to first chunk start at the request; by default it starts
    now. Use the result exactly like the stream (also as a context manager).

    With ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` the call span records the
    streamed text as ``gen_ai.output.messages`` and — when ``messages`` (the prompt that was
    sent) is given — ``gen_ai.input.messages``; a stream cannot know its prompt by itself.
    """
    recorder = CallRecorder(
        (tracer_provider or trace.get_tracer_provider()).get_tracer("otel_llm", __version__),
        LlmMetrics(meter_provider),
        operation=operation,
        provider=provider,
        model=model,
        streamed=True,
        threshold_ms=resolve_threshold_ms(stall_threshold_ms),
        classifier=classifier,
        finish_reason=finish_reason,
        started_ns=started_ns,
        messages=messages,
    )
    if isinstance(stream, AsyncIterable):
        return AsyncObservedStream(stream, recorder)
    return ObservedStream(stream, recorder)
