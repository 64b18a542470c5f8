"""Requests no SDK would send: the simulated provider answers each with HTTP 400 and the
reason, in the format's error shape, never a 500 and a traceback in the server's log."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx2
import pytest

from otel_llm.simulator import SimulatedProvider

NESTED = b"[" * 100_000 + b"]" * 100_000
"""Valid JSON nested deeper than the parser's recursion limit."""


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    async with SimulatedProvider() as provider, httpx2.AsyncClient(base_url=provider.url) as http:
        yield http


@pytest.mark.parametrize(
    "path",
    ["/v1/chat/completions", "/v1/messages", "/v1beta/models/m:generateContent", "/v1/embeddings"],
)
async def test_a_body_nested_past_the_parsers_limit_is_refused(
    client: httpx2.AsyncClient, path: str
) -> None:
    """A body nested 100,000 deep is 'not JSON' (it was a RecursionError: HTTP 500)."""
    response = await client.post(path, content=NESTED, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert "not JSON" in response.text


async def test_a_draw_key_that_is_not_unicode_text_is_refused(client: httpx2.AsyncClient) -> None:
    """A ``sim_key`` holding a lone surrogate (valid JSON, no text) is refused like any key
    that is not text (it was a UnicodeEncodeError: HTTP 500)."""
    body = '{"model": "m", "messages": [], "sim_key": "\\ud800"}'
    response = await client.post(
        "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    error = json.loads(response.text)["error"]
    assert (error["code"], "sim_key" in error["message"]) == ("invalid_key", True)
