"""``instrument_anthropic()``: the installed ``anthropic`` SDK, metered at its own API.

Wrapped: ``messages.create`` (streamed and not), ``messages.parse`` and ``messages.stream()``,
sync and async, and the same three of ``beta.messages``. One
call is one call span with one attempt span; the SDK's own retries happen inside the attempt.
A stream from ``create(stream=True)`` comes back wrapped (``isinstance(stream,
anthropic.Stream)`` still holds). ``messages.stream()`` returns its manager wrapped: the spans
start on ``with`` (when the request is sent) and the raw event stream the SDK's
``MessageStream`` reads is metered, so iterating it, ``text_stream``, ``until_done()`` and
``get_final_message()`` are all seen — each raw event once. ``with_raw_response`` and
``with_streaming_response`` are metered through ``.parse()``, as for openai.

The chunk rule of the Messages API (:class:`AnthropicReader`): a ``content_block_delta``
carrying output — text, thinking, or a tool's input JSON — is a chunk, and so is a
``content_block_start`` whose text or thinking is not empty (the API starts blocks empty, a
gateway may not: the SDK's message holds that text, and the client counts it too); ``ping`` (a
keepalive, dropped by the SDK), ``message_start``, an empty ``content_block_start``,
``content_block_stop``, ``message_delta``, ``message_stop`` and a ``signature_delta`` are
not. Usage comes from
``message_start`` and ``message_delta``, the stop reason from ``message_delta``; a stream that
ends without one was cut short. An ``error`` event mid-stream is raised by the SDK and recorded
as the provider's error.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry import metrics, trace

from otel_llm import _semconv as sc
from otel_llm._measure._response import Usage, field_of, items_of
from otel_llm._wrap._chunk_view import ResponseNotes
from otel_llm._wrap._every_sdk import forget_pending
from otel_llm._wrap._later import LaterStreamManager
from otel_llm._wrap._observe import AsyncObservedStream, ObservedStream
from otel_llm._wrap._patching import PatchConfig, SdkPatch, Starter, Target
from otel_llm._wrap._raw_response import RawResponse, is_raw_response
from otel_llm._wrap._recorder import CallRecorder
from otel_llm._wrap._sdk_client import call_credentials, client_facts

_MESSAGES: Final = "anthropic.resources.messages.messages"
_BETA_MESSAGES: Final = "anthropic.resources.beta.messages.messages"

_OUTPUT_OF_DELTA: Final = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
}
"""The delta types that carry output, and the field holding it (non-empty: a chunk)."""

_OUTPUT_OF_BLOCK: Final = {"text": "text", "thinking": "thinking"}
"""The block types whose start may carry output, and the field holding it (non-empty: a
chunk)."""


class AnthropicReader:
    """The chunk rule and the response facts of the Messages API (events as SDK objects or
    dicts)."""

    knows_finish = True

    def read(self, event: Any, notes: ResponseNotes) -> bool:
        # the SDK's objects: most events are deltas, read with plain attribute access (a dict
        # has no such attributes, so it goes the careful way below, as does everything else)
        if not notes.capture_text:
            kind = getattr(event, "type", None)
            if kind == "content_block_delta":
                delta = getattr(event, "delta", None)
                delta_kind = getattr(delta, "type", None)
                if delta_kind.__class__ is str:
                    name = _OUTPUT_OF_DELTA.get(delta_kind)
                    if name is None:
                        return False
                    output = getattr(delta, name, None)
                    return (output.__class__ is str and bool(output)) or _is_text(output)
        return self._read_carefully(event, notes)

    def _read_carefully(self, event: Any, notes: ResponseNotes) -> bool:
        """Any event: dicts, objects, any mix of the two; the text when captured."""
        kind = field_of(event, "type")
        if kind == "content_block_delta":
            delta = field_of(event, "delta")
            kind = field_of(delta, "type")
            name = _OUTPUT_OF_DELTA.get(kind) if isinstance(kind, str) else None
            if name is None:
                return False
            output = field_of(delta, name)
            if not isinstance(output, str) or not output:
                return False
            if notes.capture_text and kind == "text_delta":
                notes.text.append(output)
            return True
        if kind == "content_block_start":
            block = field_of(event, "content_block")
            kind = field_of(block, "type")
            name = _OUTPUT_OF_BLOCK.get(kind) if isinstance(kind, str) else None
            output = field_of(block, name) if name is not None else None
            if not isinstance(output, str) or not output:
                return False
            if notes.capture_text and kind == "text":
                notes.text.append(output)
            return True
        if kind == "message_start":
            message = field_of(event, "message")
            _identify(message, notes)
            notes.choices_seen.add(0)
            usage = field_of(message, "usage")
            if usage is not None:
                notes.usage = Usage.from_anthropic(usage, earlier=notes.usage)
        elif kind == "message_delta":
            reason = field_of(field_of(event, "delta"), "stop_reason")
            if isinstance(reason, str) and reason:
                notes.finish_reasons[0] = reason
            usage = field_of(event, "usage")
            if usage is not None:
                notes.usage = Usage.from_anthropic(usage, earlier=notes.usage)
        return False

    def complete(self, notes: ResponseNotes) -> bool:
        return notes.complete

    def read_answer(self, message: Any, notes: ResponseNotes) -> None:
        _identify(message, notes)
        notes.choices_seen.add(0)
        reason = field_of(message, "stop_reason")
        if isinstance(reason, str) and reason:
            notes.finish_reasons[0] = reason
        usage = field_of(message, "usage")
        if usage is not None:
            notes.usage = Usage.from_anthropic(usage)
        if notes.capture_text:
            for block in items_of(field_of(message, "content")):
                text = field_of(block, "text")
                if field_of(block, "type") == "text" and isinstance(text, str):
                    notes.text.append(text)


def _is_text(output: Any) -> bool:
    """Output as a ``str`` subclass, not empty (a plain ``str`` is decided inline)."""
    return isinstance(output, str) and bool(output)


def _identify(answer: Any, notes: ResponseNotes) -> None:
    model = field_of(answer, "model")
    answer_id = field_of(answer, "id")
    if notes.model is None and isinstance(model, str) and model:
        notes.model = model
    if notes.response_id is None and isinstance(answer_id, str) and answer_id:
        notes.response_id = answer_id


READER: Final = AnthropicReader()


def _recorder(
    config: PatchConfig, resource: Any, kwargs: Mapping[str, Any], streamed: bool
) -> CallRecorder:
    facts = client_facts(resource, default_provider=sc.PROVIDER_ANTHROPIC)
    model = kwargs.get("model")
    return CallRecorder(
        config.tracer,
        config.metrics,
        operation=sc.OPERATION_CHAT,
        provider=facts.provider,
        model=model if isinstance(model, str) else None,
        streamed=streamed,
        threshold_ms=config.threshold_ms,
        server_address=facts.host,
        server_port=facts.port,
        messages=_messages(kwargs),
        request=kwargs,
        reader=READER,
        secrets=facts.secrets,
        secrets_on_error=functools.partial(call_credentials, resource, kwargs),
    )


def _messages(kwargs: Mapping[str, Any]) -> list[Any] | None:
    """The prompt as chat messages: the top-level ``system`` first, then ``messages``."""
    messages = kwargs.get("messages")
    if not isinstance(messages, list):
        return None
    system = kwargs.get("system")
    if isinstance(system, str) and system:
        return [{"role": "system", "content": system}, *messages]
    return messages


def _create(config: PatchConfig, resource: Any, _: Any, kwargs: Mapping[str, Any]) -> CallRecorder:
    return _recorder(config, resource, kwargs, kwargs.get("stream") is True)


def _stream(config: PatchConfig, resource: Any, _: Any, kwargs: Mapping[str, Any]) -> CallRecorder:
    return _recorder(config, resource, kwargs, True)


def _observe_create(result: Any, recorder: CallRecorder, is_async: bool) -> Any:
    if isinstance(result, ObservedStream | AsyncObservedStream):
        return result
    if is_raw_response(result):
        return RawResponse(result, recorder, is_async, _observe_create)
    if recorder.attempt.streamed:
        return (
            AsyncObservedStream(result, recorder) if is_async else ObservedStream(result, recorder)
        )
    recorder.end_completion(result)
    return result


def _observe_stream(manager: Any, start: Starter, is_async: bool) -> Any:
    return LaterStreamManager(manager, start, "_raw_stream")


def _targets(module: str) -> tuple[Target, ...]:
    """The wrapped methods of one Messages resource (the API's, or the beta one's)."""
    return (
        Target(module, "Messages", "create", False, _create, _observe_create),
        Target(module, "AsyncMessages", "create", True, _create, _observe_create),
        # parse() sends its own request (not through create()), never streamed
        Target(module, "Messages", "parse", False, _create, _observe_create),
        Target(module, "AsyncMessages", "parse", True, _create, _observe_create),
        Target(module, "Messages", "stream", False, _stream, observe_later=_observe_stream),
        # AsyncMessages.stream is a plain method returning an async manager
        Target(module, "AsyncMessages", "stream", False, _stream, observe_later=_observe_stream),
    )


_PATCH: Final = SdkPatch(
    "instrument_anthropic",
    (*_targets(_MESSAGES), *_targets(_BETA_MESSAGES)),
    nested=("instrument_anthropic",),  # a helper calling the SDK's own wrapped methods
)


def instrument_anthropic(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    stall_threshold_ms: int | None = None,
) -> None:
    """Instrument the installed ``anthropic`` SDK (every client, sync and async). Idempotent;
    a second call only updates the providers and the threshold."""
    _PATCH.install(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        stall_threshold_ms=stall_threshold_ms,
    )


def uninstrument_anthropic() -> None:
    """Restore the SDK. Where another instrumentation wrapped ours since, ours is left in
    place as a pass-through, so theirs keeps working. An ``instrument()`` still waiting for the
    SDK's import is dropped too: imported later, it stays unwrapped."""
    forget_pending("anthropic")
    _PATCH.uninstall()
