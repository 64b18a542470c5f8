"""Reading OpenAI-shaped chunks whatever their form: dicts, or the SDK's pydantic objects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from otel_llm._measure._chunks import delta_has_output, is_incremental, stream_complete
from otel_llm._measure._response import (
    ResponseFacts,
    Usage,
    field_of,
    is_mapping,
    text_or_none,
)

Classifier = Callable[[Any], bool]
"""Tells whether one streamed item is an incremental chunk (the chunk rule)."""
FinishReason = Callable[[Any], "str | None"]
"""Returns the finish reason an item carries (``None`` for items that carry none)."""


class StreamReader(Protocol):
    """How the items of one API's streams, and its non-streamed answers, are read: the chunk
    rule of that API, and what each item says about the response.

    Every SDK other than OpenAI's chat completions brings one (the OpenAI chat path has its own
    fused reader, the hot path of :class:`ResponseNotes`). A reader never raises on an item it
    does not understand: it notes nothing and says it is not a chunk.
    """

    @property
    def knows_finish(self) -> bool:
        """Whether the API always reports a finish reason, so a stream that ends without one
        was cut short."""
        ...

    def read(self, item: Any, notes: ResponseNotes) -> bool:
        """Note what one streamed ``item`` says; ``True`` when it is an incremental chunk."""
        ...

    def read_answer(self, answer: Any, notes: ResponseNotes) -> None:
        """Note what a complete (non-streamed) answer says."""
        ...

    def complete(self, notes: ResponseNotes) -> bool:
        """Whether a stream that said ``notes`` is complete by the API's rule (most APIs:
        :attr:`ResponseNotes.complete`, a finish reason for every choice streamed)."""
        ...


_READ_DIRECTLY: dict[type, bool] = {}
"""Per chunk type, whether the fused reader reads it with plain attribute access: not for
mappings, and not for an object type that lacked a field once (read with defaults from then
on). One lookup per chunk decides."""


def openai_classifier(chunk: Any) -> bool:
    """The incremental-chunk rule for OpenAI ``chat.completion.chunk`` items, dict or object
    (:func:`~otel_llm._measure._chunks.delta_has_output` for any choice)."""
    return is_incremental(chunk)


def _index(choice: Any) -> int:
    """A choice's ``index`` (0 when it has none, or not an integer)."""
    index = field_of(choice, "index")
    return index if isinstance(index, int) and not isinstance(index, bool) else 0


@dataclass(slots=True)
class ResponseNotes:
    """What a stream said about its response: model, id, finish reasons, usage, and — only
    when content capture is on — the text."""

    capture_text: bool = False
    model: str | None = None
    response_id: str | None = None
    finish_reasons: dict[int, str] = field(default_factory=dict)
    choices_seen: set[int] = field(default_factory=set)
    usage: Usage | None = None
    text: list[str] = field(default_factory=list)
    failure: tuple[str | None, str] | None = None
    """``(code, message)`` of a failure the stream reported as an event of its own (the
    Responses API's ``response.failed``) where the SDK raised nothing: the call failed."""

    def feed(self, chunk: Any) -> None:
        """Take what one OpenAI-shaped chunk says (unknown shapes are ignored)."""
        self._take(chunk, text_in="delta")

    def feed_and_classify(self, chunk: Any) -> bool:
        """:meth:`feed` and the chunk rule in one pass over the chunk: the hot path of wrapped
        OpenAI streams.

        SDK objects are read with plain attribute access, the cheapest read there is. An object
        that lacks a field (the SDK builds chunks without validation, so a frame without
        ``choices`` has no such attribute) is read again the careful way, and so is every later
        chunk of its type. Everything done before such a retry is idempotent; text capture,
        which is not, always takes the careful path.
        """
        if self.model is None:
            self._identify(chunk)
        kind = chunk.__class__
        direct = _READ_DIRECTLY.get(kind)
        if direct is None:
            direct = _READ_DIRECTLY[kind] = not is_mapping(chunk)
        if not direct or self.capture_text:
            return self._feed_carefully(chunk)
        try:
            usage = chunk.usage
            if usage is not None:
                self.usage = Usage.from_openai(usage, earlier=self.usage)
            incremental = False
            choices = chunk.choices
            if choices.__class__ is not list:  # the SDK's type; anything else the careful way
                if choices is not None:
                    raise AttributeError("choices")
                choices = ()
            for choice in choices:
                index = choice.index
                self.choices_seen.add(index if index.__class__ is int else 0)
                if not incremental:
                    delta = choice.delta
                    # content is output by the rule; most chunks stop at it, so it is read
                    # inline here (a call per chunk costs 1/3 of this method) and the rule
                    # itself decides every other chunk
                    content = delta.content if delta is not None else None
                    has_content = content.__class__ is str and bool(content)
                    incremental = has_content or delta_has_output(delta)
                reason = choice.finish_reason
                if reason:
                    self._finish(choice, reason)
            return incremental
        except AttributeError:
            _READ_DIRECTLY[kind] = False  # no second exception per chunk for this type
            return self._feed_carefully(chunk)

    def _feed_carefully(self, chunk: Any) -> bool:
        """The careful read: dicts, objects, and any mix of the two at every level."""
        self._take(chunk, text_in="delta")
        return is_incremental(chunk)

    def _identify(self, answer: Any) -> None:
        self.model = text_or_none(field_of(answer, "model"))
        response_id = field_of(answer, "id")
        self.response_id = response_id if isinstance(response_id, str) else None

    def _finish(self, choice: Any, reason: Any) -> None:
        if isinstance(reason, str):
            self.finish_reasons[_index(choice)] = reason

    @property
    def complete(self) -> bool:
        """Whether the stream is complete by the one rule (``stream_complete``)."""
        return stream_complete(self.choices_seen, self.finish_reasons.keys())

    def facts(self, *, cut_short: bool = False) -> ResponseFacts:
        """What the response said; a stream ``cut_short`` reports ``error`` as its finish
        reason when it reported none (the GenAI convention)."""
        reasons = tuple(reason for _, reason in sorted(self.finish_reasons.items()))
        if cut_short and not reasons:
            reasons = ("error",)
        return ResponseFacts(self.model, self.response_id, reasons, self.usage)

    def feed_completion(self, completion: Any) -> None:
        """Take a non-streamed ``chat.completion`` or an embeddings answer (dict or object)."""
        self._take(completion, text_in="message")

    def _take(self, answer: Any, *, text_in: str) -> None:
        if self.model is None:
            self._identify(answer)
        usage = field_of(answer, "usage")
        if usage is not None:
            self.usage = Usage.from_openai(usage, earlier=self.usage)
        choices = field_of(answer, "choices")
        if not isinstance(choices, list | tuple):  # none, or malformed: not a choice in it
            choices = ()
        for choice in choices:
            self.choices_seen.add(_index(choice))
            reason = field_of(choice, "finish_reason")
            if reason:
                self._finish(choice, reason)
            if self.capture_text:
                content = field_of(field_of(choice, text_in), "content")
                if isinstance(content, str):
                    self.text.append(content)
