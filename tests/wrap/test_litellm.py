"""instrument_litellm(): the real LiteLLM package over loopback against the simulated provider —
the same figures as the SDK beneath it, one span set when that SDK is instrumented too."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from the internet

import httpx
import litellm
import openai
import pytest
from litellm.integrations.custom_logger import CustomLogger
from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

from otel_llm import _semconv as sc
from otel_llm import (
    instrument_litellm,
    instrument_openai,
    uninstrument_litellm,
    uninstrument_openai,
)
from otel_llm.simulator import Script, Silence, SimulatedProvider, ThreadedProvider
from otel_llm.testing import Spans

MESSAGES = [{"role": "user", "content": "hello"}]
FAST = {"first_chunk_delay_s": 0.0, "chunk_interval_s": 0.002, "chunk_count": 12}
ECHOED = "plainkeyZZ9912"
"""A key without the ``sk-`` shape any pattern would catch (Azure's, a gateway's)."""
SCRIPTS = {
    "smooth": Script(**FAST),
    "stall": Script(**FAST, silences=(Silence(after_chunk=4, duration_s=0.5),)),
    "cut": Script(**FAST, fault="truncate", fault_after_chunk=5),
    "two": Script(**FAST, choices=2),
    "bad": Script(error_status=400, error_message="no such thing"),
    "leaky": Script(error_status=401, error_message=f"Incorrect API key provided: {ECHOED}"),
}
KEY = "sk-litellm-secret-0000"

pytestmark = [
    # LiteLLM 1.110's own types, built by pydantic on first use: not ours to fix
    pytest.mark.filterwarnings("ignore:Items? .* (are|is) using the `ReadOnly` qualifier"),
]


@pytest.fixture
def instrumented(spans: Spans) -> Iterator[Spans]:
    """LiteLLM instrumented into the in-memory span pipeline (threshold 100 ms)."""
    instrument_litellm(tracer_provider=spans.provider, stall_threshold_ms=100)
    yield spans
    uninstrument_litellm()


@pytest.fixture
def blocking_litellm() -> Iterator[None]:
    """LiteLLM's blocking calls over an httpx client and an event loop the test closes.

    Left to itself, LiteLLM builds an httpx client per base URL and keeps it, connection open,
    in its client cache until the interpreter exits, and its service hooks make an event loop
    (``asyncio.get_event_loop()``) that nothing closes."""
    session, before = httpx.Client(), litellm.client_session
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    litellm.client_session = session
    try:
        yield None
    finally:
        litellm.client_session = before
        litellm.in_memory_llm_clients_cache.flush_cache()  # no cached client keeps the session
        session.close()
        asyncio.set_event_loop(None)
        loop.close()


@pytest.fixture
def threaded(blocking_litellm: None) -> Iterator[ThreadedProvider]:
    with SimulatedProvider.start_in_thread(scripts=SCRIPTS) as running:
        yield running


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider(scripts=SCRIPTS) as running:
        yield running


@pytest.fixture
def callback_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM's callback lists as they are, restored after the test: LiteLLM moves the
    callbacks it is given into them (and keeps one logger of a class, the first)."""
    for name in (
        "callbacks",
        "input_callback",
        "success_callback",
        "failure_callback",
        "_async_success_callback",
        "_async_failure_callback",
    ):
        monkeypatch.setattr(litellm, name, list(getattr(litellm, name)))


def _call(base_url: str, model: str, **more: Any) -> dict[str, Any]:
    return {
        "model": f"openai/{model}",
        "api_base": base_url,
        "api_key": KEY,
        "messages": MESSAGES,
        "num_retries": 0,
        **more,
    }


def attempt(spans: Spans) -> dict[str, Any]:
    (span,) = spans.attempts()
    return dict(span.attributes or {})


