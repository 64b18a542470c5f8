"""What `otel-llm query` prints: tables that fit the width, the machine formats, a clear word on
files that are not stores, and `--version`."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import pty
import re
import sqlite3
import struct
import subprocess
import sys
import uuid
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from otel_llm import __version__, open_store
from otel_llm._show._store._breakdown import Table, breakdown_sql, run_query, worst_stalls_sql
from otel_llm.cli._cells import cell_text, is_number, json_value
from otel_llm.cli._formats import markdown_text
from otel_llm.cli._layout import ELLIPSIS, lay_out
from tests.support.duckdb_store import Store
from tests.support.processes import run_cli as otel_llm
from tests.support.processes import run_cli_bytes

WIDTHS = (60, 80, 120)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with a few calls whose stalls differ (a long silence, none, several)."""
    path = tmp_path_factory.mktemp("store") / "spans.duckdb"
    writer = Store(path)
    try:
        writer.call()
        writer.call([100.0 + 20 * i for i in range(50)], 1200.0)
        writer.call([300.0, 2500.0, 2600.0, 6000.0, 6100.0], 6200.0)
    finally:
        writer.close()
    return path


def numbers_whole(lines: Sequence[str], table: Table) -> list[str]:
    """The numbers of ``table`` that no line shows whole (as a token of its own)."""
    text = "\n".join(lines)
    missing = []
    for row in table.rows:
        for value in row:
            if is_number(value):
                token = cell_text(value)
                if not re.search(rf"(?<![\w.]){re.escape(token)}(?![\w.])", text):
                    missing.append(token)
    return missing


def check_fits(lines: Sequence[str], table: Table, width: int) -> None:
    """Every line within ``width`` cells, every number whole, every cut announced."""
    too_wide = [line for line in lines if cell_len(line) > width]
    assert not too_wide, too_wide
    assert not numbers_whole(lines, table)
    if any(ELLIPSIS in line for line in lines):
        assert "cut short to fit" in " ".join(lines[-3:])


@pytest.mark.parametrize("width", WIDTHS)
def test_breakdown_fits_every_width(store: Path, width: int) -> None:
    """The breakdown and the worst stalls fit 60, 80 and 120 cells, numbers whole."""
    for sql in (breakdown_sql(), breakdown_sql(500), worst_stalls_sql()):
        table = run_query(store, sql, canned=True)
        assert table.rows
        check_fits(lay_out(table.columns, table.rows, width), table, width)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("view", ["llm_calls", "llm_attempts", "otel_traces"])
def test_select_star_fits_every_width(store: Path, width: int, view: str) -> None:
    """`SELECT *` from every view (and the raw table, maps and arrays included) fits."""
    table = run_query(store, f"SELECT * FROM {view} LIMIT 5")
    lines = lay_out(table.columns, table.rows, width)
    check_fits(lines, table, width)
    for column in table.columns:  # every column is there, its name whole or cut short
        assert any(column[:8] in line for line in lines), column


def test_wide_rows_become_records_at_80(store: Path) -> None:
    """At 80 cells the 30 columns of llm_calls are shown one record per row (psql's \\x)."""
    table = run_query(store, "SELECT * FROM llm_calls")
    lines = lay_out(table.columns, table.rows, 80)
    assert sum(line.startswith("-[ RECORD") for line in lines) == len(table.rows)


def test_narrow_table_is_untouched() -> None:
    """A table that fits is printed as it is: header, rule, rows, nothing cut or noted."""
    lines = lay_out(("model", "calls"), [("a", 1), ("bb", 22)], 80)
    assert lines == ["model  calls", "-----  -----", "a          1", "bb        22"]


def test_long_text_is_cut_and_counted() -> None:
    """A long text value is cut with an ellipsis and the note says how to see it whole."""
    lines = lay_out(("id", "n", "text"), [("x", 123456789, "word " * 40)], 40)
    assert max(cell_len(line) for line in lines) <= 40
    assert "123456789" in "\n".join(lines)
    assert lines[-2:] == ["(1 value cut short to fit; --format csv", "or json prints them whole)"]


