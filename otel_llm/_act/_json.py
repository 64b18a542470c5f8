"""JSON at the boundary: reading a provider's (every malformed document is a ``ValueError``)
and checking a caller's request body (:func:`require_json`).

``json.loads`` raises ``RecursionError`` (not ``ValueError``) for a document nested deeper than
the interpreter's recursion limit — ``[[[[…`` in a 50 KB chunk is enough — so the transport's
parsers go through :func:`loads`, which folds that into the one error they handle.
"""

from __future__ import annotations

import json
from typing import Any

from otel_llm._errors import InvalidRequest


class TooDeep(ValueError):
    """A JSON document nested too deep to parse."""


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``; a ``ValueError`` (``TooDeep``) for a too deeply nested document."""
    try:
        return json.loads(text)
    except RecursionError:
        problem = TooDeep("JSON nested too deep to parse")
    raise problem  # outside the except: no RecursionError traceback chained


def require_json(body: Any) -> None:
    """Refuse a request body that cannot be sent as JSON — an object JSON has no form for, a
    circular list, NaN or an infinity (JSON has no such numbers), text with a lone surrogate
    (UTF-8 has no form for it) — with an :class:`InvalidRequest` naming why (the body itself
    never appears: it is the caller's)."""
    try:
        # As the transport sends it: JSON text, then its UTF-8 bytes.
        json.dumps(body, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        problem = InvalidRequest(f"the request body is not JSON: {type(exc).__name__}: {exc}")
    else:
        return
    raise problem  # unchained, like every error made from a lower layer's
