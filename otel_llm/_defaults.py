"""Every default of the library, once.

Seconds are ``float``; milliseconds appear only in fields whose name ends in ``_ms``.
Other modules read these values from :data:`DEFAULTS`; no signature repeats a literal default.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Defaults:
    """The frozen policy object holding all defaults."""

    stall_threshold_ms: int = 1000
    """A gap between incremental chunks strictly longer than this is a stall."""

    max_stall_threshold_ms: int = 24 * 3600 * 1000
    """The longest stall threshold there is (a day): a longer one can never be crossed by a
    stream, and one beyond 64 bits broke the SQL that re-derives at it."""

    chunk_event_floor_ms: int = 100
    """Gaps longer than this are recorded as chunk events, so SQL can re-derive stalls at any
    threshold at or above it."""

    chunk_event_budget: int = 120
    """At most this many chunk events per attempt span (the SDK keeps 128 by default)."""

    chunk_event_headroom: int = 4
    """Events a span keeps free for others (an exception event) beside its chunk events."""

    db_path: str = "otel-llm-store"
    """The embedded store: a directory of Parquet segments, relative to the working directory."""

    earlier_db_path: str = "otel-llm.duckdb"
    """The default store of earlier versions (one DuckDB file), used where it exists alone."""

    report_name: str = "otel-llm-report.html"
    """``otel-llm report`` and ``otel-llm demo`` write the report under this name next to the
    store (in the store's parent directory) unless told where."""

    duckdb_storage_version: str = "v1.4.0"
    """DuckDB storage format written, readable by DuckDB 1.4 and later (Grafana's plugin)."""

    export_max_pending_spans: int = 100_000
    """Spans the store's writer holds while it cannot write before it starts dropping."""

    export_retry_s: float = 0.5
    """Pause before the writer tries a store it could not write again."""

    export_flush_interval_s: float = 1.0
    """The writer seals a segment at least this often while spans arrive."""

    export_segment_spans: int = 20_000
    """The writer seals a segment when this many spans are waiting, interval or not."""

    export_slice_spans: int = 256
    """Spans the writer converts into one Arrow table (a segment is several such tables)."""

    export_warn_every_s: float = 10.0
    """The writer repeats a warning (an unwritable store, dropped spans) at most this often."""

    metrics_chunk_gaps: bool = False
    """Whether the per-gap chunk histogram is recorded (``OTEL_LLM_METRICS_CHUNK_GAPS``)."""

    export_fork_waits_s: float = 60.0
    """How long a ``fork()`` waits for the writer thread to finish importing DuckDB and Arrow
    (about 0.5 s; a child forked in the middle of an import would find that import's lock held
    by a thread it does not have)."""

    shutdown_timeout_s: float = 10.0
    """Bound on how long ``shutdown()`` waits for pending spans (a store that is already
    failing gets one more attempt, not the whole wait)."""

    segment_small_bytes: int = 256 * 1024
    """Segments smaller than this are *small*: compaction merges them together once
    :attr:`segment_merge_min` wait. Small, so such a merge stays cheap however old the store is
    (it rewrites at most this much of what was merged before); larger segments go up the tiers."""

    segment_merge_min: int = 16
    """Compaction waits until at least this many small segments exist."""

    segment_tier_fanout: int = 4
    """Larger segments merge in tiers, each four times the size of the one below, once this
    many share a tier: the segment count stays bounded however long a store is written."""

    segment_merge_max_inputs: int = 256
    """A merge takes at most this many segments, unless a compaction's merges would then leave
    small segments behind. A backlog (thousands of small segments of a store nobody merged for
    hours) is merged over several short merges rather than in one long one, and a reader waits
    for one such merge at most (1.3 s here for 256 segments of 15 spans; one merge of 2,000
    took 9.1 s, and a query waited for all of it). Smaller batches cost more in all: 2,000
    segments took 19.1 s at 64 a merge, 11.3 s at 256, 10.4 s in one merge."""

    segment_merges_per_compact: int = 8
    """One compaction merges what is due — the small segments, then each tier that filled up
    in turn — up to this many merges (a cascade through every tier fits)."""

    segment_merge_max_bytes: int = 256 * 1024 * 1024
    """At most this many bytes of segments are merged into one."""

    segment_merge_rows: int = 100_000
    """Rows per segment when a single-file store is migrated."""

    segment_merge_buffer_bytes: int = 16 * 1024 * 1024
    """A merge holds at most about this much of its rows in memory (one row group each)."""

    compact_every_s: float = 30.0
    """A writer looks for small segments to merge at most this often."""

    generation_keep_s: float = 60.0
    """A superseded generation of the store's segment list is kept this long (a reader that
    listed it just before a merge may still be reading its directory), then removed."""

    orphan_dead_after_s: float = 10.0
    """A temporary file whose process this host does not know is removed once it is this old
    (younger, it may be a write in flight of a container that shares the store's volume)."""

    orphan_after_s: float = 3600.0
    """A temporary file of a process that may still live (another host's, or a reused pid) is
    removed once it is this old."""

    otlp_shutdown_timeout_s: float = 2.0
    """Bound on how long shutdown waits for the OTLP exporters to send their last batches (a
    collector that has failed, or fails while closing, gets no wait at all)."""

    collector_grpc_port: int = 4317
    """``otel-llm collector``: the OTLP/gRPC port on 127.0.0.1 (OTLP's standard)."""

    collector_http_port: int = 4318
    """``otel-llm collector``: the OTLP/HTTP port on 127.0.0.1 (OTLP's standard)."""

    collector_health_port: int = 13133
    """``otel-llm collector``: the health check's port on 127.0.0.1 (the extension's default)."""

    collector_start_timeout_s: float = 30.0
    """How long ``otel-llm collector`` waits for the collector's health check to answer."""

    collector_stop_timeout_s: float = 30.0
    """How long a stopping collector may take to write its last batches before it is killed."""

    collector_poll_s: float = 0.5
    """How often ``otel-llm collector`` looks for finished files to ingest."""

    collector_segment_spans: int = 5000
    """The ingest seals a segment when a file has given this many spans."""

    connect_timeout_s: float = 10.0
    """TCP connect timeout of the transport."""

    timeout_s: float = 60.0
    """Per-attempt read timeout of the transport; also the watchdog's budget for the first chunk
    when a source sets no ``ttft_timeout_s``."""

    inter_token_timeout_s: float = 30.0
    """The watchdog's budget between chunks when a source sets neither ``inter_token_timeout_s``
    nor ``timeout_s`` (one that sets ``timeout_s`` falls back to it). A streamed answer that
    has begun and then says nothing for 30 s has almost always died: models that think before
    answering do it before their first chunk (``timeout_s``, 60 s) or stream the thinking as
    chunks. Half the first-chunk budget, so that a stalled stream fails over while a call
    deadline of a minute or so still has room for the next source."""

    pending_call_figures: int = 10_000
    """Calls whose attempt figures the processor keeps while waiting for the call span."""

    winner_gap_floor_ms: int = 100
    """The call span carries its winner's gaps longer than this (and longer than the winner's
    chunk-event floor), so a query re-derives the winner's stalls at any threshold at or above
    it without reading the attempt. Each is a stall at some threshold anyone asks about; the
    gaps of a healthy stream, tens of milliseconds, are left on the attempt span."""

    # --- the resilient client -------------------------------------------------------------
    max_attempts: int = 3
    """Attempts that may fail (transiently) before a call gives up; 429s do not count."""

    call_deadline_s: float | None = None
    """Bound on the whole call, waits included; ``None`` means no deadline."""

    stall_window_s: float = 300.0
    """Non-productive waiting (backoff, rate-limit waits, 429 attempts, breaker or admission
    waits) after which a call that never got output gives up."""

    long_wait_warn_after_s: float = 30.0
    """A call that has waited this long without progress (the time ``stall_window_s`` counts)
    logs a warning naming the sources and why they are unavailable. 30 s is past every wait
    the defaults make on their own (a backoff is capped at 8 s, a rate-limit wait kept on the
    same source at 10 s), so a warning means a source keeps refusing; it is a tenth of the
    default window, early enough to act on a call that would otherwise sit silent for 5
    minutes."""

    long_wait_warn_every_s: float = 60.0
    """A call still waiting repeats its warning at most this often (five lines at most over
    the default window)."""

    backoff_base_s: float = 0.5
    """First retry waits up to this long (full jitter)."""

    backoff_max_s: float = 8.0
    """Cap of one backoff wait."""

    rate_limit_wait_s: float = 1.0
    """Wait after a 429 that carried no Retry-After."""

    max_retry_after_s: float = 24 * 3600.0
    """A ``Retry-After`` longer than this is taken for garbage and ignored."""

    max_error_body_bytes: int = 64 * 1024
    """Bytes of an error answer's body read for its message."""

    events_after_done: int = 64
    """Events read after ``[DONE]`` (to hand the connection back clean) before giving up on it."""

    drain_after_done_s: float = 0.1
    """How long the body is read after ``[DONE]`` (to hand the connection back clean) before
    giving up on it: a server that keeps the connection open after its end marker costs the
    call this, not its read timeout."""

    wait_after_finish_s: float = 1.0
    """How long the body is read once every choice has its finish reason, for what may follow
    (a usage frame, the end marker): a server that falls silent after the finish without ending
    the stream costs the call this, not its read timeout. Providers send both within
    milliseconds of the finish."""

    kept_errors: int = 64
    """Failures a call keeps for the ``ExceptionGroup`` behind ``AllSourcesExhausted`` (the
    most recent; a call waiting out a rate limit may have made hundreds of attempts)."""

    round_cleanup_s: float = 5.0
    """Bound on waiting for a round's cancelled legs to close their connections and end their
    spans (one that takes longer is logged and kept)."""

    probe_recheck_s: float = 0.05
    """How often a call waiting behind another call's half-open probe looks again."""

    quota_recheck_s: float = 1.0
    """How often a call whose request admission could not take asks again, at most: the
    wait admission estimates is an upper bound — tokens other calls reserved and did not use
    come back when they are settled."""

    same_source_retries: int = 1
    """Transient failures retried on the same source (after backoff) before failing over."""

    rate_limit_max_wait_s: float = 10.0
    """A 429 whose wait (``Retry-After``, else ``rate_limit_wait_s``) is at most this long is
    waited out on the same source; a longer one fails over."""

    failover_on_content_filter: bool = False
    """A content-filter refusal propagates at once (a decision about the content, not a fault
    of the source) unless this is set."""

    failover_on_context_length: bool = True
    """A context-length error moves the call to the next source (whose model may have a larger
    window); the last one propagates unmasked."""

    breaker_failure_threshold: int = 5
    """Consecutive failures that open a source's circuit breaker."""

    breaker_first_cooldown_s: float = 1.0
    """How long a breaker that just opened rejects calls before its first half-open probe."""

    breaker_cooldown_s: float = 5.0
    """The longest cool-down: each failed probe doubles it up to this (a recovered source
    serves again within about this plus the time to the next call)."""

    breaker_cooldown_growth: float = 2.0
    """Factor by which a failed half-open probe lengthens the next cool-down."""

    breaker_cooldown_jitter: float = 0.1
    """Each cool-down is shortened by up to this fraction at random, so sources opened
    together do not probe together (never lengthened: the longest stays the bound)."""

    pool_max_connections: int = 1000
    """Connections the client's HTTP pool may open at once (each stream holds one while it
    runs; the openai SDK's default)."""

    pool_max_keepalive_connections: int = 100
    """Idle connections kept open for reuse."""

    pool_keepalive_expiry_s: float = 5.0
    """How long an idle connection is kept."""

    pool_starved_after_s: float = 0.05
    """A request must have waited this long for a connection to count as starved (one cancelled
    at the very instant it was queued tells nothing about the pool)."""

    hedge_budget_ratio: float = 0.25
    """Hedge legs may add at most this fraction of extra requests (token bucket)."""

    hedge_budget_burst: float = 10.0
    """Hedge legs that may be started back to back when the budget is full."""

    hedge_first_token_burst: float = 5.0
    """With both hedge triggers set: the most tokens the first-token trigger may save from what
    the full hedge budget overflows (the stall trigger keeps the whole budget)."""

    output_tokens_estimate: int = 512
    """Output tokens pre-deducted by admission when a request sets no ``max_tokens``."""

    # --- the client's providers ------------------------------------------------------------
    openai_base_url: str = "https://api.openai.com/v1"
    """Base URL of a ``provider="openai"`` source that names none."""

    anthropic_base_url: str = "https://api.anthropic.com/v1"
    """Base URL of a ``provider="anthropic"`` source that names none (the Messages API is
    ``/messages`` below it)."""

    anthropic_version: str = "2026-10-21"
    """The ``anthropic-version`` header of a source that sets no ``api_version``: the version
    the pinned ``anthropic`` SDK (2.17) sends."""

    anthropic_max_tokens: int = 4096
    """``max_tokens`` sent to the Anthropic Messages API (which requires it) when neither the
    call nor the source sets one. An answer that reaches it ends with finish reason
    ``length``."""

    gemini_base_url: str = "https://generativelanguage.googleapis.com/v1"
    """Base URL of a ``provider="gemini"`` source that names none: the Gemini API's default
    version as the pinned ``google-genai`` SDK (3.6.1) uses it (``…/v1beta`` for preview
    features)."""

    chars_per_token: int = 4
    """Admission's estimate of prompt tokens: characters ÷ this."""

    admission_timeout_s: float = 2.0
    """How long the Redis admission backend may take to answer before the call fails closed."""

    admission_key_prefix: str = "otel-llm"
    """Prefix of the Redis keys of the shared admission backend."""

    admission_max_connections: int = 32
    """Connections a Redis admission backend keeps at most; more concurrent calls queue for one
    (each within the backend's timeout)."""

    admission_idle_expiry_s: float = 120.0
    """An idle Redis bucket's key outlives the moment it would be full again by this long."""

    scope: str = "LLM"
    """Configuration scope of chat calls; ``EMBEDDING`` is the embeddings scope."""


DEFAULTS = Defaults()
