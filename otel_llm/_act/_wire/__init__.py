"""The wire formats the client speaks — one small object per API (:class:`Wire`), chosen once
per source by its provider: OpenAI-compatible chat completions (Azure OpenAI included), the
Anthropic Messages API, the Gemini API. The transport imports :class:`Wire`,
:class:`StreamReader`, :class:`WireRequest`, :func:`request_headers` and :func:`json_problem`
from here; a source finds its wire with :func:`wire_for`."""

from __future__ import annotations

from typing import Final

from otel_llm._act._wire._anthropic import ANTHROPIC
from otel_llm._act._wire._chat import CHAT, stream_error
from otel_llm._act._wire._format import (
    StreamReader,
    Wire,
    WireRequest,
    json_problem,
    request_headers,
)
from otel_llm._act._wire._gemini import GEMINI

WIRES: Final[dict[str, Wire]] = {wire.api: wire for wire in (CHAT, ANTHROPIC, GEMINI)}
"""Every wire format, by its name (a provider's ``api``)."""


def wire_for(api: str) -> Wire:
    """The wire format named ``api`` (``chat``, ``anthropic``, ``gemini``)."""
    return WIRES[api]


__all__ = [
    "WIRES",
    "StreamReader",
    "Wire",
    "WireRequest",
    "json_problem",
    "request_headers",
    "stream_error",
    "wire_for",
]