@pytest.mark.parametrize("width", [30, 40, 60, 80, 100])
@pytest.mark.parametrize("others", [2, 8])
def test_a_cut_key_never_makes_two_rows_read_alike(width: int, others: int) -> None:
    """Two models that differ only in their last character: in whichever layout fits, each
    row's key is told apart from the other's (whole, or cut where they still differ), in one
    table, in every block, and in the records."""
    keys = ("gpt-4o-2024-08-06-finetuned-customer-A", "gpt-4o-2024-08-06-finetuned-customer-B")
    columns = ("model", *(f"column_{n}" for n in range(others)))
    rows = [
        (key, *(n * 1000 + i for n in range(others - 1)), "x" * 50) for i, key in enumerate(keys)
    ]
    lines = lay_out(columns, rows, width)
    assert max(cell_len(line) for line in lines) <= width
    if lines[0].startswith("-[ RECORD"):  # the key whole, wrapped under its name
        values, current = [], ""
        for line in lines:
            name, _, value = line.partition("| ")
            if name.strip() == "model" or (current and not name.strip()):
                current += value
            elif current:
                values.append(current)
                current = ""
        assert values == list(keys), lines
        return
    for block in "\n".join(lines).split("\n\n"):  # one table, or each block
        shown = [line.split("  ")[0] for line in block.splitlines() if line.startswith("gpt")]
        assert len(shown) == len(set(shown)) == len(keys), lines


def test_a_decimal_inside_text_is_never_split() -> None:
    """A long text value wrapped in the record view keeps ``30.4`` on one line."""
    text = "a" * 20 + "30.4" + "b" * 60
    columns = tuple(f"column_{n}" for n in range(12))
    lines = lay_out(columns, [(text, *range(11))], 40)
    assert max(cell_len(line) for line in lines) <= 40
    assert any("30.4" in line for line in lines), lines


def test_a_number_wider_than_the_value_column_gets_its_own_line() -> None:
    """In the record view a number that does not fit beside its name is printed whole below
    it."""
    columns = tuple(f"name_{n}" for n in range(12))
    value = 1.2345678901234567e-05
    lines = lay_out(columns, [(value, *range(11))], 30)
    assert lines[1:3] == ["name_0", f"  {value!r}"]
    assert max(cell_len(line) for line in lines) <= 30


def test_long_names_stay_whole_in_the_record_view() -> None:
    """Column names longer than half the width are not cut: each gets a line of its own."""
    columns = tuple(f"a_long_column_name_{n}" for n in range(12))
    lines = lay_out(columns, [tuple(range(12))], 30)
    assert all(f"a_long_column_name_{n}" in lines for n in range(12))
    assert max(cell_len(line) for line in lines) <= 30


def test_control_characters_cannot_break_lines_or_restyle() -> None:
    """Newlines, escape sequences and bidi overrides in values are shown as escapes."""
    lines = lay_out(("v",), [("a\nb\x1b[31mred\u202e",)], None)
    assert lines[-1] == "a\\nb\\u001b[31mred\\u202e"


cells = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.decimals(allow_nan=False, places=3, min_value=-(10**6), max_value=10**6),
    st.text(max_size=120),
    st.text(alphabet="漢字かな", max_size=30),
    st.lists(st.integers(0, 10**9), max_size=40),
)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(min_value=1, max_value=12).flatmap(
        lambda n: st.tuples(
            st.lists(st.text(min_size=1, max_size=25), min_size=n, max_size=n),
            st.lists(st.lists(cells, min_size=n, max_size=n), max_size=6),
        )
    ),
    st.integers(min_value=30, max_value=200),
)
def test_any_table_fits_any_width(shape: tuple[list[str], list[list[Any]]], width: int) -> None:
    """Hostile tables (wide text, CJK, control characters, huge numbers, arrays) at any width:
    lines fit, numbers are whole, cuts are announced."""
    columns, rows = shape
    table = Table(tuple(columns), [tuple(row) for row in rows])
    lines = lay_out(table.columns, table.rows, width)
    too_wide = [line for line in lines if cell_len(line) > width]
    widest_number = max(
        (cell_len(cell_text(v)) for row in rows for v in row if is_number(v)), default=0
    )
    if widest_number + 2 <= width:  # only a number wider than the line itself may overflow
        assert not too_wide, too_wide
    assert not numbers_whole(lines, table)
    assert all("\n" not in line and "\x1b" not in line for line in lines)


