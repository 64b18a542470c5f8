"""One adapter per instrumentation: install it into the suite's telemetry, remove it, and read
what it recorded for a case back into the common figures.

An adapter reads only what the instrumentation itself records — span attributes, span events,
span status, metric points — and declares, per wire format, which figures it records at all
(any other figure is *not measured*). Where an instrumentation records a figure under its own
name, the adapter reads that name and says so in :attr:`Adapter.reads`:

- ``otel-llm``: the figures the deriving processor writes on the attempt span
  (``otel_llm.chunk_count``, ``otel_llm.ttft_ms``, ``otel_llm.stall_count`` /
  ``otel_llm.stall_ms`` at the 1 s threshold; on a cancelled attempt, which has none, the
  chunks it counted, ``otel_llm.chunks.total``, and ``gen_ai.response.time_to_first_chunk``),
  the stall figures at 4 s re-derived from its chunk events by the processor's own rule,
  the call span's ``gen_ai.response.finish_reasons``,
  and the attempt's ``otel_llm.attempt.outcome`` (``closed``, ``dropped`` and ``cancelled`` are
  the suite's ``cancelled``; an ``error`` whose ``error.type`` is ``TruncatedStream`` its
  ``truncated``).
- OpenLLMetry (``opentelemetry-instrumentation-openai``, ``-anthropic``,
  ``-google-generativeai``): on chat completions one ``gen_ai.content.completion.chunk`` span
  event per streamed item and the ``gen_ai.server.time_to_first_token`` histogram;
  ``gen_ai.response.finish_reasons``; the span's status.
- OpenTelemetry contrib ``opentelemetry-instrumentation-openai-v2``: the span's status (its
  stream span carries no finish reason, chunk or first-chunk figure).
- OpenTelemetry contrib ``opentelemetry-instrumentation-google-genai`` (on the GenAI
  utilities): ``gen_ai.response.time_to_first_chunk``, the
  ``gen_ai.client.operation.time_per_output_chunk`` histogram (one point per gap between
  chunks, so its count + 1 is the chunks it saw), ``gen_ai.response.finish_reasons``, the span's
  status. Its bucket edges (… 0.64, 1.28, 2.56, 5.12 s) do not fall on the thresholds, so no
  stall figure can be read from it.

The outcome of a peer's span is read as a user reads it: an ``ERROR`` status is ``error`` (or
``cancelled`` when its ``error.type`` names a cancellation), any other ended span ``ok``. The
stream's end is a span that ended by the time the case is over.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from otel_llm import _semconv as sc
from otel_llm.conformance._case import Case
from otel_llm.conformance._figures import THRESHOLDS_S, Measured, Outcome, StallPair
from otel_llm.conformance._telemetry import Recorded, Telemetry
from otel_llm.simulator import WireName

ALL_WIRES: frozenset[WireName] = frozenset({"chat", "responses", "anthropic", "gemini"})
CANCELLATIONS = ("CancelledError", "GeneratorExit", "Cancelled")
"""``error.type`` values (or parts of them) that name a cancellation."""


@dataclass(frozen=True)
class Adapter:
    """One instrumentation under test."""

    name: str
    family: str
    """Who makes it (``otel-llm``, ``OpenLLMetry``, ``OpenTelemetry contrib``)."""
    distributions: tuple[str, ...]
    """The distributions whose versions the scorecard prints."""
    wires: frozenset[WireName]
    """The wire formats it instruments (its cases; the others are not its API)."""
    measures: Callable[[WireName], frozenset[str]]
    """The figures it records at all on a wire (of
    :data:`~otel_llm.conformance._figures.MEASURABLE`: ``chunks``, ``ttft``, ``stalls``,
    ``stall_s``, ``finish``, ``outcome``)."""
    install: Callable[[Telemetry, frozenset[WireName]], Callable[[], None]]
    """Install into the telemetry, for the wire formats about to be played; returns the
    uninstall."""
    read: Callable[[Recorded, Case], Measured]
    reads: str
    """What it reads, in one line (the scorecard prints it)."""
    processor: Callable[[InMemorySpanExporter], SpanProcessor] = SimpleSpanProcessor
    """The span processor the instrumentation's spans go through into memory."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Environment variables set before it is installed (its own process)."""
    requires: tuple[str, ...] | None = None
    """The distributions that must be installed for it to run (``None``: its
    :attr:`distributions`)."""

    def missing(self) -> tuple[str, ...]:
        """The distributions it needs that are not installed (empty: it can run)."""
        needed = self.distributions if self.requires is None else self.requires
        return tuple(dist for dist in needed if not _installed(dist))

    def versions(self) -> str:
        """``dist version`` of each distribution."""
        found = []
        for dist in self.distributions:
            try:
                found.append(f"{dist} {importlib.metadata.version(dist)}")
            except importlib.metadata.PackageNotFoundError:
                found.append(f"{dist} (not installed)")
        return ", ".join(found)

    def telemetry(self) -> Telemetry:
        """A fresh in-memory telemetry with this adapter's span processor."""
        for key, value in self.environment.items():
            os.environ[key] = value
        return Telemetry(self.processor)


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


