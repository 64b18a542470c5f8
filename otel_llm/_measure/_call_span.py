"""The telemetry of one call — its span and its metrics — for otel-llm's client and for wrapped
calls alike: one place builds call spans, records their errors and records the call's metrics.

A call span carries the request (operation, model, the GenAI request parameters, the stream
flag only when streaming), the response facts of the winning attempt, the call's counters
(attempts, hedges, sources tried, the winner, hedge waste) and, when it failed, its error. The
deriving processor copies the winning attempt's figures onto it.

Content — the prompt (``gen_ai.input.messages``) and the answer (``gen_ai.output.messages``) —
is recorded here and only here, for the client and the wrappers alike, and only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` asks for it on spans (``true``,
``SPAN_ONLY``, ``SPAN_AND_EVENT``: :func:`~otel_llm._content.capture_content`; read once, when the
call starts).

The tracing pipeline is the application's and may fail: a span processor that raises in
``on_start`` or ``on_end`` (the SDK passes its exception on to whoever starts or ends the span),
a span that refuses an attribute. Such a failure never reaches the LLM call, and each kind of it
is logged once (:mod:`otel_llm._measure._faults`), not on every call. A span whose ``on_start``
raised was started all the same (the SDK starts it, then calls its processors), so the call goes
on with that span and ends it: the processors that saw it start see it end. Only a span that
cannot be found that way is replaced by a non-recording one in its parent's context (what
follows stays in the trace). A span whose ``on_end`` raised is ended all the same (the SDK sets
its end first); the processors after the one that raised do not receive it — the SDK's doing.
"""

from __future__ import annotations

import asyncio
import linecache
import logging
import sys
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from otel_llm import _semconv as sc
from otel_llm._content import capture_content, input_messages, output_messages
from otel_llm._errors import OtelLLMError, error_type
from otel_llm._measure._faults import FAULTS, text_of
from otel_llm._measure._metrics import LlmMetrics
from otel_llm._measure._response import ResponseFacts
from otel_llm._measure._stalls import StallFigures
from otel_llm._redact import redact

logger = logging.getLogger("otel_llm")

_INT_PARAMETERS: tuple[tuple[str, str], ...] = (
    ("max_tokens", sc.GEN_AI_REQUEST_MAX_TOKENS),
    ("max_completion_tokens", sc.GEN_AI_REQUEST_MAX_TOKENS),
    ("max_output_tokens", sc.GEN_AI_REQUEST_MAX_TOKENS),  # the Responses API's, Gemini's
    ("seed", sc.GEN_AI_REQUEST_SEED),
    ("n", sc.GEN_AI_REQUEST_CHOICE_COUNT),
)
_FLOAT_PARAMETERS: tuple[tuple[str, str], ...] = (
    ("temperature", sc.GEN_AI_REQUEST_TEMPERATURE),
    ("top_p", sc.GEN_AI_REQUEST_TOP_P),
    ("frequency_penalty", sc.GEN_AI_REQUEST_FREQUENCY_PENALTY),
    ("presence_penalty", sc.GEN_AI_REQUEST_PRESENCE_PENALTY),
)
"""Request fields (OpenAI's, and the other APIs' names for the same) → the GenAI request
attributes the convention defines for them."""
_INT64: Final = -(2**63)
"""The least integer an attribute can carry: OTLP's are 64-bit, and the exporter logs the
traceback of every span holding one past them (a ``seed=2**64``), per export."""


def start_span(
    tracer: trace.Tracer,
    name: str,
    *,
    attributes: Mapping[str, AttributeValue],
    context: Context | None = None,
    start_time: int | None = None,
) -> trace.Span:
    """A ``CLIENT`` span started by ``tracer``. When starting it raised (a span processor's
    ``on_start``), the span the SDK started all the same, or else a non-recording span in its
    parent's context: the call goes on with a span to end and a context to hand down."""
    try:
        return tracer.start_span(
            name,
            context=context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start_time,
        )
    except Exception as exc:
        FAULTS.report("start a span", exc)
        started = _started_before(exc)
        if started is not None:
            return started
        return trace.NonRecordingSpan(trace.get_current_span(context).get_span_context())


_SDK_TRACE = "opentelemetry.sdk.trace"
"""Imported by whoever made an SDK tracer; never by this module (``import otel_llm`` stays
light)."""


