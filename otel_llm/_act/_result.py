"""What a call returns to the caller."""

from __future__ import annotations

from dataclasses import dataclass

from otel_llm._act._completion import Completion, Embeddings, ToolCall
from otel_llm._act._stats import CallStats
from otel_llm._measure._response import Usage


@dataclass(frozen=True, slots=True)
class ChatResult:
    """The full answer of one call and the :class:`CallStats` of how it was obtained."""

    text: str
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    usage: Usage | None
    response_model: str | None
    response_id: str | None
    source: str
    stats: CallStats

    @classmethod
    def of(cls, completion: Completion, source: str, stats: CallStats) -> ChatResult:
        """Combine the winning attempt's completion with the call's stats."""
        return cls(
            text=completion.text,
            reasoning=completion.reasoning,
            tool_calls=completion.tool_calls,
            finish_reason=completion.finish_reason,
            usage=completion.usage,
            response_model=completion.response_model,
            response_id=completion.response_id,
            source=source,
            stats=stats,
        )


@dataclass(frozen=True, slots=True)
class EmbeddingsResult:
    """The vectors of one embeddings call and its :class:`CallStats`."""

    vectors: tuple[tuple[float, ...], ...]
    usage: Usage | None
    response_model: str | None
    source: str
    stats: CallStats

    @classmethod
    def of(cls, answer: Embeddings, source: str, stats: CallStats) -> EmbeddingsResult:
        """Combine the winning attempt's vectors with the call's stats."""
        return cls(answer.vectors, answer.usage, answer.response_model, source, stats)
