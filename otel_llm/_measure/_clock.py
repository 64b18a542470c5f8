"""The one monotonic clock every metering timestamp comes from.

``now_ns`` is ``time.monotonic_ns`` in production. :func:`use_clock` swaps in another source
of monotonic nanoseconds — a replay of recorded arrivals, or a test's fake clock — so that the
client's transport, a wrapped SDK stream and ``observe_stream`` can be fed the very same
timeline and shown to produce the very same figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

now_ns: Callable[[], int] = time.monotonic_ns
"""Monotonic nanoseconds; read as ``_clock.now_ns()`` so a swap is seen everywhere."""


@contextmanager
def use_clock(clock: Callable[[], int]) -> Iterator[None]:
    """Read metering time from ``clock`` inside the ``with`` block."""
    global now_ns
    previous, now_ns = now_ns, clock
    try:
        yield
    finally:
        now_ns = previous
