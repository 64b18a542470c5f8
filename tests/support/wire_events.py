"""Each wire format's chunk rule, read off what the simulated provider writes: which events carry
output, and what. An independent reading for the simulator's tests, written from the rules of
each API (not from the simulator's code, nor from otel-llm's own stream readers):

- chat completions: a chunk whose delta carries reasoning, content, a refusal or a tool-call piece;
- Responses: ``response.output_text.delta``, ``response.refusal.delta``, the reasoning-summary and
  reasoning-text deltas, ``response.function_call_arguments.delta``;
- Anthropic: ``content_block_delta`` with a thinking, text or tool-input JSON delta (not a
  ``signature_delta``); ``ping`` and every other event are not chunks;
- Gemini: a response whose candidate carries a non-empty text part, a thought, or a function
  call; a usage-only or empty response is not a chunk.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from otel_llm.simulator._frames import Pause, Send, Step

Kind = Literal["reasoning", "content", "tool"]
WIRE_NAMES = ("chat", "responses", "anthropic", "gemini")

_RESPONSES_KINDS: dict[str, Kind] = {
    "response.output_text.delta": "content",
    "response.refusal.delta": "content",
    "response.reasoning_summary_text.delta": "reasoning",
    "response.reasoning_text.delta": "reasoning",
    "response.function_call_arguments.delta": "tool",
}
_ANTHROPIC_KINDS: dict[str, tuple[Kind, str]] = {
    "thinking_delta": ("reasoning", "thinking"),
    "text_delta": ("content", "text"),
    "input_json_delta": ("tool", "partial_json"),
}


@dataclass(frozen=True)
class Event:
    """One server-sent event: its name (``None`` when unnamed) and its data."""

    name: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


@dataclass(frozen=True)
class Carried:
    """What one chunk event carries: its kind and text (a Gemini function call's arguments as
    JSON text)."""

    kind: Kind
    text: str


def parse_sse(raw: bytes) -> tuple[list[Event], int]:
    """The events of an SSE body, and how many comment lines (``: …``) it held."""
    events: list[Event] = []
    comments = 0
    name: str | None = None
    data: list[str] = []
    for line in raw.decode().split("\n"):
        line = line.removesuffix("\r")
        if not line:
            if data:
                events.append(Event(name, "\n".join(data)))
            name, data = None, []
        elif line.startswith(":"):
            comments += 1
        elif line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].removeprefix(" "))
    if data:
        events.append(Event(name, "\n".join(data)))
    return events, comments


def is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def carried(wire: str, event: Event) -> Carried | None:
    """What ``event`` carries on ``wire``, or ``None`` when it is not a chunk."""
    if event.data == "[DONE]" or not is_json(event.data):
        return None
    payload = event.json()
    if not isinstance(payload, dict):
        return None
    if wire == "chat":
        return _chat(payload)
    if wire == "responses":
        kind = _RESPONSES_KINDS.get(payload.get("type", ""))
        return None if kind is None else Carried(kind, payload["delta"])
    if wire == "anthropic":
        if payload.get("type") != "content_block_delta":
            return None
        delta = payload["delta"]
        found = _ANTHROPIC_KINDS.get(delta.get("type"))
        return None if found is None else Carried(found[0], delta[found[1]])
    if wire == "gemini":
        return _gemini(payload)
    raise ValueError(f"unknown wire {wire!r}")


def _chat(payload: dict[str, Any]) -> Carried | None:
    for choice in payload.get("choices") or []:
        delta = choice.get("delta") or {}
        for key in ("reasoning_content", "reasoning"):
            if delta.get(key):
                return Carried("reasoning", delta[key])
        for key in ("content", "refusal"):
            if delta.get(key):
                return Carried("content", delta[key])
        if delta.get("tool_calls"):
            return Carried("tool", delta["tool_calls"][0]["function"].get("arguments", ""))
    return None


def _gemini(payload: dict[str, Any]) -> Carried | None:
    for candidate in payload.get("candidates") or []:
        for part in (candidate.get("content") or {}).get("parts") or []:
            if "functionCall" in part:
                return Carried("tool", json.dumps(part["functionCall"]["args"]))
            if part.get("text"):
                return Carried("reasoning" if part.get("thought") else "content", part["text"])
    return None


def chunk_events(wire: str, events: list[Event]) -> list[Carried]:
    """The chunk events of a stream, in order."""
    return [found for event in events if (found := carried(wire, event)) is not None]


def joined(chunks: list[Carried], kind: Kind) -> str:
    """The text of one kind of chunk, joined."""
    return "".join(chunk.text for chunk in chunks if chunk.kind == kind)


@dataclass(frozen=True)
class Timed:
    """One event of a plan and its scripted time (the sum of the pauses before it)."""

    at_s: float
    event: Event


def plan_events(plan: list[Step]) -> list[Timed]:
    """The events of a stream plan on its scripted timeline (raw sends as unnamed events)."""
    timed: list[Timed] = []
    now = 0.0
    for step in plan:
        if isinstance(step, Pause):
            now += step.seconds
        elif isinstance(step, Send):
            timed.append(Timed(now, Event(step.event, step.data)))
    return timed


def finish_of(wire: str, event: Event) -> str | None:
    """The finish an event reports, in the format's words (``None`` for other events):
    chat's ``finish_reason``, Responses' terminal status (``incomplete:<reason>``), Anthropic's
    ``stop_reason``, Gemini's ``finishReason``."""
    if not is_json(event.data):
        return None
    payload = event.json()
    if not isinstance(payload, dict):
        return None
    if wire == "chat":
        reasons = [choice.get("finish_reason") for choice in payload.get("choices") or []]
        return next((reason for reason in reasons if reason), None)
    if wire == "responses":
        kind = payload.get("type")
        if kind == "response.completed":
            return "completed"
        if kind == "response.incomplete":
            return f"incomplete:{payload['response']['incomplete_details']['reason']}"
        return None
    if wire == "anthropic":
        if payload.get("type") != "message_delta":
            return None
        reason = payload["delta"]["stop_reason"]
        return str(reason) if reason is not None else None
    candidates = payload.get("candidates") or []
    return next((c["finishReason"] for c in candidates if c.get("finishReason")), None)


def is_error_event(wire: str, event: Event) -> bool:
    """Whether ``event`` is the format's mid-stream error."""
    if wire == "anthropic":
        return event.name == "error"
    if wire == "responses":
        return event.name in ("error", "response.failed")
    return is_json(event.data) and isinstance(event.json(), dict) and "error" in event.json()
