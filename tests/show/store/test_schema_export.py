"""The segment format as JSON for the Collector's Go exporter: the committed
``collector/storeexporter/schema.json`` is what the generator writes now, and it says what the
Python writer does (columns and Arrow types, typed plan, chunk plan, layout)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from otel_llm._show._sql._table import ALL_COLUMNS, TYPED_COLUMNS
from otel_llm._show._store import _schema_export
from otel_llm._show._store._columns import arrow_schema
from otel_llm._show._store._segments import _TEMPORARY, LAYOUT, PENDING
from tests.support import REPOSITORY
from tests.support.processes import run_python

COMMITTED = REPOSITORY / _schema_export.DEFAULT_PATH


def test_the_committed_schema_json_is_what_the_generator_writes() -> None:
    """schema.json equals the generator's output byte for byte (else: run
    `python -m otel_llm._show._store._schema_export` and commit the file)."""
    assert COMMITTED.read_text(encoding="utf-8") == _schema_export.render()


def test_the_generator_runs_as_a_module(tmp_path: Path) -> None:
    """`python -m otel_llm._show._store._schema_export PATH` writes the same JSON to PATH."""
    target = tmp_path / "schema.json"
    done = run_python(
        "import runpy, sys; sys.argv = ['x', sys.argv[1]]; "
        "runpy.run_module('otel_llm._show._store._schema_export', run_name='__main__')",
        str(target),
        cwd=REPOSITORY,
    )
    assert done.returncode == 0, done.stderr
    assert target.read_text(encoding="utf-8") == _schema_export.render()


def _arrow(spec: dict[str, object]) -> pa.DataType:
    kind = spec["type"]
    if kind == "list":
        item = spec["item"]
        assert isinstance(item, dict)
        return pa.list_(pa.field(str(item["name"]), _arrow(item), bool(item["nullable"])))
    if kind == "map":
        key, value = spec["key"], spec["value"]
        assert isinstance(key, dict)
        assert isinstance(value, dict)
        return pa.map_(_arrow(key), _arrow(value))
    if kind == "timestamp":
        return pa.timestamp(str(spec["unit"]))
    return {
        "string": pa.string(),
        "uint64": pa.uint64(),
        "int64": pa.int64(),
        "int32": pa.int32(),
        "bool": pa.bool_(),
    }[str(kind)]


def test_the_json_describes_the_python_writers_schema() -> None:
    """Read back as Arrow, the JSON's columns are arrow_schema() (names, order, types,
    nullability); its typed plan is TYPED_COLUMNS; its constants are the store's."""
    described = json.loads(COMMITTED.read_text(encoding="utf-8"))
    schema = pa.schema(
        [pa.field(c["name"], _arrow(c), c["nullable"]) for c in described["columns"]]
    )
    assert schema.equals(arrow_schema())
    assert [c["name"] for c in described["columns"]] == list(ALL_COLUMNS)
    assert [
        (t["column"], t["attribute"], t["sql_type"], t["default"]) for t in described["typed"]
    ] == [(c.name, c.attribute, c.sql_type, c.default) for c in TYPED_COLUMNS]
    assert described["layout"] == LAYOUT
    assert described["store"]["pending_prefix"] == PENDING
    assert described["store"]["temporary_pattern"] == _TEMPORARY.pattern
