"""The client's SSE decoder against the HTTP library's reader, on hostile bytes."""

from __future__ import annotations

import codecs
import itertools
import time

import pytest
from httpx2._sse import _SSEParser
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_llm._act._sse import BOM, MAX_EVENT_BYTES, EventTooLarge, SSEDecoder

SAMPLE_LINES = [
    b'data: {"a": 1}', b"data:x", b"data", b"data: ", b"event: error", b"event:", b": keepalive",
    b":", b"id: 7", b"id: a\0b", b"retry: 10", b"retry: soon", b"unknown: field",
    b"data: caf\xc3\xa9", b"data: \xff\xfe", b"data: \xe2\x82", "retry: \u0661\u0660".encode(),
]  # fmt: skip
"""Field lines of every kind: data, event, comments, id (with and without NUL), retry (a number
or not, in any script's digits), an unknown field, good and broken UTF-8."""
FIELD_LINES = st.one_of(
    st.sampled_from(SAMPLE_LINES),
    st.binary(max_size=12).map(lambda raw: raw.replace(b"\r", b"").replace(b"\n", b"")),
)
NEWLINES = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Event streams of field lines and blank lines, each line ended its own way."""
    out = BOM if draw(st.booleans()) else b""
    for line in draw(st.lists(st.one_of(FIELD_LINES, st.just(b"")), max_size=30)):
        out += line + draw(NEWLINES)
    if draw(st.booleans()):
        out += draw(FIELD_LINES)  # an unterminated last line
    return out


def pieces(body: bytes, cuts: list[int]) -> list[bytes]:
    bounds = sorted({0, len(body), *(cut % (len(body) + 1) for cut in cuts)})
    return [body[a:b] for a, b in itertools.pairwise(bounds)]


def decoded(parts: list[bytes]) -> list[tuple[str, str]]:
    decoder = SSEDecoder()
    events = [event for part in parts for event in decoder.feed(part)]
    return events + decoder.close()


def library(parts: list[bytes]) -> list[tuple[str, str]]:
    """What the client read before: text decoded incrementally (UTF-8, BOM dropped, bad bytes
    replaced), then the HTTP library's SSE parser."""
    text = codecs.getincrementaldecoder("utf-8-sig")("replace")
    parser = _SSEParser()
    events = [
        (event.event, event.data) for part in parts for event in parser.decode(text.decode(part))
    ]
    events += [(event.event, event.data) for event in parser.decode(text.decode(b"", final=True))]
    return events + [(event.event, event.data) for event in parser.flush()]


@settings(max_examples=400, deadline=None)
@given(bodies(), st.lists(st.integers(0, 10_000), max_size=8))
def test_events_are_the_http_librarys_in_any_pieces(body: bytes, cuts: list[int]) -> None:
    """However the bytes arrive, the events are the ones the HTTP library's reader makes of the
    same body (types and data exactly, undecodable bytes as U+FFFD). One quirk of that reader is
    not kept: a body ending cleanly in a lone CR is read there as a line end *and* a blank line
    (dispatching an unfinished event); here that CR ends its line, as a CR LF would."""
    same = body + b"\n" if body.endswith(b"\r") else body
    assert decoded(pieces(body, cuts)) == library([same])


@given(st.lists(st.integers(0, 200), max_size=8))
def test_a_byte_order_mark_split_across_pieces_is_dropped(cuts: list[int]) -> None:
    body = BOM + b"data: one\n\ndata: two\r\n\r\n"
    assert decoded(pieces(body, cuts)) == [("message", "one"), ("message", "two")]


def test_an_unterminated_event_at_a_clean_end_is_dropped() -> None:
    assert decoded([b"data: whole\n\ndata: half\n"]) == [("message", "whole")]


def test_a_cr_at_the_end_of_a_piece_waits_for_the_next_byte() -> None:
    """A CR then LF in the next piece is one line end, not a line end and a blank line."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\ndata: b\r\n\r\n") == [("message", "a\nb")]


def test_an_event_larger_than_the_bound_fails_before_it_ends() -> None:
    """The bound holds for an event of many lines and for one line that never ends."""
    decoder = SSEDecoder(max_event_bytes=100)
    for _ in range(6):  # 16 bytes a line
        assert decoder.feed(b"data: 0123456789\n") == []
    with pytest.raises(EventTooLarge, match="100 byte limit"):
        decoder.feed(b"data: 0123456789\n")
    endless = SSEDecoder(max_event_bytes=100)
    for _ in range(10):
        assert endless.feed(b"0123456789") == []
    with pytest.raises(EventTooLarge):
        endless.feed(b"0")
    small = SSEDecoder(max_event_bytes=100)
    for _ in range(100):  # many small events: each within the bound
        assert small.feed(b"data: 0123456789\n\n") == [("message", "0123456789")]


def test_events_before_the_bound_are_given_out_first() -> None:
    """The events a piece completes before the one that outgrows the bound come out; the
    error follows at the next read."""
    decoder = SSEDecoder(max_event_bytes=150)
    assert decoder.feed(b"data: a\n\ndata: " + b"x" * 200) == [("message", "a")]
    with pytest.raises(EventTooLarge):
        decoder.feed(b"more")
    ended = SSEDecoder(max_event_bytes=150)
    assert ended.feed(b"data: a\n\ndata: " + b"x" * 200 + b"\n") == [("message", "a")]
    with pytest.raises(EventTooLarge):
        ended.close()


def test_a_line_in_tiny_pieces_costs_linear_time() -> None:
    """A 1 MB line sent 10 bytes at a time (HTTP chunks a hostile server writes at once) is
    read in time linear in its length: the unterminated tail is not copied again per piece.
    Copying it per piece took 22 s of CPU here; linear takes well under 0.1 s, so the bound
    leaves a margin of 20 times."""
    decoder = SSEDecoder()
    began = time.process_time()
    decoder.feed(b"data: ")
    for _ in range((MAX_EVENT_BYTES - 6) // 10):  # up to the bound
        assert decoder.feed(b"0123456789") == []
    with pytest.raises(EventTooLarge):
        decoder.feed(b"0123456789")
    assert time.process_time() - began < 2.0
