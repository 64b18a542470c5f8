"""The telemetry of one call — its span and its metrics — for otel-llm's client and for wrapped
calls alike: one place builds call spans, records their errors and records the call's metrics.

A call span carries the request (operation, model, the GenAI request parameters, the stream
flag only when streaming), the response facts of the winning attempt, the call's counters
(attempts, hedges, sources tried, the winner, hedge waste) and, when it failed, its error. The
deriving processor copies the winning attempt's figures onto it.

Content — the prompt (``gen_ai.input.messages``) and the answer (``gen_ai.output.messages``) —
is recorded here and only here, for the client and the wrappers alike, and only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (read once, when the call starts).
"""

from __future__ import annotations

import asyncio
import linecache
import logging
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from otel_llm import _semconv as sc
from otel_llm._content import capture_content, input_messages, output_messages
from otel_llm._errors import error_type
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
        if isinstance(value, int) and not isinstance(value, bool):
            attrs[key] = value
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


def record_error(span: trace.Span, error: BaseException, secrets: Iterable[str] = ()) -> None:
    """``error.type``, an ``exception`` event and an ERROR status on ``span`` — every text
    redacted first: a provider's error message may echo the API key.

    The event's stack trace is the raised exception's own (``chain=False``): a chained cause
    is a lower layer's and may hold what the library keeps out (an HTTP request, a validation
    input), and the cause of an :class:`AllSourcesExhausted` — the group of every attempt's
    error — is already summed up in its message, so the event stays small.
    """
    span.set_attribute(sc.ERROR_TYPE, error_type(error))
    message = redact(_text_of(error), secrets)
    stack = redact(stack_text(error), secrets)
    span.add_event(
        "exception",
        {
            "exception.type": type(error).__qualname__,
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


def _text_of(error: BaseException) -> str:
    """``str(error)``, or Python's own placeholder when the error cannot be printed."""
    try:
        return str(error)
    except Exception:
        return "<exception str() failed>"


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
        self.span = tracer.start_span(
            sc.span_name(operation, model), kind=SpanKind.CLIENT, attributes=attrs
        )
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
        self.span.set_attribute(sc.GEN_AI_PROVIDER_NAME, provider)
        if attributes:
            self.span.set_attributes(attributes)
        if model:
            self._metric_model = model

    @property
    def ended(self) -> bool:
        """True once the span has ended."""
        return self._ended

    def record_response(
        self, facts: ResponseFacts, attributes: Mapping[str, AttributeValue] | None = None
    ) -> None:
        """The winning attempt's response facts (and any more attributes)."""
        self.response_model = facts.model
        self.span.set_attributes(facts.attributes())
        if attributes:
            self.span.set_attributes(attributes)

    def record_output(self, text: str | None, finish_reason: str | None) -> None:
        """The answer's text (the winning attempt's), when content capture is on and there
        is text."""
        if self.capture and text:
            self.span.set_attribute(sc.GEN_AI_OUTPUT_MESSAGES, output_messages(text, finish_reason))

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
        self.span.set_attributes({key: value for key, value in pairs if value is not None})

    def end(
        self,
        *,
        duration_s: float,
        figures: StallFigures | None = None,
        error: BaseException | None = None,
        outcome: str | None = None,
    ) -> None:
        """End the span (once) and record the call's metrics.

        - ``error``: the call failed — ``error.type``, an ``exception`` event and an ERROR
          status; the duration metric carries the ``error.type``.
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
                record_error(self.span, error, self.secrets)
            elif outcome is not None and outcome != sc.OUTCOME_OK:
                self.span.set_attribute(sc.ERROR_TYPE, outcome)
                kind = outcome
        except Exception:
            logger.exception("otel-llm: could not record how a call ended")
        finally:
            self.span.end()
        if self.metrics is None or not recorded:
            return
        try:
            observable = None if outcome in sc.OUTCOMES_WITHOUT_FIGURES else figures
            self.metrics.record_call(duration_s, observable, self._metric_attributes(kind))
        except Exception:
            logger.exception("otel-llm: could not record a call's metrics")

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
