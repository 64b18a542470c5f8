"""OpenAI's Responses API (``POST /v1/responses``) played from a script.

Every event is named (``event: <type>``) and numbered (``sequence_number``). The mapping:

- the opening (``role_chunk``): ``response.created`` and ``response.in_progress``; without it they
  go out with the first event that needs them (the SDK's stream helper requires
  ``response.created`` first);
- the reasoning phase: one ``reasoning`` output item whose chunks are
  ``response.reasoning_summary_text.delta`` (``responses_reasoning="summary"``) or
  ``response.reasoning_text.delta`` (``"text"``);
- content: one ``message`` item whose chunks are ``response.output_text.delta``, or
  ``response.refusal.delta`` for a refusal;
- a tool call: one ``function_call`` item whose chunks are
  ``response.function_call_arguments.delta`` (the arguments in ``N`` non-empty pieces);
- each item opens (``response.output_item.added``, ``response.content_part.added`` /
  ``response.reasoning_summary_part.added``) at its first chunk and closes (``….done``) when the
  next item opens or the answer ends — none of these is a chunk;
- the finish: ``response.completed``, or ``response.incomplete`` with reason
  ``max_output_tokens`` (finish ``length``) or ``content_filter`` (finish ``content_filter``),
  carrying the whole response and its usage (``input_tokens`` with
  ``input_tokens_details.cached_tokens`` and ``cache_write_tokens`` (0), ``output_tokens`` with
  ``output_tokens_details.reasoning_tokens``; ``null`` when the script has no usage);
- the ``error`` fault: an ``error`` event (``code``, ``message`` at the top level, as documented)
  then ``response.failed`` whose ``response.error`` names the same code.

There is no ``[DONE]``. Keepalives are ``: ping`` comments; errors have OpenAI's body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from otel_llm.simulator._chat import body_model, openai_error, openai_rejection
from otel_llm.simulator._frames import (
    TOOL_NAME,
    Output,
    Phase,
    Reply,
    Send,
    Step,
    cut,
    output,
    output_tokens,
    prompt_tokens,
    reasoning_tokens,
    split,
    timeline,
)
from otel_llm.simulator._script import Script
from otel_llm.simulator._select import BadRequest
from otel_llm.simulator._wire import OPENAI_SSE, Asked, Body, Wire

INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}
"""Finish reasons that end a response as ``incomplete``, and the reason it gives; any other
finish completes it."""


def _item_id(prefix: str, reply: Reply) -> str:
    return f"{prefix}_{reply.id.removeprefix('resp_')}"


def _usage(script: Script, reply: Reply) -> dict[str, Any] | None:
    if not script.usage:
        return None
    tokens = output_tokens(script)
    return {
        "input_tokens": reply.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens(script)},
        "total_tokens": reply.prompt_tokens + tokens,
    }


def _response(
    reply: Reply,
    status: str,
    items: list[dict[str, Any]],
    usage: dict[str, Any] | None,
    *,
    error: dict[str, Any] | None = None,
    incomplete: str | None = None,
) -> dict[str, Any]:
    """A ``response`` object."""
    return {
        "id": reply.id,
        "object": "response",
        "created_at": reply.created,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": None if incomplete is None else {"reason": incomplete},
        "instructions": None,
        "max_output_tokens": None,
        "metadata": {},
        "model": reply.model,
        "output": items,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
    }


@dataclass(slots=True)
class _Items:
    """The output items of one answer: their ids, indices and contents."""

    script: Script
    reply: Reply
    said: Output

    def index(self, phase: Phase) -> int:
        """The ``output_index`` of a phase's item."""
        return 0 if phase == "reasoning" or not self.said.reasoning else 1

    def id(self, phase: Phase) -> str:
        prefix = {"reasoning": "rs", "content": "msg", "tool": "fc"}[phase]
        return _item_id(prefix, self.reply)

    def part(self, phase: Phase, text: str) -> dict[str, Any]:
        """The content part of a phase's item (``text`` so far)."""
        if phase == "reasoning":
            kind = (
                "summary_text" if self.script.responses_reasoning == "summary" else "reasoning_text"
            )
            return {"type": kind, "text": text}
        if self.script.refusal:
            return {"type": "refusal", "refusal": text}
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    def item(self, phase: Phase, text: str, status: str) -> dict[str, Any]:
        """A phase's output item with ``text`` (or arguments) so far."""
        item_id = self.id(phase)
        if phase == "reasoning":
            parts = [self.part(phase, text)] if text else []
            if self.script.responses_reasoning == "summary":
                return {"id": item_id, "type": "reasoning", "summary": parts, "status": status}
            return {
                "id": item_id,
                "type": "reasoning",
                "summary": [],
                "content": parts,
                "status": status,
            }
        if phase == "tool":
            return {
                "id": item_id,
                "type": "function_call",
                "call_id": _item_id("call", self.reply),
                "name": TOOL_NAME,
                "arguments": text,
                "status": status,
            }
        return {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [self.part(phase, text)] if text or status != "in_progress" else [],
        }

    def pieces(self, phase: Phase) -> tuple[str, ...]:
        """The delta of each chunk of a phase."""
        if phase == "reasoning":
            return self.said.reasoning
        if phase == "tool":
            return tuple(split(self.said.arguments, self.said.tool_chunks))
        return self.said.content

    def first(self, phase: Phase) -> int:
        """The chunk index a phase starts at."""
        return 0 if phase == "reasoning" else len(self.said.reasoning)

    def upto(self, chunks: int, status: str) -> list[dict[str, Any]]:
        """The output items after the first ``chunks`` chunks."""
        items = []
        for phase in ("reasoning", "tool" if self.said.tool_chunks else "content"):
            sent = self.pieces(phase)[: max(0, chunks - self.first(phase))]
            if sent:
                items.append(self.item(phase, "".join(sent), status))
        return items


