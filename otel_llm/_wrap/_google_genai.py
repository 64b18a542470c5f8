"""``instrument_google_genai()``: the installed ``google-genai`` SDK (Gemini), metered at its own
API.

Wrapped: ``models.generate_content_stream`` and ``models.generate_content``, sync
(``client.models``) and async (``client.aio.models``); the chat helpers
(``chats.create(...).send_message_stream`` / ``send_message``) go through them and are covered
too. ``generate_content_stream`` returns a generator that sends its request at its first step,
so the spans start there (a stream that is never read sent nothing and records nothing); the
generator comes back wrapped, ``isinstance`` checks still hold. One call is one call span with
one attempt span, the SDK's retries and automatic continuations inside it. Automatic function
calling runs the application's tools inside the wrapped call; an LLM call a tool makes through
any instrumented SDK (Gemini's own too) is recorded as a call of its own.

The chunk rule of the Gemini API (:class:`GeminiReader`): a streamed response is a chunk when a
candidate carries a part with output — text (an answer or a thought), a function call, code
or its result, inline data; a response with only usage, only a finish reason or empty parts is
not. The finish reason is each candidate's ``finishReason`` as the API names it (``STOP``,
``MAX_TOKENS``, ``SAFETY`` …); a prompt the API blocked ends with its ``blockReason`` instead.
A stream that ends without either was cut short. Usage is the last ``usageMetadata`` (the
candidates' and the thoughts' tokens are the output).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from opentelemetry import metrics, trace

from otel_llm import _semconv as sc
from otel_llm._measure._response import Usage, field_of, is_mapping, items_of
from otel_llm._wrap._chunk_view import ResponseNotes
from otel_llm._wrap._every_sdk import forget_pending
from otel_llm._wrap._later import AsyncLaterStream, LaterStream
from otel_llm._wrap._patching import PatchConfig, SdkPatch, Starter, Target
from otel_llm._wrap._recorder import CallRecorder
from otel_llm._wrap._sdk_client import header_credentials

_MODELS: Final = "google.genai.models"

_OUTPUT_FIELDS: Final = (
    "function_call",
    "executable_code",
    "code_execution_result",
    "inline_data",
    "tool_call",
)
"""Fields of a part that carry output whenever they are set (text counts when not empty)."""


def _value(reason: Any) -> str | None:
    """An enum's value (the SDK's enums are ``str`` enums), or the text as given."""
    value = getattr(reason, "value", reason)
    return value if isinstance(value, str) and value else None


def _has_output(part: Any) -> bool:
    text = field_of(part, "text")
    if isinstance(text, str) and text:
        return True
    return any(field_of(part, name) is not None for name in _OUTPUT_FIELDS)


class GeminiReader:
    """Reads Gemini responses (SDK objects or dicts, snake or camel case)."""

    knows_finish = True

    def read(self, response: Any, notes: ResponseNotes) -> bool:
        if notes.model is None:
            self._identify(response, notes)
        if not notes.capture_text and is_mapping(response) is False:
            try:
                return self._read_object(response, notes)
            except AttributeError:  # an object without a field: read it the careful way
                pass  # (everything done before is idempotent)
        return self._read_carefully(response, notes)

    def _read_object(self, response: Any, notes: ResponseNotes) -> bool:
        """The SDK's objects, read with plain attribute access: the hot path (each response
        of a stream); what it notes is what :meth:`_read_carefully` notes."""
        usage = response.usage_metadata
        if usage is not None:
            _note_usage(Usage.from_gemini(usage), notes)
        output = False
        candidates = response.candidates
        if candidates.__class__ is not list:
            if candidates is not None:
                raise AttributeError("candidates")
            candidates = ()
        for candidate in candidates:
            index = candidate.index
            if index.__class__ is not int:
                index = 0  # the API leaves a default (0) out of its JSON
            notes.choices_seen.add(index)
            reason = candidate.finish_reason
            if reason is not None:
                reason = _value(reason)
                if reason is not None:
                    notes.finish_reasons[index] = reason
            content = candidate.content
            parts = content.parts if content is not None else None
            if parts.__class__ is not list:
                if parts is not None:
                    raise AttributeError("parts")
                continue
            if not output:
                for part in parts:
                    text = part.text
                    if (text.__class__ is str and text) or _has_output(part):
                        output = True
                        break
        feedback = response.prompt_feedback
        if feedback is not None:
            _note_blocked(_value(feedback.block_reason), notes)
        return output

    def _read_carefully(self, response: Any, notes: ResponseNotes) -> bool:
        """Dicts, objects, and any mix of the two at every level; the text when captured."""
        usage = field_of(response, "usage_metadata")
        if usage is not None:
            _note_usage(Usage.from_gemini(usage), notes)
        output = False
        for candidate in items_of(field_of(response, "candidates")):
            index = field_of(candidate, "index")
            if not isinstance(index, int) or isinstance(index, bool):
                index = 0  # the API leaves a default (0) out of its JSON
            notes.choices_seen.add(index)
            reason = _value(field_of(candidate, "finish_reason"))
            if reason is not None:
                notes.finish_reasons[index] = reason
            for part in items_of(field_of(field_of(candidate, "content"), "parts")):
                if _has_output(part):
                    output = True
                    text = field_of(part, "text")
                    if (
                        notes.capture_text
                        and isinstance(text, str)
                        and not field_of(part, "thought")
                    ):
                        notes.text.append(text)
        feedback = field_of(response, "prompt_feedback")
        _note_blocked(_value(field_of(feedback, "block_reason")), notes)
        return output

    def complete(self, notes: ResponseNotes) -> bool:
        return notes.complete

    def read_answer(self, response: Any, notes: ResponseNotes) -> None:
        self.read(response, notes)

    def _identify(self, response: Any, notes: ResponseNotes) -> None:
        model = field_of(response, "model_version")
        answer_id = field_of(response, "response_id")
        notes.model = model if isinstance(model, str) and model else None
        if notes.response_id is None and isinstance(answer_id, str) and answer_id:
            notes.response_id = answer_id


def _note_usage(read: Usage, notes: ResponseNotes) -> None:
    """The last usage, over the earlier counts it leaves out (most responses repeat it)."""
    earlier = notes.usage
    if earlier is None:
        notes.usage = read
    elif read != earlier:
        notes.usage = earlier.updated(read)


def _note_blocked(reason: str | None, notes: ResponseNotes) -> None:
    """A prompt the API blocked: choice 0 ended for that reason."""
    if reason is not None:
        notes.choices_seen.add(0)
        notes.finish_reasons[0] = reason


READER: Final = GeminiReader()


def _where(resource: Any) -> tuple[str, str | None, int | None, tuple[str, ...]]:
    """Provider name, host, port and credentials of a ``Models`` resource's API client."""
    client = getattr(resource, "_api_client", None)
    provider = (
        sc.PROVIDER_VERTEX_AI
        if getattr(client, "vertexai", False) is True
        else (sc.PROVIDER_GEMINI)
    )
    base = getattr(getattr(client, "_http_options", None), "base_url", None)
    host = port = None
    if isinstance(base, str):
        try:
            parts = urlsplit(base)
            host, port = parts.hostname, parts.port
        except ValueError:
            host = port = None
    key = getattr(client, "api_key", None)
    return provider, host, port, (key,) if isinstance(key, str) and key else ()


