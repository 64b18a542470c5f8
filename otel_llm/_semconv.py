"""Every telemetry name otel-llm writes, in one place.

OpenTelemetry GenAI semantic-convention names are used where the convention defines them.
Everything it does not define lives in the ``otel_llm.`` namespace; the README has the table.
"""

from __future__ import annotations

from typing import Final

from otel_llm._figures import FIGURES

# --- OpenTelemetry GenAI semantic conventions -------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_FREQUENCY_PENALTY: Final = "gen_ai.request.frequency_penalty"
GEN_AI_REQUEST_PRESENCE_PENALTY: Final = "gen_ai.request.presence_penalty"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_CHOICE_COUNT: Final = "gen_ai.request.choice.count"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
"""Input tokens served from the provider's cache (part of ``gen_ai.usage.input_tokens``)."""
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
"""Input tokens written to the provider's cache (part of ``gen_ai.usage.input_tokens``)."""
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"

OPERATION_CHAT: Final = "chat"
OPERATION_EMBEDDINGS: Final = "embeddings"
OPERATION_GENERATE_CONTENT: Final = "generate_content"
"""The convention's operation name of Gemini's ``generateContent``."""
GENERATING_OPERATIONS: Final = (OPERATION_CHAT, OPERATION_GENERATE_CONTENT)
"""Operations whose calls generate a (streamed) answer: what ``otel-llm tune`` replays."""

# ``gen_ai.provider.name`` values the convention defines for the APIs otel-llm reads
PROVIDER_OPENAI: Final = "openai"
PROVIDER_AZURE_OPENAI: Final = "azure.ai.openai"
PROVIDER_ANTHROPIC: Final = "anthropic"
PROVIDER_GEMINI: Final = "gcp.gemini"
"""Google's Gemini API (AI Studio); Vertex AI is ``gcp.vertex_ai``."""
PROVIDER_VERTEX_AI: Final = "gcp.vertex_ai"
PROVIDER_AWS_BEDROCK: Final = "aws.bedrock"

# --- otel_llm namespace: what a span is ---------------------------------------------------------
SPAN_ROLE: Final = "otel_llm.span"
"""``call`` (one logical request) or ``attempt`` (one HTTP request to one source)."""
SPAN_ROLE_CALL: Final = "call"
SPAN_ROLE_ATTEMPT: Final = "attempt"

ATTEMPT_NUMBER: Final = "otel_llm.attempt.number"
ATTEMPT_LEG: Final = "otel_llm.attempt.leg"
"""``primary`` or ``hedge``."""
ATTEMPT_OUTCOME: Final = "otel_llm.attempt.outcome"
"""One of the ``OUTCOME_*`` values below."""
ATTEMPT_SOURCE: Final = "otel_llm.attempt.source"

LEG_PRIMARY: Final = "primary"
LEG_HEDGE: Final = "hedge"

OUTCOME_OK: Final = "ok"
OUTCOME_ERROR: Final = "error"
OUTCOME_WATCHDOG_KILLED: Final = "watchdog_killed"
OUTCOME_HEDGE_CANCELLED: Final = "hedge_cancelled"
OUTCOME_CANCELLED: Final = "cancelled"
OUTCOME_CLOSED: Final = "closed"
"""A wrapped stream the consumer closed (or broke out of) before its end."""
OUTCOME_DROPPED: Final = "dropped"
"""A wrapped stream collected without being consumed to the end or closed."""
OUTCOMES_WITHOUT_FIGURES: Final = frozenset({OUTCOME_HEDGE_CANCELLED, OUTCOME_CANCELLED})
"""A cancelled attempt carries no stall figures (it was cut short by
someone else, so its gaps say nothing about the provider)."""

# --- otel_llm namespace: chunk events recorded by the instrumentation ------------------------
CHUNK_EVENT: Final = "otel_llm.chunk"
"""Span event at the arrival of an incremental chunk (timestamp = arrival)."""
CHUNK_INDEX: Final = "otel_llm.chunk.index"
"""Event attribute: 0-based index of the chunk among the attempt's incremental chunks."""
CHUNK_GAP_NS: Final = "otel_llm.chunk.gap_ns"
"""Event attribute: nanoseconds since the previous incremental chunk (absent on index 0)."""

CHUNK_COUNT_RECORDED: Final = "otel_llm.chunks.total"
"""Span attribute set by the instrumentation: incremental chunks the attempt received."""
CHUNK_EVENTS_RECORDED: Final = "otel_llm.chunks.events"
"""Span attribute: chunk events the instrumentation added (to detect dropped events)."""
CHUNK_EVENTS_FLOOR_MS: Final = "otel_llm.chunks.events_floor_ms"
"""Span attribute: every gap strictly longer than this has a chunk event."""
CHUNK_STALL_NS: Final = "otel_llm.chunks.stall_ns"
CHUNK_STALL_COUNT: Final = "otel_llm.chunks.stall_count"
"""Span attributes, only when the event floor had to rise above the threshold (more long gaps
than the event budget): the exact stall sum and count at ``otel_llm.stall.threshold_ms``."""

