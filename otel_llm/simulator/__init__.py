"""A simulated LLM provider whose behaviour is scripted, speaking four wire formats.

Used by the tests (real HTTP over loopback), ``otel-llm demo``, ``otel-llm provider`` and the
benchmarks. A :class:`Script` describes one answer — first-chunk delay, chunk cadence, mid-stream
:class:`Silence` (with or without keepalives), reasoning and tool-call phases, usage, HTTP errors
with ``Retry-After``, holds, connection faults and mid-stream error events. The same script is
served on every wire format, on the same timeline: OpenAI chat completions
(``/v1/chat/completions``, and Azure OpenAI's
``/openai/deployments/{deployment}/chat/completions``), OpenAI Responses (``/v1/responses``),
Anthropic Messages (``/v1/messages``) and Gemini (``/v1beta/models/{model}:streamGenerateContent``
…), so a scripted silence, keepalive or fault
replays on each. A request picks its script by header ``X-Sim-Script``, body field ``sim``,
registered model name (the body's ``model``, or the URL's for Gemini and Azure), preset name or
the server's default, in that order. The ``measured`` preset reproduces the user's measured
distribution of 4,407 real calls; ``oracle`` is the same calls without silences. A request
carrying ``sim_key`` draws its script independently of arrival order, and the server keeps that
script (``stats.script_of(response_id)``); :func:`scripted_figures` turns it into the figures an
honest meter must report on a wire format — the ground truth ``otel-llm demo`` prints beside its
measurements.

::

    async with SimulatedProvider(time_scale=0.01) as provider:
        client = openai.AsyncOpenAI(base_url=provider.base_url, api_key="sim")
        await client.chat.completions.create(model="stall", messages=[...], stream=True)
        claude = anthropic.AsyncAnthropic(base_url=provider.url, api_key="sim")
        await claude.messages.create(model="stall", max_tokens=100, messages=[...], stream=True)
        await provider.stats.wait_for_completed(2)
"""

import importlib.util

from otel_llm._extras import install_hint

if importlib.util.find_spec("aiohttp") is None:  # say what to install, not a traceback
    raise ModuleNotFoundError(
        f"otel_llm.simulator (the simulated provider, which the conformance suite and "
        f"otel_llm.testing's providers run on) needs aiohttp: {install_hint('testing')}",
        name="aiohttp",
    )

from otel_llm.simulator._presets import (
    MEASURED_FIT,
    PRESETS,
    FixedPreset,
    MeasuredFit,
    MeasuredPreset,
    Preset,
    measured,
    oracle,
    sample_measured,
)
from otel_llm.simulator._provider import SimulatedProvider, ThreadedProvider, serve
from otel_llm.simulator._provider_stats import ProviderStats
from otel_llm.simulator._script import Script, Silence
from otel_llm.simulator._select import SCRIPT_FIELD, SCRIPT_HEADER, SCRIPT_KEY_FIELD, ScriptSource
from otel_llm.simulator._server import MAX_WAIT_S, ORIGIN_HEADER, STATS_KEY, create_app
from otel_llm.simulator._truth import ScriptedFigures, chunk_indices, scripted_figures
from otel_llm.simulator._wire import WireName

__all__ = [
    "MAX_WAIT_S",
    "MEASURED_FIT",
    "ORIGIN_HEADER",
    "PRESETS",
    "SCRIPT_FIELD",
    "SCRIPT_HEADER",
    "SCRIPT_KEY_FIELD",
    "STATS_KEY",
    "FixedPreset",
    "MeasuredFit",
    "MeasuredPreset",
    "Preset",
    "ProviderStats",
    "Script",
    "ScriptSource",
    "ScriptedFigures",
    "Silence",
    "SimulatedProvider",
    "ThreadedProvider",
    "WireName",
    "chunk_indices",
    "create_app",
    "measured",
    "oracle",
    "sample_measured",
    "scripted_figures",
    "serve",
]
