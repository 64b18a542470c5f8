"""Stored text as otel-llm shows it — on a terminal, in the report's sentences and charts: every
control or format character (a newline, an escape sequence's ESC, a bidirectional override)
and every line or paragraph separator written as an escape. A value from a store (a model, a
source, a service name: whatever an application or a request sent) can then neither break a
line nor restyle or reorder what is shown around it, nor break the chart expressions it lands
in (a raw U+2028 ends a JavaScript string literal).

The rule does not depend on the interpreter's Unicode tables: a character they do not know yet
(an emoji newer than them) is shown as it is, as an interpreter that knows it would show it;
only the categories that act on what is shown around them are escaped, and noncharacters."""

from __future__ import annotations

import unicodedata
from typing import Final

_ESCAPES: Final = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_ESCAPED: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
"""Controls, format characters, surrogates, private use, line and paragraph separators."""


def _escaped(char: str) -> bool:
    category = unicodedata.category(char)
    if category in _ESCAPED:
        return True
    if category != "Cn":
        return False
    point = ord(char)  # unassigned as far as this interpreter knows: only noncharacters
    return 0xFDD0 <= point <= 0xFDEF or point & 0xFFFE == 0xFFFE


def shown_as_is(text: str) -> bool:
    """Whether :func:`visible` leaves ``text`` as it is (nothing in it is escaped)."""
    return text.isprintable() or not any(_escaped(char) for char in text)


def visible(text: str) -> str:
    """``text`` with every control or format character and every line separator written as an
    escape (``\\n``, ``\\u202e``, ``\\U000e0001``: eight digits above U+FFFF, so an escape is
    never read as a shorter one followed by a digit)."""
    if text.isprintable():
        return text
    out: list[str] = []
    for char in text:
        if not _escaped(char):
            out.append(char)
        elif (known := _ESCAPES.get(char)) is not None:
            out.append(known)
        else:
            point = ord(char)
            out.append(f"\\u{point:04x}" if point <= 0xFFFF else f"\\U{point:08x}")
    return "".join(out)