def test_piped_output_is_plain(store: Path) -> None:
    """In a pipe: no colour, no box drawing, no width limit unless COLUMNS says one."""
    out = otel_llm("query", "--db", str(store))
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout
    assert not set("─│┃━") & set(out.stdout)
    assert "Breakdown (as measured)" in out.stdout
    narrow = otel_llm("query", "--db", str(store), columns=60)
    assert max(cell_len(line) for line in narrow.stdout.splitlines()) <= 60


def test_terminal_output_fits_the_terminal(store: Path) -> None:
    """On a terminal 70 cells wide, the table is drawn with rules and fits."""
    import fcntl
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 70, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "otel_llm.cli", "query", "--db", str(store)],
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the follower side closed: EIO on Linux
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    text = b"".join(chunks).decode()
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert "─" in plain
    assert "\x1b[1m" in text  # bold headers
    assert max(cell_len(line) for line in plain.splitlines()) <= 70


def expected_rows(store: Path, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    with open_store(Path(str(store))) as conn:
        cursor = conn.execute(sql)
        return [d[0] for d in cursor.description or ()], cursor.fetchall()


SQL_ALL = "SELECT * FROM otel_traces ORDER BY SpanId"


def ns_of(text: str) -> int:
    """The nanoseconds since the epoch of an ISO 8601 UTC time with up to nine digits."""
    whole, _, fraction = text.partition(".")
    seconds = int(dt.datetime.fromisoformat(whole).replace(tzinfo=dt.UTC).timestamp())
    return seconds * 10**9 + int(fraction.ljust(9, "0"))


def test_json_is_one_array_of_objects(store: Path) -> None:
    """`--format json` prints one array with an object per row; values read back equal, the
    store's times to the nanosecond."""
    out = otel_llm("query", "--db", str(store), "--format", "json", SQL_ALL)
    assert out.returncode == 0, out.stderr
    with open_store(Path(str(store))) as conn:
        types = {d[0]: str(d[1]) for d in conn.execute(SQL_ALL).description or ()}
    times = {name: kind for name, kind in types.items() if kind.startswith("TIMESTAMP_NS")}
    assert {"Timestamp", "Events.Timestamp"} <= set(times)
    as_ns = ", ".join(
        f'epoch_ns("{name}")' if kind == "TIMESTAMP_NS" else f'[epoch_ns(t) FOR t IN "{name}"]'
        for name, kind in times.items()
    )
    columns, rows = expected_rows(store, SQL_ALL)
    _, nanoseconds = expected_rows(store, f"SELECT {as_ns} FROM otel_traces ORDER BY SpanId")
    parsed = json.loads(out.stdout)
    assert isinstance(parsed, list)
    assert len(parsed) == len(rows) == 9
    assert any(row[0] % 1000 for row in nanoseconds), "nanoseconds to show"
    for obj, row, exact in zip(parsed, rows, nanoseconds, strict=True):
        assert list(obj) == columns
        for name, ns in zip(times, exact, strict=True):
            text = obj.pop(name)
            assert (ns_of(text) if isinstance(text, str) else _ns_list(text)) == ns, name
        rest = [v for column, v in zip(columns, row, strict=True) if column not in times]
        assert list(obj.values()) == [json_value(v) for v in rest]


def _ns_list(texts: list[str] | None) -> list[int] | None:
    return None if texts is None else [ns_of(text) for text in texts]


EXACT_TIMES = """
    SELECT
        TIMESTAMP_NS '2026-01-31 12:00:00.123456789' AS ns,
        'infinity'::TIMESTAMP AS later,
        '-infinity'::DATE AS earlier,
        TIME_NS '12:00:00.000000001' AS time_ns,
        TIMESTAMPTZ '2026-01-31 12:00:00.5+00' AS tz,
        INTERVAL '1 month 2 days 3.000004 seconds' AS months,
        INTERVAL '1000000000 days' AS huge,
        NULL::TIMESTAMP_NS AS nothing,
        [TIMESTAMP_NS '1970-01-01 00:00:00.000000001', NULL] AS list,
        {'at': TIMESTAMP_NS '1969-12-31 23:59:59.999999999', 'n': 1} AS struct,
        MAP {[TIMESTAMP_NS '2026-01-31 00:00:00.000000001']: DATE '2026-01-31'} AS map
"""


def test_times_are_exact_in_every_format(store: Path) -> None:
    """SQL of one's own gets its times exact: nanoseconds, infinity, an interval's months, an
    interval longer than Python holds, nested times; JSON and CSV as ISO 8601, the table as
    DuckDB spells them."""
    out = otel_llm("query", "--db", str(store), "--format", "json", EXACT_TIMES)
    assert out.returncode == 0, out.stderr
    flat = {
        "ns": "2026-01-31T12:00:00.123456789",
        "later": "infinity",
        "earlier": "-infinity",
        "time_ns": "12:00:00.000000001",
        "tz": "2026-01-31T12:00:00.5+00:00",
        "months": "1 month 2 days 00:00:03.000004",
        "huge": "1000000000 days",
    }
    assert json.loads(out.stdout) == [
        {
            **flat,
            "nothing": None,
            "list": ["1970-01-01T00:00:00.000000001", None],
            "struct": {"at": "1969-12-31T23:59:59.999999999", "n": 1},
            "map": {"key": [["2026-01-31T00:00:00.000000001"]], "value": ["2026-01-31"]},
        }
    ]
    csv_out = run_cli_bytes("query", "--db", str(store), "--format", "csv", EXACT_TIMES)
    assert csv_out.returncode == 0, csv_out.stderr
    (header, record) = list(csv.reader(io.StringIO(csv_out.stdout.decode(), newline="")))
    assert dict(zip(header, record, strict=True)) | {"list": "", "struct": "", "map": ""} == {
        **flat,
        "nothing": "",
        "list": "",
        "struct": "",
        "map": "",
    }
    assert json.loads(record[-3]) == ["1970-01-01T00:00:00.000000001", None]
    table = otel_llm("query", "--db", str(store), "--width", "0", EXACT_TIMES)
    assert table.returncode == 0, table.stderr
    assert "2026-01-31 12:00:00.123456789  infinity  -infinity  12:00:00.000000001" in table.stdout


def test_statements_before_the_last_run_once_each(store: Path) -> None:
    """Statements before the last run once each, rows or none (a SELECT among them is no
    error), and the last runs once: a sequence counts every run."""
    sql = (
        "CREATE TEMP SEQUENCE runs; SELECT 1; SELECT nextval('runs'); "
        "SELECT nextval('runs') AS n, DATE '2026-01-31' AS day"
    )
    out = otel_llm("query", "--db", str(store), "--format", "json", sql)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"n": 2, "day": "2026-01-31"}]
    out = otel_llm("query", "--db", str(store), "--format", "json", "SELECT 1; SELECT 2 AS x")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"x": 2}]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT INTERVAL '1000000000 days' AS huge; -- a pasted file's last line\n",
        "SELECT INTERVAL '1000000000 days' AS huge;\n/* the end */",
        "PREPARE p AS SELECT INTERVAL '1000000000 days' AS huge; EXECUTE p",
        "PIVOT (SELECT 'huge' AS k, INTERVAL '1000000000 days' AS v) ON k USING any_value(v)",
    ],
)
def test_times_are_exact_whatever_the_last_statement(store: Path, sql: str) -> None:
    """The times of a last statement that is no plain SELECT (one a comment follows, EXECUTE,
    PIVOT) are DuckDB's text too: no parser error, no Python overflow."""
    out = otel_llm("query", "--db", str(store), "--format", "json", sql)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"huge": "1000000000 days"}]


