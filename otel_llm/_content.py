"""Prompt and output content in telemetry: off unless the standard variable asks for it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from otel_llm._env import OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, env_flag


def capture_content() -> bool:
    """True when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true``."""
    return env_flag(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)


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
