"""``instrument_openai()``: the installed ``openai`` SDK, metered without changing the app.

The SDK is instrumented at its own API — ``chat.completions.create`` and ``embeddings.create``
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

import functools
import importlib
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace

from otel_llm import _env as env
from otel_llm import _semconv as sc
from otel_llm._measure._metrics import LlmMetrics
from otel_llm._measure._stalls import resolve_threshold_ms
from otel_llm._version import __version__
from otel_llm._wrap._observe import AsyncObservedStream, ObservedStream, _Proxy
from otel_llm._wrap._recorder import CallRecorder

_CHAT = "openai.resources.chat.completions.completions"
_EMBEDDINGS = "openai.resources.embeddings"
_TARGETS = (
    (_CHAT, "Completions", sc.OPERATION_CHAT, False),
    (_CHAT, "AsyncCompletions", sc.OPERATION_CHAT, True),
    (_EMBEDDINGS, "Embeddings", sc.OPERATION_EMBEDDINGS, False),
    (_EMBEDDINGS, "AsyncEmbeddings", sc.OPERATION_EMBEDDINGS, True),
)
"""(module, class, operation, async?) of every ``create`` that is wrapped."""

logger = logging.getLogger("otel_llm")


@dataclass
class _Config:
    tracer: trace.Tracer
    metrics: LlmMetrics
    threshold_ms: int
    enabled: bool = True
    provider_checked: bool = False
    """Set once the first wrapped call looked for a tracer provider (or one was passed)."""


_lock = threading.Lock()
_config: _Config | None = None
_originals: dict[tuple[str, str], Any] = {}
_installed: dict[tuple[str, str], Any] = {}
"""Our wrapper on each class (compared by identity: wrapt proxies forward attributes)."""
_warned_no_provider = False
_UNCONFIGURED = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
"""The API's stand-ins when no SDK provider is installed: spans through them go nowhere."""


def _check_provider(config: _Config) -> None:
    """Warn once per process when wrapped calls record nothing: no provider was passed and none
    is installed globally (the API's proxy or no-op stands in), and the SDK is not disabled on
    purpose. Checked at the first wrapped call, so instrumenting before ``init()`` is fine."""
    global _warned_no_provider
    config.provider_checked = True
    if _warned_no_provider or env.env_flag(env.OTEL_SDK_DISABLED):
        return
    if not isinstance(trace.get_tracer_provider(), _UNCONFIGURED):
        return
    with _lock:  # two threads' first calls warn once between them
        first, _warned_no_provider = not _warned_no_provider, True
    if first:
        logger.warning(
            "otel-llm: instrument_openai() records nothing: no tracer provider is configured "
            "(call otel_llm.init() first, install an SDK TracerProvider, or pass "
            "tracer_provider=; %s=true silences this)",
            env.OTEL_SDK_DISABLED,
        )


def _provider(resource: Any) -> tuple[str, str | None, int | None]:
    """(``gen_ai.provider.name``, ``server.address``, ``server.port``) of the SDK client."""
    client = getattr(resource, "_client", None)
    url = getattr(client, "base_url", None)
    host = getattr(url, "host", None)
    port = getattr(url, "port", None)
    name = "azure.ai.openai" if isinstance(host, str) and "azure" in host else "openai"
    return name, host if isinstance(host, str) else None, port if isinstance(port, int) else None


def _secrets(resource: Any) -> tuple[str, ...]:
    """The SDK client's API key, to redact from any error text a span records."""
    key = getattr(getattr(resource, "_client", None), "api_key", None)
    return (key,) if isinstance(key, str) and key else ()


def _recorder(
    config: _Config, resource: Any, operation: str, kwargs: dict[str, Any]
) -> CallRecorder:
    provider, host, port = _provider(resource)
    model = kwargs.get("model")
    return CallRecorder(
        config.tracer,
        config.metrics,
        operation=operation,
        provider=provider,
        model=model if isinstance(model, str) else None,
        streamed=operation == sc.OPERATION_CHAT and kwargs.get("stream") is True,
        threshold_ms=config.threshold_ms,
        server_address=host,
        server_port=port,
        messages=kwargs.get("messages") if operation == sc.OPERATION_CHAT else None,
        request=kwargs,  # its GenAI request parameters; the SDK's "not given" marks are skipped
        secrets=_secrets(resource),
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


def _wrap(original: Callable[..., Any], operation: str, is_async: bool) -> Callable[..., Any]:
    if is_async:

        @functools.wraps(original)
        async def async_wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            config = _config
            if config is None or not config.enabled:
                return await original(self, *args, **kwargs)
            if not config.provider_checked:
                _check_provider(config)
            recorder = _recorder(config, self, operation, kwargs)
            try:
                result = await original(self, *args, **kwargs)
            except BaseException as exc:
                recorder.end_error(exc)
                raise
            return _observe_result(result, recorder, True)

        return async_wrapper

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        config = _config
        if config is None or not config.enabled:
            return original(self, *args, **kwargs)
        if not config.provider_checked:
            _check_provider(config)
        recorder = _recorder(config, self, operation, kwargs)
        try:
            result = original(self, *args, **kwargs)
        except BaseException as exc:
            recorder.end_error(exc)
            raise
        return _observe_result(result, recorder, False)

    return wrapper


def instrument_openai(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    stall_threshold_ms: int | None = None,
) -> None:
    """Instrument the installed ``openai`` SDK (every client, sync and async). Idempotent;
    a second call only updates the providers and the threshold."""
    global _config
    threshold = resolve_threshold_ms(stall_threshold_ms)
    provider = tracer_provider or trace.get_tracer_provider()
    config = _Config(
        provider.get_tracer("otel_llm", __version__),
        LlmMetrics(meter_provider),
        threshold,
        provider_checked=tracer_provider is not None,
    )
    with _lock:
        _config = config
        for module_name, class_name, operation, is_async in _TARGETS:
            cls = getattr(importlib.import_module(module_name), class_name)
            key = (module_name, class_name)
            current = cls.__dict__["create"]
            if key in _installed and _in_chain(current, _installed[key]):
                continue
            _originals[key] = current
            _installed[key] = cls.create = _wrap(current, operation, is_async)


def _in_chain(function: Any, ours: Any) -> bool:
    """True when ``ours`` is ``function`` or anything it wraps (``__wrapped__`` chain)."""
    seen: set[int] = set()
    while function is not None and id(function) not in seen:
        if function is ours:
            return True
        seen.add(id(function))
        function = getattr(function, "__wrapped__", None)
    return False


def uninstrument_openai() -> None:
    """Restore the SDK. Where another instrumentation wrapped ours since, ours is left in
    place as a pass-through, so theirs keeps working."""
    global _config
    with _lock:
        for (module_name, class_name), original in list(_originals.items()):
            cls = getattr(importlib.import_module(module_name), class_name)
            if cls.__dict__["create"] is _installed[(module_name, class_name)]:
                cls.create = original
                del _originals[(module_name, class_name)]
                del _installed[(module_name, class_name)]
        if _config is not None:
            _config.enabled = False
        _config = None