# --- reading helpers ----------------------------------------------------------------------------


def _generation_spans(recorded: Recorded) -> list[ReadableSpan]:
    return [
        span
        for span in recorded.spans
        if (span.attributes or {}).get(sc.GEN_AI_OPERATION_NAME) is not None
    ]


def _reasons(span: ReadableSpan | None) -> tuple[str, ...] | None:
    if span is None:
        return None
    value = (span.attributes or {}).get(sc.GEN_AI_RESPONSE_FINISH_REASONS)
    if not value:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(str(item) for item in value) if isinstance(value, Sequence) else None


def _peer_outcome(span: ReadableSpan | None) -> Outcome | None:
    if span is None:
        return None
    if span.status.status_code is StatusCode.ERROR:
        kind = str((span.attributes or {}).get(sc.ERROR_TYPE, ""))
        described = f"{kind} {span.status.description or ''}"
        return "cancelled" if any(word in described for word in CANCELLATIONS) else "error"
    return "ok"


def _single(recorded: Recorded) -> ReadableSpan | None:
    spans = _generation_spans(recorded)
    return spans[0] if spans else None


# --- otel-llm -----------------------------------------------------------------------------------


def _install_otel_llm(telemetry: Telemetry, wires: frozenset[WireName]) -> Callable[[], None]:
    import otel_llm

    providers: dict[str, Any] = {
        "tracer_provider": telemetry.tracer_provider,
        "meter_provider": telemetry.meter_provider,
        "stall_threshold_ms": round(THRESHOLDS_S[0] * 1000),
    }
    pairs = {
        "chat": (otel_llm.instrument_openai, otel_llm.uninstrument_openai),
        "responses": (otel_llm.instrument_openai, otel_llm.uninstrument_openai),
        "anthropic": (otel_llm.instrument_anthropic, otel_llm.uninstrument_anthropic),
        "gemini": (otel_llm.instrument_google_genai, otel_llm.uninstrument_google_genai),
    }
    wanted = {pairs[wire] for wire in sorted(wires)}  # an SDK not played is not imported
    for instrument, _ in wanted:
        instrument(**providers)

    def uninstall() -> None:
        for _, remove in wanted:
            remove()

    return uninstall


def _deriving(exporter: InMemorySpanExporter) -> SpanProcessor:
    from otel_llm import DerivingSpanProcessor

    return DerivingSpanProcessor([SimpleSpanProcessor(exporter)])


def _otel_llm_stalls(attempt: ReadableSpan, threshold_s: float) -> StallPair | None:
    """The attempt's stall figures at ``threshold_s``, by the processor's own rule."""
    from otel_llm._measure._processor import _EnrichedSpan, derive_attempt

    threshold_ms = round(threshold_s * 1000)
    at = _EnrichedSpan(attempt, {sc.STALL_THRESHOLD_MS: threshold_ms})
    figures, _ = derive_attempt(at, threshold_ms)
    if figures is None or figures.stall_count is None or figures.stall_ms is None:
        return None
    return StallPair(figures.stall_count, figures.stall_ms / 1000)


_OTEL_LLM_OUTCOMES: dict[str, Outcome] = {
    sc.OUTCOME_OK: "ok",
    sc.OUTCOME_ERROR: "error",
    sc.OUTCOME_CLOSED: "cancelled",
    sc.OUTCOME_DROPPED: "cancelled",
    sc.OUTCOME_CANCELLED: "cancelled",
}


