"""The one definition of a percentile in otel-llm: linear interpolation between the closest
ranks (Hyndman and Fan's type 7), the definition of DuckDB's ``quantile_cont``, ClickHouse's
``quantileExactInclusive`` and ``statistics.quantiles(method="inclusive")``.

So the p99 the demo's accuracy check prints, the p99 ``otel-llm tune`` replays, and the p99 of
the dashboards, the report and ``otel-llm query`` (the SQL dialects in
:mod:`otel_llm._show._sql._views`) agree on the same values, however few.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 ≤ q ≤ 1) of ``values``; 0 for none."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"a quantile is between 0 and 1, got {q!r}")
    if not values:
        return 0.0
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    below, above = ordered[low], ordered[high]
    if below == above:
        return below
    return below + (above - below) * (position - low)
