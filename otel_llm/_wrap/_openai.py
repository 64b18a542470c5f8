"""``instrument_openai()``: the installed ``openai`` SDK, metered without changing the app.

The SDK is instrumented at its own API — ``chat.completions.create`` and ``parse``,
``responses.create`` and ``parse`` (the ``stream()`` helpers go through ``create``) and
``embeddings.create``
on the sync and async resources — never at the HTTP library, so it works whether the SDK uses
``httpx`` or its fork ``httpx2``. One ``create()`` is one call span with one attempt span; the
SDK's own internal retries (``max_retries``) happen *inside* that attempt span. Streams come back
wrapped (``isinstance(stream, openai.Stream)`` still holds); ``with_raw_response`` and
``with_streaming_response`` are covered through ``.parse()``; ``chat.completions.stream()``
goes through ``create()`` and is covered too. The stream helpers close a stream by closing its
HTTP response, so the response a stream hands out notices that: a helper left early ends as
``closed`` at once. Instrumenting twice is harmless;
:func:`uninstrument_openai` restores the SDK — or, if another instrumentation wrapped ours
since, turns ours into a pass-through so theirs keeps working.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from opentelemetry import metrics, trace

from otel_llm import _semconv as sc
from otel_llm._wrap._chunk_view import StreamReader
from otel_llm._wrap._every_sdk import forget_pending
from otel_llm._wrap._observe import AsyncObservedStream, ObservedStream, _Proxy
from otel_llm._wrap._openai_responses import READER as RESPONSES
from otel_llm._wrap._openai_responses import responses_messages
from otel_llm._wrap._patching import PatchConfig, SdkPatch, Starter, Target
from otel_llm._wrap._raw_response import RawResponse, is_raw_response
from otel_llm._wrap._recorder import CallRecorder
from otel_llm._wrap._sdk_client import call_credentials, client_facts

_CHAT = "openai.resources.chat.completions.completions"
_RESPONSES = "openai.resources.responses.responses"
_EMBEDDINGS = "openai.resources.embeddings"


def _recorder(
    config: PatchConfig,
    resource: Any,
    operation: str,
    kwargs: Mapping[str, Any],
    *,
    reader: StreamReader | None = None,
    messages: Any = None,
) -> CallRecorder:
    facts = client_facts(resource, default_provider=sc.PROVIDER_OPENAI)
    model = kwargs.get("model")
    return CallRecorder(
        config.tracer,
        config.metrics,
        operation=operation,
        provider=facts.provider,
        model=model if isinstance(model, str) else None,
        streamed=operation == sc.OPERATION_CHAT and kwargs.get("stream") is True,
        threshold_ms=config.threshold_ms,
        server_address=facts.host,
        server_port=facts.port,
        messages=messages,
        request=kwargs,  # its GenAI request parameters; the SDK's "not given" marks are skipped
        reader=reader,
        secrets=facts.secrets,
        secrets_on_error=functools.partial(call_credentials, resource, kwargs),
    )


class _HttpResponse:
    """The HTTP response an openai stream reads from, as ``stream.response`` hands it out.

    The SDK's stream helpers (``responses.stream()``, ``chat.completions.stream()``) close the
    stream our ``create()`` returned by closing this response, not the stream: so closing it
    ends the spans of an unfinished stream as ``closed`` there and then, instead of ``dropped``
    whenever the stream is collected. Everything else is the response's own (``isinstance``
    holds); unlike the stream's proxy it ends nothing when collected."""

    __slots__ = ("_recorder", "_response")

    def __init__(self, response: Any, recorder: CallRecorder) -> None:
        self._response = response
        self._recorder = recorder

    def __getattr__(self, name: str) -> Any:
        if name in ("_response", "_recorder"):
            raise AttributeError(name)  # not yet set: never recurse
        return getattr(self._response, name)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self._response)

    def close(self) -> None:
        if not self._recorder.ended:
            self._recorder.end_closed()
        self._response.close()

    async def aclose(self) -> None:
        if not self._recorder.ended:
            self._recorder.end_closed()
        await self._response.aclose()


class _Stream(ObservedStream[Any]):
    """A metered ``openai.Stream`` whose ``response`` notices being closed."""

    response: Any

    def __init__(self, wrapped: Any, recorder: CallRecorder) -> None:
        super().__init__(wrapped, recorder)
        self.response = _HttpResponse(wrapped.response, recorder)


class _AsyncStream(AsyncObservedStream[Any]):
    """A metered ``openai.AsyncStream`` whose ``response`` notices being closed."""

    response: Any

    def __init__(self, wrapped: Any, recorder: CallRecorder) -> None:
        super().__init__(wrapped, recorder)
        self.response = _HttpResponse(wrapped.response, recorder)


def _observe_result(result: Any, recorder: CallRecorder, is_async: bool) -> Any:
    """Wrap a stream, record a complete answer, or wrap a raw response for its ``parse()``.

    Whether a stream is sync or async follows the SDK resource that made it: another
    instrumentation's proxy around the stream may offer both protocols."""
    if isinstance(result, ObservedStream | AsyncObservedStream):
        return result
    if is_raw_response(result):
        return RawResponse(result, recorder, is_async, _observe_result)
    if recorder.attempt.streamed and hasattr(result, "response"):
        return _AsyncStream(result, recorder) if is_async else _Stream(result, recorder)
    recorder.end_completion(result)
    return result


