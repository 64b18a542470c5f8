"""A simulated OpenAI-compatible provider whose behaviour is scripted.

Used by the tests (real HTTP over loopback), ``otel-llm demo``, ``otel-llm provider`` and the
benchmarks. A :class:`Script` describes one answer — first-chunk delay, chunk cadence, mid-stream
:class:`Silence` (with or without ``: ping`` keepalives), reasoning and tool-call phases, usage,
HTTP errors with ``Retry-After``, holds and connection faults. A request picks its script by
header ``X-Sim-Script``, body field ``sim``, registered model name, preset name or the server's
default, in that order. The ``measured`` preset reproduces the user's measured distribution of
4,407 real calls; ``oracle`` is the same calls without silences. A request carrying
``sim_key`` draws its script independently of arrival order, and the server keeps that script
(``stats.script_of(response_id)``); :func:`scripted_figures` turns it into the stall figures an
honest meter must report — the ground truth ``otel-llm demo`` prints beside its measurements.

::

    async with SimulatedProvider(time_scale=0.01) as provider:
        client = openai.AsyncOpenAI(base_url=provider.base_url, api_key="sim")
        await client.chat.completions.create(model="stall", messages=[...], stream=True)
        await provider.stats.wait_for_completed(1)
"""

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
from otel_llm.simulator._truth import ScriptedFigures, scripted_figures

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
    "create_app",
    "measured",
    "oracle",
    "sample_measured",
    "scripted_figures",
    "serve",
]
