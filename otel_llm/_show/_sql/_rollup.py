"""ClickHouse's 1-minute rollups of the over-time panels: ``AggregatingMergeTree`` tables fed by
materialized views as the exporter inserts spans, so a panel over a day reads a few thousand
rows of aggregate states instead of millions of spans.

- :data:`WINNERS_ROLLUP` (``llm_winners_1m``): each call's winning attempt, as measured, by the
  minute the call started, the minute its winner started, and the winner's service, source,
  provider and model — the sums of wall, net generation and stall (the time split and the stall
  share), ``quantilesState`` of wall, TTFT and stall (the TTFT percentiles), the calls and the
  TTFTs counted. Its view takes each winning attempt (the attempt of a call whose number is
  the call's winner: :func:`~otel_llm._show._sql._views.winner_on`) with its call's start *in
  the inserted block*: a materialized view sees the rows of one insert, so a call whose winning
  attempt was inserted in another block is not counted (the SDK ends a winning attempt just
  before its call and exports them in one batch; :func:`coverage_sql` counts what a rollup
  missed, :func:`backfill_statements` rebuilds a range from the spans). Each stored copy of a
  winning attempt's span is one winner, whatever the copies of its call — as the panels count
  the winners from the spans — so a span sent twice (a retried export) is counted twice
  everywhere, never squared.
  It also holds, per minute and key, the winners' stall counts (``sumMap``: the stall-count
  bars).
- :data:`STALLED_WINNERS` (``llm_stalled_winners``): a ``MergeTree`` of the winners that stalled
  (as measured), one row each with the call's and the winner's start, sorted by stall
  descending then trace id: the worst-calls table and the chosen-call options read its first
  rows that pass the range and the filters, exactly as the spans rank them.
- :data:`CALLS_ROLLUP` (``llm_calls_1m``): every call by the minute it started and its service,
  source, provider and model — calls, hedged calls, calls a hedge won, hedges and their waste
  (the hedge rate and the hedging figures). Each call span alone feeds it: nothing is missed.
- :data:`ATTEMPTS_ROLLUP` (``llm_attempts_1m``): every attempt by the minute it started, its
  service, source, provider, model, outcome, leg and error type — attempts, and for streamed
  attempts whose chunk events are complete the gaps at or below the event floor (a sum) and the
  recorded gaps above it by the chunk-gap bar they fall in (``sumMap``, :data:`GAP_EDGES_MS`).
  Each attempt span alone feeds it.

The columns keep the views' names (``service``, ``model``, ``source``, the figures' names), so
the panels' filters read a rollup as they read a view. The merge side (:func:`merged_sum`,
:func:`merged_quantile`, :func:`merged_count`) is the one spelling of reading a state back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from otel_llm import _semconv as sc
from otel_llm._figures import (
    CHUNK_COUNT,
    FIGURES,
    GENERATION_MS,
    STALL_COUNT,
    STALL_MS,
    TTFT_MS,
    WALL_MS,
    Figure,
)
from otel_llm._measure._stalls import NS_PER_MS
from otel_llm._show._sql._table import CHUNK_GAP_COLUMN, ROLE_COLUMN, TABLE, TYPED
from otel_llm._show._sql._views import (
    ATTEMPT_COLUMNS,
    CALL_COLUMNS,
    CALL_OF_ATTEMPT,
    EVENTS_FLOOR_NS,
    GAPS_COUNTED,
    IDENTITY,
    STARTED_AT,
    THRESHOLD,
    TRACE_ID,
    WINNER_OF_CALL,
    ClickHouse,
    ViewColumn,
    _attempts_at,
)

GRAIN: Final = timedelta(minutes=1)
"""A rollup row's span of time (``toStartOfMinute``): a panel over time reads a rollup only
when its buckets are whole multiples of it."""
WINNERS_ROLLUP: Final = "llm_winners_1m"
CALLS_ROLLUP: Final = "llm_calls_1m"
MINUTE: Final = "minute"
"""The minute the row's attempt (winners) or call (calls) started."""
CALL_MINUTE: Final = "call_minute"
"""The minute the winner's call started (the panels' time range is on the call's start)."""
SUMMED: Final = (WALL_MS, GENERATION_MS, STALL_MS)
"""The winners' figures summed per minute."""
QUANTILED: Final = (WALL_MS, TTFT_MS, STALL_MS)
"""The winners' figures kept as quantile states per minute."""
LEVELS: Final = (0.5, 0.95, 0.99)
"""The quantiles a state can be read back at (a ``quantiles`` state's type names its levels)."""
CALLS: Final = "n_calls"
COUNTED_SUFFIX: Final = "_count"
"""``ttft_ms_count``: the rows whose figure is known (a quantile over none is no row)."""
QUANTILE_SUFFIX: Final = "_q"

