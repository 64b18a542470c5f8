"""How fast a recovered source gets its traffic back, and what its outage costs in probes — the
default breaker, on virtual time (an hour of calls takes a second).

Source ``a`` (preferred) answers 500 during an outage, ``b`` always answers; a call every 1–5 s
(uniform). For each outage length and seed it prints the recovery delay (end of the outage →
first call answered by ``a``) and the requests ``a`` received during the outage (the failures
that open its breaker, then the probes). ``tests/act/test_recovery.py`` asserts the bounds.

    .venv/bin/python -m benchmarks.client.breaker_recovery
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics

import httpx2
from opentelemetry.trace import NoOpTracerProvider

from otel_llm import Client, Source
from otel_llm.testing import error, run_virtual, sse_answer

START_S = 30.0


def source(name: str) -> Source:
    return Source(name=name, provider="sim", base_url=f"http://{name}.test/v1", model="m")


def one_run(outage_s: float, seed: int, **options: float) -> tuple[float, int]:
    """(recovery delay in seconds, requests to ``a`` during the outage) of one run."""
    end = START_S + outage_s
    to_a: list[float] = []
    rng = random.Random(seed)

    async def upstream(request: httpx2.Request) -> httpx2.Response:
        now = asyncio.get_running_loop().time()
        if request.url.host.startswith("a."):
            to_a.append(now)
            if START_S <= now < end:
                return error(500)
        return sse_answer()

    async def main() -> float:
        loop = asyncio.get_running_loop()
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(upstream))
        back = None
        async with Client(
            [source("a"), source("b")],
            http_client=http,
            tracer_provider=NoOpTracerProvider(),
            seed=seed,
            **options,  # type: ignore[arg-type]
        ) as client:
            while back is None or loop.time() < end + 30:
                result = await client.chat([{"role": "user", "content": "x"}])
                if back is None and result.source == "a" and loop.time() >= end:
                    back = loop.time()
                await asyncio.sleep(rng.uniform(1.0, 5.0))
        await http.aclose()
        assert back is not None
        return back - end

    delay = run_virtual(main())
    return delay, sum(START_S <= at < end for at in to_a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=50)
    args = parser.parse_args()
    threshold = 5  # failures that open the breaker (the default), before any probe
    print(f"{'policy':<24} {'outage':>7} {'delay p50':>10} {'delay max':>10} "
          f"{'requests to a':>14} {'probes':>7} {'probes/5 s':>11}")  # fmt: skip
    policies: dict[str, dict[str, float]] = {
        "default (1 s -> 5 s)": {},
        "old (30 s, re-opened)": {"breaker_first_cooldown_s": 30, "breaker_cooldown_s": 30},
    }
    for name, options in policies.items():
        for outage_s in (20.0, 45.0, 120.0):
            runs = [one_run(outage_s, seed, **options) for seed in range(args.seeds)]
            delays = [delay for delay, _ in runs]
            requests = max(count for _, count in runs)
            probes = requests - threshold
            print(f"{name:<24} {outage_s:>6.0f}s {statistics.median(delays):>9.1f}s "
                  f"{max(delays):>9.1f}s {requests:>14} {probes:>7} "
                  f"{probes / (outage_s / 5):>11.2f}")  # fmt: skip


if __name__ == "__main__":
    from benchmarks.support.header import print_header

    print_header(__spec__.name)
    main()
