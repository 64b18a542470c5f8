"""The streamed-answer assembler: its one-pass read of the common chunk against the field-by-field
read, on any chunk."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from otel_llm._act._completion import ShapeError, StreamAssembler


class FieldByField(StreamAssembler):
    """The assembler with its one-pass read turned off."""

    __slots__ = ()

    def _plain(self, choice: Any) -> bool | None:
        return None


ODD = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 2), st.just(1.5), st.just([]), st.just({})
)
TEXT = st.one_of(st.text(max_size=3), ODD)
DELTAS = st.one_of(
    st.fixed_dictionaries({"content": TEXT}, optional={"role": TEXT}),  # the common chunk's
    st.dictionaries(
        st.sampled_from(["content", "role", "reasoning", "reasoning_content", "refusal",
                         "tool_calls", "other"]),
        TEXT,
        max_size=3,
    ),
)  # fmt: skip
CHOICE = st.fixed_dictionaries(
    {"delta": st.one_of(DELTAS, ODD)},
    optional={"index": st.one_of(st.integers(0, 2), ODD), "finish_reason": TEXT},
)
COMMON = st.fixed_dictionaries(
    {
        "delta": st.fixed_dictionaries(
            {"content": st.one_of(st.text(min_size=1, max_size=3), st.just(""), ODD)},
            optional={"role": TEXT},
        ),
    },
    optional={
        "index": st.sampled_from([0, 1, 2, True, False, None]),
        "finish_reason": st.one_of(st.none(), st.just(""), st.just("stop")),
    },
)
"""The common chunk's choice (text content, perhaps the role) and its near misses."""
CHUNKS = st.fixed_dictionaries(
    {
        "choices": st.one_of(
            st.lists(COMMON, min_size=1, max_size=1),
            st.lists(CHOICE, min_size=1, max_size=2),
            st.lists(st.one_of(CHOICE, ODD)),
            ODD,
        )
    },
    optional={"model": TEXT},
)


def outcome(assembler: StreamAssembler, chunks: list[dict[str, Any]]) -> object:
    """What the assembler made of the chunks: each chunk's verdict and the answer, or the
    shape error it stopped at."""
    verdicts = []
    try:
        for chunk in chunks:
            verdicts.append(assembler.feed(chunk))
    except ShapeError as exc:
        return verdicts, str(exc)
    return verdicts, assembler.complete, assembler.result()


def _chunk(index: Any, **choice: Any) -> dict[str, Any]:
    return {"choices": [{"index": index, **choice}]}


@settings(max_examples=500, deadline=None)
@given(st.lists(CHUNKS, max_size=4))
@example([_chunk(1, delta={"content": "a"}), _chunk(0, delta={}, finish_reason="stop")])
@example([_chunk(1, delta={"content": "a"})])
@example([_chunk(True, delta={"content": "a"})])
def test_the_one_pass_read_is_the_field_by_field_read(chunks: list[dict[str, Any]]) -> None:
    """Same verdicts (the chunk rule), same shape errors, same answer, on any chunks."""
    assert outcome(StreamAssembler(), chunks) == outcome(FieldByField(), chunks)