_BY_ALIAS: Final = {c.alias: c for c in (*IDENTITY, *CALL_COLUMNS)}
KEYS: Final = tuple(_BY_ALIAS[name] for name in ("service", "source", "provider", "model"))
"""The identity a rollup row is for, as the views name it."""
THRESHOLD_OPTIONS_MS: Final = (100, 250, 500, 1000, 2000, 5000, 10000, 20000)
"""The stall thresholds the dashboards offer besides "as measured": the rollups also hold the
winners' stall figures re-derived at each (``llm_winners_at_1m``, ``llm_stalled_winners_at``)."""
WINNERS_AT_ROLLUP: Final = "llm_winners_at_1m"
STALLED_WINNERS_AT: Final = "llm_stalled_winners_at"
THRESHOLD_KEY: Final = "threshold_ms"
AT_THRESHOLD_SUMMED: Final = (WALL_MS, GENERATION_MS, STALL_MS)
WORST_CALLS: Final = 20
"""Rows of the worst-stalls table (and options of the chosen call)."""
STALLED_WINNERS: Final = "llm_stalled_winners"
CALL_STARTED_AT: Final = "call_started_at"
NEG_STALL_MS: Final = "neg_stall_ms"
"""``-stall_ms``: :data:`STALLED_WINNERS` is sorted by it, then by trace id — the worst-calls
order, read from the start."""
WORST_FIELDS: Final = (
    "started_at",
    "trace_id",
    "source",
    "provider",
    "model",
    "wall_ms",
    "stall_ms",
    "stall_count",
    "max_inter_chunk_ms",
    "ttft_ms",
    "chunk_count",
)
"""The columns of a stalled winner the worst-calls queries read (the views' names)."""
STALL_COUNTS: Final = "stall_counts"
ATTEMPTS_ROLLUP: Final = "llm_attempts_1m"
ATTEMPTS: Final = "n_attempts"
ATTEMPT_KEYS: Final = ("outcome", "leg", "error_type")
"""The attempts' rollup keys besides :data:`KEYS` (view aliases of ``llm_attempts``)."""
GAP_EDGES_MS: Final = (250, 500, 1000, 2000, 5000, 10000, 30000)
"""Upper edges of the chunk-gap bars above the event floor; the last bar is open. The
attempts' rollup counts the recorded gaps by these bars."""
GAPS_AT_FLOOR: Final = "gaps_at_floor"
GAPS_MS: Final = "gaps_ms"
HEDGED: Final = "n_hedged"
HEDGE_WON: Final = "n_hedge_won"
HEDGE_SUMS: Final = ("hedges", "hedge_waste_tokens", "hedge_waste_chunks")
"""The calls' hedge figures summed per minute (view aliases)."""


def quantile_state(figure: Figure) -> str:
    """The column holding ``figure``'s quantile state."""
    return figure.name + QUANTILE_SUFFIX


def count_column(figure: Figure) -> str:
    return figure.name + COUNTED_SUFFIX


def merged_sum(name: str) -> str:
    """A summed column read back."""
    return f"sumMerge({name})"


def gap_bar(gap_ms: str) -> str:
    """The number (1, 2 …) of the chunk-gap bar a recorded gap of ``gap_ms`` ms falls in."""
    edges = enumerate(GAP_EDGES_MS)
    number = " ".join(f"WHEN {gap_ms} <= {edge} THEN {i + 1}" for i, edge in edges)
    return f"CASE {number} ELSE {len(GAP_EDGES_MS) + 1} END"


