"""Reading OpenAI-shaped chunks whatever their form: dicts, or the SDK's pydantic objects."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Classifier = Callable[[Any], bool]
"""Tells whether one streamed item is an incremental chunk (SPEC §1)."""

_OUTPUT = ("content", "reasoning_content", "reasoning", "tool_calls")


def field_of(item: Any, name: str) -> Any:
    """``item[name]`` for mappings, ``item.name`` for objects, ``None`` when absent."""
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


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
    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    text: list[str] = field(default_factory=list)

    def feed(self, chunk: Any) -> None:
        """Take what one OpenAI-shaped chunk says (unknown shapes are ignored)."""
        self._take(chunk, text_in="delta")

    def feed_completion(self, completion: Any) -> None:
        """Take a non-streamed ``chat.completion`` or an embeddings answer (dict or object)."""
        self._take(completion, text_in="message")

    def _take(self, answer: Any, *, text_in: str) -> None:
        if self.model is None:
            model = field_of(answer, "model")
            self.model = model if isinstance(model, str) and model else None
            response_id = field_of(answer, "id")
            self.response_id = response_id if isinstance(response_id, str) else None
        usage = field_of(answer, "usage")
        if usage is not None:
            self.note_usage(usage)
        for choice in field_of(answer, "choices") or ():
            reason = field_of(choice, "finish_reason")
            if isinstance(reason, str) and reason:
                index = field_of(choice, "index")
                self.finish_reasons[index if isinstance(index, int) else 0] = reason
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
