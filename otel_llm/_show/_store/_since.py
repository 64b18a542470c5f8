"""``--since``: the start of the range a command reads from the store (``otel-llm report``,
``otel-llm tune``), as text a person types."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

from otel_llm._errors import ConfigurationError
from otel_llm._show._sql._table import as_utc

SINCE_KEY: Final = "--since"
EARLIEST: Final = datetime(1677, 9, 22, tzinfo=UTC)
"""About the earliest time a store's nanosecond timestamps hold (they start 1677-09-21): an
earlier start reads from here, which is everything."""
_DURATION: Final = re.compile(r"(?P<amount>\d+)\s*(?P<unit>s|m|h|d|w)")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def parse_since(text: str, now: datetime) -> datetime:
    """The start of the range ``--since`` names: a duration back from ``now`` (``90s``,
    ``15m``, ``6h``, ``7d``, ``2w``) or an ISO 8601 date or time (UTC unless it says
    otherwise); one before the earliest time a store holds (1677) is :data:`EARLIEST`, which
    reads everything. Raises :class:`ConfigurationError` naming ``--since``."""
    value = text.strip()
    if match := _DURATION.fullmatch(value):
        amount = int(match["amount"])
        if amount == 0:
            raise ConfigurationError(SINCE_KEY, f"a duration is longer than 0, got {text!r}")
        try:
            return max(now - timedelta(seconds=amount * _UNITS[match["unit"]]), EARLIEST)
        except OverflowError:
            return EARLIEST  # before year 1: everything
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigurationError(
            SINCE_KEY,
            f"expected a duration (15m, 6h, 7d) or an ISO 8601 time (2026-01-31T12:00Z), "
            f"got {text!r}",
        ) from None
    try:
        moment = as_utc(moment)
    except OverflowError:  # a zone offset that takes it past year 1 or 9999
        moment = EARLIEST if moment.year < 2000 else datetime.max.replace(tzinfo=UTC)
    if moment < EARLIEST:
        return EARLIEST
    if moment > now:
        raise ConfigurationError(SINCE_KEY, f"{text!r} is in the future")
    return moment
