"""Results that send their request later than the wrapped method returns.

Some SDK methods return before any request is made: a generator that sends it at its first step
(google-genai's ``generate_content_stream``), or a stream manager that sends it on ``with``
(anthropic's ``messages.stream()``). Their spans start when the request is sent, so the time
to first chunk is the provider's, not the time the application took to begin reading. A result
that is never read sent nothing and records nothing.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from types import TracebackType
from typing import Any, Generic, TypeVar

from otel_llm._wrap._observe import AsyncObservedStream, ObservedStream, _Proxy
from otel_llm._wrap._patching import Starter
from otel_llm._wrap._recorder import CallRecorder

logger = logging.getLogger("otel_llm")

T = TypeVar("T")


class LaterStream(_Proxy, Generic[T]):
    """A synchronous stream whose request goes out at its first step: metered from there."""

    def __init__(self, wrapped: Iterable[T], start: Starter) -> None:
        self._wrapped = wrapped
        self._start: Starter | None = start
        self._inner: Iterator[T] | None = None

    def __copy__(self) -> Any:
        """What copying the SDK's own object does — Gemini's stream is a generator, which
        refuses (``TypeError``) — never a second handle that would start a second call's spans
        over the same request."""
        return copy.copy(self._wrapped)

    def __iter__(self) -> Iterator[T]:
        """A generator over the same items, sharing one position with ``next(stream)`` (see
        :meth:`ObservedStream.__iter__`)."""
        return self._items()

    def _items(self) -> Iterator[T]:
        inner = self._inner
        if inner is None:
            inner = self._begin()
        yield from inner

    def __next__(self) -> T:
        inner = self._inner
        if inner is None:
            inner = self._begin()
        return next(inner)

    def _begin(self) -> Iterator[T]:
        start, self._start = self._start, None
        recorder = start() if start is not None else None
        inner: Iterator[T] = (
            iter(self._wrapped) if recorder is None else ObservedStream(self._wrapped, recorder)
        )
        self._inner = inner
        return inner

    def close(self) -> None:
        """Close the stream (spans of a stream read part-way end as ``closed``)."""
        target: Any = self._inner if isinstance(self._inner, ObservedStream) else self._wrapped
        self._start = None
        close = getattr(target, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> LaterStream[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        inner = self._inner
        if isinstance(inner, ObservedStream):
            inner.__exit__(exc_type, exc, tb)
        else:
            self.close()


class AsyncLaterStream(_Proxy, Generic[T]):
    """An asynchronous stream whose request goes out at its first step: metered from there."""

    def __init__(self, wrapped: AsyncIterable[T], start: Starter) -> None:
        self._wrapped = wrapped
        self._start: Starter | None = start
        self._inner: AsyncIterator[T] | None = None

    def __copy__(self) -> Any:
        """What copying the SDK's own object does — Gemini's stream is a generator, which
        refuses (``TypeError``) — never a second handle that would start a second call's spans
        over the same request."""
        return copy.copy(self._wrapped)

    def __aiter__(self) -> AsyncIterator[T]:
        """An async generator over the same items, sharing one position with
        ``anext(stream)`` (see :meth:`AsyncObservedStream.__aiter__`)."""
        return self._items()

    async def _items(self) -> AsyncIterator[T]:
        inner = self._inner
        if inner is None:
            inner = self._begin()
        if isinstance(inner, AsyncObservedStream):
            inner._loop_closed = False
        while True:
            try:
                item = await inner.__anext__()
            except StopAsyncIteration:
                return
            try:
                yield item
            except GeneratorExit:
                if isinstance(inner, AsyncObservedStream):
                    inner._loop_closed = True
                raise

    async def __anext__(self) -> T:
        inner = self._inner
        if inner is None:
            inner = self._begin()
        return await inner.__anext__()

    def _begin(self) -> AsyncIterator[T]:
        start, self._start = self._start, None
        recorder = start() if start is not None else None
        inner: AsyncIterator[T] = (
            self._wrapped.__aiter__()
            if recorder is None
            else AsyncObservedStream(self._wrapped, recorder)
        )
        self._inner = inner
        return inner

    async def aclose(self) -> None:
        """Close the stream (spans of a stream read part-way end as ``closed``)."""
        self._start = None
        inner = self._inner
        if isinstance(inner, AsyncObservedStream):
            await inner.aclose()
            return
        close = getattr(self._wrapped, "aclose", None)
        if callable(close):
            await close()


class LaterStreamManager(_Proxy):
    """A stream manager that sends its request on ``with`` (``__enter__`` / ``__aenter__``):
    the spans start there, and the raw stream the SDK's stream object reads is metered — so
    every way of reading it (iterating, a text-only iterator, waiting for the final message)
    is seen, and each raw event once."""

    def __init__(self, wrapped: Any, start: Starter, raw_attribute: str) -> None:
        self._wrapped = wrapped
        self._start = start
        self._raw_attribute = raw_attribute
        self._spans: CallRecorder | None = None
        """The spans started on ``with`` (not ``_recorder``: a manager collected while its
        stream is still read must not end them as dropped)."""

    def _ending(self, exc: BaseException | None) -> None:
        """Leaving the ``with`` block by an exception ends the spans by it, as leaving a
        metered stream's block does: the task's cancellation as cancelled, any other exception
        (the application's own too) as the call's error."""
        spans = self._spans
        if exc is not None and spans is not None and not spans.ended:
            spans.end_raised(exc)

    def __enter__(self) -> Any:
        recorder = self._spans = self._start()
        if recorder is None:
            return self._wrapped.__enter__()
        try:
            stream = self._wrapped.__enter__()
        except BaseException as exc:
            recorder.end_raised(exc)
            raise
        raw = getattr(stream, self._raw_attribute, None)
        if raw is None:
            logger.warning("otel-llm: a %s has no raw stream to meter", type(stream).__name__)
            recorder.end_dropped()
            return stream
        setattr(stream, self._raw_attribute, ObservedStream(raw, recorder))
        return stream

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any:
        self._ending(exc)
        return self._wrapped.__exit__(exc_type, exc, tb)

    async def __aenter__(self) -> Any:
        recorder = self._spans = self._start()
        if recorder is None:
            return await self._wrapped.__aenter__()
        try:
            stream = await self._wrapped.__aenter__()
        except BaseException as exc:
            recorder.end_raised(exc)
            raise
        raw = getattr(stream, self._raw_attribute, None)
        if raw is None:
            logger.warning("otel-llm: a %s has no raw stream to meter", type(stream).__name__)
            recorder.end_dropped()
            return stream
        setattr(stream, self._raw_attribute, AsyncObservedStream(raw, recorder))
        return stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Any:
        self._ending(exc)
        return await self._wrapped.__aexit__(exc_type, exc, tb)