def test_a_sync_stream_is_metered_as_the_sdk_beneath_it(
    instrumented: Spans, threaded: ThreadedProvider
) -> None:
    """Every chunk counted once, the scripted silence a stall, the provider LiteLLM routed
    to, the finish reason; the key nowhere.

    LiteLLM warmed up first: its first call in a process spends hundreds of milliseconds of its
    own on the first chunks while the provider streams on, which shortens — on a loaded machine,
    hides — the silence the application sees after them."""
    for _ in litellm.completion(**_call(threaded.base_url, "smooth"), stream=True):
        pass
    instrumented.exporter.clear()
    stream = litellm.completion(**_call(threaded.base_url, "stall"), stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text.startswith("word0 word1")
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT]) == (12, 1)
    # The scripted silence is 500 ms; on a loaded machine the chunk before it can arrive late and
    # shorten the gap the client sees, so only the threshold is a floor that cannot move.
    assert a[sc.STALL_MS] >= 100
    assert a[sc.GEN_AI_PROVIDER_NAME] == sc.PROVIDER_OPENAI
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[sc.SERVER_ADDRESS] == "127.0.0.1"
    assert KEY not in instrumented.finished()[0].to_json()


async def test_an_async_stream_is_metered(instrumented: Spans, provider: SimulatedProvider) -> None:
    """``acompletion(stream=True)`` the same way."""
    stream = await litellm.acompletion(**_call(provider.base_url, "smooth"), stream=True)
    chunks = [chunk async for chunk in stream]
    assert chunks
    a = attempt(instrumented)
    assert (a[sc.CHUNK_COUNT], a[sc.STALL_COUNT]) == (12, 0)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK


async def test_closing_an_async_stream_is_synchronous_as_litellms_own(
    instrumented: Spans, provider: SimulatedProvider
) -> None:
    """LiteLLM's async stream has a synchronous ``close()``: the wrapped one returns what it
    returns (``None``, nothing to await), closes the stream, and the spans end as ``closed``
    there and then."""
    stream = await litellm.acompletion(**_call(provider.base_url, "smooth"), stream=True)
    async for _ in stream:
        break
    assert stream.close() is None
    assert stream.completion_stream is None  # LiteLLM's own close() ran
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_CLOSED


def test_a_non_streamed_call_records_usage(instrumented: Spans, threaded: ThreadedProvider) -> None:
    """One call span, one attempt, no stall figures, the usage."""
    answer = litellm.completion(**_call(threaded.base_url, "smooth"))
    assert answer.choices[0].message.content.startswith("word0")
    a = attempt(instrumented)
    assert sc.STALL_MS not in a
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 12


def test_with_the_openai_sdk_instrumented_too_one_call_is_one_span_set(
    spans: Spans, threaded: ThreadedProvider
) -> None:
    """LiteLLM calls the openai SDK inside: that call passes through, recorded once, by
    LiteLLM's wrapper — in either order of instrumenting."""
    instrument_openai(tracer_provider=spans.provider, stall_threshold_ms=100)
    instrument_litellm(tracer_provider=spans.provider, stall_threshold_ms=100)
    try:
        for _ in litellm.completion(**_call(threaded.base_url, "smooth"), stream=True):
            pass
        litellm.completion(**_call(threaded.base_url, "smooth"))
    finally:
        uninstrument_litellm()
        uninstrument_openai()
    assert len(spans.calls()) == 2
    assert len(spans.attempts()) == 2
    assert {(s.attributes or {}).get(sc.CHUNK_COUNT) for s in spans.attempts()} >= {12}


