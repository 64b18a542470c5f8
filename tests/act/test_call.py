"""The retry loop: errors, retries, failover, deadline, stall budget, breaker,
admission — with scripted answers through httpx2.MockTransport."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import httpx2
import pytest

from otel_llm import (
    AdmissionSettings,
    AllSourcesExhausted,
    BackendUnavailable,
    Client,
    ClientSettings,
    ContextLengthExceeded,
    InvalidRequest,
    Limits,
    LocalAdmission,
)
from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm.simulator import Script, SimulatedProvider
from otel_llm.testing import Scripted, Spans, error, json_answer, run_virtual, sse_answer
from otel_llm.testing._scripted import Handler
from tests.support.redis_server import redis_url_fixture  # noqa: F401 (provides ``redis_url``)
from tests.support.scripted_clients import MESSAGES, client, source
from tests.support.sim_sources import PROVIDERS, sim_source


async def test_transient_failure_fails_over(spans: Spans) -> None:
    """Without same-source retries a 5xx on the first source fails over to the next at once."""
    script = Scripted({"a": [error(503)], "b": [sse_answer()]})
    async with client(script, spans, same_source_retries=0) as c:
        result = await c.chat(MESSAGES)
    assert result.source == "b"
    assert result.text == "hello world"
    assert result.stats.attempts == 2
    assert result.stats.sources_tried == ("a", "b")
    assert result.stats.retries == 1
    assert script.seen == ["a", "b"]
    outcomes = [
        (s.attributes[sc.ATTEMPT_SOURCE], s.attributes[sc.ATTEMPT_OUTCOME])
        for s in spans.attempts()
    ]  # type: ignore[index]
    assert outcomes == [("a", "error"), ("b", "ok")]


async def test_transient_failures_are_retried_with_backoff_until_max_attempts(
    spans: Spans,
) -> None:
    """Transient failures cost one unit each; at max_attempts the call gives up with reasons."""
    script = Scripted({"a": [error(500)], "b": [error(502)]})
    async with client(script, spans, max_attempts=3) as c:
        with pytest.raises(AllSourcesExhausted) as caught:
            await c.chat(MESSAGES)
    assert len(script.seen) == 3
    assert caught.value.attempts == 3
    assert "max_attempts=3 reached" in str(caught.value)
    assert set(caught.value.reasons) == {"a", "b"}
    assert "502" in caught.value.reasons["b"]
    (call,) = spans.calls()
    assert call.attributes[sc.CALL_ATTEMPTS] == 3  # type: ignore[index]


async def test_permanent_error_is_not_retried_and_propagates_unmasked(spans: Spans) -> None:
    """A permanent error is never retried on the same source; the provider's reason propagates."""
    script = Scripted({"a": [error(400, "context_length_exceeded")]})
    async with client(script, spans, source("a")) as c:
        with pytest.raises(ContextLengthExceeded, match="scripted 400"):
            await c.chat(MESSAGES)
    assert script.seen == ["a"]


async def test_permanent_error_on_one_source_fails_over(spans: Spans) -> None:
    """A permanent error excludes that source for the call; another source may answer."""
    script = Scripted({"a": [error(404)], "b": [sse_answer()]})
    async with client(script, spans) as c:
        result = await c.chat(MESSAGES)
    assert result.source == "b"
    assert c.breaker_state("a") == "closed", "a bad request says nothing about source health"


async def test_rate_limit_does_not_consume_the_retry_budget(spans: Spans) -> None:
    """429s cost no retry budget: with max_attempts=1 the call still fails over and succeeds."""
    script = Scripted({"a": [error(429, retry_after="30")], "b": [sse_answer()]})
    async with client(script, spans, max_attempts=1) as c:
        result = await c.chat(MESSAGES)
    assert result.source == "b"


async def test_rate_limit_is_waited_out_honouring_retry_after(spans: Spans) -> None:
    """On the only source a 429 is waited out for Retry-After, then retried."""
    script = Scripted({"a": [error(429, retry_after="0.2"), sse_answer()]})
    async with client(script, spans, source("a"), max_attempts=1) as c:
        result = await c.chat(MESSAGES)
    assert result.stats.attempts == 2
    assert result.stats.waited_ms is not None
    assert result.stats.waited_ms >= 150


