"""Retry backoff: exponential growth, a cap, and full jitter (pure)."""

from __future__ import annotations


def backoff_delay(failures: int, *, base_s: float, cap_s: float, unit: float) -> float:
    """Seconds to wait after the ``failures``-th failure (1-based).

    Full jitter: a uniform draw (``unit`` in [0, 1)) below ``min(cap_s, base_s · 2^(failures−1))``,
    so concurrent callers that failed together do not retry together.
    """
    if failures < 1:
        return 0.0
    ceiling = min(cap_s, base_s * 2.0 ** min(failures - 1, 62))
    return max(0.0, min(1.0, unit)) * ceiling
