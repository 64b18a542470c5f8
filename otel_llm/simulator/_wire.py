"""What one wire format is to the simulator: how a request names its model and prompt, and how
a script becomes that format's streamed events, complete answer and error body.

The server has one request flow (parse, pick the script, hold, answer or fail as scripted) and
one interpreter of stream plans; a :class:`Wire` supplies everything that differs between APIs.
Each format is built from the same :class:`Script`, so a scripted silence, keepalive or fault
replays identically on every API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from otel_llm.simulator._frames import Reply, Step
from otel_llm.simulator._script import Script

Body = Mapping[str, Any]
PathParams = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ScriptedError:
    """A scripted error answer in one format's shape."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Wire:
    """One API's request and answer shapes.

    Every callable raises :class:`~otel_llm.simulator._select.BadRequest` for a request the
    format rejects (answered with HTTP 400 in :attr:`rejection`'s shape)."""

    name: str
    """A short name (``chat``, ``responses``, ``anthropic``, ``gemini``), for logs and stats."""
    model: Callable[[Body, PathParams], str]
    """The requested model (from the body, or from the URL path for Gemini)."""
    check: Callable[[Body], None]
    """Reject a body whose prompt is not of the format's shape."""
    streamed: Callable[[Body, PathParams], bool]
    """Whether the request asks for a stream."""
    reply: Callable[[Script, Body, str, int, int], Reply]
    """``(script, body, model, serial, created)`` → what every frame of the answer repeats."""
    plan: Callable[[Script, Reply], list[Step]]
    """The streamed answer, step by step."""
    answer: Callable[[Script, Reply], dict[str, Any]]
    """The complete (non-streamed) answer."""
    error: Callable[[Script], ScriptedError]
    """The script's error answer (``error_status`` is set)."""
    rejection: Callable[[str, str], dict[str, Any]]
    """``(message, code)`` → the body of a 400 answer."""
    keepalive: bytes
    """What is written during a silence with keepalives."""
