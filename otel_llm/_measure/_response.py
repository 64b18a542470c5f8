"""What an answer says about itself — model, id, finish reasons, usage — read once, for the
client's assembler and the wrappers alike, and written as GenAI span attributes in one place.

OpenAI-shaped answers come as dicts (the client parses JSON) or as SDK objects (the wrapped
``openai`` SDK); :func:`field_of` reads either, so usage is parsed by one function and the
response attributes are built by one function, whoever read the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry.util.types import AttributeValue

from otel_llm import _semconv as sc

MAPPING_TYPES: dict[type, bool] = {dict: True}
"""Whether a type is a Mapping, remembered by :func:`is_mapping`: ``isinstance(x, Mapping)``
is an ABC check that costs several times a ``getattr`` on SDK objects, and this runs several
times per chunk. The per-chunk paths look a type up here before calling :func:`is_mapping`."""


def is_mapping(item: Any) -> bool:
    """True for mappings (dicts), False for objects — remembered per type."""
    kind = type(item)
    mapping = MAPPING_TYPES.get(kind)
    if mapping is None:
        mapping = MAPPING_TYPES[kind] = isinstance(item, Mapping)
    return mapping


def field_of(item: Any, name: str) -> Any:
    """``item[name]`` for mappings, ``item.name`` for objects, ``None`` when absent."""
    mapping = MAPPING_TYPES.get(type(item))  # per field of every chunk: a lookup, not a call
    if mapping is None:
        mapping = is_mapping(item)
    return item.get(name) if mapping else getattr(item, name, None)


def items_of(value: Any) -> list[Any] | tuple[Any, ...]:
    """``value`` when it is a list or tuple, else nothing to iterate (a field of the wrong
    type in an answer is ignored, never fatal)."""
    return value if isinstance(value, list | tuple) else ()


_GEMINI_USAGE: Final = (
    ("prompt_token_count", "promptTokenCount"),
    ("candidates_token_count", "candidatesTokenCount"),
    ("thoughts_token_count", "thoughtsTokenCount"),
    ("total_token_count", "totalTokenCount"),
    ("cached_content_token_count", "cachedContentTokenCount"),
)
"""Gemini's usage counts as the SDK and as the JSON name them, in the order
:meth:`Usage.from_gemini` reads them from a mapping."""


MOST_TOKENS: Final = 2**32 - 1
"""The largest token count read from an answer: more than any model's context by orders of
magnitude. A count past it (``2**70``), or a negative one, is no count a provider can mean and
is left out: kept, it would charge the source's admission a debt no refill repays, and a
cumulative counter of it (hedge waste) past 64 bits fails every later OTLP metrics export."""


def _count(value: Any) -> int | None:
    """A token count: an integer (a plain ``int`` decided at once), never a bool, from 0 to
    :data:`MOST_TOKENS`."""
    if value.__class__ is not int:
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        value = int(value)
    return value if 0 <= value <= MOST_TOKENS else None


_PLAIN_COUNTS: Final = frozenset((int, type(None)))
"""The types :func:`_count` keeps as they are when in range (checked for a whole usage at
once)."""


def _newer(value: int | None, earlier: int | None) -> int | None:
    return earlier if value is None else value


@dataclass(slots=True)
class Usage:
    """Token usage as the provider reported it. Treated as a value: never changed once built,
    a changed count is a new ``Usage``. (Not a frozen dataclass: a Gemini stream builds two per
    response, and a frozen one costs four times as much to build.)"""

    input_tokens: int | None = None
    """Every input token, those read from or written to a cache included (the convention's
    rule: an API that counts cached tokens apart, as Anthropic's does, has them added here)."""
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    total_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None

    @classmethod
    def from_openai(cls, usage: Any, *, earlier: Usage | None = None) -> Usage:
        """From an OpenAI ``usage`` object, a dict or an SDK object (values of the wrong type
        are left out: usage is telemetry, never a reason to fail an answer).

        ``earlier`` is the usage a previous frame of the same stream reported: a count this
        frame leaves out keeps its earlier value (providers may spread usage over frames).
        """
        details = field_of(usage, "completion_tokens_details")
        reasoning = field_of(details, "reasoning_tokens") if details is not None else None
        prompt_details = field_of(usage, "prompt_tokens_details")
        cached = field_of(prompt_details, "cached_tokens") if prompt_details is not None else None
        read = cls(
            input_tokens=_count(field_of(usage, "prompt_tokens")),
            output_tokens=_count(field_of(usage, "completion_tokens")),
            reasoning_tokens=_count(reasoning),
            total_tokens=_count(field_of(usage, "total_tokens")),
            cache_read_tokens=_count(cached),
        )
        return read if earlier is None else earlier.updated(read)

    @classmethod
    def from_responses(cls, usage: Any) -> Usage:
        """From the OpenAI Responses API's ``usage`` (``input_tokens``, ``output_tokens``,
        their details)."""
        details = field_of(usage, "output_tokens_details")
        input_details = field_of(usage, "input_tokens_details")
        return cls(
            input_tokens=_count(field_of(usage, "input_tokens")),
            output_tokens=_count(field_of(usage, "output_tokens")),
            reasoning_tokens=_count(field_of(details, "reasoning_tokens")) if details else None,
            total_tokens=_count(field_of(usage, "total_tokens")),
            cache_read_tokens=(
                _count(field_of(input_details, "cached_tokens")) if input_details else None
            ),
            cache_creation_tokens=(
                _count(field_of(input_details, "cache_write_tokens")) if input_details else None
            ),
        )

    @classmethod
    def from_anthropic(cls, usage: Any, *, earlier: Usage | None = None) -> Usage:
        """From an Anthropic ``usage`` (``message_start``'s or ``message_delta``'s, which
        repeats or updates counts; its thinking tokens are the reasoning tokens). Anthropic
        counts cache reads and writes apart from ``input_tokens``; here they are added to it,
        as the convention asks."""
        plain = _count(field_of(usage, "input_tokens"))
        read_tokens = _count(field_of(usage, "cache_read_input_tokens"))
        created = _count(field_of(usage, "cache_creation_input_tokens"))
        if earlier is not None:  # a later frame may leave a count out: keep the earlier one
            read_tokens = _newer(read_tokens, earlier.cache_read_tokens)
            created = _newer(created, earlier.cache_creation_tokens)
        parts = (plain, read_tokens, created)
        total_input = None if plain is None else sum(part or 0 for part in parts)
        details = field_of(usage, "output_tokens_details")
        read = cls(
            input_tokens=total_input,
            output_tokens=_count(field_of(usage, "output_tokens")),
            reasoning_tokens=_count(field_of(details, "thinking_tokens")) if details else None,
            cache_read_tokens=read_tokens,
            cache_creation_tokens=created,
        )
        return read if earlier is None else earlier.updated(read)

    @classmethod
    def from_gemini(cls, usage: Any) -> Usage:
        """From Gemini's ``usageMetadata`` (the SDK's ``usage_metadata``, snake or camel
        case): output is the candidates' tokens plus the thoughts' (the convention's output
        includes reasoning)."""
        if is_mapping(usage):
            # the API's JSON names are camelCase, the SDK's fields snake_case
            prompt, candidates, thoughts, total, cached = [
                _count(usage.get(snake) if usage.get(snake) is not None else usage.get(camel))
                for snake, camel in _GEMINI_USAGE
            ]
        else:  # an SDK object has only the snake_case names (asking for an alias raises);
            # read straight, as every response of a stream carries its usage
            prompt = getattr(usage, "prompt_token_count", None)
            candidates = getattr(usage, "candidates_token_count", None)
            thoughts = getattr(usage, "thoughts_token_count", None)
            total = getattr(usage, "total_token_count", None)
            cached = getattr(usage, "cached_content_token_count", None)
            kinds = {
                prompt.__class__,
                candidates.__class__,
                thoughts.__class__,
                total.__class__,
                cached.__class__,
            }
            # ints from 0 to MOST_TOKENS: one OR of them all tells (per chunk), as a negative
            # count makes it negative and one past MOST_TOKENS sets a higher bit
            plain = (
                kinds <= _PLAIN_COUNTS
                and 0
                <= (
                    (prompt or 0)
                    | (candidates or 0)
                    | (thoughts or 0)
                    | (total or 0)
                    | (cached or 0)
                )
                <= MOST_TOKENS
            )
            if not plain:  # the careful rule
                counts = (prompt, candidates, thoughts, total, cached)
                prompt, candidates, thoughts, total, cached = map(_count, counts)
        output = None
        if candidates is not None or thoughts is not None:
            output = (candidates or 0) + (thoughts or 0)
        return cls(prompt, output, thoughts, total, cached)

    def updated(self, newer: Usage) -> Usage:
        """``newer``'s counts, and this usage's where ``newer`` has none — except an earlier
        total once ``newer`` changes the parts without a total of its own: it would be stale,
        and :attr:`total` adds the parts up instead."""
        parts_changed = newer.input_tokens is not None or newer.output_tokens is not None
        earlier_total = None if parts_changed else self.total_tokens
        # each count newer's, else this one's (inline: a stream's usage can update per chunk)
        return Usage(
            self.input_tokens if newer.input_tokens is None else newer.input_tokens,
            self.output_tokens if newer.output_tokens is None else newer.output_tokens,
            self.reasoning_tokens if newer.reasoning_tokens is None else newer.reasoning_tokens,
            earlier_total if newer.total_tokens is None else newer.total_tokens,
            self.cache_read_tokens if newer.cache_read_tokens is None else newer.cache_read_tokens,
            (
                self.cache_creation_tokens
                if newer.cache_creation_tokens is None
                else newer.cache_creation_tokens
            ),
        )

    @property
    def total(self) -> int | None:
        """Total tokens (``None`` when the usage says nothing)."""
        if self.total_tokens is not None:
            return self.total_tokens
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)


