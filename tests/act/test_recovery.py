"""A recovered source gets its traffic back quickly, and an outage costs few probes — with the
default settings, on virtual time: outages of 20, 45 and 120 s, a call every 1–5 s."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import httpx2
import pytest

from otel_llm import Client
from otel_llm.testing import Spans, error, run_virtual, sse_answer
from tests.support.scripted_clients import MESSAGES, source

OUTAGE_START_S = 30.0


@dataclass
class Outage:
    """Source ``a`` answers 500 from ``start`` to ``end`` (loop time), ``b`` always answers."""

    start: float
    end: float
    requests: list[tuple[str, float]] = field(default_factory=list)

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        host = request.url.host.split(".")[0]
        now = asyncio.get_running_loop().time()
        self.requests.append((host, now))
        if host == "a" and self.start <= now < self.end:
            return error(500)
        return sse_answer()

    def to_a_during_outage(self) -> int:
        return sum(host == "a" and self.start <= at < self.end for host, at in self.requests)


@pytest.mark.parametrize("outage_s", [20.0, 45.0, 120.0])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_recovered_source_serves_within_10_s_and_probes_stay_rare(
    spans: Spans, outage_s: float, seed: int
) -> None:
    """Default breaker: the preferred source serves again within 10 s of its recovery; the
    outage costs the failures that open the breaker plus about one probe every 5 s (the first
    cool-downs, 1, 2 and 4 s, add at most three)."""
    outage = Outage(OUTAGE_START_S, OUTAGE_START_S + outage_s)
    rng = random.Random(seed)

    async def main() -> list[tuple[float, str]]:
        loop = asyncio.get_running_loop()
        served: list[tuple[float, str]] = []
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(outage))
        async with Client(
            [source("a"), source("b")], http_client=http, tracer_provider=spans.provider, seed=seed
        ) as client:
            while loop.time() < outage.end + 30:
                result = await client.chat(MESSAGES)
                served.append((loop.time(), result.source))
                await asyncio.sleep(rng.uniform(1.0, 5.0))
        await http.aclose()
        return served

    served = run_virtual(main())
    back = min(at for at, name in served if name == "a" and at >= outage.end)
    assert back - outage.end <= 10.0
    assert all(name == "a" for at, name in served if at >= back), "and it keeps its traffic"
    assert all(name == "b" for at, name in served if outage.start + 1 <= at < outage.end)
    threshold = 5  # failures that open the breaker (default), before any probe
    assert outage.to_a_during_outage() <= threshold + outage_s / 5 + 3


def test_before_the_change_recovery_could_take_30_s(spans: Spans) -> None:
    """The old policy (a 30 s cool-down, re-opened in full by a failed probe) is what this
    replaces: configured that way, the preferred source stays unused long after recovering."""
    outage = Outage(OUTAGE_START_S, OUTAGE_START_S + 45.0)

    async def main() -> float:
        loop = asyncio.get_running_loop()
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(outage))
        back = None
        async with Client(
            [source("a"), source("b")], http_client=http, tracer_provider=spans.provider,
            breaker_first_cooldown_s=30, breaker_cooldown_s=30, seed=1,
        ) as client:  # fmt: skip
            while back is None:
                result = await client.chat(MESSAGES)
                if result.source == "a" and loop.time() >= outage.end:
                    back = loop.time()
                await asyncio.sleep(3.0)
        await http.aclose()
        return back - outage.end

    assert run_virtual(main()) > 10.0
