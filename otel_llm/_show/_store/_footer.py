"""What a segment's Parquet footer says its Arrow schema is, read without a Parquet library.

Arrow's Parquet writers store the Arrow schema they wrote under the footer key
``ARROW:schema``. Segments that store the same bytes there have the same columns of the same
types, which a reader opening the store learns from a few kB of each footer -- in microseconds,
without importing pyarrow -- before it tells DuckDB how to read them (:mod:`._access`).

The footer is Thrift's compact protocol; only the key-value entry is looked at: the key
``ARROW:schema`` as a binary field with its length, then the value as the next binary field.
Anything else (no such entry, a footer cut short, an encrypted footer, a value that does not
fit) is "unknown", and the reader then unions the segments by name as it always can.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

_MAGIC: Final = b"PAR1"
"""The last 4 bytes of a Parquet file with a plain footer, after the footer's 4-byte length."""
_KEY: Final = b"ARROW:schema"
_BINARY_NEXT_FIELD: Final = 0x18
"""Compact protocol field header: the field after the previous one (delta 1), type binary."""
_LONGEST_VARINT: Final = 5
"""A 32-bit length takes at most 5 bytes of varint."""


def _varint(data: bytes, at: int) -> tuple[int, int] | None:
    """The unsigned varint at ``at`` and the index after it, or ``None`` if it does not end."""
    value = 0
    for index in range(at, min(at + _LONGEST_VARINT, len(data))):
        byte = data[index]
        value |= (byte & 0x7F) << (7 * (index - at))
        if not byte & 0x80:
            return value, index + 1
    return None


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
    or ``None`` when there are none or the footer cannot be read that far."""
    try:
        footer = _footer(path)
    except OSError:
        return None
    if footer is None:
        return None
    key_at = footer.rfind(_KEY)
    # the key is a binary field of its own: its header and length come right before it
    if key_at < 2 or footer[key_at - 2 : key_at] != bytes((_BINARY_NEXT_FIELD, len(_KEY))):
        return None
    value_at = key_at + len(_KEY)
    if footer[value_at : value_at + 1] != bytes((_BINARY_NEXT_FIELD,)):
        return None
    read = _varint(footer, value_at + 1)
    if read is None:
        return None
    length, start = read
    value = footer[start : start + length]
    return value if len(value) == length else None
