"""Failover that respects the user's order of sources: same-source retries, short Retry-After
waits, content-filter and context-length decisions, bad chunks and wrong shapes."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest

from otel_llm import (
    ContentFiltered,
    ContextLengthExceeded,
    MalformedResponse,
)
from otel_llm import _semconv as sc
from otel_llm.testing import Scripted, Spans, error, run_virtual, sse_answer
from otel_llm.testing._scripted import Handler
from tests.support.scripted_clients import MESSAGES, client, source, timed_stream


def sse(*events: object) -> httpx2.Response:
    """A streamed answer made of ``events`` (objects are sent as JSON)."""
    text = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=text)


async def test_a_transient_failure_is_retried_once_on_the_same_source(spans: Spans) -> None:
    """By default one 5xx is retried on the same source (after backoff) before failing over:
    the user's first choice answers."""
    script = Scripted({"a": [error(503), sse_answer()], "b": [sse_answer()]})
    async with client(script, spans) as c:
        result = await c.chat(MESSAGES)
    assert result.source == "a"
    assert script.seen == ["a", "a"]
    assert (result.stats.attempts, result.stats.retries) == (2, 1)
    assert result.stats.backoff_ms is not None


@pytest.mark.parametrize(("retries", "seen"), [(0, ["a", "b"]), (1, ["a", "a", "b"]),
                                               (2, ["a", "a", "a", "b"])])  # fmt: skip
async def test_same_source_retries_is_the_number_before_failover(
    spans: Spans, retries: int, seen: list[str]
) -> None:
    """``same_source_retries`` transient failures are retried on the source, then the call
    moves to the next one."""
    script = Scripted({"a": [error(500)], "b": [sse_answer()]})
    async with client(script, spans, same_source_retries=retries, max_attempts=5) as c:
        result = await c.chat(MESSAGES)
    assert result.source == "b"
    assert script.seen == seen


async def test_an_open_breaker_ends_same_source_retries(spans: Spans) -> None:
    """A failure that opens the source's breaker moves the call on at once."""
    script = Scripted({"a": [error(500)], "b": [sse_answer()]})
    async with client(script, spans, breaker_failure_threshold=1, same_source_retries=3) as c:
        result = await c.chat(MESSAGES)
    assert result.source == "b"
    assert script.seen == ["a", "b"]


@pytest.mark.parametrize(
    ("answer", "watchdog", "killed_at"),
    [
        (timed_stream(500.0), {"ttft_timeout_s": 10.0}, 10.0),  # no first chunk
        (timed_stream(0.5, gap_after=2, gap_s=500.0), {"inter_token_timeout_s": 5.0}, 5.6),
    ],
    ids=["no-first-chunk", "stall"],
)
def test_a_watchdog_kill_moves_to_the_next_source(
    spans: Spans, answer: Handler, watchdog: dict[str, float], killed_at: float
) -> None:
    """A source the watchdog killed went silent: the call moves to the next source at once
    instead of spending its same-source retry on it, and the next call goes back to the
    primary (its breaker is closed)."""
    script = Scripted({"a": [answer, sse_answer()], "b": [sse_answer()]})

    async def main() -> tuple[str, float, str]:
        loop = asyncio.get_running_loop()
        async with client(script, spans, source("a", **watchdog), source("b")) as c:
            started = loop.time()
            first = await c.chat(MESSAGES)
            elapsed = loop.time() - started
            second = await c.chat(MESSAGES)
        return first.source, elapsed, second.source

    first, elapsed, second = run_virtual(main())
    assert (first, second) == ("b", "a")
    assert script.seen == ["a", "b", "a"]
    assert killed_at <= elapsed < killed_at + 0.5


def test_with_one_source_a_watchdog_kill_is_retried_there(spans: Spans) -> None:
    """No other source: the silent one is retried (and answers the second time)."""
    script = Scripted({"a": [timed_stream(500.0), sse_answer()]})

    async def main() -> str:
        async with client(script, spans, source("a", ttft_timeout_s=10.0)) as c:
            return (await c.chat(MESSAGES)).source

    assert run_virtual(main()) == "a"
    assert script.seen == ["a", "a"]


