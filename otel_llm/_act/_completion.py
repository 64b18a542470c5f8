"""The assembled answer of one chat completion, streamed or not, read strictly.

Every field the answer is made of is checked for its JSON type: a chunk whose ``choices`` is a
number, whose ``content`` is a list or whose tool-call index is text is a
:class:`~otel_llm.MalformedStream` naming the field (transient: another attempt or source may
answer properly), never a ``TypeError`` from deep inside. A complete non-streamed answer of the
wrong shape is a :class:`~otel_llm.MalformedResponse` (permanent for that source: asking again
gets the same shape). Telemetry-only fields (``model``, ``id``, ``usage``) of the wrong type are
ignored rather than failing an otherwise good answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from otel_llm._measure._chunks import delta_has_output, stream_complete
from otel_llm._measure._response import ResponseFacts, Usage, text_or_none


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

    @property
    def facts(self) -> ResponseFacts:
        """What telemetry records of this answer."""
        reasons = (self.finish_reason,) if self.finish_reason else ()
        return ResponseFacts(self.response_model, self.response_id, reasons, self.usage)


@dataclass(slots=True)
class ToolCallParts:
    id: str | None = None
    name: str | None = None
    type: str = "function"
    arguments: list[str] = field(default_factory=list)


_JSON_TYPES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


_PLAIN = frozenset(("content", "role"))
"""The delta fields of the common chunk (:meth:`StreamAssembler._plain`)."""


class ShapeError(ValueError):
    """A field of an answer has the wrong JSON type (``where`` names it)."""

    def __init__(
        self, where: str, expected: str, value: Any = None, *, got: str | None = None
    ) -> None:
        self.where = where
        got = got or _JSON_TYPES.get(type(value), type(value).__name__)
        super().__init__(f"{where} is {got}, expected {expected}")


def expect(value: Any, kind: type | tuple[type, ...], where: str, expected: str) -> Any:
    """``value`` if it is ``None`` or of ``kind`` (never a bool for numbers), else ShapeError."""
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise ShapeError(where, expected, value)


class StreamAssembler:
    """Builds a :class:`Completion` from ``chat.completion.chunk`` objects.

    :meth:`feed` checks the chunk's shape and classifies it (the chunk rule) in the same pass: it
    returns ``True`` when the chunk carried generated output (content, reasoning or tool-call
    deltas) and raises :class:`ShapeError` when a field has the wrong type. Choice 0 is the
    answer; other choices (``n > 1``) are classified and must finish too (:attr:`complete`).
    """

    __slots__ = (
        "_finished",
        "_id",
        "_legacy",
        "_model",
        "_reasoning",
        "_refusal",
        "_seen",
        "_text",
        "_tools",
        "finish_reason",
        "usage",
    )

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._tools: dict[int, ToolCallParts] = {}
        self._legacy: ToolCallParts | None = None
        """The call of the legacy functions API (``function_call``), the answer's tool call
        only when it has no ``tool_calls`` (a server may send both, the same call twice)."""
        self._id: str | None = None
        self._model: str | None = None
        self._seen: set[int] = set()
        self._finished: set[int] = set()
        self.finish_reason: str | None = None
        self.usage: Usage | None = None

    @property
    def complete(self) -> bool:
        """True when the answer is complete by the one rule (:func:`stream_complete`)."""
        return stream_complete(self._seen, self._finished)

    def feed(self, chunk: Mapping[str, Any]) -> bool:
        """Take one chunk; True when it is an incremental chunk."""
        if self._model is None:
            self._model = text_or_none(chunk.get("model"))
            self._id = text_or_none(chunk.get("id"))
        usage = chunk.get("usage")
        if usage is not None and isinstance(usage, Mapping):
            self.usage = Usage.from_openai(usage, earlier=self.usage)
        choices = chunk.get("choices")
        if choices.__class__ is list and len(choices) == 1:
            plain = self._plain(choices[0])
            if plain is not None:
                return plain
        choices = expect(choices, list, "choices", "a list")
        incremental = False
        for position, choice in enumerate(choices or ()):
            if not isinstance(choice, dict):
                raise ShapeError(f"choices[{position}]", "an object", choice)
            if self._choice(choice, position):
                incremental = True
        return incremental

    def _plain(self, choice: Any) -> bool | None:
        """The common chunk, read in one pass: one choice, an integer index, no finish reason,
        a delta of text content (and perhaps the role) only. ``None`` for anything else, which
        :meth:`_choice` then reads field by field (the same result for these, at a third of
        the cost)."""
        if choice.__class__ is not dict or choice.get("finish_reason") is not None:
            return None
        index = choice.get("index", 0)
        delta = choice.get("delta")
        if index.__class__ is not int or delta.__class__ is not dict or not delta.keys() <= _PLAIN:
            return None
        content = delta.get("content")
        if content is not None and content.__class__ is not str:
            return None
        self._seen.add(index)
        if not content:
            return False  # the chunk rule (delta_has_output): no text is no output
        if index == 0:
            self._text.append(content)
        return True

    def _choice(self, choice: Mapping[str, Any], position: int) -> bool:
        where = f"choices[{position}]"
        index = expect(choice.get("index", 0), int, f"{where}.index", "an integer")
        index = 0 if index is None else index
        self._seen.add(index)
        reason = expect(choice.get("finish_reason"), str, f"{where}.finish_reason", "a string")
        if reason:
            self._finished.add(index)
            if index == 0:
                self.finish_reason = reason
        delta = expect(choice.get("delta"), dict, f"{where}.delta", "an object")
        if not delta:
            return False
        content = expect(delta.get("content"), str, f"{where}.delta.content", "a string")
        reasoning = expect(
            delta.get("reasoning_content"), str, f"{where}.delta.reasoning_content", "a string"
        ) or expect(delta.get("reasoning"), str, f"{where}.delta.reasoning", "a string")
        tool_calls = expect(delta.get("tool_calls"), list, f"{where}.delta.tool_calls", "a list")
        function_call = delta.get("function_call")  # the legacy functions API: rare
        if function_call is not None:
            expect(function_call, dict, f"{where}.delta.function_call", "an object")
            if index == 0 and function_call:
                self._add_function_call(function_call, f"{where}.delta.function_call")
        refusal = delta.get("refusal")  # rare: checked only when present
        if refusal is not None:
            expect(refusal, str, f"{where}.delta.refusal", "a string")
            if index == 0 and refusal:
                self._refusal.append(refusal)
        if index == 0:
            if content:
                self._text.append(content)
            if reasoning:
                self._reasoning.append(reasoning)
            if tool_calls:
                self._add_tool_deltas(tool_calls, f"{where}.delta.tool_calls")
        return delta_has_output(delta)  # the chunk rule, on a delta whose types are checked

    def _add_tool_deltas(self, deltas: list[Any], where: str) -> None:
        for position, delta in enumerate(deltas):
            at = f"{where}[{position}]"
            if not isinstance(delta, dict):
                raise ShapeError(at, "an object", delta)
            index = expect(delta.get("index", position), int, f"{at}.index", "an integer")
            parts = self._tools.setdefault(position if index is None else index, ToolCallParts())
            parts.id = expect(delta.get("id"), str, f"{at}.id", "a string") or parts.id
            parts.type = expect(delta.get("type"), str, f"{at}.type", "a string") or parts.type
            function = expect(delta.get("function"), dict, f"{at}.function", "an object")
            if function:
                name = expect(function.get("name"), str, f"{at}.function.name", "a string")
                parts.name = name or parts.name
                arguments = expect(
                    function.get("arguments"), str, f"{at}.function.arguments", "a string"
                )
                if arguments:
                    parts.arguments.append(arguments)

    def _add_function_call(self, delta: Mapping[str, Any], where: str) -> None:
        """A piece of the one call of the legacy functions API (``functions=``), a tool call
        without an id."""
        if self._legacy is None:
            self._legacy = ToolCallParts()
        parts = self._legacy
        name = expect(delta.get("name"), str, f"{where}.name", "a string")
        parts.name = name or parts.name
        arguments = expect(delta.get("arguments"), str, f"{where}.arguments", "a string")
        if arguments:
            parts.arguments.append(arguments)

    def _calls(self) -> list[ToolCallParts]:
        """The answer's tool calls, in order: its ``tool_calls``, else the legacy call."""
        calls = [parts for _, parts in sorted(self._tools.items())]
        return calls or ([self._legacy] if self._legacy is not None else [])

    @property
    def refusal(self) -> str | None:
        """The refusal the model streamed (``delta.refusal``) instead of an answer, if any."""
        return "".join(self._refusal) or None

    def result(self) -> Completion:
        """The assembled completion."""
        return Completion(
            text="".join(self._text),
            reasoning="".join(self._reasoning) or None,
            tool_calls=tuple(
                ToolCall(parts.id, parts.name, "".join(parts.arguments), parts.type)
                for parts in self._calls()
            ),
            finish_reason=self.finish_reason,
            usage=self.usage,
            response_model=self._model,
            response_id=self._id,
        )