def _read_otel_llm(recorded: Recorded, case: Case) -> Measured:
    role = {
        str((span.attributes or {}).get(sc.SPAN_ROLE)): span
        for span in recorded.spans
        if (span.attributes or {}).get(sc.SPAN_ROLE)
    }
    call, attempt = role.get(sc.SPAN_ROLE_CALL), role.get(sc.SPAN_ROLE_ATTEMPT)
    if call is None or attempt is None:
        return Measured(span_ends=False)
    attributes = attempt.attributes or {}
    chunks = attributes.get(sc.CHUNK_COUNT, attributes.get(sc.CHUNK_COUNT_RECORDED))
    ttft_ms = attributes.get(sc.TTFT_MS)
    ttft_s = attributes.get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
    stall_count, stall_ms = attributes.get(sc.STALL_COUNT), attributes.get(sc.STALL_MS)
    first = (
        StallPair(int(stall_count), float(stall_ms) / 1000)
        if isinstance(stall_count, int) and isinstance(stall_ms, int)
        else None
    )
    if attributes.get(sc.STALL_THRESHOLD_MS) != round(THRESHOLDS_S[0] * 1000):
        first = None
    outcome_value = str((attempt.attributes or {}).get(sc.ATTEMPT_OUTCOME))
    outcome = _OTEL_LLM_OUTCOMES.get(outcome_value)
    if outcome == "error" and (attempt.attributes or {}).get(sc.ERROR_TYPE) == "TruncatedStream":
        outcome = "truncated"
    return Measured(
        chunk_count=chunks if isinstance(chunks, int) else None,
        ttft_s=ttft_ms / 1000
        if isinstance(ttft_ms, int)
        else (float(ttft_s) if isinstance(ttft_s, int | float) else None),
        stalls=(first, _otel_llm_stalls(attempt, THRESHOLDS_S[1])),
        finish_reasons=_reasons(call),
        outcome=outcome,
        span_ends=True,
    )


OTEL_LLM = Adapter(
    name="otel-llm",
    family="otel-llm",
    distributions=("otel-llm",),
    wires=ALL_WIRES,
    measures=lambda wire: frozenset({"chunks", "ttft", "stalls", "stall_s", "finish", "outcome"}),
    install=_install_otel_llm,
    read=_read_otel_llm,
    reads=(
        "otel_llm.chunk_count (or chunks.total), otel_llm.ttft_ms (or "
        "gen_ai.response.time_to_first_chunk), otel_llm.stall_count/stall_ms (1 s; 4 s "
        "re-derived from the chunk events), gen_ai.response.finish_reasons, "
        "otel_llm.attempt.outcome + error.type"
    ),
    processor=_deriving,
    requires=(),  # this package, which is running
)


# --- OpenLLMetry -------------------------------------------------------------------------------

OPENLLMETRY = "OpenLLMetry"
_CHUNK_EVENT = "gen_ai.content.completion.chunk"
_OPENLLMETRY_TTFT = "gen_ai.server.time_to_first_token"


def _instrumentor(
    module: str, name: str, **options: Any
) -> Callable[[Telemetry, frozenset[WireName]], Callable[[], None]]:
    def install(telemetry: Telemetry, wires: frozenset[WireName]) -> Callable[[], None]:
        instrumentor = getattr(importlib.import_module(module), name)()
        instrumentor.instrument(
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
            **options,
        )
        uninstall: Callable[[], None] = instrumentor.uninstrument
        return uninstall

    return install


def _read_openllmetry(recorded: Recorded, case: Case) -> Measured:
    span = _single(recorded)
    chunks: int | None = None
    ttft: float | None = None
    if span is not None and case.wire == "chat":
        chunks = sum(1 for event in span.events if event.name == _CHUNK_EVENT)
        points = recorded.points_named(_OPENLLMETRY_TTFT)
        ttft = points[0].total / points[0].count if points else None
    return Measured(
        chunk_count=chunks,
        ttft_s=ttft,
        finish_reasons=_reasons(span),
        outcome=_peer_outcome(span),
        span_ends=span is not None,
    )


def _openllmetry_measures(wire: WireName) -> frozenset[str]:
    if wire == "chat":
        return frozenset({"chunks", "ttft", "finish", "outcome"})
    return frozenset({"finish", "outcome"})


