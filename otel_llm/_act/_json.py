"""Reading JSON from a provider: every malformed document is a ``ValueError``.

``json.loads`` raises ``RecursionError`` (not ``ValueError``) for a document nested deeper than
the interpreter's recursion limit — ``[[[[…`` in a 50 KB chunk is enough — so the transport's
parsers go through :func:`loads`, which folds that into the one error they handle.
"""

from __future__ import annotations

import json
from typing import Any


class TooDeep(ValueError):
    """A JSON document nested too deep to parse."""


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``; a ``ValueError`` (``TooDeep``) for a too deeply nested document."""
    try:
        return json.loads(text)
    except RecursionError:
        problem = TooDeep("JSON nested too deep to parse")
    raise problem  # outside the except: no RecursionError traceback chained