def test_a_short_retry_after_is_waited_out_on_the_same_source(spans: Spans) -> None:
    """On virtual time: a 429 asking for 5 s (below the 10 s bound) is waited out on the first
    source although the second one is free."""
    script = Scripted({"a": [error(429, retry_after="5"), sse_answer()], "b": [sse_answer()]})

    async def main() -> tuple[str, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client(script, spans) as c:
            result = await c.chat(MESSAGES)
        return result.source, loop.time() - started

    source_name, elapsed = run_virtual(main())
    assert source_name == "a"
    assert script.seen == ["a", "a"]
    assert 5.0 <= elapsed < 6.0


def test_a_long_retry_after_fails_over(spans: Spans) -> None:
    """A 429 asking for longer than ``rate_limit_max_wait_s`` moves the call to the next source
    at once."""
    script = Scripted({"a": [error(429, retry_after="30")], "b": [sse_answer()]})

    async def main() -> tuple[str, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client(script, spans, rate_limit_max_wait_s=20) as c:
            result = await c.chat(MESSAGES)
        return result.source, loop.time() - started

    source_name, elapsed = run_virtual(main())
    assert (source_name, script.seen) == ("b", ["a", "b"])
    assert elapsed < 1.0


def test_a_429_without_retry_after_waits_the_default_on_the_same_source(spans: Spans) -> None:
    """Without Retry-After the wait is ``rate_limit_wait_s`` (1 s), within the bound: stay."""
    script = Scripted({"a": [error(429), sse_answer()], "b": [sse_answer()]})

    async def main() -> str:
        async with client(script, spans) as c:
            return (await c.chat(MESSAGES)).source

    assert run_virtual(main()) == "a"
    assert script.seen == ["a", "a"]


async def test_a_content_filter_refusal_propagates_at_once(spans: Spans) -> None:
    """A content-filter refusal is a decision about the content: it reaches the caller
    unmasked, and no other source is asked."""
    script = Scripted({"a": [error(400, "content_filter")], "b": [sse_answer()]})
    async with client(script, spans) as c:
        with pytest.raises(ContentFiltered, match="scripted 400"):
            await c.chat(MESSAGES)
    assert script.seen == ["a"]


async def test_content_filter_failover_can_be_turned_on(spans: Spans) -> None:
    """``failover_on_content_filter=True`` tries the next source instead."""
    script = Scripted({"a": [error(400, "content_filter")], "b": [sse_answer()]})
    async with client(script, spans, failover_on_content_filter=True) as c:
        result = await c.chat(MESSAGES)
    assert (result.source, script.seen) == ("b", ["a", "b"])


async def test_a_context_length_error_moves_to_the_next_source(spans: Spans) -> None:
    """The context window is the source's model's: the next source (maybe a larger model) is
    tried, the first is not asked again."""
    script = Scripted({"a": [error(400, "context_length_exceeded")], "b": [sse_answer()]})
    async with client(script, spans) as c:
        result = await c.chat(MESSAGES)
    assert (result.source, script.seen) == ("b", ["a", "b"])


async def test_context_length_can_propagate_at_once(spans: Spans) -> None:
    """``failover_on_context_length=False`` ends the call with the provider's error."""
    script = Scripted({"a": [error(400, "context_length_exceeded")], "b": [sse_answer()]})
    async with client(script, spans, failover_on_context_length=False) as c:
        with pytest.raises(ContextLengthExceeded):
            await c.chat(MESSAGES)
    assert script.seen == ["a"]


def later(delay_s: float, answer: httpx2.Response) -> Handler:
    """``answer``, sent after ``delay_s`` (virtual) seconds."""

    async def handler(request: httpx2.Request) -> httpx2.Response:
        await asyncio.sleep(delay_s)
        return answer

    return handler


REFUSED_STREAM = sse(
    {"choices": [{"index": 0, "delta": {"refusal": "I will not"}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    "[DONE]",
)


@pytest.mark.parametrize(
    ("refusal", "options", "raised"),
    [
        (error(400, "content_filter"), {}, ContentFiltered),
        (REFUSED_STREAM, {}, ContentFiltered),
        (error(400, "context_length_exceeded"), {"failover_on_context_length": False},
         ContextLengthExceeded),
    ],
    ids=["400 content_filter", "streamed refusal", "context length"],
)  # fmt: skip
def test_a_refusal_ends_the_call_though_a_hedge_runs(
    spans: Spans,
    refusal: httpx2.Response,
    options: dict[str, object],
    raised: type[Exception],
) -> None:
    """On virtual time: a primary's refusal that propagates reaches the caller when it comes,
    though a hedge runs; the hedge is cancelled (never answers in the refusal's place)."""
    script = Scripted({"a": [later(0.5, refusal)], "b": [timed_stream(0.8)]})

    async def main() -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client(script, spans, hedge_after_s=0.2, **options) as c:
            with pytest.raises(raised):
                await c.chat(MESSAGES)
        return loop.time() - started

    assert run_virtual(main()) == pytest.approx(0.5, abs=0.05)
    assert script.seen == ["a", "b"]
    legs = {
        s.attributes[sc.ATTEMPT_SOURCE]: s.attributes[sc.ATTEMPT_OUTCOME]  # type: ignore[index]
        for s in spans.attempts()
    }
    assert legs == {"a": sc.OUTCOME_ERROR, "b": sc.OUTCOME_HEDGE_CANCELLED}


@pytest.mark.parametrize(
    ("refusal", "options"),
    [
        (error(400, "content_filter"), {}),
        (error(400, "context_length_exceeded"), {"failover_on_context_length": False}),
    ],
    ids=["content filter", "context length"],
)  # fmt: skip
def test_a_hedges_refusal_leaves_the_primary_to_answer(
    spans: Spans, refusal: httpx2.Response, options: dict[str, object]
) -> None:
    """On virtual time: the hedge's source refuses (a stricter filter, a smaller context window)
    while the primary is slow to its first chunk: a failed hedge — the primary, the answer the
    call would have had without hedging, answers at its time."""
    script = Scripted({"a": [timed_stream(1.0)], "b": [later(0.1, refusal)]})

    async def main() -> tuple[str, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client(script, spans, hedge_after_s=0.2, **options) as c:
            source = (await c.chat(MESSAGES)).source
        return source, loop.time() - started

    source, took = run_virtual(main())
    assert source == "a"
    assert took == pytest.approx(1.0 + 6 * 0.1, abs=0.05)  # its first chunk, six 0.1 s apart
    legs = {
        s.attributes[sc.ATTEMPT_SOURCE]: s.attributes[sc.ATTEMPT_OUTCOME]  # type: ignore[index]
        for s in spans.attempts()
    }
    assert legs == {"a": sc.OUTCOME_OK, "b": sc.OUTCOME_ERROR}


def test_a_hedge_still_answers_after_a_primary_error_that_fails_over(spans: Spans) -> None:
    """On virtual time: a permanent error the call fails over from (a context-length error,
    by default) does not end the round: the running hedge answers."""
    script = Scripted({"a": [later(0.5, error(400, "context_length_exceeded"))],
                       "b": [timed_stream(0.8)]})  # fmt: skip

    async def main() -> str:
        async with client(script, spans, hedge_after_s=0.2) as c:
            return (await c.chat(MESSAGES)).source

    assert run_virtual(main()) == "b"
    assert script.seen == ["a", "b"]


async def test_a_chunk_of_the_wrong_shape_fails_over_instead_of_crashing(spans: Spans) -> None:
    """Regression: a primary sending ``{"choices": 5}`` made chat() raise TypeError and the
    healthy source was never tried. Now it is a MalformedStream naming the field (transient:
    retried on the source, then failed over)."""
    script = Scripted({"a": [sse({"choices": 5}, "[DONE]")], "b": [sse_answer()]})
    async with client(script, spans) as c:
        result = await c.chat(MESSAGES)
    assert (result.source, script.seen) == ("b", ["a", "a", "b"])
    failed = [s for s in spans.attempts() if s.attributes[sc.ATTEMPT_SOURCE] == "a"]  # type: ignore[index]
    assert [s.attributes[sc.ERROR_TYPE] for s in failed] == ["MalformedStream"] * 2  # type: ignore[index]
    assert "choices is a number, expected a list" in (failed[0].status.description or "")


async def test_a_wrong_shaped_answer_is_permanent_for_that_source(spans: Spans) -> None:
    """Embeddings with one vector per token for one input are a well-formed answer of the
    wrong shape: a MalformedResponse, never retried on that source; the next source answers."""
    per_token = {"data": [{"index": i, "embedding": [0.1, 0.2]} for i in range(3)]}
    right = {"data": [{"index": 0, "embedding": [0.3, 0.4]}]}
    script = Scripted(
        {"a": [httpx2.Response(200, json=per_token)], "b": [httpx2.Response(200, json=right)]}
    )
    async with client(script, spans) as c:
        result = await c.embed("hello world")
    assert result.vectors == ((0.3, 0.4),)
    assert script.seen == ["a", "b"]
    (failed,) = [s for s in spans.attempts() if s.attributes[sc.ATTEMPT_SOURCE] == "a"]  # type: ignore[index]
    assert failed.attributes[sc.ERROR_TYPE] == "MalformedResponse"  # type: ignore[index]


async def test_a_wrong_shaped_answer_on_the_only_source_propagates(spans: Spans) -> None:
    """With no source left, the MalformedResponse itself reaches the caller, naming what was
    wrong."""
    nested = {"data": [{"index": 0, "embedding": [[0.1], [0.2]]}]}
    script = Scripted({"a": [httpx2.Response(200, json=nested)]})
    async with client(script, spans, source("a")) as c:
        with pytest.raises(MalformedResponse, match=r"data\[0\]\.embedding\[\] is a list"):
            await c.embed("hello")
    assert script.seen == ["a"]


def test_a_source_that_keeps_answering_429_gets_the_call_back_once(spans: Spans) -> None:
    """On virtual time: a primary that answers 429 with a short Retry-After every time is
    waited for once (the same-source allowance), then the call moves to the healthy source —
    it does not burn its stall window on the primary."""
    script = Scripted({"a": [error(429, retry_after="2")], "b": [sse_answer()]})

    async def main() -> tuple[str, float]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client(script, spans) as c:
            result = await c.chat(MESSAGES)
        return result.source, loop.time() - started

    source_name, elapsed = run_virtual(main())
    assert (source_name, script.seen) == ("b", ["a", "a", "b"])
    assert 2.0 <= elapsed < 3.0


def test_a_zero_bound_never_waits_on_the_same_source(spans: Spans) -> None:
    """``rate_limit_max_wait_s=0``: even ``Retry-After: 0`` moves the call on."""
    script = Scripted({"a": [error(429, retry_after="0")], "b": [sse_answer()]})

    async def main() -> str:
        async with client(script, spans, rate_limit_max_wait_s=0) as c:
            return (await c.chat(MESSAGES)).source

    assert run_virtual(main()) == "b"
    assert script.seen == ["a", "b"]


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param({"error": {"code": "content_filter", "message": "no"}}, ContentFiltered,
                     id="content-filter"),
        pytest.param({"error": {"code": "context_length_exceeded", "message": "too long"}},
                     ContextLengthExceeded, id="context-length"),
    ],
)  # fmt: skip
async def test_an_in_stream_refusal_keeps_its_meaning(
    spans: Spans, event: dict[str, object], expected: type[Exception]
) -> None:
    """An error event inside a 200 stream carries no status: its code decides, so it is the
    permanent error it names — never a 5xx retried on the source and failed over (with
    context-length failover off, both reach the caller from the first source)."""
    script = Scripted({"a": [sse(event)], "b": [sse_answer()]})
    async with client(script, spans, failover_on_context_length=False) as c:
        with pytest.raises(expected):
            await c.chat(MESSAGES)
    assert script.seen == ["a"]


@pytest.mark.parametrize(
    ("provider", "header", "expected"),
    [
        ("azure", None, ("api-key", "k-1")),
        ("azure.ai.openai", None, ("api-key", "k-1")),
        ("openai", None, ("authorization", "Bearer k-1")),
        ("openai", "api-key", ("api-key", "k-1")),
        ("azure", "Authorization", ("authorization", "Bearer k-1")),
    ],
)
async def test_azure_deployments_keep_their_query_and_send_the_api_key_header(
    spans: Spans, provider: str, header: str | None, expected: tuple[str, str]
) -> None:
    """An Azure OpenAI base URL carries its API version as a query string: every request keeps
    it after the endpoint's path, and the key goes in Azure's ``api-key`` header (or where
    ``api_key_header`` says)."""
    requests: list[httpx2.Request] = []

    async def answer(request: httpx2.Request) -> httpx2.Response:
        requests.append(request)
        return sse_answer()

    script = Scripted({"a": [answer]})
    base = "http://a.test/openai/deployments/gpt-4o?api-version=2024-10-21"
    azure = source("a", provider=provider, api_key="k-1", api_key_header=header, base_url=base)
    async with client(script, spans, azure) as c:
        result = await c.chat(MESSAGES)
    assert result.source == "a"
    (request,) = requests
    assert request.url.path == "/openai/deployments/gpt-4o/chat/completions"
    assert request.url.params["api-version"] == "2024-10-21"
    name, value = expected
    assert request.headers[name] == value
    other = "authorization" if name == "api-key" else "api-key"
    assert other not in request.headers


@pytest.mark.parametrize(
    ("base", "chat"),
    [
        ("http://a.test/v1", "http://a.test/v1/chat/completions"),
        ("http://a.test/v1/", "http://a.test/v1/chat/completions"),
        ("http://a.test/p%2Fq/v1", "http://a.test/p%2Fq/v1/chat/completions"),  # kept as written
        ("http://[::1]:8080/v1", "http://[::1]:8080/v1/chat/completions"),
        ("http://u:p%40ss@a.test/v1", "http://a.test/v1/chat/completions"),  # a header instead
        ("http://a.test/d?api-version=1/x", "http://a.test/d/chat/completions?api-version=1/x"),
    ],
)
def test_endpoint_urls_keep_the_base_as_written(base: str, chat: str) -> None:
    assert source("a", base_url=base).chat_url == chat


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(
            {"error": {"code": "rate_limit_exceeded", "type": "requests", "message": "slow down"}},
            id="openai-code",
        ),
        pytest.param({"error": {"type": "rate_limit_error", "message": "slow"}}, id="type"),
        pytest.param({"error": {"message": "slow", "status_code": 429}}, id="status-code"),
    ],
)
def test_an_in_stream_rate_limit_is_a_rate_limit(spans: Spans, event: dict[str, object]) -> None:
    """On virtual time: a 200 stream of an OpenAI-compatible server that reports a rate limit
    as an error event is a 429, not a server error — waited out on the same source for
    ``rate_limit_wait_s`` (1 s), never counted on its breaker."""
    script = Scripted({"a": [sse(event), sse_answer()], "b": [sse_answer()]})

    async def main() -> tuple[str, float, int]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client(script, spans) as c:
            result = await c.chat(MESSAGES)
            failures = c._states[0].breaker.failures
        return result.source, loop.time() - started, failures

    source_name, elapsed, failures = run_virtual(main())
    assert (source_name, script.seen, failures) == ("a", ["a", "a"], 0)
    assert 1.0 <= elapsed < 2.0
    (limited,) = [
        span for span in spans.finished() if dict(span.attributes or {}).get(sc.ERROR_TYPE)
    ]
    assert dict(limited.attributes or {})[sc.ERROR_TYPE] == "RateLimited"
