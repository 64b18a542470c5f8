"""One query value as text for a terminal, and as a JSON value: the one place values are spelled.

DuckDB hands back Python values (``int``, ``float``, ``Decimal``, ``datetime``, ``timedelta``,
``UUID``, ``bytes``, lists for arrays, dicts for maps and structs); a query of one's own gets
its times as DuckDB's exact text of them (:class:`Spelled`). Every output format spells them
from here: the terminal and Markdown through :func:`cell_text`, JSON and the nested values
of CSV through :func:`json_value`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Final

from otel_llm._show._store._breakdown import Spelled
from otel_llm._visible import visible

NULL_TEXT = "NULL"
"""How the terminal shows SQL NULL (as DuckDB's CLI and psql do)."""
_DATE_TIME: Final = re.compile(r"(\d{4,}-\d\d-\d\d) (?=\d)")
"""DuckDB's text of a timestamp: its date, then a space before the time."""
_HOURS_OFFSET: Final = re.compile(r"([+-]\d\d)$")
"""A zone offset DuckDB spells in hours alone (``+00``)."""


def is_number(value: object) -> bool:
    """True for the values that are right-aligned and never cut or split: numbers, not bools."""
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def numeric_columns(rows: Sequence[Sequence[object]], count: int) -> list[bool]:
    """Per column, whether it holds numbers: at least one, and nothing else but NULLs."""
    return [
        any(row[j] is not None for row in rows)
        and all(row[j] is None or is_number(row[j]) for row in rows)
        for j in range(count)
    ]


def number_text(value: int | float | Decimal) -> str:
    """A number as its shortest exact text (``212.1``, ``1e+20``, ``nan``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return repr(value)  # 3.0, not 3: the column's type stays visible
    return str(value)


def cell_text(value: object) -> str:
    """``value`` as one line of terminal text: control characters escaped, nothing dropped."""
    if value is None:
        return NULL_TEXT
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_number(value):
        return number_text(value)  # type: ignore[arg-type]
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, Spelled):
        return visible(value.text)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    return visible(json.dumps(json_value(value), ensure_ascii=False, separators=(", ", ": ")))


def json_value(value: Any) -> Any:
    """``value`` as a JSON-ready value: numbers stay numbers (non-finite floats become the
    strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, as protobuf's JSON mapping spells them;
    a decimal no double holds exactly becomes its exact text, as that mapping spells an int64),
    times become ISO 8601 text (:func:`iso_text`), maps become objects with text keys, bytes
    become hex text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Decimal):
        if not value.is_finite():
            return json_value(float(value))
        if value == value.to_integral_value():
            return int(value)
        near = float(value)
        return near if Decimal(repr(near)) == value else str(value)  # never a rounded number
    if isinstance(value, Spelled):
        return iso_text(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {_key_text(key): json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_value(item) for item in value]
    return str(value)


def _key_text(key: object) -> str:
    """A map's key as a JSON object's key: its JSON value, as JSON text unless it is text."""
    encoded = json_value(key)
    return encoded if isinstance(encoded, str) else json.dumps(encoded, ensure_ascii=False)


def iso_text(value: Spelled) -> str:
    """A time as ISO 8601 text, as exact as DuckDB's (``2026-01-31T12:00:00.123456789``,
    ``+00:00``): a ``T`` between date and time, a zone offset in hours and minutes. DuckDB's
    text where ISO 8601 has none: ``infinity``, a date before the common era, an interval."""
    if value.type == "interval":
        return value.text
    text = _DATE_TIME.sub(r"\1T", value.text, count=1)
    return _HOURS_OFFSET.sub(r"\1:00", text) if value.type.endswith("time zone") else text