def test_times_in_unnamed_structs_are_exact(store: Path) -> None:
    """The times of a struct with no field names (`row(...)`, `(a, b)`) are exact too: no
    Python overflow, no year 9999 for infinity."""
    sql = "SELECT (1, INTERVAL '1000000000 days') AS pair, [row('infinity'::DATE)] AS rows"
    out = otel_llm("query", "--db", str(store), "--format", "json", sql)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"pair": [1, "1000000000 days"], "rows": [["infinity"]]}]


def test_times_in_a_variant_are_exact(store: Path) -> None:
    """A VARIANT's times are DuckDB's text, exact (no Python overflow), and its numbers stay
    numbers, exact."""
    sql = (
        "SELECT INTERVAL '1000000000 days'::VARIANT AS v, {'at': TIMESTAMP_NS "
        "'2026-01-31 00:00:00.000000001', 'n': 0.1::DOUBLE, 'd': 12345678901234567.125::"
        "DECIMAL(38,3)}::VARIANT AS w, [2::VARIANT, NULL] AS l"
    )
    out = otel_llm("query", "--db", str(store), "--format", "json", sql)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [
        {
            "v": "1000000000 days",
            "w": {"at": "2026-01-31 00:00:00.000000001", "d": "12345678901234567.125", "n": 0.1},
            "l": [2, None],
        }
    ]


