"""``--since``: the start of the range a command reads from the store (``otel-llm report``,
``otel-llm tune``), as text a person types."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Final

from otel_llm._errors import ConfigurationError
from otel_llm._show._sql._table import as_utc

SINCE_KEY: Final = "--since"
_DURATION: Final = re.compile(r"(?P<amount>\d+)\s*(?P<unit>s|m|h|d|w)")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def parse_since(text: str, now: datetime) -> datetime:
    """The start of the range ``--since`` names: a duration back from ``now`` (``90s``,
    ``15m``, ``6h``, ``7d``, ``2w``) or an ISO 8601 date or time (UTC unless it says
    otherwise). Raises :class:`ConfigurationError` naming ``--since``."""
    value = text.strip()
    if match := _DURATION.fullmatch(value):
        amount = int(match["amount"])
        if amount == 0:
            raise ConfigurationError(SINCE_KEY, f"a duration is longer than 0, got {text!r}")
        try:
            return now - timedelta(seconds=amount * _UNITS[match["unit"]])
        except OverflowError:
            raise ConfigurationError(SINCE_KEY, f"{text!r} reaches before year 1") from None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigurationError(
            SINCE_KEY,
            f"expected a duration (15m, 6h, 7d) or an ISO 8601 time (2026-01-31T12:00Z), "
            f"got {text!r}",
        ) from None
    moment = as_utc(moment)
    if moment > now:
        raise ConfigurationError(SINCE_KEY, f"{text!r} is in the future")
    return moment
