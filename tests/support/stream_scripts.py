"""OpenAI-shaped chunk streams on a fake metering clock, for the wrapped-stream tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from otel_llm.testing import FakeClock

__all__ = ["FakeClock", "chunk", "scripted"]


def chunk(text: str | None = None, finish: str | None = None, **delta: Any) -> dict[str, Any]:
    if text is not None:
        delta["content"] = text
    return {
        "id": "c1",
        "model": "sim-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def scripted(clock: FakeClock, gaps_ms: list[float], *, finish: bool = True) -> Iterator[Any]:
    """A provider stream: a role chunk, then one content chunk after each gap, then the end."""
    yield chunk(role="assistant")
    for index, gap in enumerate(gaps_ms):
        clock.advance(gap)
        yield chunk(f"w{index} ")
    if finish:
        yield chunk(finish="stop")
        yield {"id": "c1", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3}}