def _final(script: Script) -> tuple[str, str | None]:
    """The terminal status of a finished answer and its incomplete reason."""
    reason = INCOMPLETE_REASONS.get(script.final_reason)
    return ("completed", None) if reason is None else ("incomplete", reason)


@dataclass(slots=True)
class _ResponsesFrames:
    """The Responses API events of one answer, numbered as they are asked for."""

    items: _Items
    sequence: int = 0
    started: bool = False
    open: Phase | None = None
    sent: int = 0
    """Chunks sent so far."""

    def _send(self, kind: str, **fields: Any) -> Send:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return Send(json.dumps(payload), event=kind)

    def _lifecycle(self, kind: str, status: str, **extra: Any) -> Send:
        items = self.items
        finished = status in ("completed", "incomplete")
        usage = _usage(items.script, items.reply) if finished else None
        chunks = self.sent if status == "failed" else items.script.chunk_count
        item_status = "incomplete" if status in ("incomplete", "failed") else "completed"
        listed = items.upto(chunks, item_status) if status != "in_progress" else []
        return self._send(kind, response=_response(items.reply, status, listed, usage, **extra))

    def opening(self) -> list[Send]:
        self.started = True
        return [
            self._lifecycle("response.created", "in_progress"),
            self._lifecycle("response.in_progress", "in_progress"),
        ]

    def _start(self) -> list[Send]:
        return [] if self.started else self.opening()

    def _open(self, phase: Phase) -> list[Send]:
        items = self.items
        item_id, index = items.id(phase), items.index(phase)
        sends = [
            self._send(
                "response.output_item.added",
                output_index=index,
                item=items.item(phase, "", "in_progress"),
            )
        ]
        if phase == "reasoning" and items.script.responses_reasoning == "summary":
            sends.append(
                self._send(
                    "response.reasoning_summary_part.added",
                    item_id=item_id,
                    output_index=index,
                    summary_index=0,
                    part=items.part(phase, ""),
                )
            )
        elif phase != "tool":
            sends.append(
                self._send(
                    "response.content_part.added",
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    part=items.part(phase, ""),
                )
            )
        return sends

    def _delta(self, phase: Phase, text: str) -> Send:
        items = self.items
        where = {"item_id": items.id(phase), "output_index": items.index(phase)}
        if phase == "tool":
            return self._send("response.function_call_arguments.delta", **where, delta=text)
        if phase == "reasoning":
            if items.script.responses_reasoning == "summary":
                kind = "response.reasoning_summary_text.delta"
                return self._send(kind, **where, summary_index=0, delta=text)
            return self._send("response.reasoning_text.delta", **where, content_index=0, delta=text)
        if items.script.refusal:
            return self._send("response.refusal.delta", **where, content_index=0, delta=text)
        return self._send(
            "response.output_text.delta", **where, content_index=0, delta=text, logprobs=[]
        )

    def _close(self, status: str) -> list[Send]:
        """The events that finish the open item, numbered in the order they are sent."""
        phase, self.open = self.open, None
        if phase is None:
            return []
        items = self.items
        text = "".join(items.pieces(phase))
        where = {"item_id": items.id(phase), "output_index": items.index(phase)}
        part = items.part(phase, text)
        if phase == "tool":
            sends = [
                self._send(
                    "response.function_call_arguments.done", **where, name=TOOL_NAME, arguments=text
                )
            ]
        elif phase == "reasoning" and items.script.responses_reasoning == "summary":
            sends = [
                self._send(
                    "response.reasoning_summary_text.done", **where, summary_index=0, text=text
                ),
                self._send(
                    "response.reasoning_summary_part.done", **where, summary_index=0, part=part
                ),
            ]
        else:
            if phase == "reasoning":
                finished = self._send(
                    "response.reasoning_text.done", **where, content_index=0, text=text
                )
            elif items.script.refusal:
                finished = self._send(
                    "response.refusal.done", **where, content_index=0, refusal=text
                )
            else:
                finished = self._send(
                    "response.output_text.done", **where, content_index=0, text=text, logprobs=[]
                )
            sends = [
                finished,
                self._send("response.content_part.done", **where, content_index=0, part=part),
            ]
        sends.append(
            self._send(
                "response.output_item.done",
                output_index=items.index(phase),
                item=items.item(phase, text, status),
            )
        )
        return sends

    def chunk(self, index: int) -> list[Send]:
        items = self.items
        phase = items.said.phase(index)
        sends = self._start()
        if phase != self.open:
            sends.extend(self._close("completed"))
            sends.extend(self._open(phase))
            self.open = phase
        sends.append(self._delta(phase, items.pieces(phase)[index - items.first(phase)]))
        self.sent = index + 1
        return sends

    def closing(self) -> list[Send]:
        status, reason = _final(self.items.script)
        item_status = "completed" if status == "completed" else "incomplete"
        sends = [*self._start(), *self._close(item_status)]
        kind = f"response.{status}"
        sends.append(self._lifecycle(kind, status, incomplete=reason))
        return sends

    def failure(self) -> list[Send]:
        script = self.items.script
        code = script.error_code or (
            "rate_limit_exceeded" if script.fault_status == 429 else "server_error"
        )
        sends = self._start()
        sends.append(self._send("error", code=code, message=script.error_message, param=None))
        error = {"code": code, "message": script.error_message}
        sends.append(self._lifecycle("response.failed", "failed", error=error))
        return sends

    def malformed(self) -> Send:
        items = self.items
        kind = "response.output_text.delta"
        payload = {
            "type": kind,
            "sequence_number": self.sequence,
            "item_id": items.id("content"),
            "output_index": items.index("content"),
            "content_index": 0,
            "delta": "truncated",
        }
        return Send(cut(json.dumps(payload)), event=kind)


