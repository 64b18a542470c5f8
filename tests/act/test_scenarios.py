"""What real providers do, against a client configured with nothing but its sources and a call
deadline, and against the docs' resilient configuration: every scenario ends within its
limit with an answer from the source it should come from, or with a clean library error —
with an OpenAI-compatible, an Anthropic or a Gemini primary (each failing in its own API's
words) and an OpenAI-compatible fallback.

Real HTTP over loopback to two simulated providers served on the test's own event loop, on
virtual time (``run_virtual(real_io=True)``), so the 60 s and 30 s defaults take no real time
and every figure below is exact to the scheduler, not to a busy machine's noise.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

import pytest

from otel_llm import Client, ContentFiltered, Source
from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm.simulator import Script, Silence, SimulatedProvider
from otel_llm.testing import Spans, run_virtual

Setup = Literal["defaults", "resilient"]
SETUPS: Final[tuple[Setup, ...]] = ("defaults", "resilient")
PRIMARIES: Final = ("sim", "anthropic", "gemini")
"""The primary's provider: an OpenAI-compatible one, the Messages API, the Gemini API."""
TELEMETRY_NAMES: Final = {"sim": "sim", "anthropic": "anthropic", "gemini": "gcp.gemini"}

DEADLINE_S: Final = 100.0
"""The one setting the out-of-the-box client is given besides its sources."""

RESILIENT_CLIENT: Final[dict[str, Any]] = {"hedge_after_s": 10.0, "hedge_stall_after_s": 10.0}
RESILIENT_SOURCE: Final[dict[str, Any]] = {"ttft_timeout_s": 30.0, "inter_token_timeout_s": 20.0}
"""The docs' resilient configuration (the keys it prints, as keyword arguments)."""

MODEL: Final = "m"
PRIMARY, FALLBACK = "primary", "fallback"

Primary = Callable[[int], Script]
"""The primary's answer to its n-th request (0-based)."""


def _every(script: Script) -> Primary:
    return lambda _: script


def _first_then_ok(script: Script) -> Primary:
    return lambda n: script if n == 0 else Script()


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    primary: Primary | None
    """``None``: nothing listens at the primary's address."""
    limits_s: dict[Setup, float]
    """The call ends within this long, with each configuration."""
    answers: str | None
    """The source that answers; ``None``: the call raises ``ContentFiltered``."""
    tried: tuple[str, ...]
    """The sources of the call's attempts, in the order they started (the docs' table of
    what each failure class does next)."""


NEVER_S: Final = 10_000.0
"""Longer than any call: a first chunk that never comes (the simulator caps it at 600 s)."""

SCENARIOS: Final = (
    Scenario(
        "primary down",
        None,
        {"defaults": 5.0, "resilient": 5.0},
        FALLBACK,
        (PRIMARY, PRIMARY, FALLBACK),
    ),
    Scenario(
        "5xx then recovery",
        _first_then_ok(Script(error_status=503)),
        {"defaults": 5.0, "resilient": 5.0},
        PRIMARY,
        (PRIMARY, PRIMARY),
    ),
    Scenario(
        "429 with Retry-After",
        _first_then_ok(Script(error_status=429, retry_after="3")),
        {"defaults": 5.0, "resilient": 5.0},
        PRIMARY,
        (PRIMARY, PRIMARY),
    ),
    Scenario(
        "a first chunk that never comes",
        _every(Script(first_chunk_delay_s=NEVER_S)),
        {"defaults": DEADLINE_S, "resilient": 15.0},
        FALLBACK,
        (PRIMARY, FALLBACK),
    ),
    Scenario(
        "a mid-stream stall of 30 s or more",
        _every(Script(silences=(Silence(after_chunk=3, duration_s=60.0),))),
        {"defaults": 45.0, "resilient": 15.0},
        FALLBACK,
        (PRIMARY, FALLBACK),
    ),
    Scenario(
        "a truncated stream",
        _every(Script(fault="truncate", fault_after_chunk=5)),
        {"defaults": 5.0, "resilient": 5.0},
        FALLBACK,
        (PRIMARY, PRIMARY, FALLBACK),
    ),
    Scenario(
        "a malformed event",
        _every(Script(fault="malformed", fault_after_chunk=2)),
        {"defaults": 5.0, "resilient": 5.0},
        FALLBACK,
        (PRIMARY, PRIMARY, FALLBACK),
    ),
    Scenario(
        "a content filter",
        _every(Script(error_status=400, error_code="content_filter")),
        {"defaults": 1.0, "resilient": 1.0},
        None,
        (PRIMARY,),
    ),
)


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class _Counted:
    """A primary preset counting the requests it answered."""

    def __init__(self, primary: Primary) -> None:
        self.primary = primary
        self.requests = 0

    def __call__(self, rng: random.Random) -> Script:
        script = self.primary(self.requests)
        self.requests += 1
        return script


def _client(
    setup: Setup, primary_url: str, fallback_url: str, spans: Spans, primary: str = "sim"
) -> Client:
    source_fields = RESILIENT_SOURCE if setup == "resilient" else {}
    client_fields = RESILIENT_CLIENT if setup == "resilient" else {}
    sources = [
        Source(name=name, provider=provider, base_url=url, model=MODEL, priority=n,
               **source_fields)
        for n, (name, provider, url) in enumerate(
            ((PRIMARY, primary, primary_url), (FALLBACK, "sim", fallback_url))
        )
    ]  # fmt: skip
    return Client(
        sources,
        call_deadline_s=DEADLINE_S,
        tracer_provider=spans.provider,
        seed=11,
        **client_fields,
    )


