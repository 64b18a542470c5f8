"""In-process admission: request and token rates, pre-deduction, settlement."""

from __future__ import annotations

import pytest

from otel_llm import Client, Source
from otel_llm._act._admission import Limits, LocalAdmission, estimate_tokens
from otel_llm.simulator import Script, SimulatedProvider


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_request_rate_limits() -> None:
    """requests_per_minute admits that many at once, then one per 60/rpm seconds."""
    clock = FakeClock()
    admission = LocalAdmission(clock)
    limits = Limits(requests_per_minute=2)
    assert await admission.acquire("a", limits, 10) == 0.0
    assert await admission.acquire("a", limits, 10) == 0.0
    assert await admission.acquire("a", limits, 10) == pytest.approx(30.0)
    clock.now = 30.0
    assert await admission.acquire("a", limits, 10) == 0.0


async def test_both_buckets_must_admit_and_denial_deducts_nothing() -> None:
    """A request needs both buckets; a denied one takes nothing from either."""
    clock = FakeClock()
    admission = LocalAdmission(clock)
    limits = Limits(requests_per_minute=10, tokens_per_minute=100)
    assert await admission.acquire("a", limits, 90) == 0.0
    assert await admission.acquire("a", limits, 50) > 0
    assert await admission.acquire("a", limits, 10) == 0.0, "the denial took no request token"


async def test_settlement_refunds_and_charges_tokens() -> None:
    """Usage below the estimate is refunded, above it charged."""
    clock = FakeClock()
    admission = LocalAdmission(clock)
    limits = Limits(tokens_per_minute=100)
    assert await admission.acquire("a", limits, 100) == 0.0
    await admission.settle("a", limits, -60)  # used 40 of 100
    assert await admission.acquire("a", limits, 60) == 0.0
    await admission.settle("a", limits, +30)  # used 90 of 60
    assert await admission.acquire("a", limits, 1) > 0


async def test_sources_are_independent_and_unlimited_always_admits() -> None:
    """Limits are per source; a source without limits is never held back."""
    admission = LocalAdmission(FakeClock())
    assert await admission.acquire("a", Limits(requests_per_minute=1), 1) == 0.0
    assert await admission.acquire("b", Limits(requests_per_minute=1), 1) == 0.0
    for _ in range(100):
        assert await admission.acquire("c", Limits(), 10**9) == 0.0


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ({"messages": [], "max_tokens": 100}, len("[]") // 4 + 1 + 100),
        ({"messages": [{"content": "x" * 400}], "max_completion_tokens": 7}, None),
        ({"input": "abcdefgh"}, 3),
    ],
)
def test_token_estimate(payload: dict[str, object], expected: int | None) -> None:
    """The estimate is ~4 characters a prompt token plus the output cap."""
    estimate = estimate_tokens(payload)
    if expected is None:
        assert 100 < estimate < 130
    else:
        assert estimate == expected


async def test_a_changed_limit_keeps_the_level() -> None:
    """Two limits for one source (two clients sharing the backend) do not refill the bucket
    at every change: the level carries over, capped at the limit asked with."""
    admission = LocalAdmission(FakeClock())
    old, new = Limits(requests_per_minute=3), Limits(requests_per_minute=5)
    waits = []
    for _ in range(10):
        waits.append(await admission.acquire("a", old, 1))
        waits.append(await admission.acquire("a", new, 1))
    assert waits.count(0.0) == 3


async def test_a_request_above_the_token_limit_is_charged_what_it_used() -> None:
    """A request whose estimate exceeds ``tokens_per_minute`` (a ``max_tokens`` above it) takes
    the whole bucket; settled from its usage, the bucket is left short of what the answer used
    — not refunded from the unclamped estimate, which refilled it to full and made the token
    limit charge such calls nothing."""
    admission = LocalAdmission(FakeClock())  # no refill: what is left is what was charged
    limits = Limits(tokens_per_minute=1000)
    async with SimulatedProvider(
        default=Script(first_chunk_delay_s=0.0, chunk_count=40, chunk_interval_s=0.0)
    ) as sim:
        source = Source(
            name="sim", provider="openai", base_url=sim.base_url, api_key="sk-sim-0123456789",
            model="m", tokens_per_minute=1000,
        )  # fmt: skip
        async with Client([source], admission=admission) as client:
            result = await client.chat(
                [{"role": "user", "content": "hi"}], stream=True, max_tokens=5000
            )
    assert result.usage is not None
    used = result.usage.input_tokens + result.usage.output_tokens
    assert used >= 40
    assert await admission.acquire("sim", limits, 1000 - used) == 0.0
    assert await admission.acquire("sim", limits, 1) > 0, "the answer's tokens were refunded"
