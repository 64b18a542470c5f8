"""The one panel specification: every panel of the Grafana dashboards and of ``otel-llm report``,
its SQL written once for both data sources (:class:`~otel_llm._show._sql._panel_sql.PanelDialect`),
what it shows, and the definitions of its figures.

The dashboards (:mod:`otel_llm._show._dashboards._grafana`) turn each :class:`Panel` into a Grafana
panel; the report (:mod:`otel_llm._show._report._data`) runs the same SQL with the macros expanded
as the DuckDB plugin expands them and draws the result. Every query reads the views, never raw
spans, and aggregates in SQL: a panel returns at most a few hundred rows whatever the store holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from otel_llm import _semconv as sc
from otel_llm._figures import (
    CHUNK_COUNT,
    GENERATION_MS,
    MAX_INTER_CHUNK_MS,
    STALL_COUNT,
    STALL_MS,
    TTFT_MS,
    WALL_MS,
)
from otel_llm._measure._stalls import NS_PER_MS
from otel_llm._show._sql._panel_sql import (
    AS_MEASURED,
    CALL,
    SERVICE,
    SOURCE,
    THRESHOLD,
    PanelDialect,
)
from otel_llm._show._sql._rollup import (
    ATTEMPTS,
    ATTEMPTS_ROLLUP,
    CALL_MINUTE,
    CALL_STARTED_AT,
    CALLS,
    CALLS_ROLLUP,
    GAP_EDGES_MS,
    GAPS_AT_FLOOR,
    GAPS_MS,
    GRAIN,
    HEDGE_WON,
    HEDGED,
    MINUTE,
    NEG_STALL_MS,
    STALL_COUNTS,
    STALLED_WINNERS,
    STALLED_WINNERS_AT,
    THRESHOLD_KEY,
    THRESHOLD_OPTIONS_MS,
    WINNERS_AT_ROLLUP,
    WINNERS_ROLLUP,
    WORST_CALLS,
    WORST_FIELDS,
    count_column,
    gap_bar,
    merged_count,
    merged_map,
    merged_quantile,
    merged_sum,
)
from otel_llm._show._sql._table import (
    CHUNK_GAP_COLUMN,
    CHUNK_INDEX_COLUMN,
    CHUNK_OFFSET_COLUMN,
    ROLE_COLUMN,
    TABLE,
    is_error_sql,
)
from otel_llm._show._sql._views import (
    ATTEMPT_COLUMNS,
    ATTEMPTS_VIEW,
    CALL_OF_ATTEMPT,
    CALLS_VIEW,
    EVENTS_FLOOR_NS,
    GAPS_COUNTED,
    STARTED_AT,
    WINNER_COLUMNS,
    WINNER_OF_CALL,
    WINNER_STARTED_AT,
    could_stall_at,
)

Kind = Literal["timeseries", "barchart", "table", "stat", "xychart", "traces"]
Format = Literal["time_series", "table", "traces"]

FORMATS: Final = {"time_series": 0, "table": 1, "traces": 3}
"""The data sources' integer ``format`` of a query (sqlutil's FormatQueryOption)."""

TIME: Final = "time"
"""The time column every time-series panel selects first."""
SERIES: Final = "series"
"""The label column of a time series with one line per source and model."""


@dataclass(frozen=True, slots=True)
class Panel:
    """One panel: its SQL and how to show what it returns."""

    key: str
    """Stable name (the Grafana panel id follows the order of :data:`PANELS`)."""
    title: str
    kind: Kind
    format: Format
    description: str
    """What the panel shows and the definitions of its figures (Grafana's panel info, the
    report's text beside the chart)."""
    columns: tuple[str, ...]
    """The columns the query returns, in order."""
    sql: Callable[[PanelDialect], str]
    unit: str = "none"
    """Grafana unit of the value columns (``s``, ``percent``, ``short``)."""
    width: int = 12
    height: int = 8
    stacked: tuple[str, ...] = ()
    """Value columns drawn stacked; the other value columns are drawn as lines over them."""
    x: str | None = None
    """The category (bar chart) or x column (xy chart)."""
    repeat: str | None = None
    """A filter variable to draw the panel once per value of (Grafana's panel repeat; the
    report draws one chart per value)."""

    @property
    def format_code(self) -> int:
        return FORMATS[self.format]

    @property
    def values(self) -> tuple[str, ...]:
        """The value columns: every column but time, series and the category."""
        return tuple(c for c in self.columns if c not in (TIME, SERIES, self.x))


def _series(alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return f"coalesce({prefix}source, {prefix}provider, '?') || '/' || coalesce({prefix}model, '?')"


_ATTEMPT: Final = ", ".join(f"a.{c.alias} AS {c.alias}" for c in ATTEMPT_COLUMNS)
_WINNER: Final = ", ".join(
    f"a.{c.alias} AS {STARTED_AT.alias}" if c == WINNER_STARTED_AT else f"a.{c.alias}"
    for c in WINNER_COLUMNS
    if c.alias != STARTED_AT.alias
)
"""A winner panel's columns in DuckDB, read from the call rows: ``llm_winners``' columns,
``started_at`` the winning attempt's start (as the attempts' ``started_at`` the panels read in
ClickHouse), not the call's."""


def _winners(
    d: PanelDialect,
    repeat: str | None = None,
    *,
    stalled: bool = False,
    unless: str = "",
    name: str = "w",
) -> str:
    """The winning attempt of every call in range, at the threshold variable, filtered
    (``repeat``: the panel is drawn once per value of that variable): in DuckDB read from the
    call rows (``llm_winners``, which joins only the calls whose rows do not carry their
    winner); in ClickHouse the attempts whose (call span id, number) is in the set of the calls'
    (span id, winner), as UInt64s, which it probes faster than it joins the calls' rows.
    ``stalled``: only attempts that can have stalled at a re-derived threshold
    (:func:`could_stall_at`), so the gaps of the others are never read (the same rows, faster).
    ``unless``: a condition under which the panel reads a rollup instead (no row then)."""
    t = d.number(THRESHOLD)
    longest = f"a.{MAX_INTER_CHUNK_MS.name}"
    could_stall = (
        f"\n      AND ({t} = {AS_MEASURED} OR {could_stall_at(longest, t)})" if stalled else ""
    )
    instead = f"\n      AND NOT {unless}" if unless else ""
    filters = f"{d.filters('a', repeat=repeat)}{could_stall}{instead}"
    if not d.is_clickhouse:
        return f"""{name} AS (
    SELECT {_WINNER}
    FROM {d.winners()} a
    WHERE {d.time_filter("a.started_at")}
      AND {d.since_start(f"a.{WINNER_STARTED_AT.alias}")} AND {filters}
)"""
    calls = d.relation(CALLS_VIEW)
    (call, number), (span, winner_number) = CALL_OF_ATTEMPT, WINNER_OF_CALL
    return f"""{name} AS (
    SELECT {_ATTEMPT}
    FROM {d.attempts()} a
    WHERE ({d.span_key(f"a.{call}")}, a.{number}) IN (
        SELECT {d.span_key(span)}, {winner_number} FROM {calls}
        WHERE {d.time_filter("started_at")}
      )
      AND {d.since_start("a.started_at")} AND {filters}
)"""


@dataclass(frozen=True, slots=True)
class _Aggregates:
    """How an over-time panel aggregates: over the rows it selects, or over a rollup's states
    (:mod:`otel_llm._show._sql._rollup`), the same figures under the same names."""

    time: str
    """The instant a row is bucketed by."""
    rolled: bool = False

    def sum(self, name: str) -> str:
        return merged_sum(name) if self.rolled else f"sum({name})"

    def count(self, name: str = CALLS) -> str:
        return merged_count(name) if self.rolled else "count(*)"


_ROWS: Final = _Aggregates("started_at")
_ROLLED: Final = _Aggregates(MINUTE, rolled=True)


_WHOLE_GRAINS: Final = f"$__interval_s % {int(GRAIN.total_seconds())} = 0"
"""Grafana's bucket is a whole number of rollup rows."""


def _rollup_usable(d: PanelDialect, *, at_threshold: bool = True, minutes: bool = True) -> str:
    """True when the panel's rollup answers as its rows do: whole-minute buckets (a panel
    over time), and the threshold as measured (the winners' stall figures)."""
    conditions = [f"{d.number(THRESHOLD)} = {AS_MEASURED}"] if at_threshold else []
    conditions += [_WHOLE_GRAINS] if minutes else []
    return f"({' AND '.join(conditions)})"


def _offered(d: PanelDialect) -> str:
    """True when the threshold variable holds one the rollups re-derive at."""
    options = ", ".join(str(t) for t in THRESHOLD_OPTIONS_MS)
    return f"has([{options}], {d.number(THRESHOLD)})"


def _any_rollup(d: PanelDialect, *, minutes: bool = True) -> str:
    """True when a rollup answers the winners' stall figures: as measured or re-derived at
    an offered threshold (and, for a panel over time, in whole-minute buckets)."""
    at = f"({d.number(THRESHOLD)} = {AS_MEASURED} OR {_offered(d)})"
    return f"({at} AND {_WHOLE_GRAINS})" if minutes else f"({at})"


def _at_offered(d: PanelDialect, *, minutes: bool = True) -> str:
    """The rows of the re-derived rollups at the threshold variable, when it is offered."""
    interval = f" AND {_WHOLE_GRAINS}" if minutes else ""
    return f"({THRESHOLD_KEY} = {d.number(THRESHOLD)} AND {_offered(d)}{interval})"


def _rollup_range(*minutes: str) -> str:
    """The rollup rows of the dashboard's range: the minute (of the call's start) overlapping
    it, and — for the winners — the winner started in or after the range's first minute."""
    start = "toStartOfMinute($__fromTime)"  # the rollups are ClickHouse's
    first, *rest = minutes
    conditions = [f"{first} >= {start}", f"{first} <= $__toTime"]
    conditions += [f"{minute} >= {start}" for minute in rest]
    return " AND ".join(conditions)


def _either(rolled: str, rows: str, order: str) -> str:
    """The rollup's answer when it is usable, else the rows' (each branch is empty in the
    other case, so ClickHouse reads only one)."""
    return f"""SELECT * FROM (
({rolled})
UNION ALL
({rows})
)
ORDER BY {order}"""


def _from_winners_rollup(
    d: PanelDialect,
    select: str,
    repeat: str | None = None,
    *,
    usable: str | None = None,
    table: str = WINNERS_ROLLUP,
) -> str:
    """``select`` over the winners' rollup rows in range and filtered, when ``usable``
    (default: as measured, in whole-minute buckets)."""
    return f"""SELECT
    {select}
FROM {d.relation(table)}
WHERE {_rollup_range(CALL_MINUTE, MINUTE)}
  AND {d.filters(repeat=repeat)} AND {usable or _rollup_usable(d)}"""


def _from_winners_rollups(
    d: PanelDialect, select: str, tail: str, repeat: str | None = None, *, minutes: bool = True
) -> str:
    """``select`` … ``tail`` over the winners' figures as measured (``llm_winners_1m``) or
    re-derived at the offered threshold chosen (``llm_winners_at_1m``): one of the two."""
    measured = _from_winners_rollup(d, select, repeat, usable=_rollup_usable(d, minutes=minutes))
    at = _from_winners_rollup(
        d, select, repeat, usable=_at_offered(d, minutes=minutes), table=WINNERS_AT_ROLLUP
    )
    return f"({measured}{tail})\nUNION ALL\n({at}{tail})"


def _from_rollup(d: PanelDialect, table: str, select: str, where: str = "") -> str:
    """``select`` over the rows of the calls' or attempts' rollup in range and filtered."""
    extra = f" AND {where}" if where else ""
    return f"""SELECT
    {select}
FROM {d.relation(table)}
WHERE {_rollup_range(MINUTE)} AND {d.filters()}{extra}"""


def _worst_rows(d: PanelDialect) -> str:
    """``w``: the winners the worst-calls queries rank — in ClickHouse, the first
    :data:`WORST_CALLS` rows in range and filtered of ``llm_stalled_winners`` (as measured) or
    ``llm_stalled_winners_at`` (at an offered threshold), sorted by stall descending, then
    trace id; at any other threshold, the spans."""
    if not d.rollup:
        return _winners(d, stalled=True)
    columns = ", ".join(WORST_FIELDS)

    def first(table: str, usable: str) -> str:
        return f"""SELECT {columns} FROM (
        SELECT {columns}
        FROM {d.relation(table)}
        WHERE {d.time_filter(CALL_STARTED_AT)} AND {d.since_start("started_at")}
          AND {d.filters()} AND {usable}
        ORDER BY {NEG_STALL_MS}, trace_id
        LIMIT {WORST_CALLS})"""

    measured = first(STALLED_WINNERS, _rollup_usable(d, minutes=False))
    at = first(STALLED_WINNERS_AT, _at_offered(d, minutes=False))
    return f"""{_winners(d, stalled=True, unless=_any_rollup(d, minutes=False), name="spans")},
w AS (
    SELECT {columns} FROM spans
    UNION ALL
    {measured}
    UNION ALL
    {at}
)"""


def _seconds(expr: str) -> str:
    return f"{expr} / 1000"


def _time_split(d: PanelDialect) -> str:
    def select(a: _Aggregates) -> str:
        return f"""{d.bucket(a.time)} AS {TIME},
    {_seconds(a.sum(GENERATION_MS.name))} AS net_s,
    {_seconds(a.sum(STALL_MS.name))} AS stall_s,
    {_seconds(a.sum(WALL_MS.name))} AS wall_s"""

    unless = _any_rollup(d) if d.rollup else ""
    rows = f"""WITH {_winners(d, repeat=SOURCE, unless=unless)}
SELECT
    {select(_ROWS)}
FROM w
GROUP BY 1
ORDER BY 1"""
    if not d.rollup:
        return rows
    rolled = _from_winners_rollups(d, select(_ROLLED), "\nGROUP BY 1", repeat=SOURCE)
    return _either(rolled, rows, "1")


def _stall_share(d: PanelDialect) -> str:
    def select(a: _Aggregates) -> str:
        share = f"100 * {a.sum(STALL_MS.name)} / nullif({a.sum(WALL_MS.name)}, 0)"
        return f"""{d.bucket(a.time)} AS {TIME},
    {_series()} AS {SERIES},
    {d.to_double(share)} AS stall_pct"""

    unless = _any_rollup(d) if d.rollup else ""
    rows = f"""WITH {_winners(d, unless=unless)}
SELECT
    {select(_ROWS)}
FROM w
GROUP BY 1, 2
ORDER BY 1, 2"""
    if not d.rollup:
        return rows
    rolled = _from_winners_rollups(d, select(_ROLLED), "\nGROUP BY 1, 2")
    return _either(rolled, rows, "1, 2")


STALL_COUNT_BUCKETS: Final = 5
"""The stall-count bar chart's last bar holds this many stalls or more."""


def _stall_counts(d: PanelDialect) -> str:
    n = STALL_COUNT_BUCKETS
    label = f"CASE WHEN bar = {n} THEN '{n}+' ELSE CAST(bar AS VARCHAR) END"
    if d.is_clickhouse:
        label = f"if(bar = {n}, '{n}+', toString(bar))"
    if d.rollup:
        rolled = _from_winners_rollups(d, f"{merged_map(STALL_COUNTS)} AS m", "", minutes=False)
        return f"""WITH {_winners(d, unless=_any_rollup(d, minutes=False))},
bars AS (
    SELECT least({STALL_COUNT.name}, CAST({n} AS BIGINT)) AS bar, toUInt64(1) AS n
    FROM w
    WHERE {STALL_COUNT.name} IS NOT NULL
    UNION ALL
    SELECT least(k, CAST({n} AS BIGINT)) AS bar, v AS n
    FROM ({rolled})
    ARRAY JOIN m.1 AS k, m.2 AS v
)
SELECT {label} AS stalls, sum(n) AS calls
FROM bars
GROUP BY bar
ORDER BY bar"""
    return f"""WITH {_winners(d)}
SELECT {label} AS stalls, count(*) AS calls
FROM (
    SELECT least({STALL_COUNT.name}, CAST({n} AS BIGINT)) AS bar
    FROM w
    WHERE {STALL_COUNT.name} IS NOT NULL
) bars
GROUP BY bar
ORDER BY bar"""


TTFT_LEVELS: Final = ((0.5, "ttft_p50_s"), (0.95, "ttft_p95_s"), (0.99, "ttft_p99_s"))
"""The TTFT percentiles drawn, and their columns."""


def _ttft(d: PanelDialect) -> str:
    ttft = TTFT_MS.name

    def select(a: _Aggregates) -> str:
        levels = ",\n    ".join(
            _seconds(merged_quantile(TTFT_MS, q) if a.rolled else d.sql.quantile(ttft, q))
            + f" AS {name}"
            for q, name in TTFT_LEVELS
        )
        return f"""{d.bucket(a.time)} AS {TIME},
    {_series()} AS {SERIES},
    {levels}"""

    usable = _rollup_usable(d, at_threshold=False)  # TTFT reads the same at any threshold
    unless = usable if d.rollup else ""
    rows = f"""WITH {_winners(d, unless=unless)}
SELECT
    {select(_ROWS)}
FROM w
WHERE {ttft} IS NOT NULL
GROUP BY 1, 2
ORDER BY 1, 2"""
    if not d.rollup:
        return rows
    known = merged_count(count_column(TTFT_MS))
    rolled = _from_winners_rollup(d, select(_ROLLED), usable=usable)
    rolled += f"\nGROUP BY 1, 2\nHAVING {known} > 0"
    return _either(rolled, rows, "1, 2")


def _edge_text(ms: int) -> str:
    return f"{ms // 1000} s" if ms >= 1000 else f"{ms} ms"


def _gap_bar(gap_ms: str) -> tuple[str, str]:
    """The bar (its number, its label) a recorded gap above the floor falls in."""
    edges = GAP_EDGES_MS
    label = " ".join(f"WHEN {gap_ms} <= {edge} THEN '≤ {_edge_text(edge)}'" for edge in edges)
    return gap_bar(gap_ms), f"CASE {label} ELSE '> {_edge_text(edges[-1])}' END"


def _gap_label(bar: str) -> str:
    """The label of chunk-gap bar number ``bar`` (1, 2 …)."""
    edges = enumerate(GAP_EDGES_MS)
    label = " ".join(f"WHEN {i + 1} THEN '≤ {_edge_text(edge)}'" for i, edge in edges)
    return f"CASE {bar} {label} ELSE '> {_edge_text(GAP_EDGES_MS[-1])}' END"


def _chunk_gaps(d: PanelDialect) -> str:
    """Gaps above each attempt's event floor come one by one from its chunk events; the gaps at
    or below the floor are not recorded one by one, only counted (chunks − 1 − those above)."""
    role = f"\"{ROLE_COLUMN}\" = '{sc.SPAN_ROLE_ATTEMPT}'"
    gaps = d.sql.filter(f'"{CHUNK_GAP_COLUMN}"', "g", f"g > {EVENTS_FLOOR_NS}")
    attempts = f"""SELECT
        coalesce("{CHUNK_COUNT.column}", 0) AS chunks,
        {gaps} AS above
    FROM {d.relation(TABLE)}
    WHERE {role} AND {GAPS_COUNTED}
      AND {d.time_filter('"Timestamp"')}
      AND {d.matches('"ServiceName"', "service")}
      AND {d.matches('"RequestModel"', "model")}
      AND {d.matches('"Source"', "source")}"""
    above = f"{d.unnest('above')} / {NS_PER_MS}"
    number, label = _gap_bar("gap_ms")
    if d.rollup:
        merged = f"{merged_sum(GAPS_AT_FLOOR)} AS at_floor, {merged_map(GAPS_MS)} AS m"
        return f"""WITH rolled AS (
    {_from_rollup(d, ATTEMPTS_ROLLUP, merged)}
),
bars AS (
    SELECT 0 AS bar, '≤ event floor' AS gap, {d.total("at_floor")} AS gaps FROM rolled
    UNION ALL
    SELECT k AS bar, {_gap_label("k")} AS gap, toInt64(v) AS gaps
    FROM rolled ARRAY JOIN m.1 AS k, m.2 AS v
)
SELECT gap, gaps FROM bars WHERE gaps > 0 ORDER BY bar"""
    return f"""WITH attempts AS (
    {attempts}
),
recorded AS (
    SELECT {d.to_double(above)} AS gap_ms FROM attempts
),
bars AS (
    SELECT 0 AS bar, '≤ event floor' AS gap,
        {d.total(f"greatest(chunks - 1, 0) - {d.sql.length('above')}")} AS gaps
    FROM attempts
    UNION ALL
    SELECT {number} AS bar, {label} AS gap, {d.total("1")} AS gaps FROM recorded GROUP BY 1, 2
)
SELECT gap, gaps FROM bars WHERE gaps > 0 ORDER BY bar"""


def known_total(d: PanelDialect, column: str) -> str:
    """The hedged calls' total of ``column`` where they know it; unknown (NULL) when hedges
    ran and none of them knows its own (never 0 for unknown); 0 with no hedge."""
    hedged = d.sql.count_if("hedges > 0")
    return f"coalesce({d.total(column)}, CASE WHEN {hedged} > 0 THEN NULL ELSE 0 END)"


def _hedging(d: PanelDialect) -> str:
    if d.rollup:
        calls, hedged = merged_count(CALLS), merged_count(HEDGED)

        def known(name: str) -> str:
            unknown = f"CASE WHEN {hedged} > 0 THEN NULL ELSE 0 END"
            return f"coalesce(toInt64({merged_sum(name)}), {unknown})"

        select = f"""{calls} AS calls,
    {d.to_double(f"100 * {hedged} / nullif({calls}, 0)")} AS hedged_pct,
    {d.to_double(f"100 * {merged_count(HEDGE_WON)} / nullif({hedged}, 0)")} AS hedge_won_pct,
    coalesce(toInt64({merged_sum("hedges")}), 0) AS wasted_requests,
    {known("hedge_waste_tokens")} AS wasted_tokens,
    {known("hedge_waste_chunks")} AS wasted_chunks"""
        return _from_rollup(d, CALLS_ROLLUP, select)
    count_if = d.sql.count_if
    hedged = count_if("hedges > 0")
    return f"""SELECT
    count(*) AS calls,
    {d.to_double(f"100 * {hedged} / nullif(count(*), 0)")} AS hedged_pct,
    {d.to_double(f"100 * {count_if('hedge_won')} / nullif({hedged}, 0)")} AS hedge_won_pct,
    coalesce({d.total("hedges")}, 0) AS wasted_requests,
    {known_total(d, "hedge_waste_tokens")} AS wasted_tokens,
    {known_total(d, "hedge_waste_chunks")} AS wasted_chunks
FROM {d.relation(CALLS_VIEW)}
WHERE {d.time_filter("started_at")} AND {d.filters()}"""


def _hedge_rate(d: PanelDialect) -> str:
    def select(a: _Aggregates) -> str:
        count_if = d.sql.count_if
        hedged = a.count(HEDGED) if a.rolled else count_if("hedges > 0")
        won = a.count(HEDGE_WON) if a.rolled else count_if("hedge_won")
        return f"""{d.bucket(a.time)} AS {TIME},
    {d.to_double(f"100 * {hedged} / nullif({a.count()}, 0)")} AS hedged_pct,
    {d.to_double(f"100 * {won} / nullif({hedged}, 0)")} AS hedge_won_pct"""

    usable = _rollup_usable(d, at_threshold=False)
    unless = f" AND NOT {usable}" if d.rollup else ""
    rows = f"""SELECT
    {select(_ROWS)}
FROM {d.relation(CALLS_VIEW)}
WHERE {d.time_filter("started_at")} AND {d.filters()}{unless}
GROUP BY 1
ORDER BY 1"""
    if not d.rollup:
        return rows
    rolled = f"""SELECT
    {select(_ROLLED)}
FROM {d.relation(CALLS_ROLLUP)}
WHERE {_rollup_range(MINUTE)} AND {d.filters()} AND {usable}
GROUP BY 1"""
    return _either(rolled, rows, "1")


def _outcomes(d: PanelDialect) -> str:
    if d.rollup:
        per_leg = _from_rollup(d, ATTEMPTS_ROLLUP, f"outcome, leg, {merged_count(ATTEMPTS)} AS n")
        return f"""SELECT
    coalesce(outcome, 'unknown') AS outcome,
    sumIf(n, leg = '{sc.LEG_PRIMARY}') AS primary_attempts,
    sumIf(n, leg = '{sc.LEG_HEDGE}') AS hedge_attempts,
    sumIf(n, coalesce(leg, '') NOT IN ('{sc.LEG_PRIMARY}', '{sc.LEG_HEDGE}')) AS other_attempts
FROM ({per_leg}
    GROUP BY outcome, leg)
GROUP BY 1
ORDER BY 1"""
    count_if = d.sql.count_if
    return f"""SELECT
    coalesce(outcome, 'unknown') AS outcome,
    {count_if(f"leg = '{sc.LEG_PRIMARY}'")} AS primary_attempts,
    {count_if(f"leg = '{sc.LEG_HEDGE}'")} AS hedge_attempts,
    {count_if(f"coalesce(leg, '') NOT IN ('{sc.LEG_PRIMARY}', '{sc.LEG_HEDGE}')")} AS other_attempts
FROM {d.relation(ATTEMPTS_VIEW)}
WHERE {d.time_filter("started_at")} AND {d.filters()}
GROUP BY 1
ORDER BY 1"""


_NOT_ERRORS: Final = ", ".join(f"'{outcome}'" for outcome in sorted(sc.OUTCOMES_WITHOUT_FIGURES))
"""Outcomes that carry an ``error.type`` but are no error: a hedge's loser, a call given up."""


def _errors(d: PanelDialect) -> str:
    source = d.relation(ATTEMPTS_VIEW)
    count = "count(*)"
    where = d.time_filter("started_at")
    if d.rollup:
        source, count, where = (
            d.relation(ATTEMPTS_ROLLUP),
            merged_count(ATTEMPTS),
            (_rollup_range(MINUTE)),
        )
    return f"""SELECT
    {_series()} AS {SERIES},
    coalesce(outcome, 'unknown') AS outcome,
    error_type,
    {count} AS attempts
FROM {source}
WHERE {where} AND {d.filters()} AND error_type IS NOT NULL
    AND coalesce(outcome, '') NOT IN ({_NOT_ERRORS})
GROUP BY 1, 2, 3
ORDER BY attempts DESC, 1, 2, 3
LIMIT 50"""


def _worst(d: PanelDialect) -> str:
    return f"""WITH {_worst_rows(d)}
SELECT
    {d.timestamp("started_at")} AS started_at,
    trace_id,
    {_series()} AS {SERIES},
    {_seconds(WALL_MS.name)} AS wall_s,
    {_seconds(STALL_MS.name)} AS stall_s,
    {STALL_COUNT.name} AS stalls,
    {_seconds(MAX_INTER_CHUNK_MS.name)} AS longest_gap_s,
    {_seconds(TTFT_MS.name)} AS ttft_s,
    {CHUNK_COUNT.name} AS chunks
FROM w
WHERE {STALL_MS.name} > 0
ORDER BY {STALL_MS.name} DESC, trace_id
LIMIT {WORST_CALLS}"""


def worst_trace_ids(d: PanelDialect) -> str:
    """The chosen-call variable's options: the worst stalled calls in range, worst first."""
    return f"""WITH {_worst_rows(d.for_variables())}
SELECT trace_id FROM w WHERE {STALL_MS.name} > 0
ORDER BY {STALL_MS.name} DESC, trace_id
LIMIT {WORST_CALLS}"""


def _timeline(d: PanelDialect) -> str:
    role = f"\"{ROLE_COLUMN}\" = '{sc.SPAN_ROLE_ATTEMPT}'"
    call = d.literal(CALL)
    if d.is_clickhouse:
        arrays = f"""arrayJoin(arrayZip("{CHUNK_OFFSET_COLUMN}", "{CHUNK_GAP_COLUMN}",
            "{CHUNK_INDEX_COLUMN}")) AS e,
        tupleElement(e, 1) AS offset_ns, tupleElement(e, 2) AS gap_ns,
        tupleElement(e, 3) AS chunk"""
    else:
        arrays = f"""unnest("{CHUNK_OFFSET_COLUMN}") AS offset_ns,
        unnest("{CHUNK_GAP_COLUMN}") AS gap_ns,
        unnest("{CHUNK_INDEX_COLUMN}") AS chunk"""
    return f"""WITH events AS (
    SELECT
        coalesce("Leg", '?') || ' ' || CAST(coalesce("AttemptNumber", 0) AS VARCHAR)
            || ' (' || coalesce("Source", '?') || ')' AS attempt,
        {arrays}
    FROM {d.relation(TABLE)}
    WHERE {role} AND "TraceId" = {call}
)
SELECT
    {d.to_double(f"offset_ns / {NS_PER_MS}")} / 1000 AS offset_s,
    {d.to_double(f"coalesce(gap_ns, offset_ns) / {NS_PER_MS}")} / 1000 AS gap_s,
    chunk,
    attempt
FROM events
ORDER BY attempt, offset_s"""


_DEFINITIONS: Final = {
    "wall": "wall: the attempt's transport call, request issued to stream ended.",
    "stall": "stall: the sum of the gaps between two chunks longer than the stall threshold.",
    "net": "net generation: wall − stall.",
    "ttft": "TTFT: request issued to the first incremental chunk.",
    "winner": "Each call is counted by its winning attempt.",
    "threshold": "The threshold variable re-derives stalls from the stored chunk events at "
    "another threshold ('as measured': each attempt at the threshold it ran with).",
}


def _defs(*keys: str) -> str:
    return " ".join(_DEFINITIONS[k] for k in keys)


PANELS: Final = (
    Panel(
        "time_split",
        "Where the time went: net generation + stall = wall",
        "timeseries",
        "time_series",
        "One chart per source: the seconds of the calls that started in each interval, "
        "stacked: net generation below, stall above, so the top of the stack is the wall time "
        "(the dashed line). " + _defs("wall", "stall", "net", "winner", "threshold"),
        (TIME, "net_s", "stall_s", "wall_s"),
        _time_split,
        unit="s",
        width=24,
        height=9,
        stacked=("net_s", "stall_s"),
        repeat=SOURCE,
    ),
    Panel(
        "stall_share",
        "Stall share of wall time",
        "timeseries",
        "time_series",
        "Per source/model: 100 × stall / wall over the calls that started in each interval. "
        + _defs("stall", "winner", "threshold"),
        (TIME, SERIES, "stall_pct"),
        _stall_share,
        unit="percent",
    ),
    Panel(
        "ttft",
        "Time to first chunk: p50 / p95 / p99",
        "timeseries",
        "time_series",
        "Per source/model, the percentiles of TTFT over the calls that started in each "
        "interval. " + _defs("ttft", "winner"),
        (TIME, SERIES, "ttft_p50_s", "ttft_p95_s", "ttft_p99_s"),
        _ttft,
        unit="s",
    ),
    Panel(
        "stall_counts",
        "Calls by number of stalls",
        "barchart",
        "table",
        f"How many calls stalled 0, 1, 2 … times ({STALL_COUNT_BUCKETS}+: that many or more). "
        + _defs("stall", "winner", "threshold"),
        ("stalls", "calls"),
        _stall_counts,
        unit="short",
        width=8,
        x="stalls",
    ),
    Panel(
        "chunk_gaps",
        "Gaps between chunks",
        "barchart",
        "table",
        "Every gap between two chunks of every streamed attempt whose chunk events are "
        "complete (metering status exact). Gaps above the attempt's chunk-event floor (100 ms "
        "by default) are stored one by one and fall in their bar; the gaps at or below the "
        "floor are counted together in the first bar.",
        ("gap", "gaps"),
        _chunk_gaps,
        unit="short",
        width=8,
        x="gap",
    ),
    Panel(
        "outcomes",
        "Attempts by outcome",
        "barchart",
        "table",
        "Every attempt (primary and hedge legs, retries) by how it ended: ok, error, "
        "watchdog_killed, hedge_cancelled (a leg that lost its hedged round), cancelled, "
        "closed, dropped.",
        ("outcome", "primary_attempts", "hedge_attempts", "other_attempts"),
        _outcomes,
        unit="short",
        width=8,
        stacked=("primary_attempts", "hedge_attempts", "other_attempts"),
        x="outcome",
    ),
    Panel(
        "hedging",
        "Hedging: rate, wins and waste",
        "stat",
        "table",
        "hedged: calls that started at least one hedge leg. won: hedged calls a hedge leg won. "
        "wasted requests: the legs that lost (every hedge issued, since one leg of a round "
        "wins); wasted tokens and chunks: what the losing legs had streamed when they were "
        "cancelled, where known (empty, unknown, when no hedged call knows its own).",
        (
            "calls",
            "hedged_pct",
            "hedge_won_pct",
            "wasted_requests",
            "wasted_tokens",
            "wasted_chunks",
        ),
        _hedging,
        width=12,
        height=5,
    ),
    Panel(
        "hedge_rate",
        "Hedge rate and win rate",
        "timeseries",
        "time_series",
        "Of the calls that started in each interval: the share that hedged, and of those "
        "hedged calls the share a hedge leg won (as in the Hedging panel).",
        (TIME, "hedged_pct", "hedge_won_pct"),
        _hedge_rate,
        unit="percent",
        width=12,
        height=5,
    ),
    Panel(
        "errors",
        "Errors by type",
        "table",
        "table",
        "Attempts that ended with an error type (error.type), by source/model and outcome; "
        "a hedge's cancelled loser and an attempt its caller gave up are no errors.",
        (SERIES, "outcome", "error_type", "attempts"),
        _errors,
        unit="short",
    ),
    Panel(
        "worst",
        "Worst stalled calls",
        "table",
        "table",
        f"The {WORST_CALLS} calls that lost the most time to stalls; a trace id opens its "
        "chunk timeline below. " + _defs("stall", "winner", "threshold"),
        (
            "started_at",
            "trace_id",
            SERIES,
            "wall_s",
            "stall_s",
            "stalls",
            "longest_gap_s",
            "ttft_s",
            "chunks",
        ),
        _worst,
        unit="s",
        width=24,
        height=9,
    ),
    Panel(
        "timeline",
        "Chunk timeline of the chosen call",
        "xychart",
        "table",
        "The chosen call's attempts (the trace_id variable): each recorded chunk at its "
        "arrival after the attempt started (x) with the gap before it (y). The first chunk's "
        "gap is its TTFT; chunks after gaps at or below the event floor are not recorded one "
        "by one, except the last.",
        ("offset_s", "gap_s", "chunk", "attempt"),
        _timeline,
        unit="s",
        width=24,
        height=9,
        x="offset_s",
    ),
)


def variable_sql(d: PanelDialect, name: str) -> str:
    """The options of template variable ``name``: the values seen in the time range."""
    if name == CALL:
        return worst_trace_ids(d)
    if d.rollup:
        rollup = CALLS_ROLLUP if name == SERVICE else ATTEMPTS_ROLLUP
        return f"""SELECT DISTINCT {name} FROM {d.relation(rollup)}
WHERE {_rollup_range(MINUTE)} AND {name} IS NOT NULL
ORDER BY 1"""
    view = CALLS_VIEW if name == SERVICE else ATTEMPTS_VIEW
    return f"""SELECT DISTINCT {name} FROM {d.relation(view)}
WHERE {d.time_filter("started_at")} AND {name} IS NOT NULL
ORDER BY 1"""


def trace_view_sql(d: PanelDialect) -> str:
    """The chosen call as Grafana's trace view reads a trace (ClickHouse only: the columns the
    ClickHouse plugin's trace-id query selects from the exporter's ``otel_traces``, the chunk
    events as span logs)."""
    traces = d.relation(TABLE)
    tags = "arrayMap(key -> map('key', key, 'value', {m}[key]), mapKeys({m}))"
    logs = (
        "arrayMap((name, timestamp, attributes) -> tuple(name, "
        "toString(toUnixTimestamp64Milli(timestamp)), "
        "arrayMap(key -> map('key', key, 'value', attributes[key]), mapKeys(attributes)))"
        "::Tuple(name String, timestamp String, fields Array(Map(String, String))), "
        '"Events.Name", "Events.Timestamp", "Events.Attributes")'
    )
    return f"""SELECT
    "TraceId" AS traceID,
    "SpanId" AS spanID,
    "ParentSpanId" AS parentSpanID,
    "ServiceName" AS serviceName,
    "SpanName" AS operationName,
    multiply(toUnixTimestamp64Nano("Timestamp"), 0.000001) AS startTime,
    multiply("Duration", 0.000001) AS duration,
    {tags.format(m='"SpanAttributes"')} AS tags,
    {tags.format(m='"ResourceAttributes"')} AS serviceTags,
    if({is_error_sql()}, 2, 0) AS statusCode,
    {logs} AS logs,
    "SpanKind" AS kind,
    "StatusMessage" AS statusMessage
FROM {traces}
WHERE "TraceId" = {d.literal(CALL)}"""


TRACE_VIEW: Final = Panel(
    "trace",
    "The chosen call in Grafana's trace view",
    "traces",
    "traces",
    "The call span and its attempt spans (the trace_id variable), with every chunk event "
    "as a span log.",
    (
        "traceID",
        "spanID",
        "parentSpanID",
        "serviceName",
        "operationName",
        "startTime",
        "duration",
        "tags",
        "serviceTags",
        "statusCode",
        "logs",
        "kind",
        "statusMessage",
    ),
    trace_view_sql,
    width=24,
    height=12,
)
"""Only on the ClickHouse dashboard: the DuckDB data source has no trace view."""
