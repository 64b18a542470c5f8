"""``otel_llm.instrument()``: every installed SDK wrapped with one call, the others skipped."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import openai
import pytest

import otel_llm
from otel_llm import ConfigurationError
from otel_llm import _semconv as sc
from otel_llm._wrap import _every_sdk
from otel_llm._wrap._every_sdk import SDKS, Sdk
from otel_llm.simulator import Script, SimulatedProvider, ThreadedProvider
from otel_llm.testing import Spans
from tests.support import REPOSITORY
from tests.support.processes import run_python

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
def threaded() -> Iterator[ThreadedProvider]:
    script = Script(first_chunk_delay_s=0.0, chunk_interval_s=0.001, chunk_count=5)
    with SimulatedProvider.start_in_thread(default=script) as running:
        yield running


def _chat(provider: ThreadedProvider) -> None:
    with openai.OpenAI(base_url=provider.base_url, api_key="sk-x", max_retries=0) as client:
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        assert len(list(stream)) >= 5


def test_instrument_wraps_every_installed_sdk_and_uninstrument_undoes_it(
    spans: Spans, threaded: ThreadedProvider
) -> None:
    """The SDKs installed here are each instrumented (openai at least), a call through one is
    metered, and after ``uninstrument()`` nothing is."""
    here = tuple(sdk.name for sdk in SDKS if _every_sdk.installed(sdk))
    assert "openai" in here
    try:
        assert otel_llm.instrument(tracer_provider=spans.provider) == here
        _chat(threaded)
        (attempt,) = spans.attempts()
        assert (attempt.attributes or {})[sc.CHUNK_COUNT] == 5
    finally:
        otel_llm.uninstrument()
    _chat(threaded)
    assert len(spans.attempts()) == 1


def test_an_sdk_that_is_not_installed_is_skipped_without_a_word(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, spans: Spans
) -> None:
    absent = Sdk("nothing", "otel_llm_no_such_sdk", "otel_llm_no_such_module")
    monkeypatch.setattr(_every_sdk, "SDKS", (absent, *SDKS))
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        try:
            assert "nothing" not in otel_llm.instrument(tracer_provider=spans.provider)
        finally:
            otel_llm.uninstrument()
    assert not caplog.records


def test_an_sdk_that_cannot_be_instrumented_is_named_and_the_rest_still_are(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, spans: Spans
) -> None:
    """Installed (its package imports) but its otel-llm module is broken: a warning naming it,
    and openai is instrumented all the same."""
    broken = Sdk("broken", "json", "otel_llm_no_such_module")
    monkeypatch.setattr(_every_sdk, "SDKS", (broken, *SDKS))
    monkeypatch.setattr(_every_sdk, "uninstrument", lambda: otel_llm.uninstrument_openai())
    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        try:
            assert otel_llm.instrument(tracer_provider=spans.provider)[0] == "openai"
        finally:  # every SDK it wrapped, or waits for (not only openai: the next tests')
            for sdk in SDKS:
                getattr(otel_llm, f"uninstrument_{sdk.name}")()
    (record,) = caplog.records
    assert "the broken SDK is installed but was not instrumented" in record.getMessage()


def test_a_bad_threshold_is_refused_before_any_sdk_is_touched() -> None:
    create = openai.resources.chat.completions.Completions.__dict__["create"]
    with pytest.raises(ConfigurationError):
        otel_llm.instrument(stall_threshold_ms=-1)
    assert openai.resources.chat.completions.Completions.__dict__["create"] is create


_LATER = """
import json, os, sys
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
import otel_llm
from opentelemetry.sdk.trace import TracerProvider
covered = otel_llm.instrument(tracer_provider=TracerProvider())
imported_early = [name for name in ("anthropic", "google.genai", "litellm") if name in sys.modules]
if sys.argv[1] == "forget":
    otel_llm.uninstrument()
import anthropic, google.genai.models, litellm
from anthropic.resources.messages.messages import Messages
def ours(function):
    return "otel_llm" in function.__code__.co_filename
wrapped = {
    "anthropic": ours(Messages.__dict__["create"]),
    "google_genai": ours(google.genai.models.Models.__dict__["generate_content_stream"]),
    "litellm": ours(litellm.completion),
}
print(json.dumps({"covered": covered, "early": imported_early, "wrapped": wrapped}))
"""


@pytest.mark.parametrize("then", ["import", "forget"])
def test_an_sdk_imported_after_instrument_is_wrapped_when_imported(then: str) -> None:
    """``instrument()`` imports no SDK the application has not imported; each is wrapped as
    the application imports it — unless ``uninstrument()`` came first."""
    done = run_python(_LATER, then, cwd=REPOSITORY)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["early"] == []
    assert set(seen["covered"]) >= {"openai", "anthropic", "google_genai", "litellm"}
    expected = then == "import"
    assert seen["wrapped"] == {"anthropic": expected, "google_genai": expected, "litellm": expected}
