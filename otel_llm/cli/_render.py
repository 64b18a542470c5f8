"""Rendering query results in the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable

from otel_llm._show._breakdown import Table


def render(console: Console, table: Table, title: str | None = None) -> None:
    """Print ``table`` as a rich table (``-`` for NULL)."""
    if not table.rows:
        console.print(f"[dim]{title + ': ' if title else ''}no rows[/dim]")
        return
    out = RichTable(title=title, title_justify="left", header_style="bold")
    for index, column in enumerate(table.columns):
        out.add_column(column, overflow="fold", no_wrap=index == 0)
    for row in table.rows:
        out.add_row(*("-" if value is None else str(value) for value in row))
    console.print(out)
