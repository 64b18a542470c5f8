"""The Collector ClickHouse exporter's ``otel_traces`` templates, as v0.161.0 ships them.

From ``internal/sqltemplates/`` of
``github.com/open-telemetry/opentelemetry-collector-contrib/exporter/clickhouseexporter@v0.161.0``
(Apache-2.0, copyright The OpenTelemetry Authors), byte for byte, Go ``fmt`` verbs included:
:func:`render` fills them as the exporter does when ``create_schema`` is true, so the DDL that
otel-llm ships is the exporter's own plus columns its INSERT never names. A test compares these
with the module cache (``go mod download`` of that version) when it is present.
"""

from __future__ import annotations

from typing import Final

VERSION: Final = "v0.161.0"

TRACES_TABLE: Final = """CREATE TABLE IF NOT EXISTS %q.%q %s (
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_res_attr_value mapValues(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_value mapValues(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1
) ENGINE = %s
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp))
%s
SETTINGS index_granularity=8192, ttl_only_drop_parts = 1
"""
"""``traces_table.sql``."""

TRACE_ID_TS_TABLE: Final = """CREATE TABLE IF NOT EXISTS "%s"."%s_trace_id_ts" %s (
    TraceId String CODEC(ZSTD(1)),
    Start DateTime CODEC(Delta, ZSTD(1)),
    End DateTime CODEC(Delta, ZSTD(1)),
    INDEX idx_trace_id TraceId TYPE bloom_filter(0.01) GRANULARITY 1
) ENGINE = %s
    PARTITION BY toDate(Start)
    ORDER BY (TraceId, Start)
    %s
    SETTINGS index_granularity=8192, ttl_only_drop_parts = 1"""
"""``traces_id_ts_lookup_table.sql``."""
TRACE_ID_TS_SUFFIX: Final = "_trace_id_ts"
"""The lookup table's name after the traces table's (Grafana's ``traceTimestampTableSuffix``)."""

TRACE_ID_TS_VIEW: Final = """CREATE MATERIALIZED VIEW IF NOT EXISTS "%s"."%s_trace_id_ts_mv" %s
TO "%s"."%s_trace_id_ts"
AS SELECT
              TraceId,
              min(Timestamp) as Start,
              max(Timestamp) as End
   FROM "%s"."%s"
   WHERE TraceId != ''
   GROUP BY TraceId
"""
"""``traces_id_ts_lookup_mv.sql``."""

TRACES_INSERT: Final = """INSERT INTO %q.%q (
    Timestamp,
    TraceId,
    SpanId,
    ParentSpanId,
    TraceState,
    SpanName,
    SpanKind,
    ServiceName,
    ResourceAttributes,
    ScopeName,
    ScopeVersion,
    SpanAttributes,
    Duration,
    StatusCode,
    StatusMessage,
    Events.Timestamp,
    Events.Name,
    Events.Attributes,
    Links.TraceId,
    Links.SpanId,
    Links.TraceState,
    Links.Attributes
) VALUES (
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?,
    ?
)
"""
"""``traces_insert.sql``."""

TEMPLATE_FILES: Final = {
    "traces_table.sql": TRACES_TABLE,
    "traces_id_ts_lookup_table.sql": TRACE_ID_TS_TABLE,
    "traces_id_ts_lookup_mv.sql": TRACE_ID_TS_VIEW,
    "traces_insert.sql": TRACES_INSERT,
}
"""Each template by its file name in the exporter's module."""


def _quote(name: str) -> str:
    """Go's ``%q`` of a plain identifier: a double-quoted string."""
    if not name.replace("_", "").isalnum() or not name.isascii():
        raise ValueError(f"not a plain identifier: {name!r}")
    return f'"{name}"'


def render(template: str, *args: str, quoted: tuple[int, ...] = ()) -> str:
    """``fmt.Sprintf(template, args...)`` for the verbs these templates use (``%q`` and ``%s``;
    the positions in ``quoted`` are the ``%q`` ones)."""
    parts = template.replace("%q", "%s").split("%s")
    if len(parts) != len(args) + 1:
        raise ValueError(f"{len(parts) - 1} verbs, {len(args)} arguments")
    values = [_quote(a) if i in quoted else a for i, a in enumerate(args)]
    return parts[0] + "".join(v + p for v, p in zip(values, parts[1:], strict=True))