async def test_call_deadline_bounds_everything(spans: Spans) -> None:
    """call_deadline_s ends a call stuck in a slow attempt, and cancels that attempt."""

    async def hang(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(30)
        return json_answer()

    script = Scripted({"a": [hang]})
    async with client(script, spans, source("a"), call_deadline_s=0.3) as c:
        with pytest.raises(AllSourcesExhausted, match="call deadline"):
            await c.chat(MESSAGES, stream=False)
    (attempt,) = spans.attempts()
    assert attempt.attributes[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CANCELLED  # type: ignore[index]


def test_gateway_holding_then_429_ends_at_the_stall_window(spans: Spans) -> None:
    """Regression of the stall budget, on virtual time: a gateway that holds every request for
    the full 60 s timeout and then answers 429 ends the call at the 300 s window, not after
    hours."""

    async def hold_then_429(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(60)
        return error(429)

    script = Scripted({"a": [hold_then_429]})

    async def main() -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client(
            script, spans, source("a", timeout_s=60), max_attempts=3, stall_window_s=300
        ) as c:
            with pytest.raises(AllSourcesExhausted, match="without any output"):
                await c.chat(MESSAGES, stream=False)
        return loop.time() - started

    elapsed = run_virtual(main())
    assert 300 <= elapsed <= 361
    assert len(script.seen) <= 6, "5 held 429 attempts fill the window, not 301"


def test_transient_attempt_time_does_not_count_as_stall(spans: Spans) -> None:
    """Time inside attempts that burn max_attempts is not stall: three 200 s timeouts-then-5xx
    do not end the call at a 300 s window; max_attempts does."""

    async def hold_then_500(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(200)
        return error(500)

    script = Scripted({"a": [hold_then_500]})

    async def main() -> None:
        async with client(
            script, spans, source("a", timeout_s=250), max_attempts=3, stall_window_s=300
        ) as c:
            with pytest.raises(AllSourcesExhausted, match="max_attempts=3 reached"):
                await c.chat(MESSAGES, stream=False)

    run_virtual(main())
    assert len(script.seen) == 3


async def test_breaker_opens_and_skips_the_source(spans: Spans) -> None:
    """Consecutive failures open a source's breaker; later calls go straight to the next."""
    script = Scripted({"a": [error(500)], "b": [sse_answer()]})
    async with client(script, spans, breaker_failure_threshold=2, breaker_cooldown_s=60) as c:
        for _ in range(2):
            assert (await c.chat(MESSAGES)).source == "b"
        assert c.breaker_state("a") == "open"
        script.seen.clear()
        assert (await c.chat(MESSAGES)).source == "b"
    assert script.seen == ["b"]


def test_half_open_probe_closes_the_breaker(spans: Spans) -> None:
    """On virtual time: after the cool-down one probe goes to the source; its success closes
    the breaker."""
    script = Scripted({"a": [error(500), sse_answer()], "b": [sse_answer()]})

    async def main() -> None:
        async with client(
            script, spans, breaker_failure_threshold=1, breaker_first_cooldown_s=2,
            breaker_cooldown_s=2,
        ) as c:  # fmt: skip
            assert (await c.chat(MESSAGES)).source == "b"
            assert c.breaker_state("a") == "open"
            await asyncio.sleep(1.5)  # the cool-down is 2 s, at most 10 % shorter
            assert (await c.chat(MESSAGES)).source == "b"
            await asyncio.sleep(0.5)
            assert (await c.chat(MESSAGES)).source == "a"
            assert c.breaker_state("a") == "closed"

    run_virtual(main())


async def test_admission_quota_fails_over_then_waits(spans: Spans) -> None:
    """Out of request quota on one source, the call uses another; tokens are pre-deducted."""
    script = Scripted({"a": [sse_answer()], "b": [sse_answer()]})
    limited = source("a", requests_per_minute=1)
    async with client(script, spans, limited, source("b")) as c:
        first = await c.chat(MESSAGES)
        second = await c.chat(MESSAGES)
    assert (first.source, second.source) == ("a", "b")


@pytest.mark.parametrize("alone", [False, True], ids=["two sources", "one source"])
def test_a_large_request_out_of_quota_keeps_no_small_one_away(spans: Spans, alone: bool) -> None:
    """On virtual time: a request too large for what is left of a source's token quota waits
    (or goes elsewhere) alone; a small request at the same source right after it is admitted
    at once — the large one's wait is its own, not the source's."""

    async def answer_in_1s(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(1.0)
        return sse_answer()

    script = Scripted({"a": [answer_in_1s], "b": [answer_in_1s]})
    sources = [source("a", tokens_per_minute=6000)] + ([] if alone else [source("b")])

    async def main() -> tuple[str, str, float]:
        loop = asyncio.get_running_loop()
        async with client(script, spans, *sources) as c:
            first = asyncio.create_task(c.chat(MESSAGES, max_tokens=3000))  # holds ~3000
            await asyncio.sleep(0.1)
            large = asyncio.create_task(c.chat(MESSAGES, max_tokens=5500))  # does not fit now
            await asyncio.sleep(0.1)
            started = loop.time()
            small = await c.chat(MESSAGES, max_tokens=50)
            took = loop.time() - started
            await first
            return (await large).source, small.source, took

    large, small, took = run_virtual(main())
    assert (large, small) == ("a" if alone else "b", "a")
    assert took == pytest.approx(1.0, abs=0.05)


def test_a_request_waiting_for_quota_goes_once_unused_tokens_come_back(spans: Spans) -> None:
    """On virtual time: a request too large for what is left of a source's token quota goes as
    soon as a call that reserved most of it settles having used a few tokens — not when the
    estimate admission gave first (about 25 s at 100 tokens a second)."""

    async def answer_in_1s(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(1.0)
        return sse_answer()  # a few tokens used: the rest of the reservation comes back

    script = Scripted({"a": [answer_in_1s, answer_in_1s]})

    async def main() -> float:
        loop = asyncio.get_running_loop()
        async with client(script, spans, source("a", tokens_per_minute=6000)) as c:
            first = asyncio.create_task(c.chat(MESSAGES, max_tokens=3000))
            await asyncio.sleep(0.1)
            started = loop.time()
            await c.chat(MESSAGES, max_tokens=5500)
            took = loop.time() - started
            await first
            return took

    took = run_virtual(main())
    # the first call settles at 1.0 s; the large one asks again within a second, then takes 1 s
    assert 1.9 <= took <= 2.0 + DEFAULTS.quota_recheck_s


async def test_admission_settles_from_reported_usage(spans: Spans) -> None:
    """The token pre-deduction is corrected with the usage the provider reported."""
    script = Scripted({"a": [sse_answer()]})
    admission = LocalAdmission()
    limited = source("a", tokens_per_minute=1000)
    async with client(script, spans, limited, admission=admission) as c:
        await c.chat(MESSAGES, max_tokens=900)
        # 5 tokens used of ~905 reserved: the rest was refunded, so 900 more fit at once
        assert await admission.acquire("a", Limits(tokens_per_minute=1000), 900) == 0.0


class _Down:
    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        raise BackendUnavailable("admission backend unreachable")

    async def settle(self, source: str, limits: Limits, extra_tokens: int) -> None:
        raise BackendUnavailable("admission backend unreachable")

    async def aclose(self) -> None:
        return None


async def test_unreachable_admission_backend_fails_closed(spans: Spans) -> None:
    """If admission cannot be asked, the call fails with a clear error and sends nothing."""
    script = Scripted({"a": [sse_answer()]})
    async with client(script, spans, source("a"), admission=_Down()) as c:
        with pytest.raises(BackendUnavailable):
            await c.chat(MESSAGES)
    assert script.seen == []


class _SettleFails(LocalAdmission):
    """Admits as the in-process backend does; unreachable when a request is settled."""

    async def settle(self, source: str, limits: Limits, extra_tokens: int) -> None:
        raise BackendUnavailable("admission backend unreachable")


async def test_an_answer_stands_when_its_settlement_fails(
    spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    """The backend going away after a request was admitted does not cost the answer the
    provider gave (and billed): it is returned, the failed settlement logged."""
    script = Scripted({"a": [sse_answer()], "b": [sse_answer()]})
    limited = source("a", tokens_per_minute=100_000)
    async with client(script, spans, limited, source("b"), admission=_SettleFails()) as c:
        result = await c.chat(MESSAGES)
    assert (result.source, result.text) == ("a", "hello world")
    assert script.seen == ["a"]
    assert "could not settle admission for a" in caplog.text


async def test_non_streamed_call(spans: Spans) -> None:
    """stream=False returns the whole JSON answer with wall-only figures."""
    script = Scripted({"a": [json_answer("plain")]})
    async with client(script, spans, source("a")) as c:
        result = await c.chat(MESSAGES, stream=False)
    assert result.text == "plain"
    assert (result.stats.stall_ms, result.stats.stall_count) == (None, None)
    assert result.stats.generation_ms == result.stats.wall_ms


async def test_embeddings_fail_over(spans: Spans) -> None:
    """embed() has the same failover and returns float vectors."""
    answer = httpx2.Response(
        200,
        json={
            "data": [{"index": 0, "embedding": [0.1, 0.2]}],
            "model": "e",
            "usage": {"prompt_tokens": 2, "total_tokens": 2},
        },
    )
    script = Scripted({"a": [error(500)], "b": [answer]})
    async with client(script, spans) as c:
        result = await c.embed("hello")
    assert result.vectors == ((0.1, 0.2),)
    assert result.source == "b"
    names = {s.attributes[sc.GEN_AI_OPERATION_NAME] for s in spans.finished()}  # type: ignore[index]
    assert names == {"embeddings"}


async def test_unexpected_errors_propagate_without_retry(spans: Spans) -> None:
    """An error that is not a provider's failure (a bug) propagates at once, never retried."""

    async def broken(request: httpx2.Request) -> httpx2.Response:
        raise RuntimeError("bug in a transport")

    script = Scripted({"a": [broken], "b": [sse_answer()]})
    async with client(script, spans) as c:
        with pytest.raises(RuntimeError, match="bug in a transport"):
            await c.chat(MESSAGES)
    assert script.seen == ["a"]


class _Unprintable(RuntimeError):
    def __str__(self) -> str:
        raise ValueError("cannot print me")


async def test_an_error_that_cannot_be_recorded_still_ends_the_call_span(spans: Spans) -> None:
    """Telemetry never breaks the call: an error whose text cannot even be made reaches the
    caller unchanged, and the call span still ends (the recording failure is logged)."""

    async def broken(request: httpx2.Request) -> httpx2.Response:
        raise _Unprintable

    async with client(Scripted({"a": [broken]}), spans) as c:
        with pytest.raises(_Unprintable):
            await c.chat(MESSAGES)
    (call,) = spans.calls()
    assert call.end_time is not None
    assert dict(call.attributes or {})["error.type"] == "_Unprintable"
    (attempt,) = spans.attempts()
    assert dict(attempt.attributes or {})["error.type"] == "_Unprintable"
    assert call.status.description == "<exception str() failed>"


async def test_a_leg_failing_outside_the_hierarchy_gives_back_its_admission(
    spans: Spans,
) -> None:
    """A leg that fails with an error that is not a provider's (a bug) settles the tokens it
    reserved: a bug never leaks a source's quota."""

    async def broken(request: httpx2.Request) -> httpx2.Response:
        raise RuntimeError("bug in a transport")

    admission = LocalAdmission()
    limits = Limits(tokens_per_minute=1000)
    limited = source("a", tokens_per_minute=1000)
    async with client(Scripted({"a": [broken]}), spans, limited, admission=admission) as c:
        with pytest.raises(RuntimeError, match="bug in a transport"):
            await c.chat(MESSAGES, max_tokens=900)
        # nothing was produced: the ~905 tokens reserved are back, so 900 more fit at once
        assert await admission.acquire("a", limits, 900) == 0.0


async def test_shared_redis_admission_through_settings(spans: Spans, redis_url: str) -> None:
    """With ADMISSION backend redis, the client's quota lives in Redis."""
    settings = ClientSettings(
        sources=(source("a", requests_per_minute=1), source("b")),
        admission=AdmissionSettings(
            backend="redis", redis_url=redis_url, key_prefix=f"test-{uuid.uuid4()}"
        ),
    )
    script = Scripted({"a": [sse_answer()], "b": [sse_answer()]})
    async with Client(
        settings=settings, http_client=script.client(), tracer_provider=spans.provider
    ) as c:
        first = await c.chat(MESSAGES)
        second = await c.chat(MESSAGES)
    assert (first.source, second.source) == ("a", "b")


async def test_unreachable_redis_fails_closed_through_the_client(spans: Spans) -> None:
    """An unreachable Redis admission backend fails the call closed, naming no password."""
    settings = ClientSettings(
        sources=(source("a", requests_per_minute=10),),
        admission=AdmissionSettings(backend="redis", redis_url="redis://:pw-123456@127.0.0.1:9/0"),
    )
    script = Scripted({"a": [sse_answer()]})
    async with Client(
        settings=settings, http_client=script.client(), tracer_provider=spans.provider
    ) as c:
        with pytest.raises(BackendUnavailable) as caught:
            await c.chat(MESSAGES)
    assert "pw-123456" not in str(caught.value)
    assert script.seen == []


class _DownAfterFirst:
    """Admits the first request, then the backend is gone; ``refused`` is set then."""

    def __init__(self) -> None:
        self.calls = 0
        self.refused = asyncio.Event()

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        self.calls += 1
        if self.calls > 1:
            self.refused.set()
            raise BackendUnavailable("admission backend unreachable")
        return 0.0

    async def settle(self, source: str, limits: Limits, extra_tokens: int) -> None:
        return None

    async def aclose(self) -> None:
        return None


async def test_unreachable_backend_at_hedge_time_leaves_the_primary_alone(spans: Spans) -> None:
    """If the hedge cannot be admitted because the backend went away, the call does not hedge
    and the primary's answer is returned."""

    admission = _DownAfterFirst()

    async def late_first_chunk(request: httpx2.Request) -> httpx2.Response:
        await admission.refused.wait()  # answers only once the hedge was tried and refused
        return sse_answer()

    script = Scripted({"a": [late_first_chunk], "b": [sse_answer()]})
    async with client(script, spans, admission=admission, hedge_after_s=0.05) as c:
        result = await c.chat(MESSAGES)
    assert result.source == "a"
    assert result.stats.hedges == 0
    assert admission.calls == 2


async def partial_then_cut(request: httpx2.Request) -> httpx2.Response:
    """A stream that gives its first chunk and ends (output, then a truncated stream)."""
    first_chunk_only = sse_answer().text.split("\n\n")[0] + "\n\n"
    return httpx2.Response(
        200, headers={"content-type": "text/event-stream"}, text=first_chunk_only
    )


def seconds_until_exhausted_since_output(script: Scripted, spans: Spans) -> float:
    """On virtual time: how long a call to ``a`` (window 300 s) runs before it fails with
    "waited … since the last output"."""

    async def main() -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client(script, spans, source("a"), stall_window_s=300) as c:
            with pytest.raises(AllSourcesExhausted, match="since the last output"):
                await c.chat(MESSAGES)
        return loop.time() - started

    return run_virtual(main())


def test_waiting_after_some_output_is_bounded_too(spans: Spans) -> None:
    """On virtual time: after a stream that produced output and broke, a source answering 429
    forever ends the call one stall window after that output, not a day later."""
    script = Scripted({"a": [partial_then_cut, error(429, retry_after="60")]})
    assert seconds_until_exhausted_since_output(script, spans) <= 361
    assert len(script.seen) <= 8


PASSES = 20
"""Event-loop iterations a scripted body yields after a chunk: the orchestrator, woken by the
chunk signal, reaches its stall wait within a handful (no clock time passes)."""


async def test_external_cancel_during_stall_wait_ends_spans_as_cancelled(spans: Spans) -> None:
    """Through the client: cancelled after the first chunks, before any hedge (the stall
    wait), the attempt's span ends as cancelled with no figures, the call span as an error,
    and CancelledError reaches the caller."""
    streaming = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        for word in ("a", "b"):
            chunk = {"choices": [{"index": 0, "delta": {"content": word}}]}
            yield f"data: {json.dumps(chunk)}\n\n".encode()
            for _ in range(PASSES):  # the round wakes on the chunk signal: into phase 2
                await asyncio.sleep(0)
        streaming.set()  # asked for more: both chunks were read and marked
        await asyncio.Event().wait()
        yield b""

    def stalls(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(stalls))
    async with Client(
        [source("a"), source("b")], http_client=http, tracer_provider=spans.provider,
        hedge_stall_after_s=20,
    ) as c:  # fmt: skip
        task = asyncio.create_task(c.chat(MESSAGES))
        await streaming.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await http.aclose()
    (attempt,) = spans.attempts()
    attrs = dict(attempt.attributes or {})
    assert attrs[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CANCELLED
    assert attrs[sc.ATTEMPT_LEG] == sc.LEG_PRIMARY
    assert sc.STALL_MS not in attrs
    (call,) = spans.calls()
    assert call.status.status_code.name == "ERROR"
    assert dict(call.attributes or {})[sc.CALL_HEDGES] == 0


def test_a_hedge_target_out_of_quota_is_silently_not_hedged(spans: Spans) -> None:
    """The only other source has no request quota left: no hedge, no error, the primary's
    answer (a hedge goes only to another source that is eligible and has quota)."""

    async def late(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(5)
        return sse_answer()

    script = Scripted({"a": [late], "b": [sse_answer()]})
    limited = source("b", requests_per_minute=1)

    async def main() -> tuple[str, str, int]:
        async with client(script, spans, source("a"), limited, hedge_after_s=1) as c:
            first = await c.chat(MESSAGES)  # hedged onto b, which spends b's only request
            second = await c.chat(MESSAGES)
        return first.source, second.source, second.stats.hedges

    assert run_virtual(main()) == ("b", "a", 0)
    assert script.seen == ["a", "b", "a"]


def test_a_hedge_passes_over_a_target_out_of_quota_for_the_next(spans: Spans) -> None:
    """On virtual time: the first other source has no request quota left, a third has: the
    hedge goes to the third (it is skipped only when no other source has quota)."""

    async def late(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(5)
        return sse_answer()

    script = Scripted({"a": [late], "b": [sse_answer()], "c": [sse_answer()]})
    limited = source("b", requests_per_minute=1)

    async def main() -> list[tuple[str, int, float]]:
        loop = asyncio.get_running_loop()
        answered = []
        async with client(script, spans, source("a"), limited, source("c"), hedge_after_s=1) as c:
            for _ in range(2):  # the first hedge spends b's only request
                started = loop.time()
                result = await c.chat(MESSAGES)
                answered.append((result.source, result.stats.hedges, loop.time() - started))
        return answered

    (first, second) = run_virtual(main())
    assert first[:2] == ("b", 1)
    assert second[:2] == ("c", 1)
    assert second[2] == pytest.approx(1.0, abs=0.05)
    assert script.seen == ["a", "b", "a", "c"]


def test_a_hedge_target_with_an_open_breaker_is_silently_not_hedged(spans: Spans) -> None:
    """The only other source's breaker is open: no hedge, the primary's answer (a hedge
    goes only to another source the breaker lets through)."""
    script = Scripted({"a": [sse_answer()], "b": [error(500)]})

    async def late(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(5)
        return sse_answer()

    async def main() -> tuple[str, int, str]:
        async with client(
            script, spans, source("b"), source("a"), breaker_failure_threshold=1,
            breaker_first_cooldown_s=60, breaker_cooldown_s=60, same_source_retries=0,
            hedge_after_s=1,
        ) as c:  # fmt: skip
            await c.chat(MESSAGES)  # b fails once (its breaker opens), a answers
            state = c.breaker_state("b")
            script.answers["a"] = [late]
            result = await c.chat(MESSAGES)
        return result.source, result.stats.hedges, state

    assert run_virtual(main()) == ("a", 0, "open")
    assert script.seen == ["b", "a", "a"]


def test_the_stall_window_restarts_at_each_output(spans: Spans) -> None:
    """On virtual time, pinning where this client differs from the design's scope-level rule
    ("the window ends a call that never produced output"): 250 s of 429s, then a stream that
    gives output and breaks, then 429s forever. The window starts again at that output, so the
    call ends one window after it (~550 s) — neither at 300 s (the output was progress) nor
    never (the seed's rule, once output came, would wait without bound)."""

    limited = [error(429, retry_after="50")] * 5
    script = Scripted({"a": [*limited, partial_then_cut, error(429, retry_after="50")]})
    assert 540 <= seconds_until_exhausted_since_output(script, spans) <= 610


def test_embeddings_are_never_hedged(spans: Spans) -> None:
    """embed() with hedge keys set runs unhedged: a slow answer is waited for."""

    async def slow_vectors(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(5)
        return httpx2.Response(200, json={"data": [{"index": 0, "embedding": [0.5]}]})

    script = Scripted({"a": [slow_vectors], "b": [slow_vectors]})

    async def main() -> tuple[str, int]:
        async with client(script, spans, hedge_after_s=1, hedge_stall_after_s=1) as c:
            result = await c.embed("x")
        return result.source, result.stats.hedges

    assert run_virtual(main()) == ("a", 0)
    assert script.seen == ["a"]


async def test_a_failed_call_span_carries_no_figures(spans: Spans) -> None:
    """A call that failed has no stall figures on its span (only how far it got)."""
    script = Scripted({"a": [error(500)]})
    async with client(script, spans, source("a"), max_attempts=1) as c:
        with pytest.raises(AllSourcesExhausted):
            await c.chat(MESSAGES)
    (call,) = spans.calls()
    attrs = dict(call.attributes or {})
    for figure in (sc.STALL_MS, sc.STALL_COUNT, sc.TTFT_MS, sc.GENERATION_MS, sc.WALL_MS):
        assert figure not in attrs
    assert attrs[sc.CALL_ATTEMPTS] == 1


def test_with_every_breaker_open_a_call_waits_for_the_first_probe(spans: Spans) -> None:
    """On virtual time: both sources failed and their breakers opened (default cool-downs). The
    next call waits until the first cool-down ends (1 s, less its jitter), probes the source
    whose cool-down ended — the other stays open — and its success closes that breaker."""
    script = Scripted({"a": [error(500), sse_answer()], "b": [error(500), sse_answer()]})

    async def main() -> tuple[str, float, dict[str, str]]:
        loop = asyncio.get_running_loop()
        async with client(
            script, spans, breaker_failure_threshold=1, same_source_retries=0, max_attempts=2,
        ) as c:  # fmt: skip
            with pytest.raises(AllSourcesExhausted):
                await c.chat(MESSAGES)
            assert (c.breaker_state("a"), c.breaker_state("b")) == ("open", "open")
            started = loop.time()
            result = await c.chat(MESSAGES)
            states = {name: c.breaker_state(name) for name in ("a", "b")}
            return result.source, loop.time() - started, states

    served, waited, states = run_virtual(main())
    other = "b" if served == "a" else "a"
    assert (states[served], states[other]) == ("closed", "open")
    assert 0.9 <= waited <= 1.0, "the first cool-down is 1 s, shortened by up to 10 %"
    assert script.seen == ["a", "b", served]


@pytest.mark.parametrize("older_leg", ["cancelled", "failed"])
def test_a_leg_from_before_the_breaker_opened_leaves_the_probe_alone(
    spans: Spans, older_leg: str
) -> None:
    """On virtual time: a call in flight since before the breaker opened ends (cancelled, or
    failing) while another call's half-open probe is in flight; a third call still waits for
    that probe's verdict — it reaches the source only once the probe's success closed the
    breaker, never as a second probe."""
    asked: list[float] = []

    def at(delay_s: float, answer: httpx2.Response) -> Handler:
        async def handler(request: httpx2.Request) -> httpx2.Response:
            asked.append(asyncio.get_running_loop().time())
            await asyncio.sleep(delay_s)
            return answer

        return handler

    older = at(2.0, error(500)) if older_leg == "failed" else at(60.0, sse_answer())
    script = Scripted(
        {"a": [older, at(0.0, error(500)), at(5.0, sse_answer()), at(0.0, sse_answer())]}
    )

    async def main() -> tuple[str, str]:
        async with client(
            script, spans, source("a"), breaker_failure_threshold=1, breaker_first_cooldown_s=1,
            breaker_cooldown_s=1, max_attempts=1,
        ) as c:  # fmt: skip
            x = asyncio.create_task(c.chat(MESSAGES))  # in flight, the breaker closed
            await asyncio.sleep(0.1)
            with pytest.raises(AllSourcesExhausted):
                await c.chat(MESSAGES)  # opens the breaker
            await asyncio.sleep(1.4)  # the cool-down is over
            y = asyncio.create_task(c.chat(MESSAGES))  # the probe, answering at 6.5 s
            await asyncio.sleep(0.5)
            if older_leg == "cancelled":
                x.cancel()
            await asyncio.gather(x, return_exceptions=True)
            state = c.breaker_state("a")
            z = await c.chat(MESSAGES)
            await y
            return state, z.source

    assert run_virtual(main()) == ("half_open", "a")
    x_at, w_at, y_at, z_at = asked
    assert (x_at, w_at, y_at) == pytest.approx((0.0, 0.1, 1.5), abs=0.01)
    assert z_at == pytest.approx(6.5, abs=0.1), "the third call waited for the probe's verdict"


def test_a_call_that_never_tried_says_why(spans: Spans) -> None:
    """A call whose window ran out before any attempt (every source rate limited) names, per
    source, why it was not tried."""
    script = Scripted({"a": [error(429, retry_after="1000")]})

    async def main() -> AllSourcesExhausted:
        async with client(script, spans, source("a"), stall_window_s=50) as c:
            with pytest.raises(AllSourcesExhausted):
                await c.chat(MESSAGES)
            with pytest.raises(AllSourcesExhausted) as caught:
                await c.chat(MESSAGES)
        return caught.value

    error_ = run_virtual(main())
    assert error_.reasons["a"].startswith("no attempt was made: rate limited for another")


async def test_giving_up_keeps_the_attempts_failures_as_exceptions(spans: Spans) -> None:
    """AllSourcesExhausted is raised from an ExceptionGroup of the attempts' failures (the
    errors themselves, not strings); its reasons stay each source's latest failure."""
    script = Scripted({"a": [error(500)], "b": [error(502)]})
    async with client(script, spans, max_attempts=3) as c:
        with pytest.raises(AllSourcesExhausted) as caught:
            await c.chat(MESSAGES)
    group = caught.value.__cause__
    assert isinstance(group, ExceptionGroup)
    assert [type(error).__name__ for error in group.exceptions] == ["ServerError"] * 3
    assert [error.status_code for error in group.exceptions] == [500, 500, 502]  # type: ignore[attr-defined]
    assert caught.value.reasons["b"] == group.exceptions[-1].reason  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        ("hello", "not str"),
        ({"role": "user", "content": "hi"}, "not dict"),
        (None, "not NoneType"),
        ([], "messages is empty"),
        (iter([]), "messages is empty"),
        (["hello"], r"messages\[0\] is a str"),
        ([{"role": "user", "content": "hi"}, ("user", "hi")], r"messages\[1\] is a tuple"),
    ],
    ids=["string", "one-message", "none", "empty", "empty-iterator", "string-in-list", "tuple"],
)
async def test_messages_that_are_no_list_of_messages_are_refused_before_any_source(
    spans: Spans, messages: object, said: str
) -> None:
    """A string (it was sent as a list of its characters), a single message, nothing, or a
    list holding something other than messages: an ``InvalidRequest`` naming what is wrong,
    before a span starts or any source is asked."""
    script = Scripted({"a": [sse_answer()]})
    async with client(script, spans) as c:
        with pytest.raises(InvalidRequest, match=said):
            await c.chat(messages)  # type: ignore[arg-type]
        answered = await c.chat(iter(MESSAGES))  # any iterable of messages is a list of them
    assert answered.text == "hello world"
    assert script.seen == ["a"]
    assert len(spans.calls()) == 1


@pytest.mark.parametrize(
    ("messages", "params"),
    [
        ([{"role": "user", "content": object()}], {}),
        (MESSAGES, {"temperature": object()}),
        (MESSAGES, {"stop": (circular := ["x"], circular.append(circular))[0]}),
        (MESSAGES, {"temperature": float("nan")}),
        (MESSAGES, {"max_tokens": float("inf")}),
    ],
    ids=["object-in-messages", "object-param", "circular-list", "nan", "infinity"],
)
async def test_a_body_that_is_not_json_is_refused_before_any_source(
    spans: Spans, messages: list[dict[str, object]], params: dict[str, object]
) -> None:
    """A request that cannot be sent as JSON is the caller's error: an ``InvalidRequest``
    (also a ``TypeError``) before any source is asked or charged, and the call span ends."""
    script = Scripted({"a": [sse_answer()], "b": [sse_answer()]})
    async with client(script, spans) as c:
        with pytest.raises(InvalidRequest, match="not JSON") as caught:
            await c.chat(messages, **params)
        assert isinstance(caught.value, TypeError)
        assert caught.value.__cause__ is None
        assert caught.value.__context__ is None
        assert (await c.chat(MESSAGES)).text == "hello world", "no source was charged"
    assert script.seen == ["a"]
    failed = spans.calls()[0]
    assert dict(failed.attributes or {})["error.type"] == "InvalidRequest"
    assert spans.attempts()[0].attributes[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK  # type: ignore[index]


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (-0.2, "for less than 0.1 s more"),
        (0.0, "for less than 0.1 s more"),
        (0.049, "for less than 0.1 s more"),
        (0.05, "for another 0.1 s"),
        (12.04, "for another 12.0 s"),
    ],
)
def test_why_a_source_waits_never_says_zero_seconds(seconds: float, said: str) -> None:
    """How long a source stays rate limited, open or out of quota reads in tenths of a second,
    and a wait shorter than that says so rather than "for another 0.0 s" (a call that gave up
    at its deadline a few milliseconds before the quota came back)."""
    from otel_llm._act._source_state import for_another

    assert for_another(seconds) == said


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_stream_cut_by_a_rate_limit_after_output_costs_a_retry_unit(provider: str) -> None:
    """On virtual time, real HTTP: every answer streams output, then the provider's own
    rate-limit error inside the stream. Each is a broken stream and costs a unit of
    ``max_attempts``: the call ends after three attempts — it went on forever (a 429 cost none,
    and each attempt's output restarted the stall window), a request every second."""

    async def main() -> tuple[AllSourcesExhausted, int]:
        cut = Script(fault="error", fault_status=429, fault_after_chunk=2)
        async with SimulatedProvider(default=cut) as sim:
            async with Client([sim_source(provider, sim)], max_attempts=3) as c:
                with pytest.raises(AllSourcesExhausted) as caught:
                    async with asyncio.timeout(600):
                        await c.chat(MESSAGES)
            return caught.value, sim.stats.requests

    exhausted, requests = run_virtual(main(), real_io=True)
    assert "max_attempts=3 reached" in str(exhausted)
    assert requests == 3
