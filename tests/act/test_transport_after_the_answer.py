"""What a server does after a complete answer never costs the answer: a connection held open or
broken after the end marker, or after every choice finished without one, leaves the call
answered by its one request (real HTTP over loopback, a raw server per case)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import pytest
from aiohttp import web

from otel_llm import Client, Source
from otel_llm import _errors as e
from otel_llm._defaults import DEFAULTS

Then = Literal["hang", "reset", "close"]
Event = tuple[str | None, Any]
"""An event's name and data (a float: a pause of that many seconds)."""

_CHUNK = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
CHAT: list[Event] = [
    (None, {**_CHUNK, "choices": [{"index": 0, "delta": {"content": "hello"}}]}),
    (None, {**_CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    (None, {**_CHUNK, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
    (None, "[DONE]"),
]
MESSAGES: list[Event] = [
    ("message_start", {"type": "message_start", "message": {"id": "msg_1", "model": "m"}}),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "hello"},
        },
    ),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
    ("message_stop", {"type": "message_stop"}),
]
GEMINI: list[Event] = [
    (None, {"candidates": [{"content": {"parts": [{"text": "hel"}]}, "index": 0}]}),
    (None, {"candidates": [{"content": {"parts": [{"text": "lo"}]}, "finishReason": "STOP"}]}),
]
ANSWERS: dict[str, list[Event]] = {"openai": CHAT, "anthropic": MESSAGES, "gemini": GEMINI}
"""Each API's answer "hello", its end marker last where the API has one."""

TIMEOUT_S = 1.0
"""Each source's read timeout: what a held-open connection costs where nothing bounds it."""

LONG_TIMEOUT_S = 30.0
"""The read timeout where the wait after the finish (a second) is what is measured."""


def _stream(events: list[Event], then: Then) -> Callable[[web.Request], Awaitable[Any]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for name, data in events:
            if isinstance(data, float):  # a pause of this many seconds
                await asyncio.sleep(data)
                continue
            text = data if isinstance(data, str) else json.dumps(data)
            await response.write(
                ((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode()
            )
        if then == "reset":
            assert request.transport is not None
            request.transport.abort()
        elif then == "hang":
            await asyncio.sleep(60)
        else:
            await response.write_eof()
        return response

    return handle


@asynccontextmanager
async def serving(events: list[Event], then: Then) -> AsyncIterator[tuple[str, list[str]]]:
    """A server answering every request with ``events``, then doing ``then``; yields its base
    URL and the paths it was asked for."""
    asked: list[str] = []
    handle = _stream(events, then)

    async def counted(request: web.Request) -> Any:
        asked.append(request.path)
        return await handle(request)

    app = web.Application()
    app.router.add_route("POST", "/{tail:.*}", counted)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1", asked
    finally:
        await runner.cleanup()


async def ask(
    provider: str, events: list[Event], then: Then, timeout_s: float = TIMEOUT_S
) -> tuple[Any, list[str], float]:
    async with serving(events, then) as (url, asked):
        source = Source(
            name="a", provider=provider, base_url=url, model="m", api_key="k", timeout_s=timeout_s
        )
        async with Client([source], backoff_base_s=0.01, backoff_max_s=0.02) as client:
            began = time.monotonic()
            try:
                answer: Any = await client.chat([{"role": "user", "content": "hi"}])
            except e.OtelLLMError as exc:
                answer = exc
            return answer, asked, time.monotonic() - began


@pytest.mark.parametrize("then", ["hang", "reset", "close"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_after_the_end_marker_nothing_costs_the_answer(provider: str, then: Then) -> None:
    """After ``[DONE]`` / ``message_stop`` the body is read on briefly (to pool the connection):
    a server holding it open costs at most that brief read, not the read timeout, and one that
    breaks it costs nothing; the answer came from the one request."""
    answer, asked, took = await ask(provider, ANSWERS[provider], then)
    assert not isinstance(answer, Exception), answer
    assert (answer.text, answer.finish_reason, len(asked)) == ("hello", "stop", 1)
    assert answer.stats.attempts == 1
    if then == "hang":
        # the brief read, not the 1 s read timeout (half of it is scheduling margin)
        assert DEFAULTS.drain_after_done_s < TIMEOUT_S / 2
        assert took < TIMEOUT_S


@pytest.mark.parametrize("then", ["hang", "reset"])
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_a_finished_answer_without_its_end_marker_stands(provider: str, then: Then) -> None:
    """Every choice finished, then the connection broke (or stayed silent to the read timeout)
    before the end marker or a usage frame: the answer is complete, nothing is asked again."""
    events = [event for event in ANSWERS[provider] if event[1] != "[DONE]"]
    events = [event for event in events if event[0] != "message_stop"]
    if provider == "openai":
        events = events[:2]  # no usage frame either
    answer, asked, took = await ask(provider, events, then, timeout_s=LONG_TIMEOUT_S)
    assert not isinstance(answer, Exception), answer
    assert (answer.text, answer.finish_reason, len(asked)) == ("hello", "stop", 1)
    if then == "hang":
        # a silence after the finish costs the brief wait for what may follow, not the read
        # timeout (the margin is many times the scheduling noise of a loaded machine)
        assert DEFAULTS.wait_after_finish_s * 5 < LONG_TIMEOUT_S
        assert took < LONG_TIMEOUT_S / 2


async def test_a_usage_frame_soon_after_the_finish_is_read() -> None:
    """The wait after the finish is for what follows it: a usage frame that comes a moment
    later (well within the wait) is in the answer, and the silence after it costs no more."""
    pause = DEFAULTS.wait_after_finish_s / 20  # most of the wait left as scheduling margin
    events = [*CHAT[:2], (None, pause), CHAT[2]]
    answer, asked, took = await ask("openai", events, "hang", timeout_s=LONG_TIMEOUT_S)
    assert not isinstance(answer, Exception), answer
    assert (answer.text, answer.usage.input_tokens, answer.usage.output_tokens) == ("hello", 1, 1)
    assert len(asked) == 1
    assert took < LONG_TIMEOUT_S / 2


async def test_a_usage_frame_after_the_wait_is_not_waited_for() -> None:
    """A usage frame later than the wait after the finish is not waited for: the answer
    stands without the usage (as an API that reports none)."""
    events = [*CHAT[:2], (None, DEFAULTS.wait_after_finish_s * 3), CHAT[2]]
    answer, _, took = await ask("openai", events, "hang", timeout_s=LONG_TIMEOUT_S)
    assert not isinstance(answer, Exception), answer
    assert (answer.text, answer.finish_reason, answer.usage) == ("hello", "stop", None)
    assert took < LONG_TIMEOUT_S / 2


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_a_break_before_the_finish_is_still_a_failure(provider: str) -> None:
    """The rule is completeness: a connection broken before the finish reason fails the
    attempt as before (every request tried, nothing answered)."""
    events = ANSWERS[provider][:1]
    answer, asked, _ = await ask(provider, events, "reset")
    assert isinstance(answer, e.AllSourcesExhausted), answer
    assert len(asked) >= 2, "a broken stream is retried"
