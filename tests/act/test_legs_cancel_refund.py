"""``otel_llm/_act/_legs.py``: a hedge token taken for a hedge whose admission is still pending
when the call is cancelled goes back to its trigger's bucket (no hedge was started). Virtual
time over the scripted transport: exact seconds, no real waiting."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import httpx2

from otel_llm import Limits, LocalAdmission
from otel_llm.testing import Scripted, Spans, run_virtual, sse_answer
from otel_llm.testing._scripted import Handler
from tests.support.scripted_clients import MESSAGES, client


def _stalling_stream() -> Handler:
    """A streamed answer: its first chunk at 1 s, a second at 1.1 s, then 30 s of silence."""

    async def body() -> AsyncIterator[bytes]:
        await asyncio.sleep(1.0)
        for word in ("w0 ", "w1 "):
            delta = {"choices": [{"index": 0, "delta": {"content": word}}]}
            yield f"data: {json.dumps(delta)}\n\n".encode()
            await asyncio.sleep(0.1)
        await asyncio.sleep(30.0)
        yield b"data: [DONE]\n\n"

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    return handler


class SlowForB(LocalAdmission):
    """Admission that takes 10 s to answer for source b (a remote backend's round trip) and
    says when it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        if source == "b":
            self.asked.set()
            await asyncio.sleep(10.0)
        return await super().acquire(source, limits, tokens)


def test_a_cancelled_call_gives_back_the_token_of_a_hedge_waiting_for_admission() -> None:
    """The stall hedge fires at 3.1 s and waits for b's admission; the caller cancels the call
    then: the stall bucket holds as many tokens as before the call (it was full, so the
    round's earning added nothing)."""
    spans = Spans()
    script = Scripted({"a": [_stalling_stream()], "b": [sse_answer()]})
    admission = SlowForB()

    async def main() -> tuple[float, float]:
        async with client(script, spans, admission=admission, hedge_stall_after_s=2.0) as c:
            budgets = c._hedge_budgets
            before = budgets.stall.tokens
            task = asyncio.create_task(c.chat(MESSAGES))
            await asyncio.wait_for(admission.asked.wait(), timeout=20.0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return before, budgets.stall.tokens

    before, after = run_virtual(main())
    assert after == before