def completion_from_json(payload: Mapping[str, Any]) -> Completion:
    """A :class:`Completion` from a non-streamed ``chat.completion`` object; ShapeError when
    the answer's fields have the wrong types."""
    choices = expect(payload.get("choices"), list, "choices", "a list")
    if not choices:
        raise ShapeError("choices", "a non-empty list", choices)
    first = choices[0]
    if not isinstance(first, dict):
        raise ShapeError("choices[0]", "an object", first)
    message = expect(first.get("message"), dict, "choices[0].message", "an object") or {}
    calls = expect(message.get("tool_calls"), list, "choices[0].message.tool_calls", "a list")
    tool_calls = []
    for position, call in enumerate(calls or ()):
        at = f"choices[0].message.tool_calls[{position}]"
        if not isinstance(call, dict):
            raise ShapeError(at, "an object", call)
        function = expect(call.get("function"), dict, f"{at}.function", "an object") or {}
        tool_calls.append(
            ToolCall(
                expect(call.get("id"), str, f"{at}.id", "a string"),
                expect(function.get("name"), str, f"{at}.function.name", "a string"),
                expect(function.get("arguments"), str, f"{at}.function.arguments", "a string")
                or "",
                expect(call.get("type"), str, f"{at}.type", "a string") or "function",
            )
        )
    where = "choices[0].message"
    legacy = expect(message.get("function_call"), dict, f"{where}.function_call", "an object")
    if legacy and not tool_calls:  # the legacy functions API (``functions=``): its one call
        at = f"{where}.function_call"
        tool_calls.append(
            ToolCall(
                None,
                expect(legacy.get("name"), str, f"{at}.name", "a string"),
                expect(legacy.get("arguments"), str, f"{at}.arguments", "a string") or "",
            )
        )
    reasoning = expect(
        message.get("reasoning_content"), str, f"{where}.reasoning_content", "a string"
    ) or expect(message.get("reasoning"), str, f"{where}.reasoning", "a string")
    usage = payload.get("usage")
    return Completion(
        text=expect(message.get("content"), str, f"{where}.content", "a string") or "",
        reasoning=reasoning or None,
        tool_calls=tuple(tool_calls),
        finish_reason=expect(
            first.get("finish_reason"), str, "choices[0].finish_reason", "a string"
        ),
        usage=Usage.from_openai(usage) if isinstance(usage, Mapping) else None,
        response_model=text_or_none(payload.get("model")),
        response_id=text_or_none(payload.get("id")),
    )