def responses_plan(script: Script, reply: Reply) -> list[Step]:
    """Every step of the streamed Responses answer."""
    return timeline(script, _ResponsesFrames(_Items(script, reply, output(script))))


def responses_answer(script: Script, reply: Reply) -> dict[str, Any]:
    """The non-streamed ``response`` object."""
    status, reason = _final(script)
    item_status = "completed" if status == "completed" else "incomplete"
    items = _Items(script, reply, output(script)).upto(script.chunk_count, item_status)
    return _response(reply, status, items, _usage(script, reply), incomplete=reason)


def _reply(script: Script, asked: Asked, model: str, serial: int, created: int) -> Reply:
    return Reply(
        id=f"resp_sim{serial:06d}",
        created=created,
        model=script.model_name or model,
        prompt_tokens=prompt_tokens(asked.body.get("input"), asked.body.get("instructions")),
    )


def _check(body: Body) -> None:
    if not isinstance(body.get("input"), str | list):
        raise BadRequest("'input' must be a string or a list of items", code="invalid_input")


RESPONSES = Wire(
    name="responses",
    model=lambda asked: body_model(asked.body),
    check=_check,
    streamed=lambda asked: asked.body.get("stream") is True,
    reply=_reply,
    plan=responses_plan,
    answer=responses_answer,
    error=openai_error,
    rejection=openai_rejection,
    framing=lambda _: OPENAI_SSE,
)
"""OpenAI's Responses API (``POST /v1/responses``)."""