def _credentials(resource: Any, kwargs: Mapping[str, Any]) -> tuple[str, ...]:
    """Every credential a call may have sent, looked up when it ends with an error: the API
    client's key and its Google credentials' token (Vertex AI), and the credential headers of
    the client's ``http_options`` and of the call's ``config.http_options``."""
    client = getattr(resource, "_api_client", None)
    config = kwargs.get("config")
    found = [
        getattr(client, "api_key", None),
        getattr(getattr(client, "_credentials", None), "token", None),
        *header_credentials(getattr(getattr(client, "_http_options", None), "headers", None)),
        *header_credentials(field_of(field_of(config, "http_options"), "headers")),
    ]
    return tuple(dict.fromkeys(value for value in found if isinstance(value, str) and value))


def _messages(kwargs: Mapping[str, Any]) -> list[Any] | None:
    """The prompt as chat messages: the system instruction first, then the contents (text is
    one user message)."""
    messages: list[Any] = []
    config = kwargs.get("config")
    system = field_of(config, "system_instruction") if config is not None else None
    if isinstance(system, str) and system:
        messages.append({"role": "system", "content": system})
    contents = kwargs.get("contents")
    if isinstance(contents, str):
        messages.append({"role": "user", "content": contents})
    elif isinstance(contents, list):
        messages.extend(contents)
    return messages or None