@dataclass(frozen=True, slots=True)
class Embeddings:
    """What one embeddings attempt produced."""

    vectors: tuple[tuple[float, ...], ...]
    usage: Usage | None = None
    response_model: str | None = None

    @property
    def facts(self) -> ResponseFacts:
        """What telemetry records of this answer."""
        return ResponseFacts(model=self.response_model, usage=self.usage)


def embeddings_from_json(payload: Mapping[str, Any], *, inputs: int | None) -> Embeddings:
    """An :class:`Embeddings` from an OpenAI ``list`` of ``embedding`` objects: one float
    vector per input (``inputs``, when known), all of one length; else ShapeError."""
    data = expect(payload.get("data"), list, "data", "a list")
    if not data:
        raise ShapeError("data", "a non-empty list", data)
    items = []
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            raise ShapeError(f"data[{position}]", "an object", item)
        index = expect(item.get("index", position), int, f"data[{position}].index", "an integer")
        vector = item.get("embedding")
        if not isinstance(vector, list) or not vector:
            raise ShapeError(f"data[{position}].embedding", "a non-empty list of numbers", vector)
        for value in vector:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ShapeError(f"data[{position}].embedding[]", "a number", value)
        items.append((position if index is None else index, vector))
    items.sort(key=lambda pair: pair[0])
    if inputs is not None and len(items) != inputs:
        raise ShapeError("data", f"{inputs} (one vector per input)", got=f"{len(items)} vectors")
    if len({len(vector) for _, vector in items}) > 1:
        raise ShapeError("data[].embedding", "vectors of one length", got="of mixed lengths")
    usage = payload.get("usage")
    return Embeddings(
        vectors=tuple(tuple(float(x) for x in vector) for _, vector in items),
        usage=Usage.from_openai(usage) if isinstance(usage, Mapping) else None,
        response_model=text_or_none(payload.get("model")),
    )
