"""Which Collector ClickHouse exporter schemas otel-llm reads, and the check that refuses others.

The views, the typed columns and the dashboards read a few of the exporter's ``otel_traces``
columns, with the exporter's types (``SpanAttributes`` a ``Map``, ``Events`` a ``Nested`` of
arrays). Exporter versions :data:`SUPPORTED` write that table the same way (v0.165.1 changed only
the columns' ZSTD level, which no query sees); the exporter's ``json: true`` schema types the
attributes ``JSON`` and is not supported. A table of another shape must fail loudly, never feed
the dashboards empty panels:

- :func:`guard_statement` — the first statement of otel-llm's part of ``schema.sql``: it stops
  the script with an error naming the first column that is missing or of another type;
- :func:`check_columns` — the same check over ``system.columns`` rows, raising
  :class:`~otel_llm._errors.UnsupportedSchema` naming every such column.

:func:`required_columns` is derived: the exporter columns that the ClickHouse views and typed
columns name, and those the trace view panel reads, each with its type as ``system.columns``
reports it, read from the exporter's own DDL (:mod:`otel_llm._show._sql._exporter_sql`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

from otel_llm._errors import UnsupportedSchema
from otel_llm._show._sql._exporter_sql import TRACES_TABLE
from otel_llm._show._sql._exporter_sql import VERSION as SHIPPED
from otel_llm._show._sql._table import BASE_COLUMNS, TABLE
from otel_llm._show._sql._views import CLICKHOUSE, view_statements

SUPPORTED: Final = ("v0.161.0", "v0.165.1")
"""The exporter versions whose ``otel_traces`` (``json: false``) the tests run every view and
panel on; schema.sql ships :data:`SHIPPED`'s DDL."""
SUPPORTED_TEXT: Final = (
    f"otel_traces as the Collector ClickHouse exporter {SUPPORTED[0]} to {SUPPORTED[-1]} "
    "creates it, with json: false"
)

_COLUMN: Final = re.compile(r"^    (\w+) (.+?)(?: CODEC\(.*\))?,?$")
_NESTED_FIELD: Final = re.compile(r"^        (\w+) (.+?),?$")


def exporter_types(ddl: str = TRACES_TABLE) -> dict[str, str]:
    """Every column of the exporter's ``CREATE TABLE`` template with its type as
    ``system.columns`` reports it (a ``Nested`` field ``Events.Name`` as ``Array(…)``)."""
    types: dict[str, str] = {}
    nested: str | None = None
    for line in ddl.splitlines()[1:]:
        if nested is not None:
            if line.lstrip().startswith(")"):
                nested = None
            elif field := _NESTED_FIELD.match(line):
                types[f"{nested}.{field[1]}"] = f"Array({field[2]})"
            continue
        column = _COLUMN.match(line)
        if column is None or column[1] == "INDEX":
            continue
        if column[2] == "Nested (":
            nested = column[1]
        else:
            types[column[1]] = column[2]
    return types


TRACE_VIEW_COLUMNS: Final = ("ResourceAttributes", "SpanKind", "StatusMessage")
"""Exporter columns the ClickHouse dashboard's trace view reads besides the views' columns."""


def _named_in(statements: Iterable[str]) -> set[str]:
    text = "\n".join(statements)
    return {
        name
        for name, _ in BASE_COLUMNS
        if f'"{name}"' in text or re.search(rf"(?<![\w.\"]){re.escape(name)}\b(?!\.)", text)
    }


def _typed_expressions() -> tuple[str, ...]:
    from otel_llm._show._sql._clickhouse import typed_columns  # it imports this module

    return tuple(expression for _, _, expression in typed_columns())


@functools.cache
def required_columns() -> Mapping[str, str]:
    """The exporter columns otel-llm's ClickHouse SQL reads, with their types."""
    types = exporter_types()
    named = _named_in((*view_statements(CLICKHOUSE), *_typed_expressions()))
    named |= set(TRACE_VIEW_COLUMNS)
    return MappingProxyType({name: types[name] for name in types if name in named})


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def guard_statement(database: str, table: str = TABLE) -> str:
    """A statement that fails, naming the column, unless ``database.table`` has every
    :func:`required_columns` column with its type (each ``throwIf`` message is a constant)."""
    where = f"database = {_literal(database)} AND table = {_literal(table)}"
    checks = ",\n    ".join(
        f"throwIf(NOT has(present, ({_literal(name)}, {_literal(sql_type)})), "
        + _literal(
            f"otel-llm: {database}.{table} has no column {name} of type {sql_type}: it is not "
            f"{SUPPORTED_TEXT} (see its columns in system.columns)"
        )
        + ")"
        for name, sql_type in required_columns().items()
    )
    return (
        f"WITH (SELECT groupArray((name, type)) FROM system.columns WHERE {where}) AS present\n"
        f"SELECT\n    {checks}"
    )


def columns_sql(database: str, table: str = TABLE) -> str:
    """The query whose rows (name, type) :func:`check_columns` takes."""
    return (
        "SELECT name, type FROM system.columns WHERE "
        f"database = {_literal(database)} AND table = {_literal(table)}"
    )


def problems(columns: Mapping[str, str]) -> tuple[str, ...]:
    """Each required column that ``columns`` (name → type) lacks or types differently."""
    found: list[str] = []
    for name, sql_type in required_columns().items():
        if name not in columns:
            found.append(f"no column {name} ({sql_type})")
        elif columns[name] != sql_type:
            found.append(f"{name} is {columns[name]}, not {sql_type}")
    return tuple(found)


def check_columns(columns: Mapping[str, str], table: str = f"otel.{TABLE}") -> None:
    """Raise :class:`~otel_llm._errors.UnsupportedSchema` naming every required column that
    ``columns`` (name → type, e.g. the rows of :func:`columns_sql`) lacks or types otherwise."""
    found = problems(columns)
    if found:
        raise UnsupportedSchema(table, found, SUPPORTED_TEXT)


__all__ = [
    "SHIPPED",
    "SUPPORTED",
    "check_columns",
    "columns_sql",
    "exporter_types",
    "guard_statement",
    "problems",
    "required_columns",
]
