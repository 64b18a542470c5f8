"""The machine formats of rows: CSV (RFC 4180), JSON (one array of objects) and Markdown."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from otel_llm.cli._cells import cell_text, is_number, json_value, numeric_columns


def csv_text(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A header row, then one record per row; CRLF line ends; NULL is an empty field; nested
    values (arrays, maps) are their JSON text."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(columns)
    writer.writerows([_csv_field(value) for value in row] for row in rows)
    return out.getvalue()


def _csv_field(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) or is_number(value):
        return value
    encoded = json_value(value)
    if isinstance(encoded, str):
        return encoded
    return json.dumps(encoded, ensure_ascii=False, separators=(",", ":"))


def json_text(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """One JSON array with an object per row, one object per line. A column name that repeats
    (``SELECT a.x, b.x``) gets a ``_2``, ``_3``… suffix so no value is lost."""
    keys = _unique(columns)
    if not rows:
        return "[]\n"
    lines = [
        json.dumps(
            {key: json_value(value) for key, value in zip(keys, row, strict=True)},
            ensure_ascii=False,
            allow_nan=False,
        )
        for row in rows
    ]
    return "[\n  " + ",\n  ".join(lines) + "\n]\n"


def _unique(columns: Sequence[str]) -> list[str]:
    keys: list[str] = []
    used: set[str] = set()
    for name in columns:
        key, count = name, 1
        while key in used:
            count += 1
            key = f"{name}_{count}"
        used.add(key)
        keys.append(key)
    return keys


def markdown_text(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured pipe table; numeric columns right-aligned; NULL is an empty cell."""
    aligns = ("---:" if right else "---" for right in numeric_columns(rows, len(columns)))
    lines = [_markdown_row([cell_text(name) for name in columns]), "|" + "|".join(aligns) + "|"]
    lines.extend(
        _markdown_row(["" if value is None else cell_text(value) for value in row]) for row in rows
    )
    return "\n".join(lines) + "\n"


def _markdown_row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"
