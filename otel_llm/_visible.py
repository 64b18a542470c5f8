"""Stored text as otel-llm shows it — on a terminal, in the report's sentences and charts: every
control or format character (a newline, an escape sequence's ESC, a bidirectional override)
and every line or paragraph separator written as an escape. A value from a store (a model, a
source, a service name: whatever an application or a request sent) can then neither break a
line nor restyle or reorder what is shown around it, nor break the chart expressions it lands
in (a raw U+2028 ends a JavaScript string literal)."""

from __future__ import annotations

import unicodedata
from typing import Final

_ESCAPES: Final = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def visible(text: str) -> str:
    """``text`` with every control or format character and every line separator written as an
    escape (``\\n``, ``\\u202e``)."""
    if text.isprintable():
        return text
    out: list[str] = []
    for char in text:
        category = unicodedata.category(char)
        if category[0] != "C" and category not in ("Zl", "Zp"):
            out.append(char)
        else:
            out.append(_ESCAPES.get(char) or f"\\u{ord(char):04x}")
    return "".join(out)