CONSUMER_HOLD_MS: Final = "otel_llm.consumer.hold_ms"
"""Span attribute (wrapped streams): time the application held the stream between reads —
not provider silence, never counted as stall (consumer-aware metering)."""

STALL_THRESHOLD_MS: Final = "otel_llm.stall.threshold_ms"
"""Span attribute: the stall threshold in force when the attempt was measured."""

# --- otel_llm namespace: figures derived by the span processor (the table: _figures.py) ------
DERIVED_FIGURES: Final = tuple(figure.attribute for figure in FIGURES)
"""Every figure attribute, in the table's order (``otel_llm.ttft_ms`` …)."""
(TTFT_MS, WALL_MS, GENERATION_MS, STALL_MS, STALL_COUNT, MAX_INTER_CHUNK_MS, CHUNK_COUNT) = (
    DERIVED_FIGURES
)
METERING_STATUS: Final = "otel_llm.metering.status"
"""``exact``, ``not_streamed``, or ``incomplete:<reason>`` when figures cannot be trusted."""

METERING_EXACT: Final = "exact"
METERING_NOT_STREAMED: Final = "not_streamed"
METERING_INCOMPLETE_DROPPED: Final = "incomplete:events_dropped"
METERING_INCOMPLETE_MISSING: Final = "incomplete:events_missing"
METERING_INCOMPLETE_FLOOR: Final = "incomplete:threshold_below_event_floor"
METERING_INCOMPLETE_TIMING: Final = "incomplete:impossible_timing"
"""``otel_llm.metering.status`` of an attempt whose times cannot all be true: its end before
its start, a chunk event before the start or after the end, chunk events whose times run
backwards in chunk order, a negative gap or one longer than the time since the chunk event
before it, an exact stall sum or count no gaps could make. Only a span otel-llm did not write
(or one damaged on its way) looks like that: its figures would be wrong, so it has none."""


# --- otel_llm namespace: the call span -------------------------------------------------------
CALL_ATTEMPTS: Final = "otel_llm.call.attempts"
CALL_HEDGES: Final = "otel_llm.call.hedges"
CALL_HEDGE_WON: Final = "otel_llm.call.hedge_won"
CALL_WINNER_ATTEMPT: Final = "otel_llm.call.winner_attempt"
"""The ``otel_llm.attempt.number`` whose figures the call span carries."""
CALL_WINNER_MODEL: Final = "otel_llm.call.winner_model"
"""The winning attempt's ``gen_ai.request.model`` (its source's model, which a failover or a
hedge may make differ from the call's)."""
CALL_WINNER_SOURCE: Final = "otel_llm.call.winner_source"
"""The winning attempt's ``otel_llm.attempt.source``."""
CALL_WINNER_PROVIDER: Final = "otel_llm.call.winner_provider"
"""The winning attempt's ``gen_ai.provider.name`` (a failover may cross providers)."""
CALL_WINNER_STARTED_AT_NS: Final = "otel_llm.call.winner_started_at_ns"
"""When the winning attempt started, in ns since the epoch (a hedge or a failover starts after
the call): what the winner panels bucket a call by."""
CALL_WINNER_GAPS_NS: Final = "otel_llm.call.winner_gaps_ns"
"""The winning attempt's gaps between chunks longer than ``otel_llm.call.winner_gaps_floor_ms``,
in ns and in order: enough to re-derive its stall figures at any threshold at or above the
floor from the call span alone."""
CALL_WINNER_GAPS_FLOOR_MS: Final = "otel_llm.call.winner_gaps_floor_ms"
"""The floor of ``otel_llm.call.winner_gaps_ns``: every gap of the winner longer than it is
there."""
CALL_SOURCES_TRIED: Final = "otel_llm.call.sources_tried"
CALL_HEDGE_WASTE_TOKENS: Final = "otel_llm.call.hedge_waste_tokens"
CALL_HEDGE_WASTE_CHUNKS: Final = "otel_llm.call.hedge_waste_chunks"
HEDGE_TRIGGER: Final = "otel_llm.hedge.trigger"
"""On hedge metrics: what started the hedge (``first_token`` or ``stall``)."""
HEDGE_OUTCOME: Final = "otel_llm.hedge.outcome"
"""On hedge metrics: ``won`` (the hedge answered), ``lost`` (the primary did) or ``failed``
(neither leg answered)."""
HEDGE_WON: Final = "won"
HEDGE_LOST: Final = "lost"
HEDGE_FAILED: Final = "failed"
BREAKER_STATE: Final = "otel_llm.breaker.state"
"""On breaker metrics: the state a source's breaker moved to (``open``, ``half_open``,
``closed``)."""

# --- span names ------------------------------------------------------------------------------


def span_name(operation: str, model: str | None) -> str:
    """``{operation} {model}`` as the GenAI convention names spans."""
    return f"{operation} {model}" if model else operation
