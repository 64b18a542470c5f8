"""Every provider the client speaks — OpenAI-compatible chat completions, Azure OpenAI, the
Anthropic Messages API, the Gemini API — over real HTTP on loopback against the simulated
provider, which plays the same script on each API: the text, the chunks, time to first chunk
and stalls against the scripted truth, usage and finish reasons, keepalives, truncation and
mid-stream error events, each scripted error class, and calls that hedge or fail over from one
API to another.

Timing runs on virtual time (``run_virtual(real_io=True)``: the simulator and the client share
the test's loop), so a scripted 60 s silence takes no real time and the figures are exact to
the scheduler, not to a busy machine's noise.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from otel_llm import AllSourcesExhausted, Client, ConfigurationError, Source
from otel_llm import _errors as e
from otel_llm import _semconv as sc
from otel_llm.simulator import Script, Silence, SimulatedProvider, scripted_figures
from otel_llm.testing import Spans, run_virtual
from tests.support.sim_sources import KEYS, PROVIDERS, TELEMETRY, WIRE, sim_source

T = TypeVar("T")
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "say hi"}]


def words(stem: str, count: int) -> str:
    return " ".join(f"{stem}{k}" for k in range(count))


def live(main: Callable[[SimulatedProvider], Awaitable[T]], **simulator: Any) -> T:
    """``main(simulator)`` on virtual time, the simulator served on the same loop."""

    async def run() -> T:
        async with SimulatedProvider(**simulator) as sim:
            return await main(sim)

    return run_virtual(run(), real_io=True)


def attempt_attributes(spans: Spans) -> list[dict[str, Any]]:
    """The attributes of every attempt span, in the order the attempts started."""
    ordered = sorted(spans.attempts(), key=lambda span: span.start_time or 0)
    return [dict(span.attributes or {}) for span in ordered]


# --- one provider at a time -------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("script", "finish"),
    [
        (Script(chunk_count=9, words_per_chunk=2), "stop"),
        (Script(chunk_count=8, reasoning_chunks=3), "stop"),
        (Script(chunk_count=6, finish_reason="length"), "length"),
        (Script(chunk_count=7, reasoning_chunks=2, tool_call=True), "tool_calls"),
    ],
    ids=["text", "reasoning", "length", "tool-call"],
)
def test_the_answer_is_the_same_on_every_api(
    provider: str, script: Script, finish: str, spans: Spans
) -> None:
    """The same script gives the same answer through every API: text and reasoning exact,
    the finish reason in one vocabulary, the usage normalized, as many chunks as the API
    sends (Gemini sends a tool call whole), and the attempt span names the provider by the
    GenAI convention with the response's id, model and token counts."""

    async def main(sim: SimulatedProvider) -> Any:
        source = sim_source(provider, sim, model="model-x")
        async with Client([source], tracer_provider=spans.provider) as client:
            return await client.chat(MESSAGES)

    result = live(main, default=script)
    content = script.chunk_count - script.reasoning_chunks
    if not script.tool_call:
        assert result.text == words("word", content * script.words_per_chunk)
    else:
        (call,) = result.tool_calls
        assert (call.name, call.arguments.startswith('{"query"')) == ("lookup", True)
    thinking = script.reasoning_chunks * script.words_per_chunk
    assert result.reasoning == (words("thought", thinking) or None)
    assert result.finish_reason == finish
    assert result.source == provider
    truth = scripted_figures(script, threshold_s=1.0, wire=WIRE[provider])
    assert result.stats.chunk_count == truth.chunk_count
    usage = result.usage
    assert usage is not None
    assert usage.output_tokens == script.chunk_count * script.words_per_chunk
    assert usage.input_tokens == 4  # "be brief" + "say hi", one token a word
    assert (usage.reasoning_tokens or 0) == thinking  # (Gemini leaves out a count of 0)
    (attempt,) = attempt_attributes(spans)
    assert attempt[sc.GEN_AI_PROVIDER_NAME] == TELEMETRY[provider]
    assert attempt[sc.GEN_AI_OPERATION_NAME] == sc.OPERATION_CHAT
    assert attempt[sc.GEN_AI_RESPONSE_ID] == result.response_id
    assert attempt[sc.GEN_AI_RESPONSE_MODEL] == "model-x"
    assert attempt[sc.GEN_AI_RESPONSE_FINISH_REASONS] == (finish,)
    assert attempt[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == usage.output_tokens
    if provider == "anthropic":  # reported (as 0) by the Messages API only
        assert attempt[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 0
    (call_span,) = spans.calls()
    assert dict(call_span.attributes or {})[sc.GEN_AI_PROVIDER_NAME] == TELEMETRY[provider]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_non_streamed_answer_is_the_same_on_every_api(provider: str, spans: Spans) -> None:
    """``stream=False`` asks each API for its complete answer: the same text, finish reason
    and usage, and no chunks."""

    async def main(sim: SimulatedProvider) -> Any:
        async with Client([sim_source(provider, sim)], tracer_provider=spans.provider) as c:
            return await c.chat(MESSAGES, stream=False, max_tokens=50)

    result = live(main, default=Script(chunk_count=5))
    assert (result.text, result.finish_reason) == (words("word", 5), "stop")
    assert result.usage is not None
    assert result.usage.output_tokens == 5
    assert result.stats.stall_count is None


SILENCES = Script(
    chunk_count=12,
    first_chunk_delay_s=0.4,
    chunk_interval_s=0.05,
    silences=(
        Silence(after_chunk=3, duration_s=1.5),
        Silence(after_chunk=7, duration_s=2.5, keepalive_every_s=0.5),
    ),
)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_ttft_and_stalls_are_the_scripted_ones(provider: str, spans: Spans) -> None:
    """On virtual time the figures equal the scripted truth to the millisecond: time to first
    chunk, both stalls (one of them full of keepalives, which are no chunks), the longest gap,
    the chunk count."""

    async def main(sim: SimulatedProvider) -> Any:
        async with Client([sim_source(provider, sim)], tracer_provider=spans.provider) as c:
            return await c.chat(MESSAGES)

    stats = live(main, default=SILENCES).stats
    truth = scripted_figures(SILENCES, threshold_s=1.0, wire=WIRE[provider])
    assert truth.ttft_s is not None
    assert stats.ttft_ms is not None
    assert abs(stats.ttft_ms - truth.ttft_s * 1000) <= 1
    assert stats.stall_count == truth.stall_count == 2
    assert stats.stall_ms is not None
    assert abs(stats.stall_ms - truth.stall_s * 1000) <= 2
    assert stats.max_inter_chunk_ms is not None
    assert abs(stats.max_inter_chunk_ms - truth.longest_gap_s * 1000) <= 1
    assert stats.chunk_count == truth.chunk_count == 12


@pytest.mark.parametrize("provider", PROVIDERS)
def test_keepalives_never_keep_the_watchdog_from_killing(provider: str, spans: Spans) -> None:
    """A stream that goes silent after chunk 2 and sends only keepalives (Anthropic's ``ping``
    events, SSE comments; Gemini sends none) is killed by the watchdog 5 s after its last
    chunk: keepalives are not liveness."""
    script = Script(
        chunk_count=6, silences=(Silence(after_chunk=2, duration_s=100.0, keepalive_every_s=1.0),)
    )

    async def main(sim: SimulatedProvider) -> tuple[BaseException, float]:
        loop = asyncio.get_running_loop()
        source = sim_source(provider, sim, inter_token_timeout_s=5.0)
        async with Client([source], tracer_provider=spans.provider, max_attempts=1) as client:
            started = loop.time()
            with pytest.raises(AllSourcesExhausted) as caught:
                await client.chat(MESSAGES)
            return caught.value, loop.time() - started

    error, elapsed = live(main, default=script)
    last_chunk_s = script.first_chunk_delay_s + 2 * script.chunk_interval_s
    assert last_chunk_s + 5.0 <= elapsed < last_chunk_s + 5.1
    assert "no chunk for 5 s after chunk 3" in str(error)
    (attempt,) = attempt_attributes(spans)
    assert attempt[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_WATCHDOG_KILLED
    assert attempt[sc.CHUNK_COUNT_RECORDED] == 3


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("script", "error"),
    [
        (Script(fault="truncate", fault_after_chunk=3), e.TruncatedStream),
        (Script(fault="error", fault_after_chunk=3, fault_status=529), e.ServerError),
        (Script(fault="error", fault_after_chunk=3, fault_status=400,
                error_message="bad field"), e.BadRequest),
        (Script(fault="malformed", fault_after_chunk=3), e.MalformedStream),
    ],
    ids=["truncated", "error-event-529", "error-event-400", "malformed"],
)  # fmt: skip
def test_a_broken_stream_is_its_error_never_an_answer(
    provider: str, script: Script, error: type[e.ProviderError], spans: Spans
) -> None:
    """A stream cut before its finish, or carrying the API's own error event, is that error
    of the hierarchy, recorded on the attempt span — never the partial answer."""

    async def main(sim: SimulatedProvider) -> BaseException:
        async with Client(
            [sim_source(provider, sim)], tracer_provider=spans.provider, max_attempts=1,
            same_source_retries=0,
        ) as client:  # fmt: skip
            with pytest.raises(e.OtelLLMError) as caught:
                await client.chat(MESSAGES)
            return caught.value

    raised = live(main, default=script)
    if isinstance(raised, AllSourcesExhausted):
        cause = raised.__cause__
        assert isinstance(cause, ExceptionGroup)
        (raised,) = cause.exceptions
    assert type(raised) is error
    (attempt,) = attempt_attributes(spans)
    assert attempt[sc.ERROR_TYPE] == error.__name__
    assert attempt[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    assert attempt[sc.CHUNK_COUNT_RECORDED] == 4


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [True, False])
def test_a_stop_on_content_grounds_is_content_filtered_on_every_api(
    provider: str, stream: bool, spans: Spans
) -> None:
    """A safety stop — chat completions' ``content_filter`` finish, Anthropic's ``refusal``,
    Gemini's ``SAFETY`` — is the ContentFiltered error on every API, streamed or not; it
    reaches the caller at once (no failover by default) after one request."""

    async def main(sim: SimulatedProvider) -> tuple[BaseException, int]:
        sources = [sim_source(provider, sim), sim_source("openai", sim, name="b", priority=1)]
        async with Client(sources, tracer_provider=spans.provider) as client:
            with pytest.raises(e.ContentFiltered) as caught:
                await client.chat(MESSAGES, stream=stream)
        return caught.value, sim.stats.requests

    error, requests = live(main, default=Script(chunk_count=4, finish_reason="content_filter"))
    assert requests == 1
    assert error.code in ("content_filter", "refusal", "SAFETY")


@pytest.mark.parametrize("provider", ["openai", "azure"])
@pytest.mark.parametrize("stream", [True, False])
def test_a_refusal_instead_of_content_is_content_filtered(
    provider: str, stream: bool, spans: Spans
) -> None:
    """A refusal streamed (``delta.refusal``) or answered (``message.refusal``) instead of
    content is the ContentFiltered error, never an empty answer. The model's words are the
    error's ``refusal``; they are its output, so neither the message nor the spans carry them
    (content capture is off: the message quoted them, and the spans recorded it)."""

    async def main(sim: SimulatedProvider) -> e.ContentFiltered:
        async with Client([sim_source(provider, sim)], tracer_provider=spans.provider) as c:
            with pytest.raises(e.ContentFiltered) as caught:
                await c.chat(MESSAGES, stream=stream)
        return caught.value

    error = live(main, default=Script(chunk_count=3, refusal=True))
    assert error.refusal is not None
    assert error.refusal.strip() == "word0 word1 word2"
    assert "answered with a refusal" in str(error)
    assert "word0" not in str(error)
    recorded = [
        repr(
            (
                dict(span.attributes or {}),
                [(event.name, dict(event.attributes or {})) for event in span.events],
                span.status.description,
            )
        )
        for span in spans.exporter.get_finished_spans()
    ]
    assert recorded
    assert not [text for text in recorded if "word0" in text]


class _Sequence:
    """A simulator default answering its n-th request with ``scripts[n]`` (the last repeats)."""

    def __init__(self, *scripts: Script) -> None:
        self.scripts = scripts
        self.requests = 0

    def __call__(self, rng: random.Random) -> Script:
        script = self.scripts[min(self.requests, len(self.scripts) - 1)]
        self.requests += 1
        return script


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("first", "waited_s"),
    [
        (Script(error_status=529), 0.0),
        (Script(error_status=503), 0.0),
        (Script(error_status=429, retry_after="3"), 3.0),
    ],
    ids=["529", "503", "429-retry-after"],
)
def test_scripted_errors_are_handled_by_their_class(
    provider: str, first: Script, waited_s: float, spans: Spans
) -> None:
    """An overloaded (529) or unavailable (503) answer is transient: retried on the same
    source after backoff; a 429 is waited out for its Retry-After (Gemini's also in its
    RetryInfo) on the same source, costing no retry unit. The second request answers."""
    sequence = _Sequence(first, Script())

    async def main(sim: SimulatedProvider) -> tuple[Any, float]:
        loop = asyncio.get_running_loop()
        async with Client([sim_source(provider, sim)], tracer_provider=spans.provider,
                          seed=3) as client:  # fmt: skip
            started = loop.time()
            result = await client.chat(MESSAGES)
            return result, loop.time() - started

    result, elapsed = live(main, default=sequence)
    assert result.text == words("word", 20)
    assert (result.stats.attempts, sequence.requests) == (2, 2)
    first_attempt, _ = attempt_attributes(spans)
    expected = e.RateLimited if first.error_status == 429 else e.ServerError
    assert first_attempt[sc.ERROR_TYPE] == expected.__name__
    assert waited_s <= elapsed < waited_s + 1.0


# --- across providers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("primary", "hedge", "script", "trigger", "hedge_at_s"),
    [
        ("anthropic", "openai", Script(silences=(Silence(after_chunk=3, duration_s=60.0),)),
         {"hedge_stall_after_s": 2.0}, 0.1 + 3 * 0.02 + 2.0),
        ("gemini", "anthropic", Script(first_chunk_delay_s=60.0),
         {"hedge_after_s": 1.5}, 1.5),
    ],
    ids=["anthropic-stalls-openai-wins", "gemini-late-anthropic-wins"],
)  # fmt: skip
def test_a_hedge_crosses_apis(
    primary: str,
    hedge: str,
    script: Script,
    trigger: dict[str, float],
    hedge_at_s: float,
    spans: Spans,
) -> None:
    """The primary (one API) stalls or is late; the hedge goes to a source of another API with
    the same messages, translated, and wins: the answer is the hedge's, at the time its
    stream ends, and the primary is cancelled."""

    async def main(sim: SimulatedProvider) -> tuple[Any, float]:
        loop = asyncio.get_running_loop()
        sources = [
            sim_source(primary, sim, model="slow", priority=0),
            sim_source(hedge, sim, model="fast", priority=1),
        ]
        async with Client(sources, tracer_provider=spans.provider, **trigger) as client:
            started = loop.time()
            result = await client.chat(MESSAGES)
            return result, loop.time() - started

    result, elapsed = live(main, scripts={"slow": script, "fast": Script()})
    assert result.source == hedge
    assert result.text == words("word", 20)
    assert (result.stats.hedges, result.stats.hedge_won) == (1, True)
    assert result.stats.sources_tried == (primary, hedge)
    fast = Script()
    answer_s = fast.first_chunk_delay_s + (fast.chunk_count - 1) * fast.chunk_interval_s
    assert hedge_at_s + answer_s <= elapsed < hedge_at_s + answer_s + 0.05
    assert result.stats.wall_ms is not None  # the hedge's own wall time: it started at
    assert abs(elapsed - result.stats.wall_ms / 1000 - hedge_at_s) < 0.01  # the trigger
    first, second = attempt_attributes(spans)
    assert first[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_HEDGE_CANCELLED
    assert first[sc.GEN_AI_PROVIDER_NAME] == TELEMETRY[primary]
    assert second[sc.ATTEMPT_LEG] == sc.LEG_HEDGE
    assert second[sc.GEN_AI_PROVIDER_NAME] == TELEMETRY[hedge]


def test_a_failover_chain_crosses_apis(spans: Spans) -> None:
    """Anthropic overloaded (529, transient: its breaker, opening at the first failure, sends
    the call on), Gemini out of quota for a minute (RESOURCE_EXHAUSTED: the next source at
    once), then OpenAI answers — each error classified in its own API's words, the caller's
    messages sent to each."""

    async def main(sim: SimulatedProvider) -> Any:
        sources = [
            sim_source("anthropic", sim, model="overloaded", priority=0),
            sim_source("gemini", sim, model="exhausted", priority=1),
            sim_source("openai", sim, model="fine", priority=2),
        ]
        async with Client(
            sources, tracer_provider=spans.provider, seed=5, breaker_failure_threshold=1
        ) as client:
            return await client.chat(MESSAGES)

    scripts = {
        "overloaded": Script(error_status=529),
        "exhausted": Script(error_status=429, retry_after="60"),
        "fine": Script(),
    }
    result = live(main, scripts=scripts)
    assert result.source == "openai"
    assert result.text == words("word", 20)
    attempts = attempt_attributes(spans)
    assert [a[sc.ATTEMPT_SOURCE] for a in attempts] == ["anthropic", "gemini", "openai"]
    assert [a.get(sc.ERROR_TYPE) for a in attempts] == ["ServerError", "RateLimited", None]
    assert [a.get("otel_llm.attempt.number") for a in attempts] == [1, 2, 3]
    assert result.stats.sources_tried == ("anthropic", "gemini", "openai")


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]},
         "messages[0].content[0]"),
        ({"messages": [{"role": "user", "content": "hi"},
                       {"role": "assistant", "content": None,
                        "tool_calls": [{"id": "c", "type": "function",
                                        "function": {"name": "f", "arguments": "{}"}}]},
                       {"role": "tool", "tool_call_id": "c", "content": "42"}]},
         "messages[1].tool_calls"),
        ({"temperature": 0.2}, "temperature"),
    ],
    ids=["tools", "response-format", "n", "logprobs", "image", "tool-result", "temperature"],
)  # fmt: skip
def test_an_untranslatable_request_is_refused_before_anything_is_sent(
    extra: dict[str, Any], key: str, spans: Spans
) -> None:
    """A call using more than the common subset, with an Anthropic source among the sources
    (which any failover or hedge may reach), is a ConfigurationError naming the field and the
    source — and the simulator saw no request at all, not even to the OpenAI primary."""

    async def main(sim: SimulatedProvider) -> tuple[ConfigurationError, int]:
        sources = [sim_source("openai", sim), sim_source("anthropic", sim, priority=1)]
        async with Client(sources, tracer_provider=spans.provider) as client:
            with pytest.raises(ConfigurationError) as caught:
                await client.chat(**{"messages": MESSAGES, **extra})
        return caught.value, sim.stats.requests

    error, requests = live(main)
    assert requests == 0
    assert error.key == key
    assert "'anthropic'" in str(error)
    assert "nothing was sent" in str(error)
    assert spans.attempts() == []


