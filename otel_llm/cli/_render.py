"""Where rows go: ``--format table|csv|json|markdown`` on standard output.

Rows go to standard output and nothing else does: titles only in the human formats (table,
Markdown), messages and errors on standard error, so ``otel-llm query --format json | jq``
always reads one document. On a terminal, tables are drawn with box-drawing rules and bold
headers (no colour with ``NO_COLOR``) and fit its width; in a pipe they are plain text, as wide
as ``COLUMNS`` when that is set and as wide as they need otherwise.
"""

from __future__ import annotations

import os
import sys
import textwrap
from dataclasses import dataclass
from enum import StrEnum
from typing import TextIO

from otel_llm._env import COLUMNS, NO_COLOR, env_any, env_count
from otel_llm._show._store._breakdown import Table
from otel_llm.cli._formats import csv_text, json_text, markdown_text
from otel_llm.cli._layout import MIN_WIDTH, PLAIN, Style, lay_out


class Format(StrEnum):
    """The output formats of every command that prints rows."""

    TABLE = "table"
    CSV = "csv"
    JSON = "json"
    MARKDOWN = "markdown"

    @property
    def one_table(self) -> bool:
        """Whether a run prints exactly one table (the machine formats: one document)."""
        return self in (Format.CSV, Format.JSON)


@dataclass(slots=True)
class Output:
    """Standard output, as one command run writes rows to it."""

    format: Format
    width: int | None
    """Cells a table may use (``None``: as many as it needs)."""
    style: Style
    stream: TextIO
    tables: int = 0
    """Tables printed so far."""

    @classmethod
    def stdout(cls, format: Format = Format.TABLE, width: int | None = None) -> Output:
        """Standard output: fit the terminal, or ``width`` (0: no limit)."""
        return cls.on(sys.stdout, format, width)

    @classmethod
    def stderr(cls) -> Output:
        """Standard error, in tables: where a command in a machine format puts the rows that
        are not its one table."""
        return cls.on(sys.stderr, Format.TABLE, None)

    @classmethod
    def on(cls, stream: TextIO, format: Format, width: int | None) -> Output:
        """``stream``: fit its terminal, or ``width`` (0: no limit)."""
        terminal = stream.isatty()
        if width is None:
            width = env_count(COLUMNS) or (_terminal_width(stream) if terminal else None)
        style = Style.terminal(colour=not env_any(NO_COLOR)) if terminal else PLAIN
        return cls(format, width or None, style, stream)

    def table(self, table: Table, title: str | None = None) -> None:
        """Print ``table`` in this output's format (a title only where the format has room)."""
        columns, rows = table.columns, table.rows
        if self.format is Format.CSV:
            self.stream.write(csv_text(columns, rows))
        elif self.format is Format.JSON:
            self.stream.write(json_text(columns, rows))
        elif self.format is Format.MARKDOWN:
            if title:
                self.stream.write(f"**{title}**\n\n")
            self.stream.write(markdown_text(columns, rows) if rows else "(no rows)\n")
            self.stream.write("\n")
        else:
            if title:
                lead = "\n" if self.tables else ""
                lines = self._wrapped(title)
                self.stream.write(lead + "\n".join(map(self.style.emphasis, lines)) + "\n")
            lines = lay_out(columns, rows, self.width, self.style) if rows else ["(no rows)"]
            self.stream.write("\n".join(lines) + "\n")
        self.tables += 1
        self.stream.flush()

    def _wrapped(self, title: str) -> list[str]:
        """``title`` in lines that fit the width the tables fit (the whole of it unlimited)."""
        if self.width is None:
            return [title]
        return textwrap.wrap(title, max(self.width, MIN_WIDTH), break_on_hyphens=False) or [title]


def _terminal_width(stream: TextIO) -> int | None:
    """The width of the terminal ``stream`` writes to (standard error's own, not stdout's)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns or None
    except (OSError, ValueError):
        return None