def test_a_uuid_is_plain_text_in_the_table_and_markdown() -> None:
    """A UUID cell reads as its text, as a VARCHAR's does (it was quoted, as JSON text)."""
    uuid_text = "00000000-0000-0000-0000-000000000001"
    table = Table(("u",), [(uuid.UUID(uuid_text),)])
    assert cell_text(table.rows[0][0]) == uuid_text
    assert markdown_text(table.columns, table.rows).splitlines()[-1] == f"| {uuid_text} |"


def test_a_map_key_that_is_no_text_is_its_json_text() -> None:
    """A map's key in JSON is the key's JSON text: `true`, not Python's `True`."""
    assert json_value({True: 1, False: None}) == {"true": 1, "false": None}
    assert json_value({1.5: "x", 2: "y"}) == {"1.5": "x", "2": "y"}


@pytest.mark.parametrize("sql", ["", "   ", "-- nothing here\n", "/* nor here */"])
def test_sql_with_no_statement_is_a_clear_error(store: Path, sql: str) -> None:
    """SQL with nothing to run in it is refused in a sentence, not a traceback."""
    out = otel_llm("query", "--db", str(store), "--", sql)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "no statement to run" in out.stderr
    assert "Traceback" not in out.stderr


def test_json_decimals_are_exact(store: Path) -> None:
    """A DECIMAL a double cannot hold (a sum at 10 places, 17 digits before the point) is its
    exact text in JSON, never a rounded number; one a double holds exactly stays a number."""
    sql = (
        "SELECT 12345678901234567.1234567890::DECIMAL(38,10) AS wide, "
        "0.25::DECIMAL(10,2) AS quarter, 99999999999999999999::DECIMAL(38,0) AS whole"
    )
    out = otel_llm("query", "--db", str(store), "--format", "json", sql)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [
        {"wide": "12345678901234567.1234567890", "quarter": 0.25, "whole": 99999999999999999999}
    ]