async def _run(
    scenario: Scenario, setup: Setup, spans: Spans, provider: str = "sim"
) -> tuple[str | None, float]:
    loop = asyncio.get_running_loop()
    fallback = SimulatedProvider(default=Script())
    counted = _Counted(scenario.primary) if scenario.primary is not None else None
    primary = SimulatedProvider(default=counted) if counted is not None else None
    async with fallback:
        if primary is not None:
            await primary.__aenter__()
        try:
            primary_url = primary.base_url if primary else f"http://127.0.0.1:{_closed_port()}/v1"
            client = _client(setup, primary_url, fallback.base_url, spans, provider)
            async with client:
                start = loop.time()
                try:
                    result = await client.chat([{"role": "user", "content": "hi"}])
                except ContentFiltered:
                    return None, loop.time() - start
                assert result.text.startswith("word0 word1")
                return result.source, loop.time() - start
        finally:
            if primary is not None:
                await primary.__aexit__(None, None, None)


@pytest.mark.parametrize("primary", PRIMARIES)
@pytest.mark.parametrize("setup", SETUPS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_each_scenario_ends_in_time_with_the_right_answer(
    scenario: Scenario, setup: Setup, primary: str, spans: Spans
) -> None:
    """Each failure of the primary — in its own API — ends the call within its limit, with the
    answer from the source the docs' table says, the attempts going where it says."""
    answered, elapsed = run_virtual(_run(scenario, setup, spans, primary), real_io=True)
    assert answered == scenario.answers, (scenario.name, setup, elapsed)
    assert elapsed <= scenario.limits_s[setup], (scenario.name, setup, elapsed)
    attempts = sorted(spans.attempts(), key=lambda span: span.start_time or 0)
    tried = tuple(dict(span.attributes or {})[sc.ATTEMPT_SOURCE] for span in attempts)
    assert tried == scenario.tried, (scenario.name, setup)
    named = {dict(span.attributes or {})[sc.GEN_AI_PROVIDER_NAME] for span in attempts
             if dict(span.attributes or {})[sc.ATTEMPT_SOURCE] == PRIMARY}  # fmt: skip
    assert named == {TELEMETRY_NAMES[primary]}
    (call,) = spans.calls()
    assert call.end_time is not None


def test_the_slow_scenarios_are_where_the_defaults_say() -> None:
    """The two slow scenarios end where the watchdog's defaults put them, not by luck: the
    first chunk at 60 s (``timeout_s``), the stall at 30 s (between chunks)."""

    def one(scenario: Scenario) -> float:
        spans = Spans()
        answered, elapsed = run_virtual(_run(scenario, "defaults", spans), real_io=True)
        assert answered == FALLBACK
        spans.provider.shutdown()
        return elapsed

    never, stall = SCENARIOS[3], SCENARIOS[4]
    ttft = one(never)
    assert DEFAULTS.timeout_s < ttft < DEFAULTS.timeout_s + DEFAULTS.backoff_max_s
    stalled = one(stall)
    first_chunks = 0.1 + 3 * 0.02  # the script's first chunk and cadence up to chunk 3
    low = first_chunks + DEFAULTS.inter_token_timeout_s
    assert low < stalled < low + DEFAULTS.backoff_max_s


RECOVERS_AT_S: Final = 20.0
CALLS: Final = 40


async def _recovery(setup: Setup, spans: Spans) -> tuple[list[tuple[float, str]], int]:
    """Calls one second apart; the primary answers 503 until ``RECOVERS_AT_S``. What answered
    each call (by its start), and how many requests the primary refused."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    refused = 0

    def primary(_: random.Random) -> Script:
        nonlocal refused
        if loop.time() - began < RECOVERS_AT_S:
            refused += 1
            return Script(error_status=503)
        return Script()

    served: list[tuple[float, str]] = []
    async with SimulatedProvider(default=primary) as first, SimulatedProvider() as second:
        client = _client(setup, first.base_url, second.base_url, spans)
        async with client:
            for n in range(CALLS):
                await asyncio.sleep(max(0.0, began + n - loop.time()))
                start = loop.time() - began
                result = await client.chat([{"role": "user", "content": "hi"}])
                served.append((start, result.source))
    return served, refused


@pytest.mark.parametrize("setup", SETUPS)
def test_a_recovered_primary_is_used_again_at_once(setup: Setup, spans: Spans) -> None:
    """While the primary fails every call is answered by the fallback, and the breaker keeps
    most of them off the primary; once it has recovered, the first call after the longest
    breaker cool-down goes back to it, and every call after that."""
    served, refused = run_virtual(_recovery(setup, spans), real_io=True)
    assert len(served) == CALLS
    down = [source for start, source in served if start < RECOVERS_AT_S]
    assert set(down) == {FALLBACK}
    assert refused < len(down), "the open breaker kept calls off the failing primary"
    back_by = RECOVERS_AT_S + DEFAULTS.breaker_cooldown_s + 1.0
    after = [source for start, source in served if start >= back_by]
    assert after, served
    assert set(after) == {PRIMARY}, served
