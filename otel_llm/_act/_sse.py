"""Server-sent events read from the body's bytes: the client's one SSE decoder.

The event-stream format of the HTML standard, read the way the providers' SDKs and the HTTP
library's own reader do: lines end with CR LF, LF or a lone CR (a CR at the very end of what has
arrived waits for the next bytes, since it may be half of a CR LF); a leading byte-order mark is
dropped; a line starting with ``:`` is a comment (a keepalive); ``event`` names the next event,
``data`` lines are joined with LF; ``id`` and ``retry`` mark an event as pending but are not
kept (the client never reconnects); a blank line dispatches the pending event. Undecodable bytes
become U+FFFD. An event left unfinished when the body ends cleanly is dropped, as the standard
says; a lone CR at that end ends its line (the HTTP library's reader takes it for a blank line
too, and dispatches the unfinished event: a quirk not kept).

The decoder works on bytes and decodes each event's data once, so a chunk costs a split, a few
byte comparisons and one decode: the same events as ``httpx2.EventSource`` at a fraction of its
cost (it decodes the text incrementally, then re-encodes each line to count its size, and builds a
frozen dataclass per event). A line that arrives in many pieces is kept as its pieces until it
ends, so a line sent a few bytes at a time costs time linear in its length. An event larger than
``max_event_bytes`` (its bytes as received, counting what is still unterminated; the HTTP
library counts the UTF-8 of the decoded text, where an undecodable byte counts 3) raises
:class:`EventTooLarge` once the events before it are out: a hostile stream cannot grow memory
without bound.
"""

from __future__ import annotations

from typing import Final

BOM: Final = b"\xef\xbb\xbf"
MESSAGE: Final = "message"
"""The type of an event that names none."""
MAX_EVENT_BYTES: Final = 1024 * 1024
"""The largest event read (the bytes of its field lines, as the HTTP library's reader bounds)."""

Event = tuple[str, str]
"""An event's type and its data."""


class EventTooLarge(ValueError):
    """An event grew past the decoder's bound before its end."""


class SSEDecoder:
    """Bytes in (:meth:`feed`, then :meth:`close` at a clean end), events out."""

    __slots__ = (
        "_cr",
        "_data",
        "_event",
        "_limit",
        "_overflow",
        "_parts",
        "_pending",
        "_size",
        "_started",
        "_waiting",
    )

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._limit = max_event_bytes
        self._parts: list[bytes] = []
        """The last line's bytes so far, unterminated (kept apart: joined once it ends)."""
        self._waiting = 0
        """Their length."""
        self._cr = False
        """The bytes so far ended with a CR (held back: it may be half of a CR LF)."""
        self._started = False
        """The byte-order mark question is settled."""
        self._data: list[bytes] = []
        self._event = b""
        self._pending = False
        self._size = 0
        self._overflow: EventTooLarge | None = None
        """The bound was crossed after events that were still given out: raised next."""

    def feed(self, chunk: bytes) -> list[Event]:
        """The events ``chunk`` completes, in order; :class:`EventTooLarge` once an event
        outgrows the bound (after the events completed before it)."""
        if self._parts or self._cr or self._overflow is not None or not self._started:
            return self._feed_carefully(chunk)
        if b"\r" in chunk:
            return self._feed_carefully(chunk)
        return self._split(chunk)  # the common piece: whole lines, LF-ended

    def _feed_carefully(self, chunk: bytes) -> list[Event]:
        """:meth:`feed` with a line pending, a CR held back, the stream's first bytes or the
        bound already crossed."""
        if self._overflow is not None:
            raise self._overflow
        if not self._started:
            chunk = b"".join((*self._parts, chunk))
            self._parts, self._waiting = [], 0
            if len(chunk) < len(BOM) and BOM.startswith(chunk):
                if chunk:
                    self._parts, self._waiting = [chunk], len(chunk)  # too short to tell yet
                return []
            self._started = True
            if chunk.startswith(BOM):
                chunk = chunk[len(BOM) :]
        if self._cr:  # the CR held back ends the last line (before the new bytes)
            chunk = b"\r" + chunk
            self._cr = False
        elif b"\n" not in chunk and b"\r" not in chunk:  # the line goes on: no copy, no scan
            if chunk:
                self._parts.append(chunk)
                self._waiting += len(chunk)
                self._note_size()
                if self._overflow is not None:
                    raise self._overflow
            return []
        if self._parts:
            chunk = b"".join((*self._parts, chunk))
            self._parts, self._waiting = [], 0
        if b"\r" in chunk:
            if chunk[-1] == 13:  # may be half of a CR LF: wait for the next byte
                chunk = chunk[:-1]
                self._cr = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return self._split(chunk)

    def _split(self, chunk: bytes) -> list[Event]:
        """The events of ``chunk``'s LF-ended lines; what follows the last LF waits."""
        lines = chunk.split(b"\n")
        tail = lines.pop()
        events = self._lines(lines) if lines else []
        if tail:
            self._parts, self._waiting = [tail], len(tail)
            self._note_size()
        overflow = self._crossed()
        if overflow is not None and not events:
            raise overflow
        return events

    def close(self) -> list[Event]:
        """The body ended cleanly: a line ended by a last lone CR is taken as ended (and may
        dispatch); an unterminated event is dropped."""
        if self._overflow is not None:
            raise self._overflow
        if not self._cr:
            return []
        self._cr = False
        line = b"".join(self._parts)
        self._parts, self._waiting = [], 0
        events = self._lines([line])
        overflow = self._crossed()
        if overflow is not None and not events:
            raise overflow
        return events

    def _crossed(self) -> EventTooLarge | None:
        """The overflow :meth:`_lines` noted, if any."""
        return self._overflow

    def _note_size(self) -> None:
        """Note an overflow when the pending event and the unterminated line outgrow the
        bound (raised once the events before it are out)."""
        if self._overflow is None and self._size + self._waiting > self._limit:
            self._overflow = EventTooLarge(f"an event exceeded the {self._limit} byte limit")

    def _lines(self, lines: list[bytes]) -> list[Event]:
        """The events ``lines`` complete; stops at the line that crosses the bound (noted in
        ``_overflow``, raised once the events before it are out)."""
        events: list[Event] = []
        limit = self._limit
        for line in lines:
            if not line:  # a blank line: dispatch what is pending
                self._size = 0
                if not self._pending:
                    continue
                data = self._data
                text = (data[0] if len(data) == 1 else b"\n".join(data)).decode("utf-8", "replace")
                kind = self._event.decode("utf-8", "replace") if self._event else MESSAGE
                events.append((kind, text))
                self._data = []
                self._event = b""
                self._pending = False
                continue
            if line[0] == 58:  # ':' a comment
                continue
            self._size += len(line)
            if self._size > limit:
                self._overflow = EventTooLarge(f"an event exceeded the {limit} byte limit")
                break
            name, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                self._data.append(value)
                self._pending = True
            elif name == b"event":
                self._event = value
                self._pending = True
            elif name == b"id":
                if b"\0" not in value:
                    self._pending = True
            elif name == b"retry":
                try:  # as text: a number in any script's digits counts, as it does there
                    int(value.decode("utf-8", "replace"))
                except ValueError:
                    continue
                self._pending = True
        return events