def merged_map(name: str) -> str:
    """A ``sumMap`` column read back: (keys, counts)."""
    return f"sumMapMerge({name})"


def merged_count(name: str) -> str:
    """A counted column read back."""
    return f"countMerge({name})"


def _levels() -> str:
    return ", ".join(str(q) for q in LEVELS)


def merged_quantile(figure: Figure, q: float) -> str:
    """The ``q`` quantile (one of :data:`LEVELS`) of ``figure`` read back from its states:
    ClickHouse's ``quantiles`` (``quantile``'s reservoir sampling, 8192 values a state, linear
    between the closest ranks as ``quantileExactInclusive``: exact while the merged states
    hold at most 8192 values)."""
    return f"quantilesMerge({_levels()})({quantile_state(figure)})[{LEVELS.index(q) + 1}]"


def _q(name: str) -> str:
    return f'"{name}"'


def _column(view_column: ViewColumn) -> str:
    return _q(view_column.column)


_CALL_ROLE: Final = f"{_q(ROLE_COLUMN)} = '{sc.SPAN_ROLE_CALL}'"
_ATTEMPT_ROLE: Final = f"{_q(ROLE_COLUMN)} = '{sc.SPAN_ROLE_ATTEMPT}'"
_KEY_TYPES: Final = {
    THRESHOLD_KEY: "Int64",
    "service": "LowCardinality(String)",
    **dict.fromkeys(
        ("source", "provider", "model", "outcome", "leg", "error_type"), "Nullable(String)"
    ),
}
"""The views' types (the exporter's ``ServiceName``, otel-llm's typed columns), so a panel's
columns have the same types from a rollup as from the spans."""
_MAP_TYPE: Final = "AggregateFunction(sumMap, Array(Int64), Array(UInt64))"

_FIGURE_TYPE: Final = "Nullable(Int64)"


def _figure(expr: str) -> str:
    """``expr`` as the states' argument type (a state's type names it exactly)."""
    return f"CAST({expr} AS {_FIGURE_TYPE})"


def _engine(dialect: ClickHouse) -> str:
    return "ReplicatedAggregatingMergeTree()" if dialect.cluster else "AggregatingMergeTree()"


def _one_map(key: str) -> tuple[str, str]:
    """``sumMap`` arguments counting one ``key`` (none when it is NULL)."""
    return (
        f"if(isNull({key}), CAST([] AS Array(Int64)), [toInt64(assumeNotNull({key}))])",
        f"if(isNull({key}), CAST([] AS Array(UInt64)), [toUInt64(1)])",
    )


def _table(
    dialect: ClickHouse,
    name: str,
    minutes: tuple[str, ...],
    values: list[str],
    extra_keys: tuple[str, ...] = (),
) -> str:
    keys = [*minutes, *(k.alias for k in KEYS), *extra_keys]
    columns = [f"    {m} DateTime" for m in minutes]
    columns += [f"    {k.alias} {_KEY_TYPES[k.alias]}" for k in KEYS]
    columns += [f"    {k} {_KEY_TYPES[k]}" for k in extra_keys]
    columns += [f"    {v}" for v in values]
    body = ",\n".join(columns)
    return (
        f"CREATE TABLE IF NOT EXISTS {dialect.relation(name)}{dialect.on_cluster()} (\n{body}\n)"
        f" ENGINE = {_engine(dialect)}\nPARTITION BY toDate({minutes[0]})\n"
        f"ORDER BY ({', '.join(keys)})\nSETTINGS allow_nullable_key = 1"
    )


def _winner_values() -> list[str]:
    values = [f"{CALLS} AggregateFunction(count)"]
    values += [f"{f.name} AggregateFunction(sum, {_FIGURE_TYPE})" for f in SUMMED]
    values += [f"{count_column(f)} AggregateFunction(count, {_FIGURE_TYPE})" for f in QUANTILED]
    values += [
        f"{quantile_state(f)} AggregateFunction(quantiles({_levels()}), {_FIGURE_TYPE})"
        for f in QUANTILED
    ]
    values.append(f"{STALL_COUNTS} {_MAP_TYPE}")
    return values


