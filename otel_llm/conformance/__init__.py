"""The streaming-telemetry conformance suite: what every instrumentation of a streamed LLM call
should measure, checked against scripted streams whose truth is known.

What it is
----------
A corpus of scripted streams (:data:`CASES`, over a hundred on four wire formats: OpenAI chat
completions, OpenAI Responses, Anthropic Messages, Gemini), each played by otel-llm's simulated
provider through the real SDK of its format (``openai``, ``anthropic``, ``google-genai``) to a
consumer that reads to the end, pauses between reads or stops early. For each case the suite
knows the exact figures an honest instrumentation records, derived from the script's schedule
alone:

- ``chunks``: incremental chunks (events carrying output; not role-only or empty deltas,
  usage-only frames, keepalives, ``[DONE]`` or lifecycle events);
- ``ttft``: request → first incremental chunk;
- ``stalls@1s``, ``stall_s@1s``, ``stalls@4s``, ``stall_s@4s``: gaps between chunks strictly
  longer than 1 s and 4 s, how many and their seconds;
- ``finish``: each choice's finish reason; ``outcome``: ok, truncated, error or cancelled;
- ``span ends``: the call's span ended, also when the consumer abandoned the stream.

An adapter per instrumentation (:data:`ADAPTERS`: otel-llm, OpenLLMetry's openai, anthropic and
google-genai instrumentations, the OpenTelemetry contrib openai-v2 and google-genai ones)
installs it into in-memory span and metric pipelines, reads what it recorded back into those
figures, and the suite judges each figure *exact*, *wrong* (by how much) or *not measured*.

Run it
------
::

    python -m otel_llm.conformance                              # every instrumentation
    python -m otel_llm.conformance --instrumentation otel-llm   # one, in this process
    python -m otel_llm.conformance --list                       # the cases and their truth

It needs the ``testing`` extra (the simulator's aiohttp) and the SDKs it plays (``openai``,
``anthropic``, ``google-genai``); a peer is measured when its distribution is installed.
Every instrumentation runs in a process of its own. The scorecard with the versions and the
date is ``python -m benchmarks.conformance.scorecard`` (it writes
``benchmarks/results/conformance_scorecard.txt``; the docs page "Conformance" shows it).

How it keeps time
-----------------
The cases run on virtual time (:class:`~otel_llm.testing.VirtualTimeLoop`, the simulator on
the same loop): a scripted 6 s silence takes no real time and every chunk arrives at exactly
its scheduled moment, so the whole suite takes about 30 s and times are checked to 1 ms.
Instrumentations read time their own ways (``time.time()``, ``perf_counter``,
``timeit.default_timer``, the OpenTelemetry SDK's ``time_ns()``); the suite's process puts all
of them on the same virtual time (:mod:`._clocks`), so each measures what it would measure
against a real provider with that schedule.

One owner for the truth
-----------------------
A case's expected figures come from its script through the simulator's own ground truth
(:func:`otel_llm.simulator.scripted_figures`): a case is written once, as a script and a
consumer. Cases are shapes providers send (see :mod:`._corpus`); none is written for, or
against, any instrumentation.

Add an instrumentation
----------------------
Write an :class:`Adapter`: its name, the distributions to print, the wire formats it
instruments, the figures it records at all, an ``install`` that instruments the SDKs with
the given tracer and meter providers and returns the uninstall, and a ``read`` from the
case's :class:`Recorded` spans and metric points to a :class:`Measured`.
"""

from otel_llm.conformance._adapters import ADAPTERS, NOT_ADAPTED, Adapter
from otel_llm.conformance._case import Case, Consumer, Pause, expected_figures
from otel_llm.conformance._corpus import CASES
from otel_llm.conformance._figures import (
    FIGURES,
    THRESHOLDS_S,
    TIME_TOLERANCE_S,
    Expected,
    Measured,
    StallPair,
    Verdict,
    judge,
)
from otel_llm.conformance._run import CaseResult, run
from otel_llm.conformance._telemetry import Point, Recorded

__all__ = [
    "ADAPTERS",
    "CASES",
    "FIGURES",
    "NOT_ADAPTED",
    "THRESHOLDS_S",
    "TIME_TOLERANCE_S",
    "Adapter",
    "Case",
    "CaseResult",
    "Consumer",
    "Expected",
    "Measured",
    "Pause",
    "Point",
    "Recorded",
    "StallPair",
    "Verdict",
    "expected_figures",
    "judge",
    "run",
]