@given(st.decimals(allow_nan=False, allow_infinity=False, places=None))
def test_a_decimal_reads_back_exactly_from_json(value: Decimal) -> None:
    """Every finite decimal reads back equal from the JSON text of its value: a number when a
    double (or an integer) holds it exactly, else its text."""
    encoded = json.loads(json.dumps(json_value(value)))
    if isinstance(encoded, str):
        assert Decimal(encoded) == value
    else:
        assert Decimal(repr(encoded)) == value


def test_csv_reads_back(store: Path) -> None:
    """`--format csv`: a header row, then one RFC 4180 record per row (CRLF, quoting)."""
    out = run_cli_bytes("query", "--db", str(store), "--format", "csv", SQL_ALL)
    assert out.returncode == 0, out.stderr
    raw = out.stdout.decode()
    assert raw.endswith("\r\n")
    records = list(csv.reader(io.StringIO(raw, newline="")))
    columns, rows = expected_rows(store, SQL_ALL)
    json_rows = json.loads(
        otel_llm("query", "--db", str(store), "--format", "json", SQL_ALL).stdout
    )
    assert records[0] == columns
    assert len(records) == len(rows) + 1
    for record, row in zip(records[1:], rows, strict=True):
        exact = json_rows.pop(0)  # the times to the nanosecond (the JSON test checks them)
        for field, value, name in zip(record, row, columns, strict=True):
            if value is None:
                assert field == ""
            elif isinstance(value, str):
                assert field == value
            elif is_number(value) and not isinstance(value, Decimal):
                assert float(field) == pytest.approx(float(value))
            elif isinstance(value, list | dict | dt.datetime):
                assert (json.loads(field) if field[:1] in ("[", "{") else field) == exact[name]


def test_breakdown_formats(store: Path) -> None:
    """The breakdown in csv and json is one table (the worst stalls with --worst-stalls);
    markdown prints both with their titles."""
    as_json = json.loads(otel_llm("query", "--db", str(store), "--format", "json").stdout)
    assert [row["calls"] for row in as_json] == [3]
    stalls = otel_llm("query", "--db", str(store), "--format", "json", "--worst-stalls")
    assert {"trace", "stall_s", "stalls"} <= set(json.loads(stalls.stdout)[0])
    as_csv = otel_llm("query", "--db", str(store), "--format", "csv", "--threshold-ms", "500")
    assert as_csv.stdout.splitlines()[0].startswith("model,calls,wall_s,stall_s")
    markdown = otel_llm("query", "--db", str(store), "--format", "markdown").stdout
    assert "**Breakdown (as measured)**" in markdown
    assert "**Worst stalls (as measured)**" in markdown
    assert "|---|---:|" in markdown


def test_empty_result_in_every_format(store: Path) -> None:
    """No rows: an empty array, a header alone, `(no rows)`."""
    sql = "SELECT trace_id, wall_ms FROM llm_calls WHERE false"
    assert json.loads(otel_llm("query", "--db", str(store), "--format", "json", sql).stdout) == []
    csv_out = run_cli_bytes("query", "--db", str(store), "--format", "csv", sql).stdout
    assert csv_out == b"trace_id,wall_ms\r\n"
    assert "(no rows)" in otel_llm("query", "--db", str(store), sql).stdout


