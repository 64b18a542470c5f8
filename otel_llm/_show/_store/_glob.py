"""What DuckDB's glob makes of a path: readers find a store's segments through a glob, so a
store's path must hold none of the characters it reads as a pattern. Light enough for
``init()`` to refuse such a path before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Final

GLOB_CHARACTERS: Final = frozenset("*?[]{}\\")
"""Characters DuckDB's glob would read as a pattern (the backslash escapes the next one): a
store's path has none of them."""


def glob_problem(path: Path) -> str | None:
    """Why readers could not read a store at ``path`` through its glob (None: they can)."""
    pattern = sorted(GLOB_CHARACTERS.intersection(str(path.absolute())))
    if not pattern:
        return None
    return (
        f"has {' '.join(pattern)} in its path, which DuckDB reads as a file pattern: "
        "choose a path without them"
    )
