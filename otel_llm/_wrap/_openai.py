"""``instrument_openai()``: the installed ``openai`` SDK, metered without changing the app.

The SDK is instrumented at its own API — ``chat.completions.create``, ``responses.create`` and
``responses.parse`` (``responses.stream()`` goes through ``create``) and ``embeddings.create``
on the sync and async resources — never at the HTTP library, so it works whether the SDK uses
``httpx`` or its fork ``httpx2``. One ``create()`` is one call span with one attempt span; the
SDK's own internal retries (``max_retries``) happen *inside* that attempt span. Streams come back
wrapped (``isinstance(stream, openai.Stream)`` still holds); ``with_raw_response`` and
``with_streaming_response`` are covered through ``.parse()``; ``chat.completions.stream()``
goes through ``create()`` and is covered too. Instrumenting twice is harmless;
:func:`uninstrument_openai` restores the SDK — or, if another instrumentation wrapped ours
since, turns ours into a pass-through so theirs keeps working.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping
from typing import Any

from opentelemetry import metrics, trace

from otel_llm import _semconv as sc
from otel_llm._wrap._chunk_view import StreamReader
from otel_llm._wrap._observe import AsyncObservedStream, ObservedStream, _Proxy
from otel_llm._wrap._openai_responses import READER as RESPONSES
from otel_llm._wrap._openai_responses import responses_messages
from otel_llm._wrap._patching import PatchConfig, SdkPatch, Target
from otel_llm._wrap._recorder import CallRecorder
from otel_llm._wrap._sdk_client import client_facts

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
    )


class _RawResponse(_Proxy):
    """``with_raw_response`` / ``with_streaming_response``: meter what ``parse()`` returns."""

    def __init__(self, wrapped: Any, recorder: CallRecorder, is_async: bool) -> None:
        self._wrapped = wrapped
        self._recorder = recorder
        self._is_async = is_async

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        parsed = self._wrapped.parse(*args, **kwargs)
        if inspect.isawaitable(parsed):
            return self._parse_later(parsed)
        return _observe_result(parsed, self._recorder, self._is_async)

    async def _parse_later(self, parsed: Awaitable[Any]) -> Any:
        return _observe_result(await parsed, self._recorder, self._is_async)


def _observe_result(result: Any, recorder: CallRecorder, is_async: bool) -> Any:
    """Wrap a stream, record a complete answer, or wrap a raw response for its ``parse()``.

    Whether a stream is sync or async follows the SDK resource that made it: another
    instrumentation's proxy around the stream may offer both protocols."""
    if isinstance(result, ObservedStream | AsyncObservedStream):
        return result
    if hasattr(result, "parse") and hasattr(result, "http_response"):
        return _RawResponse(result, recorder, is_async)
    if recorder.attempt.streamed and hasattr(result, "response"):
        return (
            AsyncObservedStream(result, recorder) if is_async else ObservedStream(result, recorder)
        )
    recorder.end_completion(result)
    return result


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
        Target(_RESPONSES, "Responses", "create", False, _responses, _observe_result),
        Target(_RESPONSES, "AsyncResponses", "create", True, _responses, _observe_result),
        Target(_RESPONSES, "Responses", "parse", False, _responses, _observe_result),
        Target(_RESPONSES, "AsyncResponses", "parse", True, _responses, _observe_result),
        Target(_EMBEDDINGS, "Embeddings", "create", False, _embeddings, _observe_result),
        Target(_EMBEDDINGS, "AsyncEmbeddings", "create", True, _embeddings, _observe_result),
    ),
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
    place as a pass-through, so theirs keeps working."""
    _PATCH.uninstall()
