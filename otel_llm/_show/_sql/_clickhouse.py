"""The ClickHouse schema: the Collector exporter's ``otel_traces`` plus otel-llm's typed columns
and views, generated from the same table of columns as the DuckDB store.

The exporter's own DDL (v0.161.0, :mod:`otel_llm._show._sql._exporter_sql`) creates the table; one
``ALTER TABLE … ADD COLUMN IF NOT EXISTS`` adds every typed column of
:data:`~otel_llm._show._sql._table.TYPED_COLUMNS` and the chunk arrays as ``MATERIALIZED`` columns —
the exporter's INSERT names only its own 22 columns, so ClickHouse computes ours from
``SpanAttributes`` and the ``Events`` arrays, typed as DuckDB types them — and the views are
:func:`~otel_llm._show._sql._views.view_statements` for ClickHouse. Every statement is idempotent.

``python -m otel_llm._show._sql._clickhouse [PATH] [--cluster NAME] [--database NAME]`` prints (or
writes) the script; ``collector/clickhouse/schema.sql`` is its output with the defaults.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from otel_llm import _semconv as sc
from otel_llm._figures import STALL_COUNT, STALL_MS
from otel_llm._show._sql._exporter_sql import TEMPLATE_FILES, VERSION, render
from otel_llm._show._sql._exporter_versions import SUPPORTED, guard_statement
from otel_llm._show._sql._rollup import rollup_statements
from otel_llm._show._sql._table import (
    CHUNK_COLUMNS,
    CHUNK_OFFSET_COLUMN,
    TABLE,
    TYPED_COLUMNS,
    TypedColumn,
)
from otel_llm._show._sql._views import ClickHouse, view_statements

DATABASE: Final = "otel"
SCHEMA_FILE: Final = Path("collector/clickhouse/schema.sql")
"""Where the repository keeps the generated script (relative to its root)."""

_TYPES: Final = {
    "VARCHAR": "Nullable(String)",
    "BIGINT": "Nullable(Int64)",
    "INTEGER": "Nullable(Int32)",
    "BOOLEAN": "Nullable(Bool)",
    "BIGINT[]": "Array(Int64)",
    "TIMESTAMP_NS": "Nullable(DateTime64(9))",
}
"""DuckDB's type of a typed column → ClickHouse's (every scalar is Nullable; an array cannot
be, and is empty where DuckDB's is NULL)."""
_ATTRIBUTES: Final = "SpanAttributes"


def _value(column: TypedColumn) -> str:
    """The attribute as the DuckDB row builder types it: NULL when absent or not of the type."""
    value = f"{_ATTRIBUTES}['{column.attribute}']"
    if column.sql_type == "VARCHAR":
        return f"if(mapContains({_ATTRIBUTES}, '{column.attribute}'), {value}, NULL)"
    if column.sql_type == "BIGINT":
        return f"toInt64OrNull({value})"
    if column.sql_type == "INTEGER":
        return f"toInt32OrNull({value})"
    if column.sql_type == "BOOLEAN":
        return f"multiIf({value} = 'true', true, {value} = 'false', false, NULL)"
    if column.sql_type == "TIMESTAMP_NS":  # ns since the epoch
        return f"fromUnixTimestamp64Nano(toInt64OrNull({value}))"
    if column.sql_type == "BIGINT[]":  # the exporter renders an array attribute as JSON
        # an array of ints only: JSONExtract alone would turn floats and bools into ints
        return (
            f"if(JSONType({value}) = 'Array' AND arrayAll(x -> JSONType(x) = 'Int64', "
            f"JSONExtractArrayRaw({value})), JSONExtract({value}, 'Array(Int64)'), [])"
        )
    raise ValueError(f"no ClickHouse type for {column.sql_type}")  # pragma: no cover


def _typed_expression(column: TypedColumn) -> str:
    if column.default is None:
        return _value(column)
    default = "true" if column.default else "false"
    return (
        f"if(mapContains({_ATTRIBUTES}, '{column.attribute}'), {_value(column)}, "
        f"if(mapContains({_ATTRIBUTES}, '{sc.SPAN_ROLE}'), {default}, NULL))"
    )


def _chunk_events(array: str) -> str:
    """The elements of the ``Events`` array ``array`` that belong to chunk events."""
    return f"""arrayFilter((x, n) -> n = '{sc.CHUNK_EVENT}', "{array}", "Events.Name")"""


def typed_columns() -> tuple[tuple[str, str, str], ...]:
    """(name, ClickHouse type, MATERIALIZED expression) of every column the exporter's INSERT
    does not name, in the DuckDB store's column order."""
    columns = [(c.name, _TYPES[c.sql_type], _typed_expression(c)) for c in TYPED_COLUMNS]
    columns += [
        (
            name,
            "Array(Nullable(Int64))",
            f"arrayMap(a -> toInt64OrNull(a['{attribute}']), {_chunk_events('Events.Attributes')})",
        )
        for name, attribute in CHUNK_COLUMNS
    ]
    columns.append(
        (
            CHUNK_OFFSET_COLUMN,
            "Array(Int64)",
            "arrayMap(t -> toInt64(toUnixTimestamp64Nano(t)) - toInt64(toUnixTimestamp64Nano("
            f"Timestamp)), {_chunk_events('Events.Timestamp')})",
        )
    )
    return tuple(columns)


def exporter_statements(
    database: str = DATABASE,
    *,
    cluster: str | None = None,
    engine: str = "MergeTree()",
    templates: Mapping[str, str] = TEMPLATE_FILES,
) -> tuple[str, ...]:
    """The exporter's own trace DDL, rendered as it renders it with ``create_schema: true``
    (no TTL): the database, ``otel_traces`` and its trace-id lookup table and view.
    ``templates``: the exporter's template files by name (another version's, in the tests)."""
    on_cluster = ClickHouse(database, cluster).on_cluster().strip()
    table, lookup, view = (
        templates[name]
        for name in (
            "traces_table.sql",
            "traces_id_ts_lookup_table.sql",
            "traces_id_ts_lookup_mv.sql",
        )
    )
    return (
        f'CREATE DATABASE IF NOT EXISTS "{database}" {on_cluster}'.rstrip(),
        render(table, database, TABLE, on_cluster, engine, "", quoted=(0, 1)),
        render(lookup, database, TABLE, on_cluster, engine, ""),
        render(view, database, TABLE, on_cluster, database, TABLE, database, TABLE),
    )


def otel_llm_statements(database: str = DATABASE, *, cluster: str | None = None) -> tuple[str, ...]:
    """What otel-llm adds to the exporter's table: the check that the table is a schema the
    views read (:mod:`~otel_llm._show._sql._exporter_versions`), the typed columns and the
    views."""
    dialect = ClickHouse(database, cluster)
    adds = ",\n".join(
        f'    ADD COLUMN IF NOT EXISTS "{name}" {sql_type} MATERIALIZED {expression}'
        for name, sql_type, expression in typed_columns()
    )
    alter = f'ALTER TABLE "{database}"."{TABLE}"{dialect.on_cluster()}\n{adds}'
    return (
        guard_statement(database),
        alter,
        *view_statements(dialect),
        *rollup_statements(dialect),
    )


def _header(database: str) -> str:
    return f"""\
-- otel-llm's ClickHouse schema: the OpenTelemetry Collector ClickHouse exporter's otel_traces
-- table ({VERSION} templates, rendered for database "{database}"), otel-llm's typed columns,
-- the views llm_attempts, llm_calls and llm_attempts_at(threshold_ms = T), and the rollups the
-- ClickHouse dashboard reads (llm_winners_1m, llm_calls_1m, llm_attempts_1m: AggregatingMergeTree
-- by minute; llm_stalled_winners), each filled by a materialized view as spans are inserted.
--
-- Generated by `python -m otel_llm._show._sql._clickhouse` from the column table that also
-- drives the DuckDB store; do not edit by hand (a test fails when this file is stale).
--
-- Apply it once, before the Collector starts (its config sets create_schema: false):
--     clickhouse client --multiquery < collector/clickhouse/schema.sql
--
-- Supported exporter versions: {", ".join(SUPPORTED)} (the same otel_traces but for the
-- columns' ZSTD level), with json: false. Before it adds anything, the script checks that
-- {database}.otel_traces has every column the views and dashboards read, with the exporter's type,
-- and stops with an error naming the first that is missing or different (a table the exporter
-- created with json: true, or a future schema that renamed a column), rather than leave the
-- dashboards empty.
--
-- Every statement is idempotent: IF NOT EXISTS for the tables and columns, OR REPLACE for
-- the views. On a table the exporter already created, the ALTER adds the typed columns: rows
-- inserted before it compute them when read (ALTER TABLE {database}.otel_traces MATERIALIZE COLUMN
-- "{STALL_MS.column}" stores them), rows inserted after it store them at insert.
--
-- The typed columns are MATERIALIZED from SpanAttributes and the Events arrays, so the
-- exporter's INSERT, which names only its own columns, fills them; SELECT * omits them, name
-- them (or read the views). The re-threshold is a parameterized view:
--     SELECT * FROM {database}.llm_attempts_at(threshold_ms = 500) WHERE {STALL_COUNT.name} > 0
--
-- A cluster: `python -m otel_llm._show._sql._clickhouse --cluster NAME` writes every statement
-- ON CLUSTER `NAME` and the tables as ReplicatedMergeTree() (the server's default_replica_path
-- and default_replica_name, i.e. the {{shard}} and {{replica}} macros, must be set), which
-- replicates a single shard; set the exporter's cluster_name and table_engine to match. To
-- shard as well, create these tables under another name (e.g. otel_traces_local) on every
-- node and a Distributed table over them, ON CLUSTER, whose columns (the MATERIALIZED ones
-- included) match:
--     CREATE TABLE {database}.otel_traces ON CLUSTER `NAME` AS {database}.otel_traces_local
--         ENGINE = Distributed(`NAME`, {database}, otel_traces_local, cityHash64(TraceId))
-- so the exporter inserts into the Distributed table and each shard computes the typed
-- columns; point the views at the Distributed table (they read {database}.otel_traces). Sharding by
-- TraceId keeps a call and its attempts on one shard. None of the cluster variants is tested
-- here: chDB, which runs this file in the tests, is a single embedded server.
"""


def schema_sql(
    database: str = DATABASE, *, cluster: str | None = None, engine: str | None = None
) -> str:
    """The whole script: the exporter's DDL, then otel-llm's columns and views, each statement
    ending in ``;`` at the end of a line."""
    table_engine = engine or ("ReplicatedMergeTree()" if cluster else "MergeTree()")
    statements = (
        *exporter_statements(database, cluster=cluster, engine=table_engine),
        *otel_llm_statements(database, cluster=cluster),
    )
    body = "".join(f"{statement.strip()};\n\n" for statement in statements)
    return _header(database) + "\n" + body.rstrip() + "\n"


def statements_of(script: str) -> list[str]:
    """The statements of a script written by :func:`schema_sql`, comments left out."""
    lines = [line for line in script.splitlines() if not line.startswith("--")]
    return [s.strip() for s in ("\n".join(lines) + "\n").split(";\n") if s.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the script, or write it to PATH."""
    parser = argparse.ArgumentParser(prog="python -m otel_llm._show._sql._clickhouse")
    parser.add_argument("path", nargs="?", type=Path, help="write here instead of stdout")
    parser.add_argument("--database", default=DATABASE)
    parser.add_argument("--cluster", default=None, help="ON CLUSTER and ReplicatedMergeTree()")
    args = parser.parse_args(argv)
    script = schema_sql(args.database, cluster=args.cluster)
    if args.path is None:
        sys.stdout.write(script)
    else:
        args.path.parent.mkdir(parents=True, exist_ok=True)
        args.path.write_text(script)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