def _attempt_values() -> list[str]:
    return [
        f"{ATTEMPTS} AggregateFunction(count)",
        f"{GAPS_AT_FLOOR} AggregateFunction(sum, Int64)",
        f"{GAPS_MS} {_MAP_TYPE}",
    ]


def _call_values() -> list[str]:
    values = [f"{name} AggregateFunction(count)" for name in (CALLS, HEDGED, HEDGE_WON)]
    values += [f"{name} AggregateFunction(sum, {_FIGURE_TYPE})" for name in HEDGE_SUMS]
    return values


CALL_STARTED: Final = "c_started"
"""In a winner join, the start of the winner's call."""


def _calls_with_winners(source: str, calls: str = "") -> str:
    """The call spans of ``source`` (that satisfy ``calls``, on ``otel_traces``' columns) as a
    winner join's right side: their span id, the number of their winning attempt, their start
    (:data:`CALL_STARTED`)."""
    (span, winner) = WINNER_OF_CALL
    call_of = {c.alias: c.column for c in CALL_COLUMNS}
    extra = f" AND {calls}" if calls else ""
    return (
        f"(SELECT {_q(call_of[span])} AS c_span, {_q(call_of[winner])} AS c_winner, "
        f"{_q(STARTED_AT.column)} AS {CALL_STARTED}\n"
        f"    FROM {source} WHERE {_CALL_ROLE}{extra}) AS c"
    )


def _winner_join(
    source: str, select: str, *, winners: str = "", calls: str = "", group_by: str = ""
) -> str:
    """``select`` over the winning attempts of ``source`` (that satisfy ``winners``; columns
    ``a_<view alias>``) whose call satisfies ``calls`` (the call's start:
    :data:`CALL_STARTED`; ``source`` is the inserted block, in a view). The attempts whose
    (call, number) is a call's (span id, winner): the rule of
    :func:`~otel_llm._show._sql._views.winner_on`, read as the panels read it from the spans —
    each attempt row once, however many rows its call has (a semi join), so a span stored
    twice is counted twice there and here, never once per pairing of the copies."""
    (call, number) = CALL_OF_ATTEMPT
    attempt_of = {c.alias: c.column for c in (*IDENTITY, ViewColumn(call, "ParentSpanId"))}
    attempt_of[number] = TYPED["AttemptNumber"].name
    inner = ", ".join(
        [
            f"{_q(STARTED_AT.column)} AS a_started",
            f"{_q(TRACE_ID.column)} AS a_trace_id",
            f"{_q(attempt_of[call])} AS a_call",
            f"{_q(attempt_of[number])} AS a_number",
            *(f"{_column(k)} AS a_{k.alias}" for k in KEYS),
            *(f"{_q(f.column)} AS a_{f.name}" for f in FIGURES),
        ]
    )
    filtered = f"\nWHERE {winners}" if winners else ""
    grouped = f"\nGROUP BY {group_by}" if group_by else ""
    return f"""SELECT
    {select}
FROM (SELECT {inner} FROM {source} WHERE {_ATTEMPT_ROLE}) AS a
LEFT SEMI JOIN {_calls_with_winners(source, calls)}
    ON a_call = c_span AND a_number = c_winner{filtered}{grouped}"""


def _winner_select(source: str, calls: str = "") -> str:
    """The winners' states of the spans in ``source`` (of the calls that satisfy ``calls``)."""
    states = [f"countState() AS {CALLS}"]
    states += [f"sumState({_figure(f'a_{f.name}')}) AS {f.name}" for f in SUMMED]
    states += [f"countState({_figure(f'a_{f.name}')}) AS {count_column(f)}" for f in QUANTILED]
    states += [
        f"quantilesState({_levels()})({_figure(f'a_{f.name}')}) AS {quantile_state(f)}"
        for f in QUANTILED
    ]
    keys_of, ones = _one_map(f"a_{STALL_COUNT.name}")
    states.append(f"sumMapState({keys_of}, {ones}) AS {STALL_COUNTS}")
    select = ",\n    ".join(
        [
            f"toStartOfMinute({CALL_STARTED}) AS {CALL_MINUTE}",
            f"toStartOfMinute(a_started) AS {MINUTE}",
            *(f"a_{k.alias} AS {k.alias}" for k in KEYS),
            *states,
        ]
    )
    keys = ", ".join([CALL_MINUTE, MINUTE, *(k.alias for k in KEYS)])
    return _winner_join(source, select, calls=calls, group_by=keys)