def test_a_stream_of_several_choices_is_complete_by_litellms_rule(
    instrumented: Spans, threaded: ThreadedProvider
) -> None:
    """With ``n=2`` LiteLLM passes on both choices' deltas but only the first choice's finish
    reason: the stream read to its end is ``ok``, not cut short."""
    chunks = list(litellm.completion(**_call(threaded.base_url, "two"), stream=True, n=2))
    finished = {c.index for chunk in chunks for c in chunk.choices if c.finish_reason}
    assert finished == {0}  # LiteLLM's own doing, the rule this test pins
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_OK
    assert sc.ERROR_TYPE not in a
    assert a[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert a[sc.CHUNK_COUNT] >= 12


def test_a_cut_stream_is_recorded_as_truncated(
    instrumented: Spans, threaded: ThreadedProvider
) -> None:
    """The provider's stream ends without a finish reason: the span says so, whatever LiteLLM
    gives the application."""
    try:
        for _ in litellm.completion(**_call(threaded.base_url, "cut"), stream=True):
            pass
    except Exception:  # LiteLLM may raise for it itself; the span is what is checked
        pass
    a = attempt(instrumented)
    assert a[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR


def test_an_error_answer_is_recorded_and_raised(
    instrumented: Spans, threaded: ThreadedProvider
) -> None:
    """LiteLLM's exception reaches the application; the spans end as errors."""
    with pytest.raises(litellm.exceptions.BadRequestError):
        litellm.completion(**_call(threaded.base_url, "bad"), stream=True)
    assert attempt(instrumented)[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR


@pytest.fixture
def no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenAI key in LiteLLM's settings or the environment but the one a test puts there."""
    for setting in ("api_key", "openai_key"):
        monkeypatch.setattr(litellm, setting, None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _leaky(base_url: str, **more: Any) -> dict[str, Any]:
    call = _call(base_url, "leaky", **more)
    del call["api_key"]  # LiteLLM finds the key by itself
    return call


def _redacted(spans: Spans) -> str:
    dumped = "".join(span.to_json() for span in spans.finished())
    assert len(spans.finished()) == 2
    assert "REDACTED" in dumped
    return dumped


@pytest.mark.usefixtures("no_ambient_key")
def test_a_key_from_the_environment_echoed_by_the_provider_never_reaches_spans(
    instrumented: Spans, threaded: ThreadedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key LiteLLM took from ``OPENAI_API_KEY`` and the provider's 401 echoes is redacted."""
    monkeypatch.setenv("OPENAI_API_KEY", ECHOED)
    with pytest.raises(litellm.exceptions.AuthenticationError):
        litellm.completion(**_leaky(threaded.base_url))
    assert ECHOED not in _redacted(instrumented)


@pytest.mark.usefixtures("no_ambient_key")
async def test_an_async_stream_keeps_a_key_from_the_environment_out_of_spans(
    instrumented: Spans, provider: SimulatedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for ``acompletion``, streamed."""
    monkeypatch.setenv("OPENAI_API_KEY", ECHOED)
    with pytest.raises(litellm.exceptions.AuthenticationError):
        await litellm.acompletion(**_leaky(provider.base_url), stream=True)
    assert ECHOED not in _redacted(instrumented)


@pytest.mark.usefixtures("no_ambient_key")
def test_a_key_from_litellm_settings_never_reaches_spans(
    instrumented: Spans, threaded: ThreadedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key set as ``litellm.openai_key`` and echoed by the provider is redacted."""
    monkeypatch.setattr(litellm, "openai_key", ECHOED)
    with pytest.raises(litellm.exceptions.AuthenticationError):
        litellm.completion(**_leaky(threaded.base_url), stream=True)
    assert ECHOED not in _redacted(instrumented)


async def test_a_token_in_an_authorization_header_never_reaches_spans(
    instrumented: Spans, provider: SimulatedProvider
) -> None:
    """A bearer token the application passes in ``extra_headers`` is redacted, bare as well."""
    headers = {"Authorization": f"Bearer {ECHOED}"}
    with pytest.raises(litellm.exceptions.AuthenticationError):
        await litellm.acompletion(**_call(provider.base_url, "leaky"), extra_headers=headers)
    assert ECHOED not in _redacted(instrumented)


def test_short_environment_values_are_not_taken_for_keys(
    instrumented: Spans, threaded: ThreadedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A short value of a key-named variable stays in the provider's message: the environment
    is read whole, and ``thing`` is not a key."""
    monkeypatch.setenv("SOME_FEATURE_TOKEN", "thing")
    with pytest.raises(litellm.exceptions.BadRequestError):
        litellm.completion(**_call(threaded.base_url, "bad"))
    (call,) = instrumented.calls()
    assert "no such thing" in (call.status.description or "")


async def test_an_llm_call_made_by_the_applications_callback_has_spans_of_its_own(
    spans: Spans, provider: SimulatedProvider, callback_lists: None
) -> None:
    """LiteLLM runs the application's async success callback in a task it starts inside
    ``acompletion``: an LLM call that callback makes (a judge through the openai SDK) is the
    application's, with its own spans — while the openai SDK call LiteLLM makes for the
    ``acompletion`` itself, streamed or not, still passes through (one span set a call)."""
    judge = openai.AsyncOpenAI(base_url=provider.base_url, api_key="k", max_retries=0)
    judged: list[str] = []
    fired = asyncio.Event()

    class AsyncJudge(CustomLogger):  # type: ignore[misc]
        async def async_log_success_event(self, *_: Any, **__: Any) -> None:
            answer = await judge.chat.completions.create(model="smooth", messages=MESSAGES)
            judged.append(answer.choices[0].message.content or "")
            fired.set()

    litellm.callbacks = [AsyncJudge()]
    instrument_openai(tracer_provider=spans.provider, stall_threshold_ms=100)
    instrument_litellm(tracer_provider=spans.provider, stall_threshold_ms=100)
    try:
        await litellm.acompletion(**_call(provider.base_url, "smooth"))
        await asyncio.wait_for(fired.wait(), 30)
        litellm.callbacks = []
        stream = await litellm.acompletion(**_call(provider.base_url, "smooth"), stream=True)
        assert [chunk async for chunk in stream]
    finally:
        uninstrument_litellm()
        uninstrument_openai()
        await judge.close()
        await GLOBAL_LOGGING_WORKER.stop()  # the task LiteLLM runs callbacks in
    assert judged
    models = sorted(str((s.attributes or {}).get(sc.GEN_AI_REQUEST_MODEL)) for s in spans.calls())
    assert models == ["openai/smooth", "openai/smooth", "smooth"]  # the judge's: "smooth"
    assert len(spans.attempts()) == 3


def test_an_llm_call_made_by_the_applications_sync_callback_has_spans_of_its_own(
    spans: Spans, threaded: ThreadedProvider, callback_lists: None
) -> None:
    """LiteLLM runs a sync success callback in its logging threads, handing them the call's
    context: an LLM call the callback makes there is the application's, with its own spans,
    while LiteLLM's own call to the openai SDK still passes through."""
    fired = threading.Event()

    with openai.OpenAI(base_url=threaded.base_url, api_key="k", max_retries=0) as judge:

        class SyncJudge(CustomLogger):  # type: ignore[misc]
            def log_success_event(self, *_: Any, **__: Any) -> None:
                judge.chat.completions.create(model="smooth", messages=MESSAGES)
                fired.set()

        litellm.callbacks = [SyncJudge()]
        instrument_openai(tracer_provider=spans.provider, stall_threshold_ms=100)
        instrument_litellm(tracer_provider=spans.provider, stall_threshold_ms=100)
        try:
            litellm.completion(**_call(threaded.base_url, "smooth"))
            assert fired.wait(30)
        finally:
            litellm.callbacks = []
            uninstrument_litellm()
            uninstrument_openai()
    models = sorted(str((s.attributes or {}).get(sc.GEN_AI_REQUEST_MODEL)) for s in spans.calls())
    assert models == ["openai/smooth", "smooth"]  # LiteLLM's call, and the judge's


async def test_a_sync_call_made_in_a_task_tells_its_sync_callbacks_calls_apart(
    spans: Spans, threaded: ThreadedProvider, callback_lists: None
) -> None:
    """A sync ``completion`` made by code that runs in an asyncio task (an ``async def``
    handler calling sync code): LiteLLM's logging thread runs the sync success callback with
    the call's context, and the LLM call made there is still the application's own."""
    fired = threading.Event()

    with openai.OpenAI(base_url=threaded.base_url, api_key="k", max_retries=0) as judge:

        class SyncJudge(CustomLogger):  # type: ignore[misc]
            def log_success_event(self, *_: Any, **__: Any) -> None:
                judge.chat.completions.create(model="smooth", messages=MESSAGES)
                fired.set()

        litellm.callbacks = [SyncJudge()]
        instrument_openai(tracer_provider=spans.provider, stall_threshold_ms=100)
        instrument_litellm(tracer_provider=spans.provider, stall_threshold_ms=100)
        try:
            litellm.completion(**_call(threaded.base_url, "smooth"))  # in this test's task
            assert await asyncio.to_thread(fired.wait, 30)
        finally:
            litellm.callbacks = []
            uninstrument_litellm()
            uninstrument_openai()
    models = sorted(str((s.attributes or {}).get(sc.GEN_AI_REQUEST_MODEL)) for s in spans.calls())
    assert models == ["openai/smooth", "smooth"]  # LiteLLM's call, and the judge's
