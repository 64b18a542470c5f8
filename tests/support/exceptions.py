"""Walking an exception's chain, for tests that read everything an error carries."""

from __future__ import annotations

from collections.abc import Iterator


def chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and every exception reachable from it (cause, context, groups)."""
    seen: set[int] = set()
    stack = [error]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack += [e for e in (current.__cause__, current.__context__) if e is not None]
        stack += list(getattr(current, "exceptions", ()))