def _started_before(error: BaseException) -> trace.Span | None:
    """The SDK span whose start raised ``error``, or ``None``. The SDK's ``Span.start()`` sets
    the start time, then calls the processors' ``on_start``: when one raises, the span is started
    but never handed back. It is the ``self`` of that method's frame in the traceback (the frame
    is matched by the method's own code object, so nothing else is taken for it)."""
    if _SDK_TRACE not in sys.modules:
        return None
    from opentelemetry.sdk.trace import Span as SdkSpan

    code = SdkSpan.start.__code__
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            span = tb.tb_frame.f_locals.get("self")
            if isinstance(span, SdkSpan) and span.start_time is not None and span.end_time is None:
                return span
            return None
        tb = tb.tb_next
    return None


def end_span(span: trace.Span, end_time: int | None = None) -> None:
    """End ``span``; a span processor's ``on_end`` that raises is reported, never raised (the
    SDK ends the span before it calls its processors, so the span is ended either way)."""
    try:
        span.end(end_time=end_time)
    except Exception as exc:
        FAULTS.report("end a span", exc)


def request_attributes(params: Mapping[str, Any] | None) -> dict[str, AttributeValue]:
    """The GenAI request attributes of an OpenAI-style request body (never its content):
    ``max_tokens`` (or ``max_completion_tokens``), ``temperature``, ``top_p``, the penalties,
    ``seed``, ``n`` (only when it is not 1, as the convention asks) and ``stop`` (or
    ``stop_sequences``, as Anthropic and Gemini name it)."""
    attrs: dict[str, AttributeValue] = {}
    if not params:
        return attrs
    for field, key in _INT_PARAMETERS:
        value = params.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and _INT64 <= value < -_INT64:
            attrs[key] = int(value)
    for field, key in _FLOAT_PARAMETERS:
        number = params.get(field)
        if isinstance(number, int | float) and not isinstance(number, bool):
            attrs[key] = float(number)
    if attrs.get(sc.GEN_AI_REQUEST_CHOICE_COUNT) == 1:
        del attrs[sc.GEN_AI_REQUEST_CHOICE_COUNT]
    stop = params.get("stop", params.get("stop_sequences"))
    if isinstance(stop, str):
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = (stop,)
    elif isinstance(stop, list | tuple) and all(isinstance(item, str) for item in stop):
        attrs[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = tuple(stop)
    return attrs


_API_ERRORS: Final = frozenset(
    {("openai", "APIError"), ("anthropic", "APIError"), ("google.genai.errors", "APIError")}
)
"""``(module, name)`` of the base class of the errors each wrapped SDK's HTTP/API layer raises
(LiteLLM's derive from openai's): their text is the provider's or the transport's."""

_TRANSPORT_PACKAGES: Final = ("httpx", "httpx2", "httpcore")
"""HTTP libraries whose own errors (a reset, a timeout) pass through the SDKs mid-stream."""


def error_text_recordable(error: BaseException, *, content: bool) -> bool:
    """Whether a wrapped call's spans may record ``error``'s text (message and stack), or only
    its type.

    The text of an error raised by an SDK's HTTP/API layer (the provider's error, a failed
    connection), by an HTTP library or by otel-llm itself says what the provider or the
    transport said, and is recorded (redacted). Any other error — a structured-output helper's
    validation error, whose message quotes the model's answer; the application's own exception
    inside a stream's ``with`` block — may carry content, so its text is recorded only when
    content capture is on (``content``)."""
    if content or isinstance(error, OtelLLMError):
        return True
    for cls in type(error).__mro__:
        module = cls.__module__
        if (module, cls.__qualname__) in _API_ERRORS:
            return True
        if module.partition(".")[0] in _TRANSPORT_PACKAGES:
            return True
    return False


def record_error(
    span: trace.Span, error: BaseException, secrets: Iterable[str] = (), *, text: bool = True
) -> None:
    """``error.type``, an ``exception`` event and an ERROR status on ``span`` — every text
    redacted first: a provider's error message may echo the API key. Without ``text``
    (:func:`error_text_recordable` said no) the event and the status name the exception's type
    only: no message, no stack.

    The event's stack trace is the raised exception's own (``chain=False``): a chained cause
    is a lower layer's and may hold what the library keeps out (an HTTP request, a validation
    input), and the cause of an :class:`AllSourcesExhausted` — the group of every attempt's
    error — is already summed up in its message, so the event stays small.
    """
    span.set_attribute(sc.ERROR_TYPE, error_type(error))
    kind = type(error).__qualname__
    if not text:
        span.add_event("exception", {"exception.type": kind})
        span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        return
    message = redact(text_of(error), secrets)
    stack = redact(stack_text(error), secrets)
    span.add_event(
        "exception",
        {
            "exception.type": kind,
            "exception.message": message,
            "exception.stacktrace": stack,
        },
    )
    span.set_status(Status(StatusCode.ERROR, message or type(error).__name__))


def stack_text(error: BaseException) -> str:
    """What ``traceback.format_exception(error, chain=False)`` prints, without its column
    carets: Python 3.11's carets parse each frame's source line (``ast.parse``) and
    ``format_exception`` stats every file of the stack (``linecache.checkcache``) — ~3 ms of a
    failed call, on the event loop, a third of the soak's CPU before this. A group of errors is
    printed by ``format_exception`` itself (its tree of sub-errors)."""
    if isinstance(error, BaseExceptionGroup):
        return "".join(traceback.format_exception(error, chain=False))
    frames: list[tuple[str, int, str, str]] = []
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        line = linecache.getline(code.co_filename, tb.tb_lineno, tb.tb_frame.f_globals)
        frames.append((code.co_filename, tb.tb_lineno, code.co_name, line.strip()))
        tb = tb.tb_next
    head = (
        ["Traceback (most recent call last):\n", *traceback.format_list(frames)] if frames else []
    )
    return "".join([*head, *traceback.format_exception_only(type(error), error)])


class CallSpan:
    """The span of one call, ended exactly once by :meth:`end`, and the call's metrics
    recorded with it. Whoever creates one ends it on every path (``try``/``finally``)."""

    def __init__(
        self,
        tracer: trace.Tracer,
        metrics: LlmMetrics | None,
        *,
        operation: str,
        model: str | None,
        stream: bool,
        provider: str | None = None,
        request: Mapping[str, Any] | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        secrets: Iterable[str] = (),
        messages: Sequence[Any] | None = None,
    ) -> None:
        """``request`` is the request body (its GenAI parameters are recorded, never its
        messages); ``provider`` is ``gen_ai.provider.name`` when known at the start (a wrapped
        SDK's), else it is set with the winner. ``messages`` is the prompt, recorded only when
        content capture is on (:attr:`capture`)."""
        self.capture = capture_content()
        """Whether this call records content: the opt-in as it stood when the call started."""
        self.secrets = tuple(secrets)
        self.metrics = metrics
        self.operation = operation
        self.model = model
        self.provider = provider
        attrs: dict[str, AttributeValue] = {
            sc.SPAN_ROLE: sc.SPAN_ROLE_CALL,
            sc.GEN_AI_OPERATION_NAME: operation,
        }
        if stream:  # the convention sets it if and only if the request streams
            attrs[sc.GEN_AI_REQUEST_STREAM] = True
        if model:
            attrs[sc.GEN_AI_REQUEST_MODEL] = model
        if provider:
            attrs[sc.GEN_AI_PROVIDER_NAME] = provider
        attrs.update(request_attributes(request))
        attrs.update(attributes or {})
        if self.capture and messages is not None:
            try:  # telemetry never breaks the call: a prompt that is not JSON is not recorded
                attrs[sc.GEN_AI_INPUT_MESSAGES] = input_messages(messages)
            except (TypeError, ValueError):
                logger.warning("otel-llm: the prompt is not JSON; gen_ai.input.messages not set")
        self.span = start_span(tracer, sc.span_name(operation, model), attributes=attrs)
        self.context: Context = trace.set_span_in_context(self.span)
        self.response_model: str | None = None
        self._metric_model = model
        self._ended = False

    def set_provider(
        self,
        provider: str,
        attributes: Mapping[str, AttributeValue] | None = None,
        *,
        model: str | None = None,
    ) -> None:
        """``gen_ai.provider.name`` once known (the winner's, or the last source tried), with
        any attributes of that source; ``model`` is the model the metrics record as requested
        (the winner's source's) when it differs from the span's."""
        self.provider = provider
        if model:
            self._metric_model = model
        try:
            self.span.set_attribute(sc.GEN_AI_PROVIDER_NAME, provider)
            if attributes:
                self.span.set_attributes(attributes)
        except Exception as exc:
            FAULTS.report("record a call's provider", exc)

    @property
    def ended(self) -> bool:
        """True once the span has ended."""
        return self._ended

    def record_response(
        self, facts: ResponseFacts, attributes: Mapping[str, AttributeValue] | None = None
    ) -> None:
        """The winning attempt's response facts (and any more attributes)."""
        self.response_model = facts.model
        try:
            self.span.set_attributes(facts.attributes())
            if attributes:
                self.span.set_attributes(attributes)
        except Exception as exc:
            FAULTS.report("record a call's response", exc)

    def record_output(self, text: str | None, finish_reason: str | None) -> None:
        """The answer's text (the winning attempt's), when content capture is on and there
        is text."""
        if not (self.capture and text):
            return
        try:
            self.span.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, output_messages(text, finish_reason))
        except Exception as exc:
            FAULTS.report("record a call's answer", exc)

    def record_counts(
        self,
        *,
        attempts: int,
        hedges: int,
        sources_tried: tuple[str, ...] | None = None,
        hedge_won: bool | None = None,
        winner: int | None = None,
        hedge_waste_tokens: int | None = None,
        hedge_waste_chunks: int | None = None,
    ) -> None:
        """How far the call got; ``winner`` is the attempt number whose figures it carries."""
        pairs: tuple[tuple[str, AttributeValue | None], ...] = (
            (sc.CALL_ATTEMPTS, attempts),
            (sc.CALL_HEDGES, hedges),
            (sc.CALL_SOURCES_TRIED, sources_tried),
            (sc.CALL_HEDGE_WON, hedge_won),
            (sc.CALL_WINNER_ATTEMPT, winner),
            (sc.CALL_HEDGE_WASTE_TOKENS, hedge_waste_tokens),
            (sc.CALL_HEDGE_WASTE_CHUNKS, hedge_waste_chunks),
        )
        try:
            self.span.set_attributes({key: value for key, value in pairs if value is not None})
        except Exception as exc:
            FAULTS.report("record a call's counts", exc)

    def end(
        self,
        *,
        duration_s: float,
        figures: StallFigures | None = None,
        error: BaseException | None = None,
        outcome: str | None = None,
        error_text: bool = True,
    ) -> None:
        """End the span (once) and record the call's metrics.

        - ``error``: the call failed — ``error.type``, an ``exception`` event and an ERROR
          status; the duration metric carries the ``error.type``. ``error_text`` false: the
          event and the status name its type only (:func:`record_error`).
        - ``error`` that is a ``CancelledError`` (the calling task was cancelled): an ERROR
          status and ``error.type`` (no event: nothing went wrong inside), the span marked
          ``cancelled`` — and no metric: a cancelled call is the caller's choice, not a
          duration of the provider's.
        - ``outcome`` (a wrapped stream ``closed``, ``dropped`` or ``cancelled`` by the
          application): no error status — nothing failed — only ``error.type`` set to the
          outcome, on the span and the metric (whose figures a cancelled stream does not have).
        - neither: the call answered; ``figures`` are the winner's.
        """
        if self._ended:
            return
        self._ended = True
        kind: str | None = None
        recorded = True
        try:  # telemetry never breaks the call: whatever fails here, the span ends
            if isinstance(error, asyncio.CancelledError):  # no event: nothing went wrong
                self.span.set_attributes(
                    {sc.ERROR_TYPE: error_type(error), sc.ATTEMPT_OUTCOME: sc.OUTCOME_CANCELLED}
                )
                self.span.set_status(Status(StatusCode.ERROR, type(error).__name__))
                recorded = False
            elif error is not None:
                kind = error_type(error)
                record_error(self.span, error, self.secrets, text=error_text)
            elif outcome is not None and outcome != sc.OUTCOME_OK:
                self.span.set_attribute(sc.ERROR_TYPE, outcome)
                kind = outcome
        except Exception as exc:
            FAULTS.report("record how a call ended", exc)
        finally:
            end_span(self.span)
        if self.metrics is None or not recorded:
            return
        try:
            observable = None if outcome in sc.OUTCOMES_WITHOUT_FIGURES else figures
            self.metrics.record_call(duration_s, observable, self._metric_attributes(kind))
        except Exception as exc:  # a meter provider's failure never costs the call or its span
            FAULTS.report("record a call's metrics", exc)

    def _metric_attributes(self, kind: str | None) -> dict[str, AttributeValue]:
        attrs: dict[str, AttributeValue] = {sc.GEN_AI_OPERATION_NAME: self.operation}
        for key, value in (
            (sc.GEN_AI_PROVIDER_NAME, self.provider),
            (sc.GEN_AI_REQUEST_MODEL, self._metric_model),
            (sc.GEN_AI_RESPONSE_MODEL, self.response_model),
            (sc.ERROR_TYPE, kind),
        ):
            if value:
                attrs[key] = value
        return attrs
