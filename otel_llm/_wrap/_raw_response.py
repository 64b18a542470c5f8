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
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable
from typing import Any

from otel_llm._wrap._observe import _Proxy
from otel_llm._wrap._patching import Observer, _observed
from otel_llm._wrap._recorder import CallRecorder


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
        self._handed_on: tuple[Any, Any] | None = None
        """The last result of ``parse()`` and what the application got for it. The SDK caches
        what it parsed, so a second ``parse()`` gets the same metered stream, not a second proxy
        of it; and a stream left part-way stays alive until ``close()`` ends it as closed."""

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
        self._handed_on = (parsed, observed)
        return observed

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

    def __del__(self) -> None:
        if self.__dict__.get("_a_copy") or self.__dict__.get("_handed_on") is not None:
            return  # once handed on, the result owns the spans
        if "_recorder" in self.__dict__ and self._ended_by_the_body():
            return
        super().__del__()
