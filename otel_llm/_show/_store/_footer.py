"""What a segment's Parquet footer says its Arrow schema is, read without a Parquet library.

Arrow's Parquet writers (pyarrow's, and arrow-go's in the Collector's exporter) store the Arrow
schema they wrote under the footer's key ``ARROW:schema``. Segments that store the same bytes
there have the same columns of the same types, which a reader opening the store learns from the
footer alone -- in microseconds, without importing pyarrow -- before it tells DuckDB how to read
them (:mod:`._access`).

The footer is a Thrift ``FileMetaData`` in the compact protocol; walking all of it in Python
would take longer than the reading saves (milliseconds for the row groups' statistics), so the
key-value entry is found by its bytes and checked by parsing from there to the footer's end
(:func:`_only_entry_value`). Anything unexpected (no such entry or several, a footer cut short
or malformed, an encrypted footer) is "unknown": the reader then unions those segments by name,
as it always can.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

_MAGIC: Final = b"PAR1"
"""The last 4 bytes of a Parquet file with a plain footer, after the footer's 4-byte length."""
ARROW_SCHEMA_KEY: Final = b"ARROW:schema"
_KEY_VALUES_FIELD: Final = 5
"""``FileMetaData.key_value_metadata``: a list of ``KeyValue`` structs (key 1, value 2)."""
_ONLY_ENTRY: Final = b"\x19\x1c\x18\x0c" + ARROW_SCHEMA_KEY
"""Field 5 after field 4 (delta 1, a list), of one struct (size 1, struct), whose field 1
(delta 1, binary) is 12 bytes long: the key."""
_DEPTH: Final = 32
"""Structs nest no deeper than this in a Parquet footer (a malformed one may claim to)."""

# compact protocol types
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = 1, 2, 3, 4, 5, 6, 7, 8
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12


class _Malformed(Exception):
    """The footer does not parse as the compact protocol says it should."""


class _Reader:
    """A cursor over the footer's bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise _Malformed
        self.at += 1
        return self.data[self.at - 1]

    def varint(self) -> int:
        value = 0
        for shift in range(0, 70, 7):
            byte = self.byte()
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise _Malformed

    def binary(self) -> bytes:
        size = self.varint()
        if size > len(self.data) - self.at:
            raise _Malformed
        self.at += size
        return self.data[self.at - size : self.at]

    def field(self, last: int) -> tuple[int, int] | None:
        """The next field's (id, type) after field ``last``; ``None`` at the struct's end."""
        header = self.byte()
        if header == 0:
            return None
        delta, kind = header >> 4, header & 0x0F
        if delta:
            return last + delta, kind
        zigzag = self.varint()
        return (zigzag >> 1) ^ -(zigzag & 1), kind

    def collection(self) -> tuple[int, int]:
        """A list or set header: (size, element type)."""
        header = self.byte()
        size = header >> 4
        return (self.varint() if size == 15 else size), header & 0x0F

    def skip(self, kind: int, depth: int = 0) -> None:
        if depth > _DEPTH:
            raise _Malformed
        if kind in (_TRUE, _FALSE):
            return  # a struct field's bool is in its header (one byte inside a list: see below)
        if kind == _BYTE:
            self.byte()
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _DOUBLE:
            self.at += 8
            if self.at > len(self.data):
                raise _Malformed
        elif kind == _BINARY:
            self.binary()
        elif kind in (_LIST, _SET):
            size, element = self.collection()
            for _ in range(size):
                if element in (_TRUE, _FALSE):
                    self.byte()
                else:
                    self.skip(element, depth + 1)
        elif kind == _MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.skip(types >> 4, depth + 1)
                    self.skip(types & 0x0F, depth + 1)
        elif kind == _STRUCT:
            last = 0
            while (field := self.field(last)) is not None:
                last = field[0]
                self.skip(field[1], depth + 1)
        else:
            raise _Malformed


def _only_entry_value(footer: bytes) -> bytes | None:
    """The value of the footer's one key-value entry when its key is ``ARROW:schema``.

    The entry is found by its bytes -- field 5 after field 4, a list of one struct, whose
    field 1 is the 12-byte key -- and taken only if the rest of the footer parses from there as
    the compact protocol says it must: the value, the entry's end, the fields after 5, and the
    footer's end exactly where the file says it ends. The same bytes inside a statistic are
    followed by the end of its struct, so they never parse to the footer's end; other footers
    (several entries, none) are unknown."""
    at = footer.rfind(_ONLY_ENTRY)
    if at < 0:
        return None
    reader = _Reader(footer)
    reader.at = at + len(_ONLY_ENTRY)
    if reader.field(1) != (2, _BINARY):
        return None
    value = reader.binary()
    if reader.field(2) is not None:  # the entry ends
        return None
    last = _KEY_VALUES_FIELD
    while (field := reader.field(last)) is not None:
        if field[0] <= last:
            return None
        last = field[0]
        reader.skip(field[1])
    return value if reader.at == len(footer) else None


def _footer(path: Path) -> bytes | None:
    with path.open("rb") as file:
        size = file.seek(0, os.SEEK_END)
        if size < 12:  # "PAR1" + footer length + "PAR1"
            return None
        file.seek(size - 8)
        tail = file.read(8)
        length = int.from_bytes(tail[:4], "little")
        if tail[4:] != _MAGIC or not 0 < length <= size - 12:
            return None
        file.seek(size - 8 - length)
        footer = file.read(length)
    return footer if len(footer) == length else None


def stored_arrow_schema(path: Path) -> bytes | None:
    """The bytes stored under ``ARROW:schema`` in the footer of the Parquet file at ``path``,
    or ``None`` when there are none or the footer cannot be read."""
    try:
        footer = _footer(path)
        return None if footer is None else _only_entry_value(footer)
    except (OSError, _Malformed):
        return None
