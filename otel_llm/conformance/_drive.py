"""One case's call through the real SDK of its wire format, consumed as the case says.

Each wire format is called through its SDK's async client, pointed at the simulated provider
on the same loop: ``openai.AsyncOpenAI`` (chat completions with ``include_usage``, and the
Responses API), ``anthropic.AsyncAnthropic`` (Messages), ``google.genai.Client(...).aio``
(Gemini). The case's script travels in the request's ``X-Sim-Script`` header. No retries.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from otel_llm.conformance._case import Case
from otel_llm.simulator import SCRIPT_HEADER, SimulatedProvider, WireName

MODEL = "conformance"
PROMPT = "tell me something"
API_KEY = "sk-conformance"

SDKS: Final[Mapping[WireName, str]] = {
    "chat": "openai",
    "responses": "openai",
    "anthropic": "anthropic",
    "gemini": "google-genai",
}
"""The distribution of the SDK each wire format's cases are played through."""


def missing_sdks(wires: Iterable[WireName]) -> dict[WireName, str]:
    """The wire formats among ``wires`` whose SDK is not installed, with the SDK's name."""
    missing: dict[WireName, str] = {}
    for wire in wires:
        try:
            importlib.metadata.version(SDKS[wire])
        except importlib.metadata.PackageNotFoundError:
            missing[wire] = SDKS[wire]
    return missing


@dataclass(frozen=True, slots=True)
class Driven:
    """What the consumer saw."""

    items: int
    """Items the SDK handed to the consumer."""
    raised: str | None
    """The exception the SDK raised to the consumer, by type name."""


class _Sdk:
    """One SDK's async client, making one streamed request."""

    async def open(self, headers: dict[str, str], case: Case) -> Any:
        raise NotImplementedError

    async def close_stream(self, stream: Any) -> None:
        await stream.close()

    async def close(self) -> None:
        raise NotImplementedError


class _OpenAI(_Sdk):
    def __init__(self, provider: SimulatedProvider, responses: bool) -> None:
        import openai

        self.client = openai.AsyncOpenAI(base_url=provider.base_url, api_key=API_KEY, max_retries=0)
        self.responses = responses

    async def open(self, headers: dict[str, str], case: Case) -> Any:
        if self.responses:
            return await self.client.responses.create(
                model=MODEL, input=PROMPT, stream=True, extra_headers=headers
            )
        extra: dict[str, Any] = {}
        if case.script.choices > 1:
            extra["n"] = case.script.choices
        return await self.client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": PROMPT}],
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=headers,
            **extra,
        )

    async def close(self) -> None:
        await self.client.close()


class _Anthropic(_Sdk):
    def __init__(self, provider: SimulatedProvider) -> None:
        import anthropic

        self.client = anthropic.AsyncAnthropic(
            base_url=provider.url, api_key=API_KEY, max_retries=0
        )

    async def open(self, headers: dict[str, str], case: Case) -> Any:
        return await self.client.messages.create(
            model=MODEL,
            max_tokens=4096,
            messages=[{"role": "user", "content": PROMPT}],
            stream=True,
            extra_headers=headers,
        )

    async def close(self) -> None:
        await self.client.close()


class _Gemini(_Sdk):
    def __init__(self, provider: SimulatedProvider) -> None:
        from google import genai
        from google.genai import types

        self.types = types
        options = types.HttpOptions(base_url=provider.url, retry_options=None)
        self.client = genai.Client(api_key=API_KEY, http_options=options)

    async def open(self, headers: dict[str, str], case: Case) -> Any:
        types = self.types
        config = types.GenerateContentConfig(http_options=types.HttpOptions(headers=headers))
        return await self.client.aio.models.generate_content_stream(
            model=MODEL, contents=PROMPT, config=config
        )

    async def close_stream(self, stream: Any) -> None:
        await stream.aclose()

    async def close(self) -> None:
        await self.client.aio.aclose()


def sdk_for(case: Case, provider: SimulatedProvider) -> _Sdk:
    """The SDK client of the case's wire format."""
    if case.wire in ("chat", "responses"):
        return _OpenAI(provider, responses=case.wire == "responses")
    if case.wire == "anthropic":
        return _Anthropic(provider)
    return _Gemini(provider)


async def _consume(case: Case, stream: Any, sdk: _Sdk, started: float) -> tuple[int, bool]:
    """Read the stream as the case's consumer does; returns items read and whether it stopped
    early by leaving the loop."""
    loop = asyncio.get_running_loop()
    consumer = case.consumer
    pauses = list(consumer.pauses)
    items = 0
    iterator: AsyncIterator[Any] = aiter(stream)
    async for _ in iterator:
        items += 1
        elapsed = loop.time() - started
        due = [pause for pause in pauses if elapsed > pause.at_s]
        for pause in due:  # the application's own work between two reads
            pauses.remove(pause)
            await asyncio.sleep(pause.for_s)
        if consumer.stop in ("break", "close") and elapsed > consumer.stop_at_s:
            if consumer.stop == "close":
                await sdk.close_stream(stream)
            return items, True
    return items, False


async def drive(case: Case, sdk: _Sdk) -> Driven:
    """Make the case's call through ``sdk`` (one client per wire format serves every case of
    a run) and consume it; the stream of a ``break`` consumer is dropped and collected before
    this returns."""
    loop = asyncio.get_running_loop()
    headers = {SCRIPT_HEADER: case.script.model_dump_json()}
    started = loop.time()
    items = 0
    raised: str | None = None
    try:
        if case.consumer.stop == "cancel":
            async with asyncio.timeout_at(started + case.consumer.stop_at_s):
                stream = await sdk.open(headers, case)
                items, _ = await _consume(case, stream, sdk, started)
        else:
            stream = await sdk.open(headers, case)
            items, _ = await _consume(case, stream, sdk, started)
    except TimeoutError:
        raised = "cancelled"
    except Exception as exc:  # the SDK's own error for a mid-stream error or a broken stream
        raised = type(exc).__name__
    if case.consumer.stop == "break":
        stream = None
        gc.collect()  # the abandoned stream is collected, as it would be in an application
    for _ in range(3):
        await asyncio.sleep(0)
    return Driven(items, raised)
