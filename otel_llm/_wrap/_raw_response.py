"""``with_raw_response`` / ``with_streaming_response``: a call metered through ``parse()``.

The ``openai`` and ``anthropic`` SDKs share this machinery. Called through it, the wrapped
``create()`` returns the SDK's raw response (status, headers, the HTTP response) rather than
the answer, and the answer — or the stream — comes from the raw response's ``parse()``. The spans
started when the request was sent; what ``parse()`` returns is metered exactly as ``create()``'s
own result would have been, by the wrapper's own observer.

Once ``parse()`` has handed its result on, that result owns the spans: a raw response let go
of while its stream is read (``create(...).parse()`` in one expression) ends nothing. A raw
response closed before its answer was read to the end — the ``with`` block of
``with_streaming_response`` closes it on the way out — ends the spans as ``closed``. But a
non-streamed answer whose body was read all the same, without ``parse()`` (``http_response.json()``
of ``with_raw_response``, which reads the body before it returns; ``.json()`` or ``.read()`` in
a ``with_streaming_response`` block), was answered: closed or let go of, its spans end ``ok``
with what the body says (finish reason, usage, model).

A streamed answer read without ``parse()``, as server-sent events through the raw response's
own ``iter_lines()``, ``iter_text()`` or ``iter_bytes()`` (the openai SDK's documented way to
read a ``with_streaming_response`` stream line by line), is metered from those events: each
``data:`` payload is the API's event (a chat completion chunk, a Responses or Messages event)
as a dict, read by the same chunk rule; read to the end, the call ends ``ok`` — or cut short,
by the rule — and an exception while reading ends it with that error. A stream of another
framing (Bedrock's AWS event stream) read that way is not metered: it ends ``closed``.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Iterator
from typing import Any

from otel_llm._act._sse import SSEDecoder
from otel_llm._measure import _clock
from otel_llm._wrap._observe import _Proxy
from otel_llm._wrap._patching import Observer, _observed
from otel_llm._wrap._recorder import CallRecorder

logger = logging.getLogger("otel_llm")

_ANY_SIZE = 2**62
"""No bound on an event's size: the application reads the body, the SDK holds it whole."""


def is_raw_response(result: Any) -> bool:
    """True for the SDK's raw response: it has a ``parse()`` and the HTTP response."""
    return hasattr(result, "parse") and hasattr(result, "http_response")


class RawResponse(_Proxy):
    """The SDK's raw response, metering what its ``parse()`` returns."""

    def __init__(
        self, wrapped: Any, recorder: CallRecorder, is_async: bool, observe: Observer
    ) -> None:
        self._wrapped = wrapped
        self._recorder = recorder
        self._is_async = is_async
        self._observe = observe
        self._shared = _Handed()
        """What every copy of this response shares (a copy is a second handle on it)."""

    @property
    def _handed_on(self) -> tuple[Any, Any] | None:
        """The last result of ``parse()`` (through any copy) and what the application got for
        it. The SDK caches what it parsed, so a second ``parse()`` gets the same metered stream,
        not a second proxy of it; and a stream left part-way stays alive until ``close()`` ends
        it as closed."""
        return self._shared.handed_on

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        parsed = self._wrapped.parse(*args, **kwargs)
        if inspect.isawaitable(parsed):
            return self._parse_later(parsed)
        return self._observed_as(parsed)

    async def _parse_later(self, parsed: Awaitable[Any]) -> Any:
        return self._observed_as(await parsed)

    def _observed_as(self, parsed: Any) -> Any:
        handed_on = self._handed_on
        if handed_on is not None and handed_on[0] is parsed:
            return handed_on[1]
        observed = _observed(self._observe, parsed, self._recorder, self._is_async)
        self._shared.handed_on = (parsed, observed)
        return observed

    def iter_lines(self, *args: Any, **kwargs: Any) -> Any:
        return self._metered(self._wrapped.iter_lines(*args, **kwargs), "lines")

    def iter_text(self, *args: Any, **kwargs: Any) -> Any:
        return self._metered(self._wrapped.iter_text(*args, **kwargs), "text")

    def iter_bytes(self, *args: Any, **kwargs: Any) -> Any:
        return self._metered(self._wrapped.iter_bytes(*args, **kwargs), "bytes")

    def _metered(self, pieces: Any, kind: str) -> Any:
        """``pieces`` (the SDK's iterator over the body) metered as server-sent events, when
        they are the stream of a streamed call not handed on by ``parse()``; else as they are."""
        recorder = self._recorder
        if recorder.ended or not recorder.attempt.streamed or self._handed_on is not None:
            return pieces
        if not self._server_sent_events():
            return pieces  # a stream of another framing (Bedrock's event stream): not read
        events = _SseEvents(kind)
        if self._is_async:
            return _async_events(pieces, events, recorder)
        return _events(pieces, events, recorder)

    def _server_sent_events(self) -> bool:
        """Whether the body is a stream of server-sent events, by its content type."""
        try:
            kind = self._wrapped.http_response.headers.get("content-type", "")
        except Exception:
            return False
        return isinstance(kind, str) and kind.lower().startswith("text/event-stream")

    def _ended_by_the_body(self) -> bool:
        """End the spans by the answer when the call was not streamed and its body was read
        without ``parse()``; ``False`` when there is no such answer to end them by."""
        recorder = self._recorder
        if recorder.ended or recorder.attempt.streamed:
            return False
        try:  # the body, if it was read (reading it here would be I/O the application skipped)
            body = self._wrapped.http_response.content
        except Exception:  # not read (the SDK's ResponseNotRead), or not an HTTP response
            return False
        try:
            answer = json.loads(body)
        except (TypeError, ValueError):
            return False
        if not isinstance(answer, dict):
            return False
        recorder.end_completion(answer)
        return True

    def close(self) -> Any:
        """Close the response; spans not ended yet end by the answer when its body was read
        (a non-streamed call), else as ``closed``. The SDK's own ``close()`` runs either way
        (for an async response, its awaitable is returned)."""
        close = self._wrapped.close  # a response without close() raises as it would unwrapped
        if not self._recorder.ended and not self._ended_by_the_body():
            self._recorder.end_closed()
        return close()

    def _collected(self) -> None:
        shared = self.__dict__.get("_shared")
        if shared is None or shared.handed_on is not None:
            return  # never built; or, once handed on, the result owns the spans
        if self._ended_by_the_body():
            return
        super()._collected()


