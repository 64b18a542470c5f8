"""Prompt and output content in telemetry: off unless the standard variable asks for it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from otel_llm._env import OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, env_text

_ON_SPANS: Final = frozenset({"true", "span_only", "span_and_event"})
"""The values (any case) that put content on spans: ``true``, the variable's first form, and
the capturing modes of OpenTelemetry's GenAI utilities that record it on spans (``EVENT_ONLY``
and ``NO_CONTENT`` do not; otel-llm records content on call spans only)."""


def capture_content() -> bool:
    """True when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` asks for content on
    spans: ``true``, ``SPAN_ONLY`` or ``SPAN_AND_EVENT``."""
    return (env_text(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT) or "").lower() in _ON_SPANS


def _message(message: Any) -> dict[str, Any]:
    if isinstance(message, dict):
        role, content = message.get("role"), message.get("content")
    else:
        role, content = getattr(message, "role", None), getattr(message, "content", None)
    parts: list[dict[str, Any]]
    if isinstance(content, str):
        parts = [{"type": "text", "content": content}]
    elif isinstance(content, list):
        parts = [
            {"type": "text", "content": part.get("text")}
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
    else:
        parts = []
    return {"role": role, "parts": parts}


def input_messages(messages: Sequence[Any]) -> str:
    """``gen_ai.input.messages`` as JSON (GenAI convention: role and parts)."""
    return json.dumps([_message(m) for m in messages], ensure_ascii=False)


def output_messages(text: str, finish_reason: str | None) -> str:
    """``gen_ai.output.messages`` as JSON for one assistant answer."""
    return json.dumps(
        [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": text}],
                "finish_reason": finish_reason,
            }
        ],
        ensure_ascii=False,
    )
