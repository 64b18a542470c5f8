"""The in-memory simulated provider (``otel_llm.testing._memory_provider.MemoryProvider``)
answers as the simulated provider's chat completions route does: the same bytes for the same
script (the ids, timestamps and origin header aside)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re

import httpx2
import pytest

from otel_llm.simulator import SCRIPT_HEADER, Script, Silence, SimulatedProvider
from otel_llm.testing import run_virtual
from otel_llm.testing._memory_provider import MemoryProvider

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

SCRIPTS = {
    "empty-delta keepalives": Script(
        chunk_count=3,
        keepalive="empty_delta",
        silences=(Silence(after_chunk=0, duration_s=0.05, keepalive_every_s=0.02),),
    ),
    "error fault, not streamed": Script(chunk_count=3, fault="error", fault_status=529),
    "plain": Script(chunk_count=3),
}


def anonymous(text: str) -> str:
    """``text`` without what differs between two answers of one script: ids, timestamps and
    the spacing of a JSON answer."""
    with contextlib.suppress(ValueError):  # a stream is no JSON
        text = json.dumps(json.loads(text))
    text = re.sub(r'"chatcmpl-[a-z]+\d+"', '"chatcmpl-id"', text)
    return re.sub(r'"created": \d+', '"created": 0', text)


async def from_server(script: Script, stream: bool) -> tuple[int, str]:
    async with (
        SimulatedProvider(time_scale=0.01) as provider,
        httpx2.AsyncClient(base_url=provider.base_url) as http,
    ):
        response = await http.post(
            "/chat/completions",
            json={**BODY, "stream": stream},
            headers={SCRIPT_HEADER: script.model_dump_json()},
        )
        return response.status_code, anonymous(response.text)


def from_memory(script: Script, stream: bool) -> tuple[int, str]:
    async def main() -> tuple[int, str]:
        provider = MemoryProvider(lambda _rng: script, {"a": 1})
        async with provider.client() as http:
            response = await http.post(
                "http://a.test/v1/chat/completions", json={**BODY, "stream": stream}
            )
            return response.status_code, anonymous(response.text)

    return run_virtual(main())


@pytest.mark.parametrize("name", sorted(SCRIPTS))
@pytest.mark.parametrize("stream", [True, False])
def test_memory_answers_as_the_server_does(name: str, stream: bool) -> None:
    """Keepalives in the script's own form (it sent ``: ping`` for empty-delta keepalives) and
    a non-streamed ``error`` fault as the ``fault_status`` error (it cut the answer in half)."""
    script = SCRIPTS[name]
    served = asyncio.run(from_server(script, stream))
    assert from_memory(script, stream) == served
    if not stream and script.fault == "error":
        status, text = served
        assert (status, json.loads(text)["error"]["message"]) == (529, script.error_message)
