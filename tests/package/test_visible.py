"""How stored text is shown (``otel_llm/_visible.py``): what is escaped, how, and that the rule
does not change with the interpreter's Unicode tables."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from otel_llm._visible import shown_as_is, visible

_ACTING: frozenset[str] = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})


def test_a_character_newer_than_the_interpreter_is_shown_as_it_is() -> None:
    """U+1FAE8 (an emoji of Unicode 15) is unassigned in Python 3.11's tables and assigned in
    3.12's: shown as it is under both, as every other emoji is."""
    shaking_face = "\U0001fae8"
    assert visible(f"model {shaking_face}") == f"model {shaking_face}"
    assert shown_as_is(shaking_face)


def test_an_escape_above_the_basic_plane_cannot_be_read_as_a_shorter_one() -> None:
    """U+E0001 (a format character) followed by a digit: eight hex digits, so the escape never
    reads as U+E000 followed by "11"."""
    assert visible("\U000e00011") == "\\U000e00011"
    assert visible("\u202e1") == "\\u202e1"
    assert visible("a\nb\tc\rd") == "a\\nb\\tc\\rd"


def test_noncharacters_and_private_use_are_escaped() -> None:
    """Noncharacters (U+FFFE, U+10FFFF, U+FDD0) and private use are never shown raw."""
    assert visible("\ufffe\U0010ffff\ufdd0\ue000") == "\\ufffe\\U0010ffff\\ufdd0\\ue000"
    assert not shown_as_is("\ufdd0")


@given(st.text())
def test_nothing_that_acts_on_what_is_around_it_survives(text: str) -> None:
    """No control, format, separator, surrogate or private-use character is left in what is
    shown; text with none of them is shown unchanged."""
    shown = visible(text)
    assert not any(unicodedata.category(char) in _ACTING for char in shown)
    assert shown_as_is(shown)
    if shown_as_is(text):
        assert shown == text