def test_version() -> None:
    """`otel-llm --version` prints the version."""
    out = otel_llm("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"otel-llm {__version__}"


def test_version_loads_no_application() -> None:
    """The console script answers `--version` before importing the application: neither typer
    nor rich, DuckDB or the OpenTelemetry SDK is loaded."""
    heavy = ("typer", "rich", "duckdb", "pyarrow", "opentelemetry.sdk", "otel_llm.cli._app")
    code = (
        "import sys\n"
        "sys.argv = ['otel-llm', '--version']\n"
        "from otel_llm.cli import main\n"
        "main()\n"
        f"print([name for name in {heavy!r} if name in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.splitlines() == [f"otel-llm {__version__}", "[]"]


def test_sqlite_file_is_not_a_store(tmp_path: Path) -> None:
    """A SQLite file is named as one, with what to do, and nothing is downloaded."""
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    out = otel_llm("query", "--db", str(path))
    assert out.returncode == 2
    assert "is a SQLite database, not an otel-llm store" in out.stderr
    assert "otel_llm.init(db_path=...)" in out.stderr
    assert out.stdout == ""
    assert "extension" not in out.stderr.lower()


def test_duckdb_file_without_spans_is_not_a_store(tmp_path: Path) -> None:
    """A DuckDB database without the otel-llm tables says so (not `Did you mean "pg_class"?`),
    for the breakdown and for SQL alike."""
    path = tmp_path / "other.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE sales (x INT)")
    for args in ((), ("SELECT * FROM llm_calls",)):
        out = otel_llm("query", "--db", str(path), *args)
        assert out.returncode == 2
        assert "is a DuckDB database but not an otel-llm store" in out.stderr
        assert "pg_class" not in out.stderr


@pytest.mark.parametrize("content", [b"", b"hello, world\n" * 10])
def test_other_files_are_not_stores(tmp_path: Path, content: bytes) -> None:
    """An empty or text file is not a DuckDB database; a directory is a directory."""
    path = tmp_path / "spans.duckdb"
    path.write_bytes(content)
    out = otel_llm("query", "--db", str(path))
    assert out.returncode == 2
    assert "is not a DuckDB database, so not an otel-llm store" in out.stderr
    folder = otel_llm("query", "--db", str(tmp_path))
    assert "is a directory" in folder.stderr


def test_every_option_has_help() -> None:
    """Every option and argument of every command says what it does."""
    import typer.main

    from otel_llm.cli import app

    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    silent = [
        f"{name} {param.name}"
        for name, command in group.commands.items()
        for param in command.params
        if not getattr(param, "help", None)
    ]
    assert not silent
    assert {"demo", "query", "provider"} <= set(group.commands)


def test_a_limit_past_any_store_shows_every_worst_stall(store: Path) -> None:
    """`--limit` larger than DuckDB's LIMIT holds (past 64 bits) shows every stalled call, as
    a limit past the store's calls does; it is no DuckDB error after the breakdown."""
    huge = otel_llm("query", "--db", str(store), "--limit", str(2**80))
    assert huge.returncode == 0, huge.stderr
    assert "Worst stalls" in huge.stdout
    rows = json.loads(
        otel_llm("query", "--db", str(store), "--worst-stalls", "--format", "json").stdout
    )
    as_json = otel_llm(
        "query", "--db", str(store), "--worst-stalls", "--format", "json", "--limit", str(2**80)
    )
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == rows


@pytest.mark.parametrize("width", [30, 40])
def test_a_long_title_fits_the_width_too(store: Path, width: int) -> None:
    """The titles of `--since` and `--threshold-ms` (near 60 cells) wrap to the width, as the
    tables under them fit it."""
    out = otel_llm(
        "query", "--db", str(store), "--since", "2w", "--threshold-ms", "500", columns=width
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(cell_len(line) for line in lines) <= width, lines
    assert "Breakdown (at 500 ms, calls since" in " ".join(lines)
    assert "Worst stalls (at 500 ms, calls since" in " ".join(lines)


def test_a_unions_members_keep_their_kind(tmp_path: Path) -> None:
    """A UNION that can hold a time: a number member stays a number in the JSON (a union
    comes without its member's name, so it is not spelled as text: 3 read as "3")."""
    from otel_llm._show._store._segments import SegmentStore

    store = SegmentStore(tmp_path / "store")
    store.create()
    sql = (
        "SELECT union_value(n := 3)::UNION(n INT, t TIMESTAMP) AS u, "
        "union_value(t := TIMESTAMP '2020-01-02 03:04:05')::UNION(n INT, t TIMESTAMP) AS v"
    )
    out = otel_llm("query", "--db", str(store.path), "--format", "json", sql)
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert row["u"] == 3
    assert row["v"].startswith("2020-01-02")
