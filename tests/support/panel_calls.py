"""Real SDK spans for the panel tests and the dashboard benchmark: the client against simulated
providers, from two services — smooth, stalled, hedged (won and cancelled), failed over, killed
by the watchdog, failed outright, cancelled by the caller, not streamed — in a few seconds."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Final

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan

from otel_llm import AllSourcesExhausted, Client, Source
from otel_llm.simulator import Script, Silence, SimulatedProvider
from otel_llm.testing import Spans

MESSAGES: Final = [{"role": "user", "content": "hi"}]
_FAST: Final[dict[str, Any]] = {
    "first_chunk_delay_s": 0.0,
    "chunk_interval_s": 0.005,
    "chunk_count": 20,
}
SCRIPTS: Final = {
    "smooth": Script(**_FAST),
    "stalls": Script(
        **_FAST,
        silences=(Silence(after_chunk=3, duration_s=0.15), Silence(after_chunk=9, duration_s=0.45)),
    ),
    "short-stall": Script(**_FAST, silences=(Silence(after_chunk=5, duration_s=0.3),)),
    "stall": Script(
        **_FAST, silences=(Silence(after_chunk=3, duration_s=3.0, keepalive_every_s=0.05),)
    ),
    "dead": Script(**_FAST, silences=(Silence(after_chunk=4, duration_s=2.0),)),
    "fail": Script(error_status=500),
}
"""The simulated answers, by the model a source asks for."""

FRONT: Final = "chat-api"
BATCH: Final = "batch-jobs"
"""The two services (resource ``service.name``) the spans come from."""
EU: Final = 'eu "west"'
"""The third source: a name with a ``"``, which Grafana's ``sqlstring`` format (the DuckDB
panels') writes as ``\\"``, and a space."""
THRESHOLD_MS: Final = 100
"""The stall threshold every call is measured at."""


@contextlib.contextmanager
def _service(name: str) -> Iterator[Spans]:
    """Spans whose resource names service ``name``."""
    before = os.environ.get("OTEL_SERVICE_NAME")
    os.environ["OTEL_SERVICE_NAME"] = name
    try:
        spans = Spans()
    finally:
        if before is None:
            del os.environ["OTEL_SERVICE_NAME"]
        else:
            os.environ["OTEL_SERVICE_NAME"] = before
    yield spans
    spans.check()
    spans.provider.shutdown()


def _source(provider: SimulatedProvider, name: str, model: str, **fields: Any) -> Source:
    return Source(
        name=name,
        provider=fields.pop("vendor", "sim"),
        base_url=provider.base_url,
        model=model,
        **fields,
    )


def _options(spans: Spans) -> dict[str, Any]:
    return {
        "stall_threshold_ms": THRESHOLD_MS,
        "backoff_base_s": 0.01,
        "tracer_provider": spans.provider,
        "meter_provider": _METERS.get(),
    }


_METERS: ContextVar[MeterProvider | None] = ContextVar("panel_meters", default=None)
"""The meter provider the clients of :func:`panel_spans` record into (``None``: the global)."""


async def _front(provider: SimulatedProvider, spans: Spans) -> None:
    src, options = _source, _options(spans)
    async with Client([src(provider, "a", "smooth")], **options) as client:
        await client.chat(MESSAGES)
        await client.chat(MESSAGES, stream=False)
    async with Client([src(provider, "a", "stalls")], **options) as client:
        await client.chat(MESSAGES)
    async with Client([src(provider, EU, "stalls", vendor="sim-eu")], **options) as client:
        await client.chat(MESSAGES)
        await client.chat(MESSAGES)
    hedged = [src(provider, "a", "stall"), src(provider, "b", "smooth", priority=1)]
    async with Client(hedged, hedge_stall_after_s=0.2, **options) as client:
        await client.chat(MESSAGES)
    failover = [src(provider, "a", "fail"), src(provider, "b", "short-stall", priority=1)]
    async with Client(failover, same_source_retries=0, **options) as client:
        await client.chat(MESSAGES)


async def _cancelled(provider: SimulatedProvider, client: Client, requests: int) -> None:
    """A call the caller cancels once ``requests`` more requests reached the provider."""
    task = asyncio.create_task(client.chat(MESSAGES))
    await provider.stats.wait_for_requests(provider.stats.requests + requests)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _batch(provider: SimulatedProvider, spans: Spans) -> None:
    src, options = _source, _options(spans)
    async with Client([src(provider, "a", "fail")], max_attempts=2, **options) as client:
        with contextlib.suppress(AllSourcesExhausted):
            await client.chat(MESSAGES)
    killed = [
        src(provider, "a", "dead", inter_token_timeout_s=0.25),
        src(provider, "b", "smooth", priority=1),
    ]
    async with Client(killed, same_source_retries=0, **options) as client:
        await client.chat(MESSAGES)
    async with Client([src(provider, EU, "stalls", vendor="sim-eu")], **options) as client:
        await client.chat(MESSAGES)
        await _cancelled(provider, client, 1)
    both = [src(provider, "a", "stall"), src(provider, "b", "stall", priority=1)]
    async with Client(both, hedge_stall_after_s=0.1, **options) as client:
        await _cancelled(provider, client, 2)


async def _run(front: Spans, batch: Spans) -> None:
    async with SimulatedProvider(scripts=SCRIPTS) as provider:
        await asyncio.gather(_front(provider, front), _batch(provider, batch))


def panel_spans(meter_provider: MeterProvider | None = None) -> list[ReadableSpan]:
    """Every finished span of both services, through the deriving processor; the clients'
    metrics go to ``meter_provider`` (default: the global one)."""
    token = _METERS.set(meter_provider)
    try:
        with _service(FRONT) as front, _service(BATCH) as batch:
            asyncio.run(_run(front, batch))
            return [*front.finished(), *batch.finished()]
    finally:
        _METERS.reset(token)
