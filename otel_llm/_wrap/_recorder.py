"""The spans of one wrapped call: a call span and one attempt span, ended exactly once.

A wrapped call (an SDK's ``create()`` or any chunk stream) produces the same call span, attempt
span and chunk events as otel-llm's own client, so the deriving processor, the DuckDB views and
the dashboards treat it identically. Metering is consumer-aware: time the application
holds the stream between reads is measured apart and never counted as stall.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from otel_llm import _semconv as sc
from otel_llm._errors import ProviderError, TruncatedStream
from otel_llm._measure._call_span import CallSpan, error_text_recordable
from otel_llm._measure._metrics import LlmMetrics
from otel_llm._measure._spans import AttemptSpan
from otel_llm._measure._stalls import to_ms
from otel_llm._wrap import _open_calls
from otel_llm._wrap._chunk_view import (
    Classifier,
    FinishReason,
    ResponseNotes,
    StreamReader,
    openai_classifier,
)

logger = logging.getLogger("otel_llm")


class CallRecorder:
    """Spans and metrics of one wrapped call. Thread-safe; every ``end_*`` is idempotent."""

    def __init__(
        self,
        tracer: trace.Tracer,
        metrics: LlmMetrics | None,
        *,
        operation: str,
        provider: str,
        model: str | None,
        streamed: bool,
        threshold_ms: int,
        server_address: str | None = None,
        server_port: int | None = None,
        messages: Sequence[Any] | None = None,
        request: Mapping[str, Any] | None = None,
        classifier: Classifier = openai_classifier,
        finish_reason: FinishReason | None = None,
        reader: StreamReader | None = None,
        started_ns: int | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        secrets: Sequence[str] = (),
        secrets_on_error: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        """``secrets`` are redacted from any error text the spans record; ``secrets_on_error``
        finds more, called only when the call ends with an error (for secrets too dear to find
        on every call: those an SDK picks up by itself from its settings or the environment).
        ``messages`` is the prompt as the application gave it: recorded (with content capture
        on) only when it is a sequence — an iterable that reads once (a generator, which the
        SDKs take) is the SDK's to read, and reading it here would send an empty prompt."""
        self.classifier = classifier
        self.hold_ns = 0
        self._last_arrival_ns: int | None = None
        self._reader = reader
        self._fused = reader is None and classifier is openai_classifier
        self._finish_reason = finish_reason
        self._knows_finish = (
            reader.knows_finish if reader is not None else self._fused or finish_reason is not None
        )
        """Only then can a missing finish reason be told apart from a normal end."""
        self._lock = threading.Lock()
        self._ended = False
        common: dict[str, AttributeValue] = {}
        if server_address:
            common[sc.SERVER_ADDRESS] = server_address
        if server_port is not None:
            common[sc.SERVER_PORT] = server_port
        common.update(attributes or {})
        self.call = CallSpan(
            tracer,
            metrics,
            operation=operation,
            model=model,
            stream=streamed,
            provider=provider,
            request=request,
            attributes=common,
            secrets=secrets,
            messages=messages if isinstance(messages, Sequence) else None,
        )
        self.notes = ResponseNotes(capture_text=self.call.capture)
        attempt_attributes: dict[str, AttributeValue] = {
            sc.GEN_AI_OPERATION_NAME: operation,
            sc.GEN_AI_PROVIDER_NAME: provider,
            **common,
            sc.ATTEMPT_NUMBER: 1,
            sc.ATTEMPT_LEG: sc.LEG_PRIMARY,
            sc.ATTEMPT_SOURCE: provider,
        }
        if model:
            attempt_attributes[sc.GEN_AI_REQUEST_MODEL] = model
        self.attempt = AttemptSpan(
            tracer,
            sc.span_name(operation, model),
            attributes=attempt_attributes,
            threshold_ms=threshold_ms,
            streamed=streamed,
            context=self.call.context,
            consumer_aware=True,
            start_ns=started_ns,
            secrets=secrets,
            metrics=metrics,
        )
        self.secrets = tuple(secrets)
        self._secrets_on_error = secrets_on_error
        self.started_ns = self.attempt.clock.start_ns
        self._reader_read: Callable[[Any, ResponseNotes], bool] | None = (
            reader.read if reader is not None else None
        )
        """Bound once: the per-item path reads it first."""
        self._mark = self.attempt.clock.mark_with_hold
        if not _open_calls.hooked:
            _open_calls.hook()
        _open_calls.recorders[id(self)] = self

    @property
    def ended(self) -> bool:
        """True once the spans have ended."""
        return self._ended

    # --- the per-item path --------------------------------------------------------------------

    def on_item(self, item: Any, wait_start_ns: int, arrival_ns: int) -> None:
        """One item came out of the stream: the consumer asked at ``wait_start_ns``.

        The time from the previous item's arrival to this request is the consumer's hold (it
        includes this method's own few microseconds, which is not provider silence either).
        """
        last = self._last_arrival_ns
        if last is not None and wait_start_ns > last:
            self.hold_ns += wait_start_ns - last
        self._last_arrival_ns = arrival_ns
        try:
            read = self._reader_read
            if read is not None:
                incremental = read(item, self.notes)
            elif self._fused:
                incremental = self.notes.feed_and_classify(item)
            else:
                incremental = self._feed_custom(item)
            if incremental:
                self._mark(arrival_ns, self.hold_ns)
        except Exception:  # a classifier bug must not break the application's stream
            logger.exception("otel-llm: could not read a streamed item")

    def _feed_custom(self, item: Any) -> bool:
        """Note what ``item`` says and whether it is an incremental chunk (custom shapes)."""
        incremental = self.classifier(item)
        self.notes.feed(item)
        if self._finish_reason is not None:
            reason = self._finish_reason(item)
            if reason:
                self.notes.finish_reasons[0] = reason
        return incremental

    # --- endings ------------------------------------------------------------------------------

    def end_ok(self) -> None:
        """The stream ended. Incomplete by the one rule (``stream_complete``: a finish reason
        for every choice), or its reader's where the API has its own (LiteLLM's), it was cut
        short, recorded as an error — when the stream's shape says where finish reasons are:
        OpenAI chunks, a reader, or a ``finish_reason`` hook. What the application receives is
        never changed."""
        failure = self.notes.failure
        if failure is not None:
            code, message = failure
            self._end(sc.OUTCOME_ERROR, ProviderError(message, code=code), cut_short=True)
        elif self.attempt.streamed and self._knows_finish and not self._complete():
            self._end(
                sc.OUTCOME_ERROR,
                TruncatedStream("the stream ended without a finish reason"),
                cut_short=True,
            )
        else:
            self._end(sc.OUTCOME_OK, None)

    def _complete(self) -> bool:
        """Whether the stream is complete: by its reader's rule, else the one rule."""
        reader = self._reader
        return reader.complete(self.notes) if reader is not None else self.notes.complete

    def end_completion(self, completion: Any) -> None:
        """A non-streamed answer arrived (one that reports its own failure ends as an
        error)."""
        try:
            if self._reader is not None:
                self._reader.read_answer(completion, self.notes)
            else:
                self.notes.feed_completion(completion)
        except Exception:
            logger.exception("otel-llm: could not read a completion")
        failure = self.notes.failure
        if failure is not None:
            code, message = failure
            self._end(sc.OUTCOME_ERROR, ProviderError(message, code=code))
        else:
            self._end(sc.OUTCOME_OK, None)

    def end_error(self, error: BaseException) -> None:
        """The call or the stream raised."""
        self._end(sc.OUTCOME_ERROR, error, cut_short=True)

    def end_raised(self, raised: BaseException) -> None:
        """``raised`` ended the call: the consuming task's cancellation, Ctrl-C
        (``KeyboardInterrupt``) or the process exiting (``SystemExit``) ends it as cancelled
        (the user's doing, never the provider's error); a generator closed around the stream
        (``GeneratorExit``: a web framework's response generator closed when its client went
        away) as closed, the consumer having stopped reading; anything else as an error."""
        if isinstance(raised, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
            self.end_cancelled()
        elif isinstance(raised, GeneratorExit):
            self.end_closed()
        else:
            self.end_error(raised)

    def end_cancelled(self) -> None:
        """The consuming task was cancelled."""
        self._end(sc.OUTCOME_CANCELLED, None, cut_short=True)

    def end_closed(self) -> None:
        """The consumer closed the stream before its end."""
        self._end(sc.OUTCOME_CLOSED, None, cut_short=True)

    def end_dropped(self) -> None:
        """The stream was collected without being consumed or closed."""
        self._end(sc.OUTCOME_DROPPED, None, cut_short=True)

    def _end(self, outcome: str, error: BaseException | None, *, cut_short: bool = False) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
        _open_calls.recorders.pop(id(self), None)
        try:
            self._finish(outcome, error, cut_short)
        except Exception:
            logger.exception("otel-llm: could not end the spans of a wrapped call")

    def _learn_secrets(self, find: Callable[[], Iterable[str]]) -> None:
        """Add what ``find`` finds to the secrets both spans redact (a failure to find them
        keeps the known ones, and the spans still end)."""
        try:
            found = tuple(dict.fromkeys((*self.secrets, *(s for s in find() if s))))
        except Exception:
            logger.exception("otel-llm: could not look up a call's credentials")
            return
        self.secrets = self.call.secrets = self.attempt.secrets = found

    def _finish(self, outcome: str, error: BaseException | None, cut_short: bool) -> None:
        if error is not None and self._secrets_on_error is not None:
            self._learn_secrets(self._secrets_on_error)
        notes = self.notes
        facts = notes.facts(cut_short=cut_short)
        attempt_extra: dict[str, AttributeValue] = facts.attributes()
        if self.attempt.streamed:
            attempt_extra[sc.CONSUMER_HOLD_MS] = to_ms(self.hold_ns)
        call = self.call
        text = error is None or error_text_recordable(error, content=call.capture)
        figures = self.attempt.finish(
            outcome, error=error, attributes=attempt_extra, error_text=text
        )
        call.record_response(
            facts, {sc.CONSUMER_HOLD_MS: to_ms(self.hold_ns)} if self.attempt.streamed else None
        )
        ok = outcome == sc.OUTCOME_OK
        call.record_counts(attempts=1, hedges=0, hedge_won=False, winner=1 if ok else None)
        if notes.text:
            call.record_output("".join(notes.text), notes.finish_reasons.get(0))
        call.end(
            duration_s=figures.wall_ms / 1000,
            figures=figures,
            error=error,
            outcome=None if ok or error is not None else outcome,
            error_text=text,
        )