def _stalled_columns() -> dict[str, tuple[str, str]]:
    """Each column of :data:`STALLED_WINNERS`: its type and its value in the winner join."""
    figures = {f.name: (_FIGURE_TYPE, _figure(f"a_{f.name}")) for f in FIGURES}
    return {
        CALL_STARTED_AT: ("DateTime64(9)", CALL_STARTED),
        STARTED_AT.alias: ("DateTime64(9)", "a_started"),
        TRACE_ID.alias: ("String", "a_trace_id"),
        NEG_STALL_MS: ("Int64", f"-assumeNotNull(a_{STALL_MS.name})"),
        **{k.alias: (_KEY_TYPES[k.alias], f"a_{k.alias}") for k in KEYS},
        **{name: figures[name] for name in WORST_FIELDS if name in figures},
    }


def _stalled_select(source: str, calls: str = "") -> str:
    """The rows of :data:`STALLED_WINNERS` for the spans in ``source`` (of the calls that
    satisfy ``calls``)."""
    columns = _stalled_columns()
    select = ",\n    ".join(f"{value} AS {name}" for name, (_, value) in columns.items())
    return _winner_join(source, select, winners=f"a_{STALL_MS.name} > 0", calls=calls)


def _call_select(source: str, where: str = "") -> str:
    """The calls' states of the spans in ``source``."""
    call_of = {c.alias: _q(c.column) for c in CALL_COLUMNS}
    keys = ",\n    ".join(f"{_column(k)} AS {k.alias}" for k in KEYS)
    states = [
        f"countState() AS {CALLS}",
        f"countStateIf(ifNull({call_of['hedges']}, 0) > 0) AS {HEDGED}",
        f"countStateIf(ifNull({call_of['hedge_won']}, false)) AS {HEDGE_WON}",
        *(f"sumState({_figure(call_of[name])}) AS {name}" for name in HEDGE_SUMS),
    ]
    state_sql = ",\n    ".join(states)
    extra = f" AND {where}" if where else ""
    return f"""SELECT
    toStartOfMinute({_q(STARTED_AT.column)}) AS {MINUTE},
    {keys},
    {state_sql}
FROM {source}
WHERE {_CALL_ROLE}{extra}
GROUP BY {MINUTE}, {", ".join(k.alias for k in KEYS)}"""


def _attempt_select(source: str, where: str = "") -> str:
    """The attempts' states of the spans in ``source``: counts, and the gaps of streamed
    attempts whose chunk events are complete (as the chunk-gap bars count them)."""
    attempt_of = {c.alias: _q(c.column) for c in ATTEMPT_COLUMNS}
    keys = [_column(k) + f" AS {k.alias}" for k in KEYS]
    keys += [f"{attempt_of[name]} AS {name}" for name in ATTEMPT_KEYS]
    complete = GAPS_COUNTED
    above = f"arrayFilter(g -> g > {EVENTS_FLOOR_NS}, {_q(CHUNK_GAP_COLUMN)})"
    chunks = f"coalesce({_q(CHUNK_COUNT.column)}, 0)"
    at_floor = f"toInt64(greatest({chunks} - 1, 0) - length({above}))"
    bars = f"arrayMap(g -> toInt64({gap_bar(f'toFloat64(g / {NS_PER_MS})')}), {above})"
    ones = f"arrayMap(g -> toUInt64(1), {above})"
    states = [
        f"countState() AS {ATTEMPTS}",
        f"sumStateIf({at_floor}, {complete}) AS {GAPS_AT_FLOOR}",
        f"sumMapStateIf({bars}, {ones}, {complete}) AS {GAPS_MS}",
    ]
    extra = f" AND {where}" if where else ""
    key_sql = ",\n    ".join(keys)
    state_sql = ",\n    ".join(states)
    names = ", ".join([*(k.alias for k in KEYS), *ATTEMPT_KEYS])
    return f"""SELECT
    toStartOfMinute({_q(STARTED_AT.column)}) AS {MINUTE},
    {key_sql},
    {state_sql}
FROM {source}
WHERE {_ATTEMPT_ROLE}{extra}
GROUP BY {MINUTE}, {names}"""