def test_what_gemini_takes_is_sent(spans: Spans) -> None:
    """The refusal is per API: ``temperature`` crosses to Gemini (as ``generationConfig``),
    so the same call with a Gemini fallback is sent and answered."""

    async def main(sim: SimulatedProvider) -> tuple[str, int]:
        sources = [sim_source("gemini", sim), sim_source("openai", sim, priority=1)]
        async with Client(sources, tracer_provider=spans.provider) as client:
            result = await client.chat(MESSAGES, temperature=0.2, max_tokens=64, stop=["x"])
        return result.source, sim.stats.requests

    assert live(main) == ("gemini", 1)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_key_appears_in_spans_or_errors(provider: str, spans: Spans) -> None:
    """An error answer echoing the key: neither the error nor any span holds the key."""
    key = KEYS[provider]

    async def main(sim: SimulatedProvider) -> BaseException:
        async with Client([sim_source(provider, sim)], tracer_provider=spans.provider) as c:
            with pytest.raises(e.AuthenticationError) as caught:
                await c.chat(MESSAGES)
        return caught.value

    error = live(main, default=Script(error_status=401, error_message=f"bad key {key}"))
    assert key not in str(error)
    assert key not in repr(error)
    for span in spans.finished():
        assert key not in span.to_json()


def test_azure_goes_to_its_deployment(spans: Spans) -> None:
    """An Azure source built from its resource endpoint, deployment and api_version reaches
    the deployment's route (the simulator names the deployment as the model)."""

    async def main(sim: SimulatedProvider) -> tuple[str, dict[str, int]]:
        source: Source = sim_source("azure", sim, model="gpt-4o", deployment="prod-gpt")
        async with Client([source], tracer_provider=spans.provider) as client:
            result = await client.chat(MESSAGES)
        return result.text, sim.stats.requests_by_model

    text, by_model = live(main)
    assert text == words("word", 20)
    assert by_model == {"prod-gpt": 1}