@dataclass(frozen=True, slots=True)
class ResponseFacts:
    """The facts of one response that telemetry records (never its content)."""

    model: str | None = None
    response_id: str | None = None
    finish_reasons: tuple[str, ...] = ()
    """One per choice, in choice order (``error`` where a choice was cut short)."""
    usage: Usage | None = None

    def attributes(self) -> dict[str, AttributeValue]:
        """The GenAI attributes of these facts (absent facts are left out)."""
        attrs: dict[str, AttributeValue] = {}
        if self.model:
            attrs[sc.GEN_AI_RESPONSE_MODEL] = self.model
        if self.response_id:
            attrs[sc.GEN_AI_RESPONSE_ID] = self.response_id
        if self.finish_reasons:
            attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] = self.finish_reasons
        usage = self.usage
        if usage is not None:
            for key, value in (
                (sc.GEN_AI_USAGE_INPUT_TOKENS, usage.input_tokens),
                (sc.GEN_AI_USAGE_OUTPUT_TOKENS, usage.output_tokens),
                (sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, usage.reasoning_tokens),
                (sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, usage.cache_read_tokens),
                (sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, usage.cache_creation_tokens),
            ):
                if value is not None:
                    attrs[key] = value
        return attrs


def text_or_none(value: Any) -> str | None:
    """``value`` when it is a non-empty string (model names and ids of the wrong type are
    ignored, not fatal)."""
    return value if isinstance(value, str) and value else None
