"""``instrument_litellm()``: LiteLLM's ``completion`` and ``acompletion``, metered at LiteLLM's
own API.

LiteLLM answers in OpenAI's shape whatever the provider behind it, so its chunks are read by the
OpenAI chat chunk rule, as the application sees them (from the values LiteLLM's objects store:
:class:`LiteLLMReader`). ``gen_ai.provider.name`` is the provider
LiteLLM routes the model to (``anthropic/claude-…`` → ``anthropic``), named as the convention
names it. When LiteLLM calls an SDK otel-llm also wraps (the ``openai`` SDK for OpenAI-compatible
models), or itself, that inner call passes through: one call, one span set, by LiteLLM's
wrapper. The
functions are wrapped where the application finds them, ``litellm.completion`` and
``litellm.acompletion``; a name imported from LiteLLM before instrumenting stays unwrapped, and
LiteLLM's ``Router`` is not covered.

A provider's error may echo the key it was given, and LiteLLM finds keys by itself (its module
settings, the environment), so a call's credentials are whatever LiteLLM could have used; they
are looked up only when there is error text to redact (reading the whole environment costs
tens of microseconds, too much for every call).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any, Final

from opentelemetry import metrics, trace

from otel_llm import _semconv as sc
from otel_llm._wrap._chunk_view import ResponseNotes
from otel_llm._wrap._every_sdk import forget_pending
from otel_llm._wrap._observe import AsyncObservedStream, ObservedStream
from otel_llm._wrap._patching import PatchConfig, SdkPatch, Target
from otel_llm._wrap._recorder import CallRecorder
from otel_llm._wrap._sdk_client import CREDENTIAL_NAME, header_credentials

logger = logging.getLogger("otel_llm")

_PROVIDER_NAMES: Final = {
    "openai": sc.PROVIDER_OPENAI,
    "text-completion-openai": sc.PROVIDER_OPENAI,
    "azure": sc.PROVIDER_AZURE_OPENAI,
    "azure_text": sc.PROVIDER_AZURE_OPENAI,
    "anthropic": sc.PROVIDER_ANTHROPIC,
    "gemini": sc.PROVIDER_GEMINI,
    "vertex_ai": sc.PROVIDER_VERTEX_AI,
    "vertex_ai_beta": sc.PROVIDER_VERTEX_AI,
    "bedrock": sc.PROVIDER_AWS_BEDROCK,
    "mistral": "mistral_ai",
    "groq": "groq",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "cohere": "cohere",
    "cohere_chat": "cohere",
    "perplexity": "perplexity",
    "watsonx": "ibm.watsonx.ai",
}
"""LiteLLM's provider names → the convention's ``gen_ai.provider.name`` (others as LiteLLM
names them)."""


def _provider(kwargs: Mapping[str, Any]) -> str:
    """The provider LiteLLM routes this call's model to (``litellm`` when it cannot tell)."""
    model = kwargs.get("model")
    if not isinstance(model, str):
        return "litellm"
    try:
        import litellm

        given = kwargs.get("custom_llm_provider")
        _, provider, _, _ = litellm.get_llm_provider(
            model=model,
            custom_llm_provider=given if isinstance(given, str) else None,
            api_base=kwargs.get("api_base") if isinstance(kwargs.get("api_base"), str) else None,
        )
    except Exception:  # an unknown model: LiteLLM itself will say so to the caller
        return "litellm"
    return _PROVIDER_NAMES.get(provider, provider) if isinstance(provider, str) else "litellm"


def _server(kwargs: Mapping[str, Any]) -> tuple[str | None, int | None]:
    base = kwargs.get("api_base") or kwargs.get("base_url")
    if not isinstance(base, str):
        return None, None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(base)
        return parts.hostname, parts.port
    except ValueError:
        return None, None


_ENV_SECRET_MIN_CHARS: Final = 8
"""An environment value shorter than this is not taken for a key: the environment is read whole,
and a ``..._TOKEN=true`` must not blank every ``true`` out of an error."""

_ENV_REFERENCE: Final = "os.environ/"
"""LiteLLM's way to name a key by its variable (``api_key="os.environ/MY_KEY"``)."""

_HEADER_ARGUMENTS: Final = ("extra_headers", "headers")
"""The call arguments whose headers LiteLLM sends as they are, an ``Authorization`` among them."""


def _with_reference(value: str) -> Iterator[str]:
    """``value``, and the variable's value when it names one the way LiteLLM reads them."""
    yield value
    if value.startswith(_ENV_REFERENCE):
        named = os.environ.get(value.removeprefix(_ENV_REFERENCE))
        if named:
            yield named


def _call_credentials(kwargs: Mapping[str, Any]) -> Iterator[str]:
    """The credentials among the call's arguments and its extra headers (an ``Authorization``
    value also without its scheme: the bare token is what a provider echoes)."""
    for name, value in kwargs.items():
        if isinstance(value, str) and value and CREDENTIAL_NAME.search(name):
            yield from _with_reference(value)
    for argument in _HEADER_ARGUMENTS:
        yield from header_credentials(kwargs.get(argument))


@functools.cache
def _setting_names(module: ModuleType) -> tuple[str, ...]:
    """LiteLLM's key settings (``litellm.api_key``, ``litellm.openai_key``, ``litellm.azure_key``
    … every lower-case module setting named like a credential, unset or a string), found once:
    LiteLLM defines them all as it is imported, and its namespace is large."""
    return tuple(
        name
        for name, value in list(vars(module).items())
        if (value is None or isinstance(value, str))
        and name.islower()
        and CREDENTIAL_NAME.search(name)
    )


