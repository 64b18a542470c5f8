"""What a simulated provider does with one request: a frozen, validated :class:`Script`.

A script describes one answer in *scripted seconds*; the server multiplies every duration by its
``time_scale`` when it serves the script, so the same script runs in real time for a demo and a
thousand times faster in a test. Vocabulary follows the chunk rule: the ``chunk_count`` incremental
chunks carry output (reasoning, content or tool-call deltas); the role-only chunk, SSE keepalive
comments, the finish chunk, the usage frame and ``[DONE]`` are not chunks.

Every wire format (chat completions, Responses, Anthropic Messages, Gemini) plays the same script
on the same timeline; each module of a format says how it maps the script (``_chat``,
``_responses``, ``_anthropic``, ``_gemini``). The stream a script produces, in chat completions'
words, in order::

    role chunk                         (role_chunk)
    ── first_chunk_delay_s ──
    chunk 0 … chunk N-1                chunk_interval_s apart, plus each Silence after its chunk
    finish chunk                       empty delta, finish_reason
    usage frame                        (usage, and the request asked for include_usage)
    data: [DONE]                       (done)

The response headers and the role chunk go out as soon as the request is taken (after
``hold_s``); a non-streamed answer arrives after :attr:`Script.nominal_duration_s`.

A script is a pydantic model with ``extra="forbid"``, so a misspelt field in a JSON script sent
by a test is a clear HTTP 400 instead of a silently ignored key.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Fault = Literal["reset", "truncate", "malformed", "error"]
"""``reset`` aborts the TCP connection, ``truncate`` ends the response cleanly without a finish
reason or ``[DONE]`` (no stop event in any format), ``malformed`` sends one ``data:`` line that is
not JSON and carries on, ``error`` sends the format's own mid-stream error event (an
``{"error": …}`` data line for chat completions, ``error`` and ``response.failed`` for Responses,
``event: error`` for Anthropic, an ``{"error": …}`` chunk for Gemini) naming ``fault_status``, and
ends the stream."""

ResponsesReasoning = Literal["summary", "text"]
"""How the Responses API streams the reasoning phase: reasoning-summary deltas (OpenAI's reasoning
models) or reasoning-text deltas (open-weight models behind a Responses server)."""

ReasoningKey = Literal["reasoning_content", "reasoning"]
"""The delta key of reasoning output (DeepSeek/vLLM style, or OpenRouter style)."""

Keepalive = Literal["comment", "empty_delta"]
"""What chat completions write as a keepalive: a ``: ping`` SSE comment, or a chunk whose delta
is ``{"content": ""}`` (OpenAI-compatible servers that keep a connection alive with empty
deltas). Neither is an incremental chunk. The other formats keep their own keepalive."""

_MAX_CHOICES = 8

_MAX_KEEPALIVES = 10_000

MAX_OUTPUT_WORDS = 1_000_000
"""Words one answer may carry (``chunk_count × words_per_chunk``): every format builds its
answer before it is sent, so a script sent by a client never costs the server gigabytes."""
_FROZEN = ConfigDict(
    frozen=True, extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True
)


class Silence(BaseModel):
    """A mid-stream silence of ``duration_s`` after the incremental chunk ``after_chunk``.

    The silence adds to the normal ``chunk_interval_s`` before the next chunk. During it the
    server writes the format's keepalive every ``keepalive_every_s`` when that is set (a ``: ping``
    SSE comment; Anthropic's ``ping`` event; nothing on Gemini, whose SDK cannot read comments);
    keepalives are not chunks, so the silence is still a gap to a meter.
    """

    model_config = _FROZEN

    after_chunk: int = Field(ge=0)
    """0-based index of the incremental chunk the silence follows."""
    duration_s: float = Field(ge=0.0)
    """Length of the silence, scripted seconds."""
    keepalive_every_s: float | None = Field(default=None, gt=0.0)
    """Period of keepalives during the silence; ``None`` sends none."""

    @model_validator(mode="after")
    def _bounded_keepalives(self) -> Self:
        every = self.keepalive_every_s
        if every is not None and self.duration_s / every > _MAX_KEEPALIVES:
            raise ValueError(
                f"keepalive_every_s={every} would send more than "
                f"{_MAX_KEEPALIVES} keepalives during a {self.duration_s} s silence"
            )
        return self


class Script(BaseModel):
    """The scripted behaviour of one answer. Durations are scripted seconds (× ``time_scale``)."""

    model_config = _FROZEN

    # Timing and shape of the stream.
    first_chunk_delay_s: float = Field(default=0.1, ge=0.0)
    """Request (after ``hold_s``) to the first incremental chunk."""
    chunk_count: int = Field(default=20, ge=0, le=100_000)
    """Number of incremental chunks."""
    chunk_interval_s: float = Field(default=0.02, ge=0.0)
    """Cadence between consecutive incremental chunks."""
    words_per_chunk: int = Field(default=1, ge=1, le=1_000)
    """Words per chunk of the text ``word0 word1 …`` (``thought0 thought1 …`` when reasoning);
    ``chunk_count × words_per_chunk`` is at most :data:`MAX_OUTPUT_WORDS`."""
    role_chunk: bool = True
    """First send a chunk whose delta is only ``{"role": "assistant"}`` (no output: not a
    chunk)."""
    silences: tuple[Silence, ...] = ()
    """Mid-stream silences; several after the same chunk add up."""
    first_chunk_keepalive_every_s: float | None = Field(default=None, gt=0.0)
    """Period of keepalives during ``first_chunk_delay_s`` (the format's keepalive, as in a
    :class:`Silence`); ``None`` sends none."""
    keepalive: Keepalive = "comment"
    """Chat completions: what a keepalive is (see :data:`Keepalive`)."""
    choices: int = Field(default=1, ge=1, le=_MAX_CHOICES)
    """Chat completions: the answer has this many choices (the request's ``n``); at the time of
    each incremental chunk one chunk per choice goes out (choice 0 first), and each choice has
    its own finish chunk. The other formats stream one answer."""
    finish_chunk: bool = True
    """Chat completions: send the finish chunk; ``False`` ends the stream with the usage frame
    and ``[DONE]`` but no finish reason (as some OpenAI-compatible servers do). The other
    formats always send their finish."""

    # What the chunks carry.
    reasoning_chunks: int = Field(default=0, ge=0)
    """The first N incremental chunks carry only reasoning (a reasoning-only phase)."""
    reasoning_key: ReasoningKey = "reasoning_content"
    """Delta key of the reasoning phase."""
    tool_call: bool = False
    """The chunks after the reasoning phase stream one tool call instead of content."""
    refusal: bool = False
    """The chunks after the reasoning phase carry a refusal instead of content (chat
    ``delta.refusal``, Responses ``response.refusal.delta``; Anthropic and Gemini have no refusal
    channel and stream it as text)."""
    responses_reasoning: ResponsesReasoning = "summary"
    """How the Responses API streams the reasoning phase (other formats ignore it)."""
    usage: bool = True
    """Send a usage-only frame before ``[DONE]`` when the request set ``include_usage``."""
    finish_reason: str | None = None
    """Finish reason of the final chunk; ``None``: ``tool_calls`` for a tool call, else ``stop``."""
    done: bool = True
    """Send ``data: [DONE]``; ``False`` ends the stream cleanly without it ("missing [DONE]").
    Anthropic's terminator is ``message_stop`` (left out the same way); Responses and Gemini
    have none."""
    model_name: str | None = None
    """``model`` reported in the answer; ``None`` echoes the requested model."""

    # Failures.
    error_status: int | None = Field(default=None, ge=400, le=599)
    """Answer with this HTTP status and the format's error body instead of an answer."""
    error_code: str | None = None
    """The provider's error code: OpenAI's ``error.code``, Anthropic's
    ``error.details.error_code``, the ``reason`` of Gemini's ``ErrorInfo``."""
    error_message: str = "simulated provider error"
    """``error.message`` of the error body (and of the ``error`` fault's event)."""
    error_type: str | None = None
    """The error's type as the format spells it, written verbatim: OpenAI's and Anthropic's
    ``error.type``, Gemini's ``error.status``. ``None`` derives it from the status in each
    format's own words (429: ``rate_limit_error`` / ``rate_limit_error`` /
    ``RESOURCE_EXHAUSTED``; 529: ``server_error`` / ``overloaded_error`` / ``INTERNAL``)."""
    retry_after: str | None = None
    """Raw ``Retry-After`` header value of an error answer; ``None`` leaves the header out."""
    retry_after_ms: str | None = None
    """Raw ``retry-after-ms`` header value of an error answer; ``None`` leaves the header out."""
    hold_s: float = Field(default=0.0, ge=0.0)
    """Hold the request this long before answering at all (a gateway queueing it)."""
    fault: Fault | None = None
    """Break the stream after chunk ``fault_after_chunk`` (see :data:`Fault`). A non-streamed
    answer is aborted (``reset``), cut in half, not JSON (``truncate``, ``malformed``), or the
    ``fault_status`` error (``error``)."""
    fault_after_chunk: int = Field(default=0, ge=-1)
    """Chunk index the fault follows; ``-1`` means after ``first_chunk_delay_s``, before chunk 0."""
    fault_status: int = Field(default=500, ge=400, le=599)
    """The HTTP status the ``error`` fault names: its event's type derives from it in each
    format (529 is Anthropic's ``overloaded_error``); a non-streamed answer with the ``error``
    fault is this status with the format's error body."""

    @field_validator("retry_after", "retry_after_ms", mode="before")
    @classmethod
    def _header_text(cls, value: object) -> object:
        """Numbers are accepted for header values and sent as written."""
        if isinstance(value, bool):
            return value
        if isinstance(value, int | float):
            return str(value)
        return value

    @field_validator("retry_after", "retry_after_ms")
    @classmethod
    def _printable_header(cls, value: str | None) -> str | None:
        if value is not None and not value.isprintable():
            raise ValueError("a header value must be printable text without line breaks")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        words = self.chunk_count * self.words_per_chunk
        if words > MAX_OUTPUT_WORDS:
            raise ValueError(
                f"chunk_count × words_per_chunk is {words} words of output; at most "
                f"{MAX_OUTPUT_WORDS}"
            )
        if self.reasoning_chunks > self.chunk_count:
            raise ValueError(
                f"reasoning_chunks ({self.reasoning_chunks}) exceeds chunk_count "
                f"({self.chunk_count})"
            )
        if self.tool_call and self.reasoning_chunks >= self.chunk_count:
            raise ValueError("tool_call needs at least one chunk after the reasoning chunks")
        if self.tool_call and self.refusal:
            raise ValueError("a script streams a tool call or a refusal, not both")
        every = self.first_chunk_keepalive_every_s
        if every is not None and self.first_chunk_delay_s / every > _MAX_KEEPALIVES:
            raise ValueError(
                f"first_chunk_keepalive_every_s={every} would send more than "
                f"{_MAX_KEEPALIVES} keepalives during a {self.first_chunk_delay_s} s delay"
            )
        for silence in self.silences:
            if silence.after_chunk >= self.chunk_count:
                raise ValueError(
                    f"silence after_chunk={silence.after_chunk} is not a chunk index "
                    f"(chunk_count={self.chunk_count})"
                )
        if self.fault is not None and self.fault_after_chunk >= self.chunk_count:
            raise ValueError(
                f"fault_after_chunk={self.fault_after_chunk} is not a chunk index "
                f"(chunk_count={self.chunk_count}; use -1 for before the first chunk)"
            )
        return self

    @property
    def final_reason(self) -> str:
        """The finish reason the answer reports."""
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_call else "stop"

    @property
    def silence_s(self) -> float:
        """Total scripted silence of the stream."""
        return sum(silence.duration_s for silence in self.silences)

    @property
    def longest_gap_silence_s(self) -> float:
        """The longest silence between two chunks (silences after the same chunk add up)."""
        per_chunk: dict[int, float] = {}
        for silence in self.silences:
            per_chunk[silence.after_chunk] = (
                per_chunk.get(silence.after_chunk, 0.0) + silence.duration_s
            )
        return max(per_chunk.values(), default=0.0)

    @property
    def nominal_duration_s(self) -> float:
        """Scripted time from request to the last chunk, excluding ``hold_s``.

        ``first_chunk_delay_s + (chunk_count - 1) × chunk_interval_s + silences``; a non-streamed
        answer arrives after this long.
        """
        cadence = max(0, self.chunk_count - 1) * self.chunk_interval_s
        return self.first_chunk_delay_s + cadence + self.silence_s