class _Handed:
    """What ``parse()`` handed on, shared by the copies of one raw response."""

    __slots__ = ("handed_on",)

    def __init__(self) -> None:
        self.handed_on: tuple[Any, Any] | None = None


class _SseEvents:
    """The JSON payloads of server-sent events, from the lines, text or bytes of a body as they
    come, read by the client's own decoder (line ends, a byte-order mark, ``data:`` lines of one
    event joined, time linear in the body however it is cut); ``[DONE]`` and what is not a
    JSON object are no event of the API's."""

    def __init__(self, kind: str) -> None:
        self._kind = kind
        self._decoder = SSEDecoder(max_event_bytes=_ANY_SIZE)
        self._piece_arrival: int | None = None
        self._event_arrival: int | None = None
        self._held = 0

    def read(self, piece: Any, wait_start: int, arrival: int, recorder: CallRecorder) -> None:
        """Hand ``recorder`` the events ``piece`` completes, the application having asked for
        it at ``wait_start``. An event may take several pieces: only the time the application
        held the body between its reads is its hold, never the waits for the pieces (the
        recorder counts, as an event's hold, the time from the previous event's arrival to the
        wait start it is given)."""
        if self._piece_arrival is not None:
            self._held += max(0, wait_start - self._piece_arrival)
        self._piece_arrival = arrival
        try:
            completed = self.feed(piece)
        except Exception:  # telemetry never breaks the application's read
            logger.exception("otel-llm: could not read a streamed body")
            return
        for event in completed:
            previous = self._event_arrival
            recorder.on_item(
                event, wait_start if previous is None else previous + self._held, arrival
            )
            self._event_arrival = arrival
            self._held = 0

    def feed(self, piece: Any) -> list[dict[str, Any]]:
        """The events that ``piece`` of the body completes."""
        if self._kind == "bytes":
            raw = piece if isinstance(piece, bytes) else b""
        elif not isinstance(piece, str):
            raw = b""
        elif self._kind == "lines":  # a line without its end
            raw = piece.encode("utf-8", "replace") + b"\n"
        else:
            raw = piece.encode("utf-8", "replace")
        found = []
        for _, data in self._decoder.feed(raw):
            try:
                event = json.loads(data)
            except ValueError:
                continue  # [DONE]
            if isinstance(event, dict):
                found.append(event)
        return found


def _events(pieces: Iterator[Any], events: _SseEvents, recorder: CallRecorder) -> Iterator[Any]:
    """``pieces`` unchanged, each event in them read as the stream's item when it arrives."""
    iterator = iter(pieces)
    while True:
        wait_start = _clock.now_ns()
        try:
            piece = next(iterator)
        except StopIteration:
            recorder.end_ok()
            return
        except BaseException as exc:
            recorder.end_raised(exc)
            raise
        events.read(piece, wait_start, _clock.now_ns(), recorder)
        yield piece


async def _async_events(
    pieces: AsyncIterator[Any], events: _SseEvents, recorder: CallRecorder
) -> AsyncIterator[Any]:
    """:func:`_events` of an async body."""
    iterator = aiter(pieces)
    while True:
        wait_start = _clock.now_ns()
        try:
            piece = await anext(iterator)
        except StopAsyncIteration:
            recorder.end_ok()
            return
        except BaseException as exc:
            recorder.end_raised(exc)
            raise
        events.read(piece, wait_start, _clock.now_ns(), recorder)
        yield piece
