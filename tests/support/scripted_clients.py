"""Clients on a scripted upstream (in memory), for the tests of the retry loop and its
policies: sources ``a``, ``b``… answer at ``http://<name>.test/v1``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx2

from otel_llm import Client, Source
from otel_llm.testing import Scripted, Spans, sse_answer
from otel_llm.testing._scripted import Handler

MESSAGES = [{"role": "user", "content": "hi"}]


def source(host: str, **fields: object) -> Source:
    """Source ``host`` at ``http://<host>.test/v1``; ``fields`` add to or replace those."""
    given: dict[str, object] = {
        "name": host,
        "provider": "sim",
        "base_url": f"http://{host}.test/v1",
        "model": f"{host}-m",
    }
    return Source(**{**given, **fields})


def client(script: Scripted, spans: Spans, *sources: Source, **options: object) -> Client:
    return Client(
        list(sources) or [source("a"), source("b")],
        http_client=script.client(),
        tracer_provider=spans.provider,
        backoff_base_s=0.01,
        backoff_max_s=0.02,
        seed=7,
        **options,  # type: ignore[arg-type]
    )


def timed_stream(
    first_s: float, *, chunks: int = 6, gap_after: int | None = None, gap_s: float = 0.0
) -> Handler:
    """A streamed answer: the first chunk after ``first_s``, ``chunks`` chunks 0.1 s apart, and
    a silence of ``gap_s`` after chunk ``gap_after`` (virtual seconds)."""
    words = [f"w{n} " for n in range(chunks)]
    tail = sse_answer(words).text.split("\n\n")[chunks:]

    async def body() -> AsyncIterator[bytes]:
        await asyncio.sleep(first_s)
        for number, word in enumerate(words, start=1):
            delta = {"choices": [{"index": 0, "delta": {"content": word}}]}
            yield f"data: {json.dumps(delta)}\n\n".encode()
            await asyncio.sleep(gap_s if number == gap_after else 0.1)
        yield "\n\n".join(tail).encode()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    return handler
