"""The cases: scripted streams real providers send, on each of the four wire formats.

Each case is a :class:`~otel_llm.simulator.Script` (timing in seconds, played on virtual time)
and a consumer; its expected figures follow from the script alone (see ``_case``). The shapes
are the ones providers send: OpenAI's role-only first chunk and usage-only last frame, SSE
``: ping`` comments and Anthropic's ``ping`` events while a model thinks, empty-content deltas
from OpenAI-compatible servers, reasoning streamed before any text, tool-call arguments in
pieces, refusals, several choices, ``[DONE]`` after a stream that never named a finish reason,
the formats' own mid-stream error events, a connection cut mid-answer, a stream that just
stops, silences where a provider queues, and bursts of chunks after them. The consumer reads
to the end, pauses between reads, or stops early (leaves the loop, closes, or is cancelled).
Gemini's streams carry no keepalives (Google's servers send none and google-genai cannot read
SSE comments), so the keepalive cases are on the other three formats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from otel_llm.conformance._case import Case, Consumer, Kind, Pause
from otel_llm.simulator import Script, Silence, WireName

WIRES: Final[tuple[WireName, ...]] = ("chat", "responses", "anthropic", "gemini")

FIRST_S = 0.4
"""Request → first chunk of most cases."""
EVERY_S = 0.05
"""Cadence of most cases."""
CHUNKS = 10


def _at(chunk: int, first_s: float = FIRST_S, every_s: float = EVERY_S) -> float:
    """Halfway between chunk ``chunk``'s and the next one's scheduled arrival (no silences)."""
    return first_s + every_s * chunk + every_s / 2


def _script(**fields: Any) -> Script:
    values: dict[str, Any] = {
        "first_chunk_delay_s": FIRST_S,
        "chunk_interval_s": EVERY_S,
        "chunk_count": CHUNKS,
    }
    values.update(fields)
    return Script(**values)


Template = tuple[str, Kind, str, Callable[[], Script], Consumer]
"""name, kind, what is sent, the script, the consumer."""

_TWO_SILENCES = (Silence(after_chunk=2, duration_s=2.5), Silence(after_chunk=5, duration_s=6.0))

COMMON: Final[tuple[Template, ...]] = (
    ("plain", "plain", "10 chunks 50 ms apart after 0.4 s", lambda: _script(), Consumer()),
    (
        "silences",
        "silence",
        "silences of 2.5 s after chunk 2 and 6 s after chunk 5",
        lambda: _script(silences=_TWO_SILENCES),
        Consumer(),
    ),
    (
        "slow-first-chunk",
        "silence",
        "7 s before the first chunk, then a steady stream",
        lambda: _script(first_chunk_delay_s=7.0),
        Consumer(),
    ),
    (
        "back-to-back-silences",
        "silence",
        "two silences of 1.5 s after the same chunk (one gap of 3.05 s) and 4.5 s after the next",
        lambda: _script(
            silences=(
                Silence(after_chunk=3, duration_s=1.5),
                Silence(after_chunk=3, duration_s=1.5),
                Silence(after_chunk=4, duration_s=4.5),
            )
        ),
        Consumer(),
    ),
    (
        "gaps-at-the-thresholds",
        "silence",
        "gaps of exactly 1 s and 4 s (a 0.25 s cadence): neither is a stall at its own threshold",
        lambda: _script(
            first_chunk_delay_s=0.5,
            chunk_interval_s=0.25,
            chunk_count=8,
            silences=(
                Silence(after_chunk=2, duration_s=0.75),
                Silence(after_chunk=5, duration_s=3.75),
            ),
        ),
        Consumer(),
    ),
    (
        "role-only-first",
        "role-only",
        "the opening frame (role-only chunk / message_start / response.created / usage-only "
        "response) at once, the first chunk 2 s later",
        lambda: _script(first_chunk_delay_s=2.0),
        Consumer(),
    ),
    (
        "no-opening",
        "role-only",
        "no opening frame: the first event is the first chunk, after 0.8 s",
        lambda: _script(role_chunk=False, first_chunk_delay_s=0.8),
        Consumer(),
    ),
    (
        "reasoning-first",
        "reasoning-first",
        "4 reasoning-only chunks, then 6 chunks of text",
        lambda: _script(reasoning_chunks=4, first_chunk_delay_s=1.2),
        Consumer(),
    ),
    (
        "reasoning-then-silence",
        "reasoning-first",
        "3 reasoning chunks, 5 s of silence, then 5 chunks of text",
        lambda: _script(
            chunk_count=8, reasoning_chunks=3, silences=(Silence(after_chunk=2, duration_s=5.0),)
        ),
        Consumer(),
    ),
    (
        "tool-call",
        "tool-call",
        "a tool call whose arguments stream in 6 pieces",
        lambda: _script(chunk_count=6, tool_call=True),
        Consumer(),
    ),
    (
        "reasoning-tool-call",
        "tool-call",
        "2 reasoning chunks, 1.5 s of silence, then a tool call in 5 pieces",
        lambda: _script(
            chunk_count=7,
            reasoning_chunks=2,
            tool_call=True,
            silences=(Silence(after_chunk=1, duration_s=1.5),),
        ),
        Consumer(),
    ),
    (
        "refusal",
        "refusal",
        "a refusal in 5 chunks (chat delta.refusal, Responses refusal deltas, text elsewhere)",
        lambda: _script(chunk_count=5, refusal=True, finish_reason="content_filter"),
        Consumer(),
    ),
    (
        "max-tokens",
        "finish-length",
        "10 chunks, stopped by the token limit",
        lambda: _script(finish_reason="length"),
        Consumer(),
    ),
    (
        "usage-after-tail",
        "usage-only",
        "10 chunks, then 3 s before the finish and usage frames",
        lambda: _script(silences=(Silence(after_chunk=CHUNKS - 1, duration_s=3.0),)),
        Consumer(),
    ),
    (
        "one-chunk",
        "plain",
        "a one-chunk answer after 1.5 s (no gap: no stall figure exists)",
        lambda: _script(chunk_count=1, first_chunk_delay_s=1.5),
        Consumer(),
    ),
    (
        "error-event",
        "error-event",
        "4 chunks (a 2 s silence after chunk 1), then the format's error event (500)",
        lambda: _script(
            silences=(Silence(after_chunk=1, duration_s=2.0),), fault="error", fault_after_chunk=3
        ),
        Consumer(),
    ),
    (
        "connection-reset",
        "error-event",
        "5 chunks, then the connection is reset",
        lambda: _script(fault="reset", fault_after_chunk=4),
        Consumer(),
    ),
    (
        "truncated",
        "truncated",
        "5 chunks (a 1.5 s silence after chunk 2), then the stream ends without a finish",
        lambda: _script(
            silences=(Silence(after_chunk=2, duration_s=1.5),),
            fault="truncate",
            fault_after_chunk=4,
        ),
        Consumer(),
    ),
    (
        "consumer-pause",
        "consumer-pause",
        "a steady stream; the consumer holds it 3 s after chunk 3",
        lambda: _script(),
        Consumer(pauses=(Pause(_at(2), 3.0),)),
    ),
    (
        "consumer-pause-silence",
        "consumer-pause",
        "a 2 s silence after chunk 2; the consumer holds the stream 4 s after chunk 6",
        lambda: _script(silences=(Silence(after_chunk=2, duration_s=2.0),)),
        Consumer(pauses=(Pause(_at(5) + 2.0, 4.0),)),
    ),
    (
        "abandoned",
        "abandoned",
        "the consumer leaves the loop after chunk 5 and drops the stream unclosed",
        lambda: _script(),
        Consumer(stop="break", stop_at_s=_at(4)),
    ),
    (
        "abandoned-after-silence",
        "abandoned",
        "a 2 s silence after chunk 2; the consumer leaves after chunk 6, stream unclosed",
        lambda: _script(silences=(Silence(after_chunk=2, duration_s=2.0),)),
        Consumer(stop="break", stop_at_s=_at(5) + 2.0),
    ),
    (
        "closed-early",
        "abandoned",
        "the consumer closes the stream after chunk 3",
        lambda: _script(),
        Consumer(stop="close", stop_at_s=_at(2)),
    ),
    (
        "cancelled",
        "abandoned",
        "a 5 s silence after chunk 3; the consumer's task is cancelled 3 s in, mid-silence",
        lambda: _script(silences=(Silence(after_chunk=3, duration_s=5.0),)),
        Consumer(stop="cancel", stop_at_s=3.0),
    ),
    (
        "bursts",
        "burst",
        "3 bursts of 5 chunks at once, 2 s and 5 s apart",
        lambda: _script(
            chunk_count=15,
            chunk_interval_s=0.0,
            silences=(
                Silence(after_chunk=4, duration_s=2.0),
                Silence(after_chunk=9, duration_s=5.0),
            ),
        ),
        Consumer(),
    ),
)
"""Cases played on every wire format."""

KEEPALIVE: Final[tuple[Template, ...]] = (
    (
        "keepalive-first",
        "keepalive-first",
        "keepalives every 0.5 s for 3 s before the first chunk",
        lambda: _script(first_chunk_delay_s=3.0, first_chunk_keepalive_every_s=0.5),
        Consumer(),
    ),
    (
        "keepalive-mid",
        "keepalive-mid",
        "a 5 s silence after chunk 3 with keepalives every second",
        lambda: _script(silences=(Silence(after_chunk=3, duration_s=5.0, keepalive_every_s=1.0),)),
        Consumer(),
    ),
    (
        "keepalive-both",
        "keepalive-mid",
        "keepalives every 0.75 s for 2 s before the first chunk and in a 2.5 s silence",
        lambda: _script(
            first_chunk_delay_s=2.0,
            first_chunk_keepalive_every_s=0.75,
            silences=(Silence(after_chunk=6, duration_s=2.5, keepalive_every_s=0.75),),
        ),
        Consumer(),
    ),
)
"""Cases with keepalives (chat completions, Responses, Anthropic)."""

CHAT_ONLY: Final[tuple[Template, ...]] = (
    (
        "empty-delta-keepalives",
        "empty-delta",
        'a 4.5 s silence after chunk 4 kept alive by {"content": ""} deltas every second',
        lambda: _script(
            keepalive="empty_delta",
            silences=(Silence(after_chunk=4, duration_s=4.5, keepalive_every_s=1.0),),
        ),
        Consumer(),
    ),
    (
        "empty-delta-first",
        "empty-delta",
        "empty-content deltas every 0.5 s for 2.5 s before the first chunk",
        lambda: _script(
            keepalive="empty_delta", first_chunk_delay_s=2.5, first_chunk_keepalive_every_s=0.5
        ),
        Consumer(),
    ),
    (
        "two-choices",
        "choices",
        "n=2: each chunk once per choice, a 1.5 s silence after chunk 3, a finish per choice",
        lambda: _script(choices=2, silences=(Silence(after_chunk=3, duration_s=1.5),)),
        Consumer(),
    ),
    (
        "three-choices-length",
        "choices",
        "n=3, each choice stopped by the token limit",
        lambda: _script(choices=3, chunk_count=6, finish_reason="length"),
        Consumer(),
    ),
    (
        "done-without-finish",
        "done-without-finish",
        "10 chunks, the usage frame and [DONE], but no chunk names a finish reason",
        lambda: _script(finish_chunk=False),
        Consumer(),
    ),
    (
        "no-done",
        "plain",
        "10 chunks and the finish, then the stream ends without [DONE]",
        lambda: _script(done=False),
        Consumer(),
    ),
    (
        "reasoning-key",
        "reasoning-first",
        'OpenRouter-style "reasoning" deltas for 3 chunks, then text',
        lambda: _script(reasoning_chunks=3, reasoning_key="reasoning"),
        Consumer(),
    ),
)
"""Shapes only chat completions have (or that matter only there)."""

OTHERS: Final[tuple[tuple[WireName, Template], ...]] = (
    (
        "responses",
        (
            "reasoning-text",
            "reasoning-first",
            "reasoning-text deltas (an open-weight model behind a Responses server), then text",
            lambda: _script(reasoning_chunks=3, responses_reasoning="text"),
            Consumer(),
        ),
    ),
    (
        "anthropic",
        (
            "overloaded-mid-stream",
            "error-event",
            "3 chunks, then event: error overloaded_error (529)",
            lambda: _script(fault="error", fault_after_chunk=2, fault_status=529),
            Consumer(),
        ),
    ),
    (
        "anthropic",
        (
            "overloaded-before-first",
            "error-event",
            "message_start and ping, then event: error overloaded_error before any chunk",
            lambda: _script(fault="error", fault_after_chunk=-1, fault_status=529),
            Consumer(),
        ),
    ),
)
"""One-format cases."""


def _case(wire: WireName, template: Template) -> Case:
    name, kind, what, script, consumer = template
    return Case(f"{wire}/{name}", wire, kind, script(), what, consumer)


def build() -> tuple[Case, ...]:
    """Every case, by wire format then template."""
    cases: list[Case] = []
    for wire in WIRES:
        cases.extend(_case(wire, template) for template in COMMON)
        if wire != "gemini":
            cases.extend(_case(wire, template) for template in KEEPALIVE)
        if wire == "chat":
            cases.extend(_case(wire, template) for template in CHAT_ONLY)
        cases.extend(_case(wire, template) for owner, template in OTHERS if owner == wire)
    return tuple(cases)


CASES: Final = build()
"""The suite."""
