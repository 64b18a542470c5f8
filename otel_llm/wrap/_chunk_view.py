"""Reading OpenAI-shaped chunks whatever their form: dicts, or the SDK's pydantic objects."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from otel_llm.measure._chunks import stream_complete

Classifier = Callable[[Any], bool]
"""Tells whether one streamed item is an incremental chunk (SPEC §1)."""
FinishReason = Callable[[Any], "str | None"]
"""Returns the finish reason an item carries (``None`` for items that carry none)."""

_OUTPUT = ("content", "reasoning_content", "reasoning", "tool_calls")


_MAPPING_TYPES: dict[type, bool] = {dict: True}
"""Whether a type is a Mapping, remembered: ``isinstance(x, Mapping)`` is an ABC check that
costs several times a ``getattr`` on SDK objects, and this runs several times per chunk."""


_READ_WITH_DEFAULTS: set[type] = set()
"""Object types that lacked a field once: read with defaults from then on."""


def field_of(item: Any, name: str) -> Any:
    """``item[name]`` for mappings, ``item.name`` for objects, ``None`` when absent."""
    kind = type(item)
    mapping = _MAPPING_TYPES.get(kind)
    if mapping is None:
        mapping = _MAPPING_TYPES[kind] = isinstance(item, Mapping)
    return item.get(name) if mapping else getattr(item, name, None)


def _index(choice: Any) -> int:
    """A choice's ``index`` (0 when it has none, or not an integer)."""
    index = field_of(choice, "index")
    return index if isinstance(index, int) and not isinstance(index, bool) else 0


def openai_classifier(chunk: Any) -> bool:
    """The incremental-chunk rule for OpenAI ``chat.completion.chunk`` items, dict or object:
    non-empty content, reasoning_content/reasoning or tool-call deltas."""
    for choice in field_of(chunk, "choices") or ():
        delta = field_of(choice, "delta")
        if delta is None:
            continue
        for name in _OUTPUT:
            if field_of(delta, name):
                return True
    return False


@dataclass(slots=True)
class ResponseNotes:
    """What a stream said about its response: model, id, finish reasons, usage, and — only
    when content capture is on — the text."""

    capture_text: bool = False
    model: str | None = None
    response_id: str | None = None
    finish_reasons: dict[int, str] = field(default_factory=dict)
    choices_seen: set[int] = field(default_factory=set)
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    text: list[str] = field(default_factory=list)

    def feed(self, chunk: Any) -> None:
        """Take what one OpenAI-shaped chunk says (unknown shapes are ignored)."""
        self._take(chunk, text_in="delta")

    def feed_and_classify(self, chunk: Any) -> bool:
        """:meth:`feed` and :func:`openai_classifier` in one pass over the chunk: the hot path
        of wrapped OpenAI streams.

        SDK objects are read with plain attribute access, the cheapest read there is. An object
        that lacks a field (the SDK builds chunks without validation, so a frame without
        ``choices`` has no such attribute) is read again the careful way, and so is every later
        chunk of its type. Everything done before such a retry is idempotent; text capture,
        which is not, always takes the careful path.
        """
        if self.model is None:
            self._identify(chunk)
        kind = type(chunk)
        mapping = _MAPPING_TYPES.get(kind)
        if mapping is None:
            mapping = _MAPPING_TYPES[kind] = isinstance(chunk, Mapping)
        if mapping or self.capture_text or kind in _READ_WITH_DEFAULTS:
            return self._feed_carefully(chunk)
        try:
            usage = chunk.usage
            if usage is not None:
                self.note_usage(usage)
            incremental = False
            for choice in chunk.choices or ():
                index = choice.index
                self.choices_seen.add(index if index.__class__ is int else 0)
                delta = choice.delta
                if delta is not None and not incremental:
                    incremental = bool(
                        delta.content
                        or delta.tool_calls
                        or getattr(delta, "reasoning_content", None)
                        or getattr(delta, "reasoning", None)
                    )
                reason = choice.finish_reason
                if reason:
                    self._finish(choice, reason)
            return incremental
        except AttributeError:
            _READ_WITH_DEFAULTS.add(kind)  # no second exception per chunk for this type
            return self._feed_carefully(chunk)

    def _feed_carefully(self, chunk: Any) -> bool:
        """The careful read: dicts, objects, and any mix of the two at every level."""
        self._take(chunk, text_in="delta")
        return openai_classifier(chunk)

    def _identify(self, answer: Any) -> None:
        model = field_of(answer, "model")
        self.model = model if isinstance(model, str) and model else None
        response_id = field_of(answer, "id")
        self.response_id = response_id if isinstance(response_id, str) else None

    def _finish(self, choice: Any, reason: Any) -> None:
        if isinstance(reason, str):
            self.finish_reasons[_index(choice)] = reason

    @property
    def complete(self) -> bool:
        """Whether the stream is complete by the one rule (``stream_complete``)."""
        return stream_complete(self.choices_seen, self.finish_reasons.keys())

    def feed_completion(self, completion: Any) -> None:
        """Take a non-streamed ``chat.completion`` or an embeddings answer (dict or object)."""
        self._take(completion, text_in="message")

    def _take(self, answer: Any, *, text_in: str) -> None:
        if self.model is None:
            self._identify(answer)
        usage = field_of(answer, "usage")
        if usage is not None:
            self.note_usage(usage)
        for choice in field_of(answer, "choices") or ():
            self.choices_seen.add(_index(choice))
            reason = field_of(choice, "finish_reason")
            if reason:
                self._finish(choice, reason)
            if self.capture_text:
                content = field_of(field_of(choice, text_in), "content")
                if isinstance(content, str):
                    self.text.append(content)

    def note_usage(self, usage: Any) -> None:
        """Record an OpenAI ``usage`` object."""
        prompt = field_of(usage, "prompt_tokens")
        completion = field_of(usage, "completion_tokens")
        details = field_of(usage, "completion_tokens_details")
        reasoning = field_of(details, "reasoning_tokens") if details is not None else None
        self.input_tokens = prompt if isinstance(prompt, int) else self.input_tokens
        self.output_tokens = completion if isinstance(completion, int) else self.output_tokens
        self.reasoning_tokens = reasoning if isinstance(reasoning, int) else self.reasoning_tokens
