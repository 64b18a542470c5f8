"""Every default of the library, once.

Seconds are ``float``; milliseconds appear only where the specification names a field ``_ms``.
Other modules read these values from :data:`DEFAULTS`; no signature repeats a literal default.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Defaults:
    """The frozen policy object holding all defaults."""

    stall_threshold_ms: int = 1000
    """A gap between incremental chunks strictly longer than this is a stall (SPEC M5)."""

    chunk_event_floor_ms: int = 100
    """Gaps longer than this are recorded as chunk events, so SQL can re-derive stalls at any
    threshold at or above it."""

    chunk_event_budget: int = 120
    """At most this many chunk events per attempt span (the SDK keeps 128 by default)."""

    db_path: str = "otel-llm.duckdb"
    """Embedded DuckDB file, relative to the working directory."""

    db_env_var: str = "OTEL_LLM_DB"
    """Environment variable naming the DuckDB file."""

    duckdb_storage_version: str = "v1.4.0"
    """DuckDB storage format written, readable by DuckDB 1.4 and later (Grafana's plugin)."""

    export_schedule_delay_s: float = 1.0
    """How often the batch processor hands spans to the DuckDB writer."""

    export_max_pending_spans: int = 100_000
    """Spans the DuckDB writer holds while the file is busy before it starts dropping."""

    export_lock_retry_s: float = 0.5
    """Pause before the writer tries a busy DuckDB file again."""

    shutdown_timeout_s: float = 10.0
    """Bound on how long ``shutdown()`` waits for pending spans."""

    connect_timeout_s: float = 10.0
    """TCP connect timeout of the transport."""

    timeout_s: float = 60.0
    """Per-attempt read timeout of the transport."""

    pending_call_figures: int = 10_000
    """Calls whose attempt figures the processor keeps while waiting for the call span."""


DEFAULTS = Defaults()