@dataclass(frozen=True, slots=True)
class _AtThreshold(ClickHouse):
    """``llm_attempts_at``'s re-derivation at one fixed threshold (a literal, not a
    parameter: a materialized view takes none)."""

    threshold_ms: int = 0

    def parameter(self) -> str:
        return str(self.threshold_ms)


def _winner_at_join(
    source: str, select: str, *, winners: str = "", calls: str = "", group_by: str = ""
) -> str:
    """``select`` over the winning attempts of ``source`` re-derived at every offered
    threshold (``a``: ``llm_attempts_at``'s columns, one row per threshold, that satisfy
    ``winners``) whose call satisfies ``calls``: paired with their calls as
    :func:`_winner_join` pairs them."""
    (call, number) = CALL_OF_ATTEMPT
    database = source.split(".", 1)[0]
    attempts = "\nUNION ALL\n".join(
        f"({_attempts_at(_AtThreshold(database, threshold_ms=t))})" for t in THRESHOLD_OPTIONS_MS
    )
    filtered = f"\nWHERE {winners}" if winners else ""
    grouped = f"\nGROUP BY {group_by}" if group_by else ""
    return f"""SELECT
    {select}
FROM (
{attempts}
) AS a
LEFT SEMI JOIN {_calls_with_winners(source, calls)}
    ON a.{call} = c_span AND a.{number} = c_winner{filtered}{grouped}"""


def _winner_at_select(source: str, calls: str = "") -> str:
    """The winners' stall figures re-derived at each offered threshold, as states (of the
    calls that satisfy ``calls``)."""
    states = [f"sumState({_figure(f'a.{f.name}')}) AS {f.name}" for f in AT_THRESHOLD_SUMMED]
    keys_of, ones = _one_map(f"a.{STALL_COUNT.name}")
    states.append(f"sumMapState({keys_of}, {ones}) AS {STALL_COUNTS}")
    select = ",\n    ".join(
        [
            f"toStartOfMinute({CALL_STARTED}) AS {CALL_MINUTE}",
            f"toStartOfMinute(a.{STARTED_AT.alias}) AS {MINUTE}",
            *(f"a.{k.alias} AS {k.alias}" for k in KEYS),
            f"a.{THRESHOLD.alias} AS {THRESHOLD_KEY}",
            *states,
        ]
    )
    keys = ", ".join([CALL_MINUTE, MINUTE, *(k.alias for k in KEYS), THRESHOLD_KEY])
    return _winner_at_join(source, select, calls=calls, group_by=keys)


def _stalled_at_columns() -> dict[str, tuple[str, str]]:
    """Each column of :data:`STALLED_WINNERS_AT`: its type and its value in the join."""
    figures = {f.name: (_FIGURE_TYPE, _figure(f"a.{f.name}")) for f in FIGURES}
    return {
        THRESHOLD_KEY: ("Int64", f"a.{THRESHOLD.alias}"),
        CALL_STARTED_AT: ("DateTime64(9)", CALL_STARTED),
        STARTED_AT.alias: ("DateTime64(9)", f"a.{STARTED_AT.alias}"),
        TRACE_ID.alias: ("String", f"a.{TRACE_ID.alias}"),
        NEG_STALL_MS: ("Int64", f"-assumeNotNull(a.{STALL_MS.name})"),
        **{k.alias: (_KEY_TYPES[k.alias], f"a.{k.alias}") for k in KEYS},
        **{name: figures[name] for name in WORST_FIELDS if name in figures},
    }


def _stalled_at_select(source: str, calls: str = "") -> str:
    columns = _stalled_at_columns()
    select = ",\n    ".join(f"{value} AS {name}" for name, (_, value) in columns.items())
    return _winner_at_join(source, select, winners=f"a.{STALL_MS.name} > 0", calls=calls)


