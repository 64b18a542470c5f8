"""Tables that fit a terminal: the layout rules of ``--format table``.

A result is laid out the first way that fits the width, in this order:

1. one table, every value whole;
2. the columns in up to :data:`MAX_BLOCKS` blocks printed one under the other, each repeating
   the first (key) column — R's way with wide data frames — every value whole;
3. one table with long text values cut short (``…``), no text column narrower than
   :data:`MIN_TEXT_CELLS`, and the key column never so narrow that two rows' keys read alike;
4. blocks again, text cut short;
5. one record per row, a line per column (psql's ``\\x``, DuckDB's ``.mode line``), long values
   wrapped over up to :data:`MAX_VALUE_LINES` lines.

Numbers are never cut and never split across lines; anything cut short is counted in a note
under the table that says how to see it whole. Widths are terminal cells (a CJK character is
two), measured before any styling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.cells import cell_len, get_character_cell_size

from otel_llm.cli._cells import cell_text, is_number, numeric_columns

GAP = 2
"""Spaces between two columns."""
MIN_TEXT_CELLS = 10
"""A text column cut short keeps at least this many cells (an id's first 9 characters)."""
MAX_BLOCKS = 3
"""More column blocks than this read worse than one record per row."""
MAX_VALUE_LINES = 4
"""Lines a value may wrap over in the record view before it is cut short."""
MIN_WIDTH = 30
"""Narrower widths are laid out as this wide."""
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class Style:
    """How the table is drawn: box-drawing rules and bold headers on a terminal, plain ASCII
    in a pipe."""

    rule: str = "-"
    bar: str = "|"
    emphasis: Callable[[str], str] = str

    @classmethod
    def terminal(cls, *, colour: bool) -> Style:
        """Box drawing; bold headers unless colour is off (``NO_COLOR``)."""
        return cls("─", "│", _bold if colour else str)


def _bold(text: str) -> str:
    return f"\x1b[1m{text}\x1b[0m"


PLAIN = Style()


@dataclass(slots=True)
class _Grid:
    headers: list[str]
    cells: list[list[str]]
    numbers: list[list[bool]]
    """Which cells hold a number (never cut, never wrapped), in any column."""
    numeric: list[bool]
    """Which columns hold numbers only (right-aligned)."""
    natural: list[int]
    cut: int = 0
    """Values (and headers) cut short so far."""

    @classmethod
    def of(cls, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> _Grid:
        headers = [cell_text(name) for name in columns]
        cells = [[cell_text(value) for value in row] for row in rows]
        numbers = [[is_number(value) for value in row] for row in rows]
        natural = [
            max([cell_len(headers[j]), *(cell_len(row[j]) for row in cells)])
            for j in range(len(headers))
        ]
        return cls(headers, cells, numbers, numeric_columns(rows, len(headers)), natural)

    def floor(self, j: int) -> int:
        """The narrowest column ``j`` may get: its numbers whole, text cut to a readable width
        (a numeric column keeps its header's width up to that too); the key (first) column
        no narrower than keeps apart every two rows its whole values tell apart."""
        widest_number = max(
            (
                cell_len(row[j])
                for row, kinds in zip(self.cells, self.numbers, strict=True)
                if kinds[j]
            ),
            default=0,
        )
        readable = max(widest_number, min(self.natural[j], MIN_TEXT_CELLS))
        return self._distinct_from(readable) if j == 0 else readable

    def _distinct_from(self, width: int) -> int:
        """The narrowest width from ``width`` at which the key column's values, cut short,
        are as many different values as whole (a wider cut keeps a longer prefix, so the
        first such width is found by bisection)."""
        keys = [row[0] for row in self.cells]
        different = len(set(keys))
        low, high = width, max(width, self.natural[0])
        while low < high:
            middle = (low + high) // 2
            if len({_cut(key, middle) for key in keys}) == different:
                high = middle
            else:
                low = middle + 1
        return low


def lay_out(
    columns: Sequence[str],
    rows: Sequence[Sequence[object]],
    width: int | None,
    style: Style = PLAIN,
) -> list[str]:
    """The lines that show ``rows`` within ``width`` cells (``None``: any width)."""
    grid = _Grid.of(columns, rows)
    everything = list(range(len(grid.headers)))
    if width is None or _span(grid.natural) <= width:
        return _table(grid, everything, grid.natural, style)
    width = max(width, MIN_WIDTH)
    blocks = _blocks(grid, width, whole=True)
    if blocks is None:
        widths = _shrink(grid, everything, width)
        if widths is not None:
            return _table(grid, everything, widths, style) + _notes(grid, width)
        blocks = _blocks(grid, width, whole=False)
    if blocks is None:
        return _records(grid, width, style) + _notes(grid, width)
    lines: list[str] = []
    for number, (block, block_widths) in enumerate(blocks, 1):
        if number > 1:
            lines.append("")
        first, last = block[1 if number > 1 else 0] + 1, block[-1] + 1
        shown = f"column {last}" if first == last else f"columns {first}–{last}"
        lines.append(f"({shown} of {len(grid.headers)})")
        lines.extend(_table(grid, block, block_widths, style))
    return lines + _notes(grid, width)


def _span(widths: Sequence[int]) -> int:
    return sum(widths) + GAP * (len(widths) - 1)


def _shrink(
    grid: _Grid, chosen: list[int], width: int, floors: list[int] | None = None
) -> list[int] | None:
    """Widths for ``chosen`` within ``width``, cutting text columns no narrower than their
    ``floors`` (by default :meth:`_Grid.floor`); ``None`` when even the floors do not fit.
    Spare cells go to the cut columns in equal shares."""
    widths = floors or [grid.floor(j) for j in chosen]
    spare = width - _span(widths)
    if spare < 0:
        return None
    while spare > 0:
        wanting = [i for i, j in enumerate(chosen) if widths[i] < grid.natural[j]]
        if not wanting:
            break
        share = max(1, spare // len(wanting))
        for i in wanting:
            extra = min(share, grid.natural[chosen[i]] - widths[i], spare)
            widths[i] += extra
            spare -= extra
            if spare == 0:
                break
    return widths


def _blocks(grid: _Grid, width: int, *, whole: bool) -> list[tuple[list[int], list[int]]] | None:
    """The columns in blocks that each repeat the key (first) column and fit ``width``: every
    value ``whole``, or text cut to its floor; ``None`` when that takes more than
    :data:`MAX_BLOCKS` blocks or a column fits in none. The key column stays whole when it
    takes at most a third of the width."""
    count = len(grid.headers)
    key = grid.natural[0] if grid.natural[0] <= width // 3 else grid.floor(0)
    if count < 3 or key > width // 3:
        return None
    floor = [key, *(grid.natural[j] if whole else grid.floor(j) for j in range(1, count))]
    blocks: list[list[int]] = []
    current = [0]
    for j in range(1, count):
        if _span([floor[i] for i in [*current, j]]) <= width:
            current.append(j)
        elif len(current) > 1 and _span([key, floor[j]]) <= width:
            blocks.append(current)
            current = [0, j]
        else:
            return None
    blocks.append(current)
    if len(blocks) > MAX_BLOCKS:
        return None
    laid: list[tuple[list[int], list[int]]] = []
    for block in blocks:
        widths = _shrink(grid, block, width, [floor[j] for j in block])
        assert widths is not None  # each block was packed on these floors
        laid.append((block, widths))
    return laid


def _table(grid: _Grid, chosen: list[int], widths: list[int], style: Style) -> list[str]:
    gap = " " * GAP
    header = gap.join(
        _pad(_cut_counted(grid, grid.headers[j], w), w, grid.numeric[j])
        for j, w in zip(chosen, widths, strict=True)
    )
    lines = [style.emphasis(header.rstrip())]
    lines.append(gap.join(style.rule * w for w in widths))
    for row in grid.cells:
        line = gap.join(
            _pad(_cut_counted(grid, row[j], w), w, grid.numeric[j])
            for j, w in zip(chosen, widths, strict=True)
        )
        lines.append(line.rstrip())
    return lines


def _records(grid: _Grid, width: int, style: Style) -> list[str]:
    """One record per row: ``name │ value`` lines, long values wrapped. A name longer than
    half the width gets a line of its own with its value indented below, and so does a number
    too wide to stand beside its name: names and numbers stay whole."""
    name_width = min(max(cell_len(h) for h in grid.headers), width // 2)
    lines: list[str] = []
    for number, row in enumerate(grid.cells, 1):
        label = f"-[ RECORD {number} ]"
        lines.append(label + style.rule * max(0, min(width, 40) - cell_len(label)))
        for j, text in enumerate(row):
            header, is_number = grid.headers[j], grid.numbers[number - 1][j]
            beside = cell_len(header) <= name_width and not (
                is_number and cell_len(text) > width - name_width - 3
            )
            if beside:
                first = f"{_pad(header, name_width, False)} {style.bar} "
                rest = f"{' ' * name_width} {style.bar} "
            else:
                lines.append(_cut_counted(grid, header, width))
                first = rest = "  "
            room = width - cell_len(first)
            parts = [text] if is_number else _wrap(text, room)
            if len(parts) > MAX_VALUE_LINES:
                parts = parts[:MAX_VALUE_LINES]
                last = parts[-1]
                parts[-1] = last[: _chars_within(last, room - 1)] + ELLIPSIS
                grid.cut += 1
            for index, part in enumerate(parts):
                lines.append(((first if index == 0 else rest) + part).rstrip())
    return lines


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken after a space or a comma where one
    is near, and never inside a run of digits that fits on a line. Every line but the last is
    full to its break; the last may be longer only if the text has no break at all (a number
    wider than the line)."""
    lines: list[str] = []
    rest = text
    while cell_len(rest) > width:
        fits = _chars_within(rest, width)
        at = _break(rest, fits)
        lines.append(rest[:at].rstrip(" "))
        rest = rest[at:].lstrip(" ")
        if len(lines) > MAX_VALUE_LINES:
            lines.append(rest)  # enough to know it is cut short
            return lines
    lines.append(rest)
    return lines


def _break(text: str, fits: int) -> int:
    """Where to end a line of ``text`` that can hold ``fits`` characters."""
    for at in range(fits, fits // 2, -1):
        if text[at - 1] in " ,;" or text[at] == " ":
            return at
    if _in_number(text[fits - 1]) and _in_number(text[fits]):
        start = fits - 1
        while start > 0 and _in_number(text[start - 1]):
            start -= 1
        if start > 0:
            return start
    return fits


def _in_number(char: str) -> bool:
    """Whether ``char`` may be part of a number a line must not split (``30.4``)."""
    return char.isdigit() or char == "."


def _chars_within(text: str, width: int) -> int:
    used = 0
    for index, char in enumerate(text):
        used += get_character_cell_size(char)
        if used > width:
            return max(1, index)
    return len(text)


def _cut_counted(grid: _Grid, text: str, width: int) -> str:
    if cell_len(text) <= width:
        return text
    grid.cut += 1
    return _cut(text, width)


def _cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells, ending in ``…``."""
    if cell_len(text) <= width:
        return text
    return text[: _chars_within(text, width - 1)] + ELLIPSIS


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * (width - cell_len(text))
    return fill + text if right else text + fill


def _notes(grid: _Grid, width: int) -> list[str]:
    if not grid.cut:
        return []
    values = "value" if grid.cut == 1 else "values"
    note = f"({grid.cut} {values} cut short to fit; --format csv or json prints them whole)"
    return _wrap(note, width)
