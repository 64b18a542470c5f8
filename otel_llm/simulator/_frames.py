"""What every wire format's answer is made of: the steps of a stream, and what a script's
chunks carry before a format gives them its shape.

Nothing here waits or does I/O. :func:`timeline` turns a :class:`Script` into the list of steps a
streamed answer consists of — events to send, pauses, an abort — asking one format's
:class:`Frames` for the events due at each point; the server only interprets that list, so the
shape of every answer can be read (and tested) without a clock. The pauses, silences and faults
are placed here once for every format, so a scripted silence, keepalive or fault replays on the
same timeline whatever the API. Every format takes its text from :func:`output`, so all of them
carry the same words.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from otel_llm.simulator._script import Script

TOOL_NAME = "lookup"
"""Name of the function a scripted tool call asks for."""

_MAX_PROMPT_DEPTH = 8
"""How deep :func:`prompt_tokens` looks into a request's prompt (hostile input is bounded)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What every frame of one answer repeats, and what the request asked for."""

    id: str
    created: int
    model: str
    prompt_tokens: int
    include_usage: bool = False
    """Chat completions: the request set ``stream_options.include_usage``."""
    json_array: bool = False
    """Gemini: the streamed answer is one JSON array (no ``alt=sse``), not server-sent events."""
    empty_keepalive: bool = False
    """Chat completions: keepalives are empty-delta chunks, not SSE comments."""


@dataclass(frozen=True, slots=True)
class Send:
    """Send one SSE event ``data: <data>``, preceded by ``event: <event>`` when it is named
    (the Anthropic and Responses wire formats name every event; chat completions none). A
    ``raw`` send is written as it is (a piece of a JSON array)."""

    data: str
    event: str | None = None
    raw: bool = False

    def encoded(self) -> bytes:
        """The event as written to the socket."""
        if self.raw:
            return self.data.encode()
        if self.event is None:
            return f"data: {self.data}\n\n".encode()
        return f"event: {self.event}\ndata: {self.data}\n\n".encode()


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait ``seconds`` (scripted), writing the format's keepalive every ``keepalive_every_s``
    if set.

    A *silence* (``cadence=False``) runs from the previous write's actual end, so a late write
    never shortens it. A *cadence* pause (the first-chunk delay, the interval between chunks)
    runs on the stream's own timeline: it absorbs the lateness of the writes before it, so a
    loaded machine does not stretch a stream by a little per chunk.
    """

    seconds: float
    keepalive_every_s: float | None = None
    cadence: bool = False

    def keepalive_count(self) -> int:
        """How many pings fall strictly inside the pause (at every multiple of the period
        before its end; a multiple that equals the end up to float rounding sends none)."""
        every = self.keepalive_every_s
        if every is None:
            return 0
        return max(0, math.ceil(self.seconds / every - 1e-9) - 1)


@dataclass(frozen=True, slots=True)
class Abort:
    """Abort the TCP connection (a ``reset`` fault)."""


Step = Send | Pause | Abort

Phase = Literal["reasoning", "content", "tool"]
"""What one incremental chunk carries: reasoning, content (text or a refusal), or a piece of
the tool call."""


def words(stem: str, index: int, per_chunk: int) -> str:
    """Text of chunk ``index``: ``stem0 stem1 …``, with a leading space after the first chunk."""
    start = index * per_chunk
    text = " ".join(f"{stem}{k}" for k in range(start, start + per_chunk))
    return text if index == 0 else f" {text}"


def split(text: str, pieces: int) -> list[str]:
    """``text`` cut into ``pieces`` non-empty parts of nearly equal length (``len ≥ pieces``)."""
    bounds = [len(text) * k // pieces for k in range(pieces + 1)]
    return [text[bounds[k] : bounds[k + 1]] for k in range(pieces)]


def tool_arguments(script: Script) -> str:
    """The JSON arguments text of a scripted tool call."""
    count = (script.chunk_count - script.reasoning_chunks) * script.words_per_chunk
    return json.dumps({"query": " ".join(f"arg{k}" for k in range(count))})


@dataclass(frozen=True, slots=True)
class Output:
    """What a script's incremental chunks carry, before any format gives them a shape."""

    reasoning: tuple[str, ...]
    """The text of each reasoning chunk (``thought0 thought1 …``), in order."""
    content: tuple[str, ...]
    """The text of each content chunk (``word0 word1 …``); empty for a tool call."""
    tool_chunks: int
    """How many chunks stream the tool call (0 without one)."""
    arguments: str
    """The tool call's JSON arguments (empty without one)."""

    def phase(self, index: int) -> Phase:
        """What chunk ``index`` carries."""
        if index < len(self.reasoning):
            return "reasoning"
        return "tool" if self.tool_chunks else "content"

    @property
    def reasoning_text(self) -> str:
        """The whole reasoning."""
        return "".join(self.reasoning)

    @property
    def text(self) -> str:
        """The whole content."""
        return "".join(self.content)