def _winner_at_values() -> list[str]:
    values = [f"{f.name} AggregateFunction(sum, {_FIGURE_TYPE})" for f in AT_THRESHOLD_SUMMED]
    values.append(f"{STALL_COUNTS} {_MAP_TYPE}")
    return values


def _view_name(table: str) -> str:
    return f"{table}_mv"


def rollup_statements(dialect: ClickHouse) -> tuple[str, ...]:
    """The rollup tables and the materialized views that feed them (idempotent)."""
    source = dialect.relation(TABLE)
    out: list[str] = [
        _table(dialect, WINNERS_ROLLUP, (CALL_MINUTE, MINUTE), _winner_values()),
        _table(dialect, CALLS_ROLLUP, (MINUTE,), _call_values()),
        _table(dialect, ATTEMPTS_ROLLUP, (MINUTE,), _attempt_values(), ATTEMPT_KEYS),
    ]
    columns = ",\n".join(f"    {name} {kind}" for name, (kind, _) in _stalled_columns().items())
    engine = "ReplicatedMergeTree()" if dialect.cluster else "MergeTree()"
    out.append(
        f"CREATE TABLE IF NOT EXISTS {dialect.relation(STALLED_WINNERS)}{dialect.on_cluster()} "
        f"(\n{columns}\n) ENGINE = {engine}\nPARTITION BY toDate({CALL_STARTED_AT})\n"
        f"ORDER BY ({NEG_STALL_MS}, {TRACE_ID.alias})"
    )
    out.append(
        _table(
            dialect, WINNERS_AT_ROLLUP, (CALL_MINUTE, MINUTE), _winner_at_values(), (THRESHOLD_KEY,)
        )
    )
    columns = ",\n".join(f"    {name} {kind}" for name, (kind, _) in _stalled_at_columns().items())
    out.append(
        f"CREATE TABLE IF NOT EXISTS {dialect.relation(STALLED_WINNERS_AT)}{dialect.on_cluster()} "
        f"(\n{columns}\n) ENGINE = {engine}\nPARTITION BY toDate({CALL_STARTED_AT})\n"
        f"ORDER BY ({THRESHOLD_KEY}, {NEG_STALL_MS}, {TRACE_ID.alias})"
    )
    for table, select in (
        (WINNERS_ROLLUP, _winner_select(source)),
        (CALLS_ROLLUP, _call_select(source)),
        (ATTEMPTS_ROLLUP, _attempt_select(source)),
        (STALLED_WINNERS, _stalled_select(source)),
        (WINNERS_AT_ROLLUP, _winner_at_select(source)),
        (STALLED_WINNERS_AT, _stalled_at_select(source)),
    ):
        out.append(
            f"CREATE MATERIALIZED VIEW IF NOT EXISTS {dialect.relation(_view_name(table))}"
            f"{dialect.on_cluster()}\nTO {dialect.relation(table)}\nAS {select}"
        )
    return tuple(out)


def _between(expr: str, start: str, end: str) -> str:
    return f"{expr} >= {start} AND {expr} < {end}"


