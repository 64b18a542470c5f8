"""``otel_llm.Client``: an async client for OpenAI-compatible endpoints that meters every call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import httpx
from opentelemetry import trace

from otel_llm import _errors as e
from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm._version import __version__
from otel_llm.act._attempt import Attempt, completion_attributes
from otel_llm.act._call_span import CallSpan
from otel_llm.act._result import ChatResult
from otel_llm.act._source import Source
from otel_llm.act._stats import CallStats
from otel_llm.measure._stalls import validate_threshold_ms


class Client:
    """Calls OpenAI-compatible sources in priority order and returns metered results.

    Use as ``async with Client([...]) as client: result = await client.chat(messages=...)``.
    """

    def __init__(
        self,
        sources: Sequence[Source],
        *,
        stall_threshold_ms: int = DEFAULTS.stall_threshold_ms,
        tracer_provider: trace.TracerProvider | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not sources:
            raise e.ConfigurationError("sources", "at least one source is required")
        names = [source.name for source in sources]
        if len(set(names)) != len(names):
            raise e.ConfigurationError("sources", f"source names must be unique, got {names}")
        self.sources = tuple(sorted(sources, key=lambda source: source.priority))
        self.stall_threshold_ms = validate_threshold_ms(stall_threshold_ms)
        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer("otel_llm", __version__)
        self._http = http_client or httpx.AsyncClient()
        self._owns_http = http_client is None

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connections the client opened."""
        if self._owns_http:
            await self._http.aclose()

    def __repr__(self) -> str:
        return f"Client(sources={[source.name for source in self.sources]!r})"

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        stream: bool = True,
        **params: Any,
    ) -> ChatResult:
        """Run one chat call; the whole answer comes back once the winning stream has ended."""
        payload: dict[str, Any] = {"messages": list(messages), **params}
        with CallSpan(
            self._tracer, operation=sc.OPERATION_CHAT, model=self.sources[0].model, stream=stream
        ) as call:
            reasons: dict[str, str] = {}
            tried: list[str] = []
            for number, source in enumerate(self.sources, start=1):
                tried.append(source.name)
                attempt = Attempt(
                    self._tracer,
                    source,
                    number=number,
                    stream=stream,
                    threshold_ms=self.stall_threshold_ms,
                    context=call.context,
                )
                try:
                    completion = await attempt.run(self._http, payload)
                except e.TransientError as exc:
                    reasons[source.name] = str(exc)
                    continue
                assert attempt.figures is not None
                stats = CallStats.from_winner(
                    attempt.figures,
                    self.stall_threshold_ms,
                    attempts=number,
                    sources_tried=tuple(tried),
                )
                attrs = completion_attributes(completion)
                attrs[sc.GEN_AI_PROVIDER_NAME] = source.provider
                call.record(stats, attrs, winner=number)
                return ChatResult.of(completion, source.name, stats)
            raise e.AllSourcesExhausted("every source failed", reasons)
