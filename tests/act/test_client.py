"""The client end to end over real HTTP to the simulated provider: hedging on a late first
chunk or a mid-stream stall, the watchdog, cancellation, and the telemetry of every leg."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_llm import (
    AllSourcesExhausted,
    Client,
    ConfigurationError,
    Limits,
    LocalAdmission,
    NotFound,
    Source,
)
from otel_llm import _semconv as sc
from otel_llm.simulator import Script, Silence, SimulatedProvider
from otel_llm.testing import Spans
from tests.support.processes import run_python

MESSAGES = [{"role": "user", "content": "hi"}]
FAST = {"first_chunk_delay_s": 0.0, "chunk_interval_s": 0.005, "chunk_count": 20}
LONG = 5.0  # a silence far beyond every trigger used here (10-50×)

SCRIPTS = {
    "smooth": Script(**FAST),
    "stall": Script(
        **FAST, silences=(Silence(after_chunk=3, duration_s=LONG, keepalive_every_s=0.05),)
    ),
    "short-stall": Script(**FAST, silences=(Silence(after_chunk=3, duration_s=0.6),)),
    "slow-first": Script(**{**FAST, "first_chunk_delay_s": LONG}),
    "late-first": Script(**{**FAST, "first_chunk_delay_s": 1.2}),
    "fail": Script(error_status=500),
    "rate-limited": Script(error_status=429, retry_after="30"),
}


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider(scripts=SCRIPTS) as running:
        yield running


def source(provider: SimulatedProvider, name: str, model: str, **fields: object) -> Source:
    return Source(name=name, provider="sim", base_url=provider.base_url, model=model, **fields)  # type: ignore[arg-type]


def attempts_by_source(spans: Spans) -> dict[str, dict[str, object]]:
    return {
        str(s.attributes[sc.ATTEMPT_SOURCE]): dict(s.attributes or {})  # type: ignore[index]
        for s in spans.attempts()
    }


async def test_stall_hedge_wins_and_the_stalled_leg_is_closed(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """A mid-stream stall starts a hedge on another source; the hedge's answer is returned,
    the stalled leg's connection is closed, its span says hedge_cancelled, its breaker is not
    fed, and the call span carries the winner's figures."""
    sources = [source(provider, "a", "stall"), source(provider, "b", "smooth", priority=1)]
    async with Client(
        sources, hedge_stall_after_s=0.2, stall_threshold_ms=100, tracer_provider=spans.provider
    ) as client:
        result = await client.chat(MESSAGES)
        await provider.stats.wait_for_disconnects(1)
        assert client.breaker_state("a") == "closed"
        assert client._states[0].breaker.failures == 0
    stats = result.stats
    assert result.source == "b"
    assert (stats.hedges, stats.hedge_won, stats.attempts) == (1, True, 2)
    assert result.text.startswith("word0")
    assert stats.stall_count == 0, "the loser's stall never enters the winner's figures"
    legs = attempts_by_source(spans)
    assert legs["a"][sc.ATTEMPT_OUTCOME] == sc.OUTCOME_HEDGE_CANCELLED
    assert legs["a"][sc.ATTEMPT_LEG] == sc.LEG_PRIMARY
    assert sc.STALL_MS not in legs["a"], "a cancelled loser has no stall figures"
    assert legs["b"][sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert legs["b"][sc.ATTEMPT_LEG] == sc.LEG_HEDGE
    (call,) = spans.calls()
    attrs = call.attributes or {}
    assert attrs[sc.CALL_HEDGE_WON] is True
    assert attrs[sc.CALL_HEDGES] == 1
    assert attrs[sc.STALL_MS] == stats.stall_ms
    assert attrs[sc.GENERATION_MS] == stats.generation_ms
    assert attrs[sc.TTFT_MS] == stats.ttft_ms
    assert attrs[sc.WALL_MS] == stats.wall_ms


async def test_first_token_hedge(provider: SimulatedProvider, spans: Spans) -> None:
    """A primary with no first chunk after AFTER_S gets a hedge on another source."""
    sources = [source(provider, "a", "slow-first"), source(provider, "b", "smooth")]
    async with Client(sources, hedge_after_s=0.2, tracer_provider=spans.provider) as client:
        result = await client.chat(MESSAGES)
    assert result.source == "b"
    assert result.stats.hedge_won


async def test_hedging_off_by_default_behaves_unhedged(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """With both hedge keys unset a stalled stream is simply waited for: the client is exactly
    the unhedged one."""
    sources = [source(provider, "a", "short-stall"), source(provider, "b", "smooth")]
    async with Client(sources, stall_threshold_ms=100, tracer_provider=spans.provider) as client:
        result = await client.chat(MESSAGES)
    assert result.source == "a"
    assert (result.stats.attempts, result.stats.hedges) == (1, 0)
    assert result.stats.stall_count == 1
    assert result.stats.stall_ms is not None
    # at least the threshold: a chunk before the 0.6 s silence delivered late shortens the gap
    assert result.stats.stall_ms >= 100


async def test_stall_only_hedging_leaves_non_streamed_calls_alone(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """With only STALL_AFTER_S set, a non-streamed request runs exactly as unhedged."""
    sources = [source(provider, "a", "late-first"), source(provider, "b", "smooth")]
    async with Client(sources, hedge_stall_after_s=0.1, tracer_provider=spans.provider) as client:
        result = await client.chat(MESSAGES, stream=False)
    assert result.source == "a"
    assert result.stats.hedges == 0


async def test_watchdog_kills_a_keepalive_only_stream_and_fails_over(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """Keepalives do not keep a silent stream alive: the watchdog kills it (a transient
    failure that feeds the breaker) and the call moves to the next source at once (no
    same-source retry on a source that went silent)."""
    sources = [
        source(provider, "a", "stall", inter_token_timeout_s=0.3),
        source(provider, "b", "smooth"),
    ]
    async with Client(sources, tracer_provider=spans.provider, backoff_base_s=0.01) as client:
        result = await client.chat(MESSAGES)
        assert client._states[0].breaker.failures == 1
    assert result.source == "b"
    assert result.stats.sources_tried == ("a", "b")
    assert result.stats.attempts == 2
    assert result.text.startswith("word0"), "the killed stream's partial answer is discarded"
    legs = attempts_by_source(spans)
    assert legs["a"][sc.ATTEMPT_OUTCOME] == sc.OUTCOME_WATCHDOG_KILLED
    assert legs["a"][sc.ERROR_TYPE] == "WatchdogTimeout"


async def test_watchdog_kill_of_primary_during_live_hedge(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """The primary killed by the watchdog while the hedge runs: the round waits for the hedge
    and still records the kill on the primary's breaker."""
    sources = [
        source(provider, "a", "stall", inter_token_timeout_s=0.6),
        source(provider, "b", "late-first"),
    ]
    async with Client(sources, hedge_stall_after_s=0.1, tracer_provider=spans.provider) as client:
        result = await client.chat(MESSAGES)
        assert client._states[0].breaker.failures == 1
    assert result.source == "b"
    assert result.stats.hedge_won
    legs = attempts_by_source(spans)
    assert legs["a"][sc.ATTEMPT_OUTCOME] == sc.OUTCOME_WATCHDOG_KILLED


async def test_both_legs_failing_cost_one_budget_unit(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """A round whose two legs both fail costs one retry unit: with max_attempts=2 a second
    round runs (three attempts in all)."""
    sources = [
        source(provider, "a", "stall", inter_token_timeout_s=0.5),
        source(provider, "b", "fail"),
    ]
    async with Client(
        sources,
        hedge_stall_after_s=0.1,
        max_attempts=2,
        same_source_retries=0,
        backoff_base_s=0.01,
        tracer_provider=spans.provider,
    ) as client:
        with pytest.raises(AllSourcesExhausted, match="max_attempts=2 reached: 2 failed rounds"):
            await client.chat(MESSAGES)
    (call,) = spans.calls()
    assert call.attributes[sc.CALL_ATTEMPTS] == 3  # type: ignore[index]
    assert call.attributes[sc.CALL_HEDGES] == 1  # type: ignore[index]


async def test_caller_cancellation_closes_every_leg(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """Cancelling the caller during a stall cancels both legs, closes their connections, ends
    their spans as cancelled and propagates CancelledError."""
    sources = [source(provider, "a", "stall"), source(provider, "b", "stall")]
    async with Client(sources, hedge_stall_after_s=0.1, tracer_provider=spans.provider) as client:
        task = asyncio.create_task(client.chat(MESSAGES))
        await provider.stats.wait_for_requests(2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await provider.stats.wait_for_disconnects(2)
    outcomes = sorted(str(s.attributes[sc.ATTEMPT_OUTCOME]) for s in spans.attempts())  # type: ignore[index]
    assert outcomes == [sc.OUTCOME_CANCELLED, sc.OUTCOME_CANCELLED]
    (call,) = spans.calls()
    assert call.status.status_code.name == "ERROR"


async def test_no_hedging_into_a_source_answering_429(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """A source that just answered 429 is not a hedge target."""
    sources = [source(provider, "a", "rate-limited"), source(provider, "b", "short-stall")]
    async with Client(
        sources, hedge_stall_after_s=0.1, stall_threshold_ms=100, tracer_provider=spans.provider
    ) as client:
        result = await client.chat(MESSAGES)
    assert result.source == "b"
    assert result.stats.hedges == 0, "the only other source is answering 429"
    assert result.stats.stall_count == 1


async def test_hedge_budget_caps_extra_requests(provider: SimulatedProvider, spans: Spans) -> None:
    """With the hedge budget spent, later stalls are waited out instead of hedged."""
    sources = [source(provider, "a", "short-stall"), source(provider, "b", "smooth")]
    async with Client(
        sources, hedge_stall_after_s=0.1, hedge_budget_ratio=0.0, tracer_provider=spans.provider
    ) as client:
        client._hedge_budgets.stall.tokens = 1.0  # one hedge left
        first = await client.chat(MESSAGES)
        second = await client.chat(MESSAGES)
    assert first.stats.hedges == 1
    assert second.stats.hedges == 0
    assert second.source == "a"


async def test_rate_limited_only_source_exhausts_on_the_window(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """A source that only answers 429 (Retry-After 30 s) ends the call at the stall window."""
    sources = [source(provider, "a", "rate-limited")]
    async with Client(sources, stall_window_s=0.5, tracer_provider=spans.provider) as client:
        with pytest.raises(AllSourcesExhausted, match="without any output") as caught:
            await client.chat(MESSAGES)
    assert "429" in caught.value.reasons["a"]


class RecordingAdmission(LocalAdmission):
    """The in-process backend, remembering every settlement."""

    def __init__(self) -> None:
        super().__init__()
        self.settled: list[tuple[str, int]] = []

    async def settle(self, source: str, limits: Limits, extra_tokens: int) -> None:
        self.settled.append((source, extra_tokens))
        await super().settle(source, limits, extra_tokens)


async def test_loser_is_settled_and_its_waste_counted(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """The cancelled loser's reservation is settled (the output cap given back) and its chunks
    are reported as hedge waste; waited_ms does not count the winning round."""
    admission = RecordingAdmission()
    sources = [
        source(provider, "a", "stall", tokens_per_minute=100_000),
        source(provider, "b", "smooth", tokens_per_minute=100_000),
    ]
    async with Client(
        sources, hedge_stall_after_s=0.2, admission=admission, tracer_provider=spans.provider
    ) as client:
        result = await client.chat(MESSAGES, max_tokens=1000)
    loser = [extra for name, extra in admission.settled if name == "a"]
    assert len(loser) == 1
    assert -1000 < loser[0] < -900, "the unused output cap came back, the chunks were kept"
    assert result.stats.hedge_waste_chunks == 4
    assert result.stats.waited_ms is not None
    assert result.stats.waited_ms < 50
    (call,) = spans.calls()
    assert (call.attributes or {})[sc.CALL_HEDGE_WASTE_CHUNKS] == 4


async def test_silence_after_the_finish_reason_is_neither_hedged_nor_killed(
    spans: Spans,
) -> None:
    """Once the finish reason arrived, a slow usage frame or [DONE] neither starts a hedge nor
    trips the watchdog: the answer is complete."""
    import httpx2

    from otel_llm.testing import Scripted, sse_answer

    async def slow_tail(request: httpx2.Request) -> httpx2.Response:
        events = sse_answer().text.split("\n\n")
        finish = next(i for i, e in enumerate(events) if "finish_reason" in e and "stop" in e)

        async def body() -> AsyncIterator[bytes]:
            for index, event in enumerate(events):
                if event:
                    yield (event + "\n\n").encode()
                if index == finish:
                    await asyncio.sleep(0.6)  # the provider takes its time after finishing

        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    script = Scripted({"a": [slow_tail], "b": [sse_answer()]})
    a = Source(
        name="a",
        provider="sim",
        base_url="http://a.test/v1",
        model="m",
        inter_token_timeout_s=0.2,
    )
    b = Source(name="b", provider="sim", base_url="http://b.test/v1", model="m")
    async with Client(
        [a, b],
        hedge_stall_after_s=0.1,
        http_client=script.client(),
        tracer_provider=spans.provider,
    ) as client:
        result = await client.chat(MESSAGES)
    assert result.source == "a"
    assert (result.stats.attempts, result.stats.hedges) == (1, 0)
    assert script.seen == ["a"]


def _source(name: str) -> Source:
    return Source(name=name, provider="sim", base_url=f"http://{name}.test/v1", model="m")


_CLIENT_PARAMETERS = [
    name for name in inspect.signature(Client.__init__).parameters if name not in ("self",)
]
_WRONG = st.one_of(
    st.text(max_size=6),
    st.binary(max_size=3),
    st.builds(object),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.complex_numbers(allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(_CLIENT_PARAMETERS), value=_WRONG)
def test_an_argument_of_the_wrong_type_is_refused_at_construction(name: str, value: object) -> None:
    """Every argument of ``Client``, given a value of a type it never takes (text where a
    number, a flag or an object goes; an object where a list goes), is refused when the client
    is made, with a ``ConfigurationError`` naming that argument — never a raw Python error then
    or at the first call."""
    if name == "scope" and isinstance(value, str) and value.strip():
        return  # text is a scope's type: its spelling is checked by the scope's own rule
    arguments: dict[str, object] = {name: value}
    if name not in ("sources", "settings"):
        arguments["sources"] = [_source("a"), _source("b")]
    with pytest.raises(ConfigurationError) as caught:
        Client(**arguments)  # type: ignore[arg-type]
    assert name in str(caught.value).lower() or caught.value.key == name, caught.value


async def test_a_404_names_the_url_and_suggests_the_api_version(
    provider: SimulatedProvider, spans: Spans
) -> None:
    """A base URL without ``/v1`` answers 404 from a real server: the error names the URL
    requested and the base URL to try; with ``/v1`` the same server answers."""
    root = provider.base_url.removesuffix("/v1")
    bare = Source(name="a", provider="sim", base_url=root, model="smooth")
    async with Client([bare], tracer_provider=spans.provider) as client:
        with pytest.raises(NotFound) as caught:
            await client.chat(MESSAGES)
    message = str(caught.value)
    assert f"requested {root}/chat/completions" in message
    assert f"try '{root}/v1'" in message
    versioned = Source(name="a", provider="sim", base_url=provider.base_url, model="missing")
    async with Client([versioned], tracer_provider=spans.provider) as client:
        result = await client.chat(MESSAGES)
    assert result.source == "a"


FIRST_CALL_OF_A_PROCESS = """
import asyncio, json, time
from otel_llm import Client, Source
from otel_llm.simulator import Script, SimulatedProvider

scripts = {
    "silent": Script(first_chunk_delay_s=60.0, chunk_count=3),
    "smooth": Script(first_chunk_delay_s=0.0, chunk_count=5, chunk_interval_s=0.01),
}

async def main():
    async with SimulatedProvider(scripts=scripts) as sim:
        sources = [
            Source(name="a", provider="sim", base_url=sim.base_url, model="silent"),
            Source(name="b", provider="sim", base_url=sim.base_url, model="smooth", priority=1),
        ]
        async with Client(sources, hedge_after_s=0.5, hedge_stall_after_s=2.0) as client:
            started = time.monotonic()
            result = await client.chat([{"role": "user", "content": "hi"}])
            elapsed = time.monotonic() - started
    print(json.dumps({"source": result.source, "hedges": result.stats.hedges,
                      "won": result.stats.hedge_won, "elapsed": elapsed}))

asyncio.run(main())
"""


def test_the_first_call_of_a_fresh_process_hedges_a_late_first_chunk(tmp_path: Path) -> None:
    """Both triggers, a new process, its very first call, real HTTP on loopback: the primary
    sends no first chunk for 60 s, the first-token hedge starts at 0.5 s and the second source
    answers — seconds, not a watchdog kill and a retry later."""
    done = run_python(FIRST_CALL_OF_A_PROCESS, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert (answer["source"], answer["hedges"], answer["won"]) == ("b", 1, True)
    assert answer["elapsed"] < 30, "answered by the hedge, long before the silent primary"