def _recorder(
    config: PatchConfig, resource: Any, kwargs: Mapping[str, Any], streamed: bool
) -> CallRecorder:
    provider, host, port, secrets = _where(resource)
    model = kwargs.get("model")
    request = kwargs.get("config")
    return CallRecorder(
        config.tracer,
        config.metrics,
        operation=sc.OPERATION_GENERATE_CONTENT,
        provider=provider,
        model=model.removeprefix("models/") if isinstance(model, str) else None,
        streamed=streamed,
        threshold_ms=config.threshold_ms,
        server_address=host,
        server_port=port,
        messages=_messages(kwargs),
        request=_request_parameters(request),
        reader=READER,
        secrets=secrets,
        secrets_on_error=functools.partial(_credentials, resource, kwargs),
    )


def _request_parameters(config: Any) -> dict[str, Any] | None:
    """The generation config's parameters the GenAI request attributes record (Gemini's
    names are those :func:`~otel_llm._measure._call_span.request_attributes` reads, but for
    the candidate count)."""
    if config is None:
        return None
    names = (
        "max_output_tokens",
        "temperature",
        "top_p",
        "seed",
        "stop_sequences",
        "frequency_penalty",
        "presence_penalty",
    )
    found = {name: field_of(config, name) for name in names}
    found["n"] = field_of(config, "candidate_count")
    return {name: value for name, value in found.items() if value is not None}


def _stream(config: PatchConfig, resource: Any, _: Any, kwargs: Mapping[str, Any]) -> CallRecorder:
    return _recorder(config, resource, kwargs, True)


def _generate(
    config: PatchConfig, resource: Any, _: Any, kwargs: Mapping[str, Any]
) -> CallRecorder:
    return _recorder(config, resource, kwargs, False)


def _observe_stream(result: Any, start: Starter, is_async: bool) -> Any:
    return AsyncLaterStream(result, start) if is_async else LaterStream(result, start)


def _observe_answer(result: Any, recorder: CallRecorder, is_async: bool) -> Any:
    recorder.end_completion(result)
    return result


_PATCH: Final = SdkPatch(
    "instrument_google_genai",
    (
        Target(_MODELS, "Models", "generate_content_stream", False, _stream,
               observe_later=_observe_stream),
        Target(_MODELS, "AsyncModels", "generate_content_stream", True, _stream,
               observe_later=_observe_stream),
        Target(_MODELS, "Models", "generate_content", False, _generate, _observe_answer),
        Target(_MODELS, "AsyncModels", "generate_content", True, _generate, _observe_answer),
    ),
    # none nested: automatic function calling runs the application's tools inside the call,
    # and an LLM call a tool makes (Gemini's own too) is a call of its own
)  # fmt: skip


def instrument_google_genai(
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    stall_threshold_ms: int | None = None,
) -> None:
    """Instrument the installed ``google-genai`` SDK (every client, sync and async).
    Idempotent; a second call only updates the providers and the threshold."""
    _PATCH.install(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        stall_threshold_ms=stall_threshold_ms,
    )


def uninstrument_google_genai() -> None:
    """Restore the SDK. Where another instrumentation wrapped ours since, ours is left in
    place as a pass-through, so theirs keeps working. An ``instrument()`` still waiting for the
    SDK's import is dropped too: imported later, it stays unwrapped."""
    forget_pending("google_genai")
    _PATCH.uninstall()