def _ambient_credentials() -> Iterator[str]:
    """The keys LiteLLM finds by itself: its key settings and the environment's variables named
    like a credential."""
    module = sys.modules.get("litellm")
    if module is not None:
        for name in _setting_names(module):
            value = getattr(module, name, None)
            if isinstance(value, str) and value:
                yield from _with_reference(value)
    for name, value in os.environ.items():
        if len(value) >= _ENV_SECRET_MIN_CHARS and CREDENTIAL_NAME.search(name):
            yield value


def _credentials(kwargs: Mapping[str, Any]) -> tuple[str, ...]:
    """Every credential LiteLLM may have used for a call with these arguments, once each."""
    return tuple(
        dict.fromkeys(c for c in (*_call_credentials(kwargs), *_ambient_credentials()) if c)
    )


def _recorder(
    config: PatchConfig, _: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> CallRecorder:
    if args:  # completion(model, messages, …) positionally
        kwargs = {**dict(zip(("model", "messages"), args, strict=False)), **kwargs}
    model = kwargs.get("model")
    host, port = _server(kwargs)
    key = kwargs.get("api_key")
    return CallRecorder(
        config.tracer,
        config.metrics,
        operation=sc.OPERATION_CHAT,
        provider=_provider(kwargs),
        model=model if isinstance(model, str) else None,
        streamed=kwargs.get("stream") is True,
        threshold_ms=config.threshold_ms,
        server_address=host,
        server_port=port,
        messages=kwargs.get("messages"),
        request=kwargs,
        reader=READER,
        secrets=(key,) if isinstance(key, str) and key else (),
        secrets_on_error=functools.partial(_credentials, kwargs),
    )


def _stored(obj: Any) -> Any:
    """A pydantic model's stored values as one dict: its fields (``__dict__``) and its extra
    fields (``__pydantic_extra__``); anything else as it is.

    LiteLLM keeps most of a delta's values as extra fields, and reading one as an attribute
    runs pydantic's ``__getattr__`` — about 1 µs, and an exception inside it for every field a
    chunk lacks (``usage``, ``refusal``, ``tool_calls`` … on most chunks), which made asking
    for the chunk rule's fields cost 9 µs a chunk. The same values read from the two dicts
    cost a fraction; the OpenAI reader then reads them as it reads any dict."""
    if obj.__class__ is dict:
        return obj
    fields = getattr(obj, "__dict__", None)
    if fields.__class__ is not dict:
        return obj
    extra = getattr(obj, "__pydantic_extra__", None)
    return {**fields, **extra} if extra.__class__ is dict and extra else fields


def _plain_chunk(chunk: Any) -> Any:
    """A streamed chunk with its choices and their deltas as dicts of their stored values (the
    usage, read once a stream, stays an object)."""
    plain = _stored(chunk)
    choices = plain.get("choices") if plain.__class__ is dict else None
    if choices.__class__ is not list:
        return plain
    flat = []
    for choice in choices:
        stored = _stored(choice)
        if stored.__class__ is dict:
            stored = {**stored, "delta": _stored(stored.get("delta"))}
        flat.append(stored)
    return {**plain, "choices": flat}


class LiteLLMReader:
    """LiteLLM's chunks and answers, in OpenAI's shape whatever the provider: the OpenAI chat
    chunk rule, read from the stored values of LiteLLM's objects (:func:`_plain_chunk`), and
    LiteLLM's own rule of a complete stream (:meth:`complete`)."""

    knows_finish = True

    def read(self, chunk: Any, notes: ResponseNotes) -> bool:
        return notes.feed_and_classify(_plain_chunk(chunk))

    def read_answer(self, answer: Any, notes: ResponseNotes) -> None:
        notes.feed_completion(answer)

    def complete(self, notes: ResponseNotes) -> bool:
        """LiteLLM's rule: a finish reason for the first choice. With ``n > 1`` LiteLLM passes
        on the other choices' deltas but only the first one's finish reason, so OpenAI's rule
        (one for every choice) would take every such stream for cut short."""
        return 0 in notes.finish_reasons


READER: Final = LiteLLMReader()


def _observe(result: Any, recorder: CallRecorder, is_async: bool) -> Any:
    if recorder.attempt.streamed:
        return (
            AsyncObservedStream(result, recorder) if is_async else ObservedStream(result, recorder)
        )
    recorder.end_completion(result)
    return result


_PATCH: Final = SdkPatch(
    "instrument_litellm",
    (
        Target("litellm", None, "completion", False, _recorder, _observe),
        Target("litellm", None, "acompletion", True, _recorder, _observe),
    ),
    # the openai SDK for OpenAI-compatible models and Azure; itself for fallbacks
    nested=("instrument_openai", "instrument_litellm"),
)


def instrument_litellm(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    stall_threshold_ms: int | None = None,
) -> None:
    """Instrument ``litellm.completion`` and ``litellm.acompletion``. Idempotent; a second
    call only updates the providers and the threshold."""
    _PATCH.install(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        stall_threshold_ms=stall_threshold_ms,
    )


def uninstrument_litellm() -> None:
    """Restore LiteLLM's functions. Where another instrumentation wrapped ours since, ours is
    left in place as a pass-through, so theirs keeps working. An ``instrument()`` still waiting
    for LiteLLM's import is dropped too: imported later, it stays unwrapped."""
    forget_pending("litellm")
    _PATCH.uninstall()