OPENLLMETRY_OPENAI = Adapter(
    name="openllmetry-openai",
    family=OPENLLMETRY,
    distributions=("opentelemetry-instrumentation-openai",),
    wires=frozenset({"chat", "responses"}),
    measures=_openllmetry_measures,
    install=_instrumentor("opentelemetry.instrumentation.openai", "OpenAIInstrumentor"),
    read=_read_openllmetry,
    reads=(
        f"chat: {_CHUNK_EVENT} span events, the {_OPENLLMETRY_TTFT} histogram; "
        "gen_ai.response.finish_reasons; span status"
    ),
)
OPENLLMETRY_ANTHROPIC = Adapter(
    name="openllmetry-anthropic",
    family=OPENLLMETRY,
    distributions=("opentelemetry-instrumentation-anthropic",),
    wires=frozenset({"anthropic"}),
    measures=_openllmetry_measures,
    install=_instrumentor("opentelemetry.instrumentation.anthropic", "AnthropicInstrumentor"),
    read=_read_openllmetry,
    reads="gen_ai.response.finish_reasons; span status",
)
OPENLLMETRY_GEMINI = Adapter(
    name="openllmetry-google-genai",
    family=OPENLLMETRY,
    distributions=("opentelemetry-instrumentation-google-generativeai",),
    wires=frozenset({"gemini"}),
    measures=_openllmetry_measures,
    install=_instrumentor(
        "opentelemetry.instrumentation.google_generativeai", "GoogleGenerativeAiInstrumentor"
    ),
    read=_read_openllmetry,
    reads="gen_ai.response.finish_reasons; span status",
)


# --- OpenTelemetry contrib ----------------------------------------------------------------------

CONTRIB = "OpenTelemetry contrib"
_PER_CHUNK = "gen_ai.client.operation.time_per_output_chunk"


def _read_contrib_openai(recorded: Recorded, case: Case) -> Measured:
    span = _single(recorded)
    return Measured(
        finish_reasons=_reasons(span), outcome=_peer_outcome(span), span_ends=span is not None
    )


def _read_contrib_genai(recorded: Recorded, case: Case) -> Measured:
    span = _single(recorded)
    ttft: float | None = None
    chunks: int | None = None
    if span is not None:
        value = (span.attributes or {}).get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
        ttft = float(value) if isinstance(value, int | float) else None
        gaps = sum(point.count for point in recorded.points_named(_PER_CHUNK))
        chunks = gaps + 1 if ttft is not None else 0
    return Measured(
        chunk_count=chunks,
        ttft_s=ttft,
        finish_reasons=_reasons(span),
        outcome=_peer_outcome(span),
        span_ends=span is not None,
    )


CONTRIB_OPENAI = Adapter(
    name="contrib-openai-v2",
    family=CONTRIB,
    distributions=("opentelemetry-instrumentation-openai-v2",),
    wires=frozenset({"chat"}),
    measures=lambda wire: frozenset({"outcome"}),
    install=_instrumentor("opentelemetry.instrumentation.openai_v2", "OpenAIInstrumentor"),
    read=_read_contrib_openai,
    reads="span status (the stream span has no finish reason, chunk or first-chunk figure)",
)
CONTRIB_GENAI = Adapter(
    name="contrib-google-genai",
    family=CONTRIB,
    distributions=("opentelemetry-instrumentation-google-genai", "opentelemetry-util-genai"),
    wires=frozenset({"gemini"}),
    measures=lambda wire: frozenset({"chunks", "ttft", "finish", "outcome"}),
    # it declares google-genai < 3; with the check skipped it works with the 3.x here
    install=_instrumentor(
        "opentelemetry.instrumentation.google_genai",
        "GoogleGenAiSdkInstrumentor",
        skip_dep_check=True,
    ),
    read=_read_contrib_genai,
    reads=(
        f"gen_ai.response.time_to_first_chunk, the {_PER_CHUNK} histogram (count + 1 chunks), "
        "gen_ai.response.finish_reasons; span status"
    ),
)

ADAPTERS: dict[str, Adapter] = {
    adapter.name: adapter
    for adapter in (
        OTEL_LLM,
        OPENLLMETRY_OPENAI,
        OPENLLMETRY_ANTHROPIC,
        OPENLLMETRY_GEMINI,
        CONTRIB_OPENAI,
        CONTRIB_GENAI,
    )
}
"""Every adapter by name, otel-llm first."""

NOT_ADAPTED = (
    "OpenLIT (openlit 1.45.0, the newest release) is not adapted: it requires anthropic < 1 "
    "and openai < 3, so pip installs it only by downgrading the SDKs under test (to anthropic "
    "0.125 and openai 2.54) and the OpenTelemetry SDK"
)