def output(script: Script) -> Output:
    """What the ``chunk_count`` incremental chunks of ``script`` carry."""
    per_chunk = script.words_per_chunk
    rest = script.chunk_count - script.reasoning_chunks
    reasoning = tuple(words("thought", k, per_chunk) for k in range(script.reasoning_chunks))
    if script.tool_call:
        return Output(reasoning, (), rest, tool_arguments(script))
    content = tuple(words("word", k, per_chunk) for k in range(rest))
    return Output(reasoning, content, 0, "")


def output_tokens(script: Script) -> int:
    """Output tokens of an answer: one per word, reasoning and tool-call arguments included."""
    return script.chunk_count * script.words_per_chunk


def reasoning_tokens(script: Script) -> int:
    """The reasoning part of :func:`output_tokens`."""
    return script.reasoning_chunks * script.words_per_chunk


def _prompt_words(value: object, depth: int) -> int:
    """Words of the text in a prompt: strings, lists, and the ``content`` / ``text`` / ``parts``
    of objects (chat and Responses messages, Anthropic blocks, Gemini contents)."""
    if isinstance(value, str):
        return len(value.split())
    if depth >= _MAX_PROMPT_DEPTH:
        return 0
    if isinstance(value, list):
        return sum(_prompt_words(item, depth + 1) for item in value)
    if isinstance(value, Mapping):
        return sum(_prompt_words(value.get(key), depth + 1) for key in ("content", "text", "parts"))
    return 0


def prompt_tokens(*prompts: object) -> int:
    """A deterministic token estimate of a request's prompt: one per word, at least 1."""
    return max(1, sum(_prompt_words(prompt, 0) for prompt in prompts))


class Frames(Protocol):
    """One format's events of one streamed answer, asked for in stream order (a format may
    count its events: the Responses API numbers them)."""

    def opening(self) -> list[Send]:
        """Sent as soon as the request is taken, when the script has ``role_chunk``: the
        format's opening events, none of them a chunk."""
        ...

    def chunk(self, index: int) -> list[Send]:
        """Sent at the time of chunk ``index``: the chunk event, with whatever the format sends
        at that moment besides (an opening it still owes, a block that starts or ends). A
        format that does not stream some chunks returns no chunk event for them."""
        ...

    def closing(self) -> list[Send]:
        """Sent after the last chunk (and any silence after it): the finish, usage, the end."""
        ...

    def failure(self) -> list[Send]:
        """The ``error`` fault: the format's mid-stream error event(s)."""
        ...

    def malformed(self) -> Send:
        """The ``malformed`` fault: one event whose data is cut-off JSON."""
        ...


def timeline(script: Script, frames: Frames) -> list[Step]:
    """Every step of the streamed answer to one request, in order (see :mod:`._script`)."""
    steps: list[Step] = []
    if script.role_chunk:
        steps.extend(frames.opening())
    steps.append(
        Pause(script.first_chunk_delay_s, script.first_chunk_keepalive_every_s, cadence=True)
    )
    if (
        script.fault is not None
        and script.fault_after_chunk == -1
        and _fault(script, frames, steps)
    ):
        return steps
    for index in range(script.chunk_count):
        if index:
            steps.append(Pause(script.chunk_interval_s, cadence=True))
        steps.extend(frames.chunk(index))
        at_fault = script.fault is not None and script.fault_after_chunk == index
        if at_fault and _fault(script, frames, steps):
            return steps
        steps.extend(
            Pause(silence.duration_s, silence.keepalive_every_s)
            for silence in script.silences
            if silence.after_chunk == index
        )
    steps.extend(frames.closing())
    return steps


def _fault(script: Script, frames: Frames, steps: list[Step]) -> bool:
    """Append the scripted fault; True when the stream ends there."""
    if script.fault == "malformed":
        steps.append(frames.malformed())
        return False
    if script.fault == "reset":
        steps.append(Abort())
    elif script.fault == "error":
        steps.extend(frames.failure())
    return True


def cut(document: str) -> str:
    """The first half of a JSON text: what a ``malformed`` event or answer carries."""
    return document[: len(document) // 2]
