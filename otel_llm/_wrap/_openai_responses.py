"""The chunk rule and the response facts of the OpenAI Responses API.

A Responses stream is a sequence of typed events. An event that adds output is a chunk when
its ``delta`` is not empty: output text, a refusal, reasoning (its summary or its text), the
arguments of a function or custom tool call, an MCP call's arguments, code for the code
interpreter, audio and its transcript (:data:`OUTPUT_DELTAS`). Lifecycle events
(``response.created``, ``…in_progress``, ``…output_item.added``/``done``,
``…content_part.added``/``done``, the ``….done`` event of each delta kind) are not chunks.

The answer ends with ``response.completed``, ``response.incomplete`` or ``response.failed``,
which carries the response with its usage. The API has no finish reason of its own; the one
recorded follows the convention's values: ``stop`` (``tool_call`` when the output calls a
tool), ``length`` or ``content_filter`` for an incomplete response (its reason as given
otherwise), ``error`` for a failed one. A stream that ends without one of the three was cut
short; ``response.failed`` and an ``error`` event are the provider's error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from otel_llm._measure._response import Usage, field_of, items_of
from otel_llm._wrap._chunk_view import ResponseNotes

OUTPUT_DELTAS: Final = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_text.delta",
        "response.function_call_arguments.delta",
        "response.custom_tool_call_input.delta",
        "response.mcp_call_arguments.delta",
        "response.code_interpreter_call_code.delta",
        "response.audio.delta",
        "response.audio.transcript.delta",
    }
)
"""Event types that carry output: a chunk when their ``delta`` is not empty."""

_STARTED: Final = frozenset({"response.created", "response.in_progress", "response.queued"})
_ENDED: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})
_TOOL_ITEMS: Final = frozenset(
    {"function_call", "custom_tool_call", "mcp_call", "computer_call", "local_shell_call"}
)
"""Output items that call a tool: a completed response holding one finished with ``tool_call``."""
_INCOMPLETE_REASONS: Final = {"max_output_tokens": "length", "content_filter": "content_filter"}


class ResponsesReader:
    """Reads Responses API events (SDK objects or dicts) and complete responses."""

    knows_finish = True

    def read(self, event: Any, notes: ResponseNotes) -> bool:
        kind = field_of(event, "type")
        if not isinstance(kind, str):
            return False
        if kind in OUTPUT_DELTAS:
            delta = field_of(event, "delta")
            if not isinstance(delta, str) or not delta:
                return False
            if notes.capture_text and kind == "response.output_text.delta":
                notes.text.append(delta)
            return True
        if kind in _STARTED:
            self._identify(field_of(event, "response"), notes)
        elif kind in _ENDED:
            self._ended(field_of(event, "response"), notes, capture=False)
        elif kind == "error":
            notes.failure = _failure_of(event)
        return False

    def complete(self, notes: ResponseNotes) -> bool:
        return notes.complete

    def read_answer(self, response: Any, notes: ResponseNotes) -> None:
        self._ended(response, notes, capture=notes.capture_text)

    def _identify(self, response: Any, notes: ResponseNotes) -> None:
        notes.choices_seen.add(0)
        if notes.model is None:
            model = field_of(response, "model")
            notes.model = model if isinstance(model, str) and model else None
        if notes.response_id is None:
            answer_id = field_of(response, "id")
            notes.response_id = answer_id if isinstance(answer_id, str) and answer_id else None

    def _ended(self, response: Any, notes: ResponseNotes, *, capture: bool) -> None:
        self._identify(response, notes)
        usage = field_of(response, "usage")
        if usage is not None:
            notes.usage = Usage.from_responses(usage)
        status = field_of(response, "status")
        output = field_of(response, "output")
        items = output if isinstance(output, list) else ()
        if status == "completed":
            calls = any(field_of(item, "type") in _TOOL_ITEMS for item in items)
            notes.finish_reasons[0] = "tool_call" if calls else "stop"
        elif status == "incomplete":
            reason = field_of(field_of(response, "incomplete_details"), "reason")
            reason = reason if isinstance(reason, str) and reason else "incomplete"
            notes.finish_reasons[0] = _INCOMPLETE_REASONS.get(reason, reason)
        elif status in ("failed", "cancelled"):
            notes.finish_reasons[0] = "error"
            notes.failure = _failure_of(field_of(response, "error"), status)
        if capture:
            notes.text.extend(_output_text(items))


def _failure_of(error: Any, status: str = "failed") -> tuple[str | None, str]:
    """``(code, message)`` of an ``error`` event or a failed response's ``error``."""
    code = field_of(error, "code") if error is not None else None
    message = field_of(error, "message") if error is not None else None
    return (
        code if isinstance(code, str) and code else None,
        message if isinstance(message, str) and message else f"the response {status}",
    )


def _output_text(items: Any) -> list[str]:
    """The output text of a response's message items."""
    texts = []
    for item in items:
        for part in items_of(field_of(item, "content")):
            text = field_of(part, "text")
            if field_of(part, "type") == "output_text" and isinstance(text, str):
                texts.append(text)
    return texts


def responses_messages(kwargs: Mapping[str, Any]) -> list[Any] | None:
    """The prompt of a Responses request as chat messages: ``instructions`` as the system
    message, then ``input`` (text is one user message; a list of items is taken as is)."""
    messages: list[Any] = []
    instructions = kwargs.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    given = kwargs.get("input")
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
    elif isinstance(given, list):
        messages.extend(given)
    return messages or None


READER: Final = ResponsesReader()