def backfill_statements(dialect: ClickHouse, start: str, end: str) -> tuple[str, ...]:
    """Rebuild the rollups for the calls (and attempts) that started in [``start``, ``end``)
    (SQL instants, whole minutes) from the spans: drop those minutes' rows, then insert them
    again. Run it after loading spans the views did not see (an import, a block that split a
    call from its winner: :func:`coverage_sql`)."""
    source = dialect.relation(TABLE)
    started = _between(_q(STARTED_AT.column), start, end)
    return (
        f"DELETE FROM {dialect.relation(WINNERS_ROLLUP)}{dialect.on_cluster()} "
        f"WHERE {_between(CALL_MINUTE, start, end)}",
        f"INSERT INTO {dialect.relation(WINNERS_ROLLUP)}\n{_winner_select(source, started)}",
        f"DELETE FROM {dialect.relation(CALLS_ROLLUP)}{dialect.on_cluster()} "
        f"WHERE {_between(MINUTE, start, end)}",
        f"INSERT INTO {dialect.relation(CALLS_ROLLUP)}\n{_call_select(source, started)}",
        f"DELETE FROM {dialect.relation(ATTEMPTS_ROLLUP)}{dialect.on_cluster()} "
        f"WHERE {_between(MINUTE, start, end)}",
        f"INSERT INTO {dialect.relation(ATTEMPTS_ROLLUP)}\n{_attempt_select(source, started)}",
        f"DELETE FROM {dialect.relation(STALLED_WINNERS)}{dialect.on_cluster()} "
        f"WHERE {_between(CALL_STARTED_AT, start, end)}",
        f"INSERT INTO {dialect.relation(STALLED_WINNERS)}\n{_stalled_select(source, started)}",
        f"DELETE FROM {dialect.relation(WINNERS_AT_ROLLUP)}{dialect.on_cluster()} "
        f"WHERE {_between(CALL_MINUTE, start, end)}",
        f"INSERT INTO {dialect.relation(WINNERS_AT_ROLLUP)}\n{_winner_at_select(source, started)}",
        f"DELETE FROM {dialect.relation(STALLED_WINNERS_AT)}{dialect.on_cluster()} "
        f"WHERE {_between(CALL_STARTED_AT, start, end)}",
        f"INSERT INTO {dialect.relation(STALLED_WINNERS_AT)}\n"
        f"{_stalled_at_select(source, started)}",
    )


def coverage_sql(dialect: ClickHouse, start: str, end: str) -> str:
    """One row: the winners of the calls that started in [``start``, ``end``), as the panels
    count them from the spans (each stored copy of a winning attempt's span whose call is
    stored) and as the winners' rollup does (equal when it missed none)."""
    started = _between(_q(STARTED_AT.column), start, end)
    return f"""SELECT
    (SELECT count() FROM (
{_winner_join(dialect.relation(TABLE), "1", calls=started)}
    )) AS spans,
    (SELECT {merged_count(CALLS)} FROM {dialect.relation(WINNERS_ROLLUP)}
     WHERE {_between(CALL_MINUTE, start, end)}) AS rolled_up"""


def contents_sql(dialect: ClickHouse, table: str) -> str:
    """Every row of rollup ``table`` with its states read back (merged per key), in key
    order: what it holds, for a person or a test to read."""
    minutes: tuple[str, ...]
    if table == WINNERS_ROLLUP:
        minutes = (CALL_MINUTE, MINUTE)
        values = [merged_count(CALLS)]
        values += [merged_sum(f.name) for f in SUMMED]
        values += [merged_count(count_column(f)) for f in QUANTILED]
        values += [merged_quantile(f, q) for f in QUANTILED for q in LEVELS]
        values.append(merged_map(STALL_COUNTS))
        extra: tuple[str, ...] = ()
    elif table == CALLS_ROLLUP:
        minutes = (MINUTE,)
        values = [merged_count(name) for name in (CALLS, HEDGED, HEDGE_WON)]
        values += [merged_sum(name) for name in HEDGE_SUMS]
        extra = ()
    elif table == ATTEMPTS_ROLLUP:
        minutes = (MINUTE,)
        values = [merged_count(ATTEMPTS), merged_sum(GAPS_AT_FLOOR), merged_map(GAPS_MS)]
        extra = ATTEMPT_KEYS
    elif table == WINNERS_AT_ROLLUP:
        minutes = (CALL_MINUTE, MINUTE)
        values = [merged_sum(f.name) for f in AT_THRESHOLD_SUMMED]
        values.append(merged_map(STALL_COUNTS))
        extra = (THRESHOLD_KEY,)
    elif table in (STALLED_WINNERS, STALLED_WINNERS_AT):
        first = f"{THRESHOLD_KEY}, " if table == STALLED_WINNERS_AT else ""
        return (
            f"SELECT * FROM {dialect.relation(table)}\n"
            f"ORDER BY {first}{NEG_STALL_MS}, {TRACE_ID.alias}, {CALL_STARTED_AT}"
        )
    else:
        raise ValueError(f"not a rollup: {table}")
    keys = ", ".join([*minutes, *(k.alias for k in KEYS), *extra])
    return (
        f"SELECT {keys}, {', '.join(values)}\nFROM {dialect.relation(table)}\n"
        f"GROUP BY {keys}\nORDER BY {keys}"
    )
