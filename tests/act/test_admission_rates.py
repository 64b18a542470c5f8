"""Admission as the provider sees it: real HTTP on 127.0.0.1, a server that notes when each
request arrived, many concurrent calls against a source's ``requests_per_minute`` and
``tokens_per_minute`` — on virtual time, so minutes of waiting take no real time."""

from __future__ import annotations

import asyncio
import json
from types import TracebackType

import httpx2
import pytest
from aiohttp import web

from otel_llm import Client, Limits, LocalAdmission, Source
from otel_llm.testing import run_virtual

MESSAGES = [{"role": "user", "content": "hi"}]


class Provider:
    """A chat-completions endpoint on 127.0.0.1 answering every request with one streamed word
    and ``usage`` of ``prompt_tokens`` + ``output_tokens``; :attr:`arrivals` holds the loop
    time of each request."""

    def __init__(self, *, prompt_tokens: int = 5, output_tokens: int = 10) -> None:
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.arrivals: list[float] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        self.arrivals.append(asyncio.get_running_loop().time())
        await request.read()
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        usage = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.output_tokens,
            "total_tokens": self.prompt_tokens + self.output_tokens,
        }
        for event in (
            {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": usage},
        ):
            await response.write(f"data: {json.dumps({'model': 'm', **event})}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def __aenter__(self) -> Provider:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._answer)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    def source(self, **limits: float) -> Source:
        return Source(
            name="a", provider="openai", base_url=f"http://127.0.0.1:{self.port}/v1",
            api_key="sk-test-0123456789", model="m", **limits,
        )  # fmt: skip


class BoundedAdmission(LocalAdmission):
    """In-process admission that fails once it has been asked ``most`` times: a call that
    asks again and again without time passing ends with an error instead of a hang (an event
    loop on virtual time never moves its clock while something is ready)."""

    def __init__(self, most: int) -> None:
        super().__init__()
        self.asked = 0
        self.most = most

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        self.asked += 1
        if self.asked > self.most:
            raise RuntimeError(f"admission asked {self.asked} times")
        return await super().acquire(source, limits, tokens)


def most_in_a_window(times: list[float], window_s: float) -> int:
    """The most of ``times`` inside any half-open window of ``window_s`` seconds."""
    times = sorted(times)
    most = first = 0
    for last, at in enumerate(times):
        while times[first] <= at - window_s:
            first += 1
        most = max(most, last - first + 1)
    return most


def test_concurrent_calls_reach_the_provider_at_the_request_rate() -> None:
    """30 calls at once against ``requests_per_minute=6``: six reach the provider at once (the
    full bucket), then one every 10 s — never more than a full bucket and a minute's refill in
    any minute, and every call answered. (The waiting calls hung: a bucket refilled for exactly
    the wait it had named held 0.9999999999999998 of a request and named a wait of 2e-15 s,
    which a clock reading 40.0 cannot pass.)"""

    async def main() -> tuple[list[float], float]:
        async with Provider() as provider:
            started = asyncio.get_running_loop().time()
            async with Client(
                [provider.source(requests_per_minute=6)],
                stall_window_s=3600,
                call_deadline_s=None,
                admission=BoundedAdmission(most=10_000),  # each waiting call asks every second
            ) as client:
                await asyncio.gather(*(client.chat(MESSAGES) for _ in range(30)))
            return provider.arrivals, started

    arrivals, started = run_virtual(main(), real_io=True)
    seconds = sorted(at - started for at in arrivals)
    assert len(seconds) == 30, "one request a call"
    assert seconds[:6] == pytest.approx([0.0] * 6, abs=0.01)
    assert seconds[6:] == pytest.approx([10.0 * n for n in range(1, 25)], abs=0.01)
    assert most_in_a_window(seconds, 60.0) <= 6 + 6


async def test_a_cancelled_attempt_keeps_its_request_and_gives_back_its_tokens() -> None:
    """A call cancelled while its request waits for the first chunk keeps the request it was
    admitted for (the provider may have counted it) and gives back every estimated token (it
    streamed nothing)."""
    admission = LocalAdmission(clock=lambda: 0.0)  # no refill: what is left is what was kept
    never, arrived = asyncio.Event(), asyncio.Event()

    async def silent(request: httpx2.Request) -> httpx2.Response:
        arrived.set()
        await never.wait()
        raise AssertionError("never answered")

    limits = Limits(requests_per_minute=2, tokens_per_minute=1000)
    source = Source(
        name="a", provider="openai", base_url="http://a.test/v1", api_key="sk-test-0123456789",
        model="m", requests_per_minute=2, tokens_per_minute=1000,
    )  # fmt: skip
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(silent))
    async with Client([source], admission=admission, http_client=http) as client:
        call = asyncio.create_task(client.chat(MESSAGES, max_tokens=500))
        await asyncio.wait_for(arrived.wait(), 10)  # admitted, and the request is under way
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    await http.aclose()
    assert await admission.acquire("a", limits, 1000) == 0.0, "tokens were kept"
    assert await admission.acquire("a", limits, 1) > 0, "the request was given back"
