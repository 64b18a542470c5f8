"""What one wire format is to the simulator: how a request names its model and prompt, and how
a script becomes that format's streamed events, complete answer and error body.

The server has one request flow (parse, pick the script, hold, answer or fail as scripted) and
one interpreter of stream plans; a :class:`Wire` supplies everything that differs between APIs.
Each format is built from the same :class:`Script` on the same timeline
(:func:`~otel_llm.simulator._frames.timeline`), so a scripted silence, keepalive or fault
replays identically on every API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from otel_llm.simulator._frames import Reply, Send, Step
from otel_llm.simulator._script import Script

Body = Mapping[str, Any]
WireName = Literal["chat", "responses", "anthropic", "gemini"]
"""The wire formats: OpenAI chat completions (also Azure OpenAI's deployment route), OpenAI
Responses, Anthropic Messages, Google Gemini."""

SSE = "text/event-stream"
SSE_COMMENT_KEEPALIVE = b": ping\n\n"
"""The keepalive of the OpenAI formats: an SSE comment, which no client sees."""


@dataclass(frozen=True, slots=True)
class Asked:
    """One request as a wire reads it: the JSON body, the URL path's parameters (Gemini's model,
    Azure's deployment) and the query (Gemini's ``alt``)."""

    body: Body
    path: Mapping[str, str]
    query: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ScriptedError:
    """A scripted error answer in one format's shape."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Framing:
    """How a streamed answer is written: its content type, what a keepalive is and how an
    event is written."""

    content_type: str
    keepalive: bytes
    """Written during a silence with keepalives (nothing when empty)."""
    encode: Callable[[Send], bytes] = Send.encoded
    """An event as written to the socket (SSE, unless the format frames events otherwise)."""


OPENAI_SSE = Framing(SSE, SSE_COMMENT_KEEPALIVE)
"""Server-sent events with ``: ping`` keepalives (chat completions, Responses)."""


def all_chunks(script: Script) -> tuple[int, ...]:
    """Every scripted chunk is a chunk event (chat completions, Responses, Anthropic)."""
    return tuple(range(script.chunk_count))


@dataclass(frozen=True, slots=True)
class Wire:
    """One API's request and answer shapes.

    Every callable raises :class:`~otel_llm.simulator._select.BadRequest` for a request the
    format rejects (answered with HTTP 400 in :attr:`rejection`'s shape)."""

    name: WireName
    """The format's name, for logs, stats and :func:`~otel_llm.simulator.scripted_figures`."""
    model: Callable[[Asked], str]
    """The requested model (from the body, or from the URL path for Gemini and Azure)."""
    check: Callable[[Body], None]
    """Reject a body whose prompt is not of the format's shape."""
    streamed: Callable[[Asked], bool]
    """Whether the request asks for a stream."""
    reply: Callable[[Script, Asked, str, int, int], Reply]
    """``(script, asked, model, serial, created)`` → what every frame of the answer repeats."""
    plan: Callable[[Script, Reply], list[Step]]
    """The streamed answer, step by step."""
    answer: Callable[[Script, Reply], dict[str, Any]]
    """The complete (non-streamed) answer."""
    error: Callable[[Script, int], ScriptedError]
    """``(script, status)`` → the script's error answer with that status."""
    rejection: Callable[[str, str], dict[str, Any]]
    """``(message, code)`` → the body of a 400 answer."""
    framing: Callable[[Reply], Framing]
    """How the streamed answer to a request is written."""
    chunk_indices: Callable[[Script], tuple[int, ...]] = all_chunks
    """The scripted chunks this format sends as chunk events, at their scripted times: every
    one, except where a format cannot stream a phase piece by piece (Gemini's tool call, see
    :func:`~otel_llm.simulator._gemini.gemini_chunks`). The one place a format's chunk count
    may differ from ``chunk_count``."""
