"""The assembled answer of one chat completion, streamed or not."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from otel_llm.measure._chunks import delta_has_output


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage as the provider reported it."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    total_tokens: int | None = None

    @classmethod
    def from_openai(cls, usage: Mapping[str, Any]) -> Usage:
        """From an OpenAI ``usage`` object."""
        details = usage.get("completion_tokens_details") or {}
        reasoning = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
        return cls(
            input_tokens=_int(usage.get("prompt_tokens")),
            output_tokens=_int(usage.get("completion_tokens")),
            reasoning_tokens=_int(reasoning),
            total_tokens=_int(usage.get("total_tokens")),
        )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model asked for; ``arguments`` is the raw JSON text."""

    id: str | None
    name: str | None
    arguments: str
    type: str = "function"


@dataclass(frozen=True, slots=True)
class Completion:
    """What one attempt produced."""

    text: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    response_model: str | None = None
    response_id: str | None = None


@dataclass(slots=True)
class _ToolCallParts:
    id: str | None = None
    name: str | None = None
    type: str = "function"
    arguments: list[str] = field(default_factory=list)


class StreamAssembler:
    """Builds a :class:`Completion` from ``chat.completion.chunk`` objects.

    :meth:`feed` also classifies the chunk (SPEC §1) in the same pass: it returns ``True`` when
    the chunk carried generated output (content, reasoning or tool-call deltas).
    """

    __slots__ = (
        "_id",
        "_model",
        "_reasoning",
        "_text",
        "_tools",
        "finish_reason",
        "usage",
    )

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._tools: dict[int, _ToolCallParts] = {}
        self._id: str | None = None
        self._model: str | None = None
        self.finish_reason: str | None = None
        self.usage: Usage | None = None

    def feed(self, chunk: Mapping[str, Any]) -> bool:
        """Take one chunk; True when it is an incremental chunk."""
        if self._model is None:
            self._model = chunk.get("model") or None
            self._id = chunk.get("id") or None
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self.usage = Usage.from_openai(usage)
        incremental = False
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping):
                continue
            if choice.get("index", 0) != 0:
                incremental = incremental or delta_has_output(choice.get("delta"))
                continue
            reason = choice.get("finish_reason")
            if reason:
                self.finish_reason = reason
            delta = choice.get("delta")
            if not isinstance(delta, Mapping):
                continue
            content = delta.get("content")
            if content:
                self._text.append(content)
                incremental = True
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                self._reasoning.append(reasoning)
                incremental = True
            tool_calls = delta.get("tool_calls")
            if tool_calls:
                self._add_tool_deltas(tool_calls)
                incremental = True
        return incremental

    def _add_tool_deltas(self, deltas: Any) -> None:
        for position, delta in enumerate(deltas):
            if not isinstance(delta, Mapping):
                continue
            parts = self._tools.setdefault(delta.get("index", position), _ToolCallParts())
            parts.id = delta.get("id") or parts.id
            parts.type = delta.get("type") or parts.type
            function = delta.get("function")
            if isinstance(function, Mapping):
                parts.name = function.get("name") or parts.name
                arguments = function.get("arguments")
                if arguments:
                    parts.arguments.append(arguments)

    def result(self) -> Completion:
        """The assembled completion."""
        return Completion(
            text="".join(self._text),
            reasoning="".join(self._reasoning) or None,
            tool_calls=tuple(
                ToolCall(parts.id, parts.name, "".join(parts.arguments), parts.type)
                for _, parts in sorted(self._tools.items())
            ),
            finish_reason=self.finish_reason,
            usage=self.usage,
            response_model=self._model,
            response_id=self._id,
        )


def completion_from_json(payload: Mapping[str, Any]) -> Completion:
    """A :class:`Completion` from a non-streamed ``chat.completion`` object."""
    choices = payload.get("choices") or []
    first: Mapping[str, Any] = choices[0] if choices and isinstance(choices[0], Mapping) else {}
    message = first.get("message") or {}
    tool_calls = tuple(
        ToolCall(
            call.get("id"),
            (call.get("function") or {}).get("name"),
            (call.get("function") or {}).get("arguments") or "",
            call.get("type") or "function",
        )
        for call in (message.get("tool_calls") or ())
        if isinstance(call, Mapping)
    )
    usage = payload.get("usage")
    return Completion(
        text=message.get("content") or "",
        reasoning=message.get("reasoning_content") or message.get("reasoning") or None,
        tool_calls=tool_calls,
        finish_reason=first.get("finish_reason"),
        usage=Usage.from_openai(usage) if isinstance(usage, Mapping) else None,
        response_model=payload.get("model"),
        response_id=payload.get("id"),
    )


@dataclass(frozen=True, slots=True)
class Embeddings:
    """What one embeddings attempt produced."""

    vectors: tuple[tuple[float, ...], ...]
    usage: Usage | None = None
    response_model: str | None = None


def embeddings_from_json(payload: Mapping[str, Any]) -> Embeddings:
    """An :class:`Embeddings` from an OpenAI ``list`` of ``embedding`` objects."""
    data = sorted(
        (item for item in payload.get("data") or () if isinstance(item, Mapping)),
        key=lambda item: item.get("index", 0),
    )
    usage = payload.get("usage")
    return Embeddings(
        vectors=tuple(tuple(float(x) for x in item.get("embedding") or ()) for item in data),
        usage=Usage(
            input_tokens=_int(usage.get("prompt_tokens")),
            total_tokens=_int(usage.get("total_tokens")),
        )
        if isinstance(usage, Mapping)
        else None,
        response_model=payload.get("model"),
    )