class _StreamHelper(_Proxy):
    """The manager of a stream helper (``chat.completions.stream()``, ``responses.stream()``),
    whose ``with`` block sends the request through the wrapped ``create()`` — the spans are
    that call's. The helper closes its stream on the way out without telling how the block was
    left, so this manager tells the spans first: the task's cancellation ends them as
    cancelled, the application's own exception as that error, as leaving a metered stream's
    block does. Everything else is the manager's own (``isinstance`` holds)."""

    def __init__(self, wrapped: Any) -> None:
        self._wrapped = wrapped
        self._entered: Any = None

    def _ending(self, exc: BaseException | None) -> None:
        # the helper's stream reads the stream create() returned (its raw stream); a helper of
        # another shape is left to end its spans as closed
        raw = getattr(self._entered, "_raw_stream", None)
        if not isinstance(raw, ObservedStream | AsyncObservedStream):
            return
        if exc is not None and not raw.recorder.ended:
            raw.recorder.end_raised(exc)

    def __enter__(self) -> Any:
        self._entered = self._wrapped.__enter__()
        return self._entered

    def __exit__(self, *exc_info: Any) -> Any:
        self._ending(exc_info[1])
        return self._wrapped.__exit__(*exc_info)

    async def __aenter__(self) -> Any:
        self._entered = await self._wrapped.__aenter__()
        return self._entered

    async def __aexit__(self, *exc_info: Any) -> Any:
        self._ending(exc_info[1])
        return await self._wrapped.__aexit__(*exc_info)


def _observe_helper(manager: Any, start: Starter, is_async: bool) -> Any:
    """A stream helper's manager, told how its block is left (its spans start in create())."""
    return _StreamHelper(manager)


def _chat(config: PatchConfig, resource: Any, _: Any, kwargs: Mapping[str, Any]) -> CallRecorder:
    return _recorder(config, resource, sc.OPERATION_CHAT, kwargs, messages=kwargs.get("messages"))


def _responses(
    config: PatchConfig, resource: Any, _: Any, kwargs: Mapping[str, Any]
) -> CallRecorder:
    return _recorder(
        config,
        resource,
        sc.OPERATION_CHAT,
        kwargs,
        reader=RESPONSES,
        messages=responses_messages(kwargs),
    )


def _embeddings(
    config: PatchConfig, resource: Any, _: Any, kwargs: Mapping[str, Any]
) -> CallRecorder:
    return _recorder(config, resource, sc.OPERATION_EMBEDDINGS, kwargs)


_PATCH = SdkPatch(
    "instrument_openai",
    (
        Target(_CHAT, "Completions", "create", False, _chat, _observe_result),
        Target(_CHAT, "AsyncCompletions", "create", True, _chat, _observe_result),
        # parse() sends its own request (not through create()), never streamed
        Target(_CHAT, "Completions", "parse", False, _chat, _observe_result),
        Target(_CHAT, "AsyncCompletions", "parse", True, _chat, _observe_result),
        Target(_RESPONSES, "Responses", "create", False, _responses, _observe_result),
        Target(_RESPONSES, "AsyncResponses", "create", True, _responses, _observe_result),
        Target(_RESPONSES, "Responses", "parse", False, _responses, _observe_result),
        Target(_RESPONSES, "AsyncResponses", "parse", True, _responses, _observe_result),
        # the helpers are plain methods returning a manager, sync and async alike
        Target(_CHAT, "Completions", "stream", False, _chat, observe_later=_observe_helper),
        Target(_CHAT, "AsyncCompletions", "stream", False, _chat, observe_later=_observe_helper),
        Target(_RESPONSES, "Responses", "stream", False, _responses, observe_later=_observe_helper),
        Target(
            _RESPONSES, "AsyncResponses", "stream", False, _responses, observe_later=_observe_helper
        ),
        Target(_EMBEDDINGS, "Embeddings", "create", False, _embeddings, _observe_result),
        Target(_EMBEDDINGS, "AsyncEmbeddings", "create", True, _embeddings, _observe_result),
    ),
    nested=("instrument_openai",),  # a helper calling the SDK's own wrapped methods
)


def instrument_openai(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    stall_threshold_ms: int | None = None,
) -> None:
    """Instrument the installed ``openai`` SDK (every client, sync and async). Idempotent;
    a second call only updates the providers and the threshold."""
    _PATCH.install(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        stall_threshold_ms=stall_threshold_ms,
    )


def uninstrument_openai() -> None:
    """Restore the SDK. Where another instrumentation wrapped ours since, ours is left in
    place as a pass-through, so theirs keeps working. An ``instrument()`` still waiting for the
    SDK's import is dropped too: imported later, it stays unwrapped."""
    forget_pending("openai")
    _PATCH.uninstall()
