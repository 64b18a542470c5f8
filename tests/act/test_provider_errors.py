"""What each API's error says, read from hostile bodies: the provider's own words are kept —
one line, its control and format characters written as escapes, its key redacted — whatever
the wire format, the HTTP status, or the part of the answer it came in (an error body, an error
event, a refusal's explanation)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from otel_llm import Client, Source
from otel_llm import _errors as e
from otel_llm._act._http_errors import ErrorContext
from otel_llm._act._wire import wire_for
from otel_llm.simulator import Script, SimulatedProvider
from tests.support.sim_sources import sim_source

KEY = "sk-hostile-0123456789SECRET"
HOSTILE = f"bad\nERROR forged log line \x1b[2J\x1b]0;title\x07 \u202eevil\u2028{KEY}"
"""A provider's message that would start a line of its own, clear a terminal, retitle it,
reverse what follows and carry the key."""

BODIES: dict[str, dict[str, Any]] = {
    "chat": {"error": {"message": HOSTILE, "type": "invalid_request_error", "code": "x\ny"}},
    "anthropic": {
        "type": "error",
        "error": {"type": "invalid_request_error\x1b[31m", "message": HOSTILE},
    },
    "gemini": {"error": {"code": 400, "message": HOSTILE, "status": "INVALID\nARGUMENT"}},
}


def _context() -> ErrorContext:
    return ErrorContext(source="s", secrets=(KEY,))


def _one_line(text: str) -> None:
    assert KEY not in text
    assert text.isprintable(), repr(text)


@pytest.mark.parametrize("api", ["chat", "anthropic", "gemini"])
@pytest.mark.parametrize("status", [400, 503, None], ids=["400", "503", "in-stream"])
def test_a_providers_words_are_kept_on_one_line(api: str, status: int | None) -> None:
    """The message keeps the provider's words with every control character, line break and
    bidirectional override written as an escape (a log line cannot be forged, a terminal not
    restyled), the key redacted — and the code too."""
    error = wire_for(api).error(status, json.dumps(BODIES[api]), _context())
    _one_line(str(error))
    _one_line(error.code or "")
    assert "bad\\nERROR forged log line \\u001b[2J\\u001b]0;title\\u0007" in str(error)
    assert "\\u202eevil\\u2028[REDACTED]" in str(error)


@pytest.mark.parametrize("api", ["chat", "anthropic", "gemini"])
def test_an_error_without_words_says_so(api: str) -> None:
    """An error event with no data at all (or a body of nothing) says it came without a
    message, never "HTTP an error"."""
    in_stream = wire_for(api).error(None, "", _context())
    assert isinstance(in_stream, e.ServerError)
    assert in_stream.message == "answered an error without a message"
    assert wire_for(api).error(503, "", _context()).message == "answered 503: HTTP 503"


def _source(api: str) -> Source:
    provider = {"chat": "openai", "anthropic": "anthropic", "gemini": "gemini"}[api]
    return Source(name="s", provider=provider, model="m", api_key=KEY)


@pytest.mark.parametrize(
    ("api", "document"),
    [
        ("chat", {"choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "refusal": HOSTILE}}]}),
        ("anthropic", {"type": "message", "content": [], "stop_reason": "refusal",
                       "stop_details": {"category": "cyber\x1b[0m", "explanation": HOSTILE}}),
        ("gemini", {"candidates": [{"finishReason": "SAFETY", "finishMessage": HOSTILE}]}),
        ("gemini", {"promptFeedback": {"blockReason": "OTHER\r\n",
                                       "blockReasonMessage": HOSTILE}}),
    ],
    ids=["chat-refusal", "anthropic-refusal", "gemini-safety", "gemini-blocked"],
)  # fmt: skip
def test_a_refusals_words_are_kept_on_one_line(api: str, document: dict[str, Any]) -> None:
    """A refusal's explanation is the provider's text too: on one line, the key redacted. A
    chat completions refusal is the model's own words, its output: they are the error's
    ``refusal`` (the key redacted), and the message does not carry them."""
    with pytest.raises(e.ContentFiltered) as caught:
        wire_for(api).answer(_source(api), document)
    _one_line(str(caught.value))
    _one_line(caught.value.code or "")
    if api == "chat":
        assert "forged" not in str(caught.value)
        assert caught.value.refusal == HOSTILE.replace(KEY, "[REDACTED]")
    else:
        assert "ERROR forged log line" in str(caught.value)


def test_an_azure_404_names_the_deployment_not_a_version() -> None:
    """Azure answers 404 to a deployment the resource does not have (``DeploymentNotFound``,
    the usual slip). Its base URL is the resource endpoint, which names no API version by
    design: the message names the deployment to check, never a ``…/v1`` to try instead."""

    async def main() -> BaseException:
        script = Script(error_status=404, error_message="The API deployment does not exist.")
        async with SimulatedProvider(default=script) as sim:
            source = sim_source("azure", sim, model="gpt-4o", deployment="prod")
            async with Client([source], max_attempts=1) as client:
                with pytest.raises(e.NotFound) as caught:
                    await client.chat([{"role": "user", "content": "hi"}])
        return caught.value

    error = asyncio.run(main())
    assert "/openai/deployments/prod/chat/completions" in str(error)
    assert "try" not in str(error)
    assert "/v1" not in str(error)
    assert "deployment 'prod'" in str(error)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_a_404_below_a_base_url_without_its_version_suggests_one(provider: str) -> None:
    """Elsewhere a base URL without its API version is the usual cause of a 404: the message
    suggests the URL with ``/v1``."""

    async def main() -> BaseException:
        async with SimulatedProvider(default=Script(error_status=404)) as sim:
            source = Source(name="s", provider=provider, model="m", api_key=KEY, base_url=sim.url)
            async with Client([source], max_attempts=1) as client:
                with pytest.raises(e.NotFound) as caught:
                    await client.chat([{"role": "user", "content": "hi"}])
        return caught.value

    assert "the base URL ends in its API version: try" in str(asyncio.run(main()))
