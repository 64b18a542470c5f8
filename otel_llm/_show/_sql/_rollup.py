"""ClickHouse's 1-minute rollups of the over-time panels: ``AggregatingMergeTree`` tables fed by
materialized views as the exporter inserts spans, so a panel over a day reads a few thousand
rows of aggregate states instead of millions of spans.

- :data:`WINNERS_ROLLUP` (``llm_winners_1m``): each call's winning attempt, as measured, by the
  minute the call started, the minute its winner started, and the winner's service, source,
  provider and model — the sums of wall, net generation and stall (the time split and the stall
  share), ``quantilesState`` of wall, TTFT and stall (the TTFT percentiles), the calls and the
  TTFTs counted. Its view pairs each call span with its winning attempt (the attempt of that
  call whose number is the call's winner: :func:`~otel_llm._show._sql._views.winner_on`) *in the
  inserted block*: a materialized view sees the rows of one insert, so a call whose winning
  attempt was inserted in another block is not counted (the SDK ends a winning attempt just
  before its call and exports them in one batch; :func:`coverage_sql` counts what a rollup
  missed, :func:`backfill_statements` rebuilds a range from the spans).
- :data:`CALLS_ROLLUP` (``llm_calls_1m``): every call by the minute it started and its service,
  source, provider and model — calls, hedged calls, calls a hedge won, hedges and their waste
  (the hedge rate). Each call span alone feeds it: nothing is missed.

The columns keep the views' names (``service``, ``model``, ``source``, the figures' names), so
the panels' filters read a rollup as they read a view. The merge side (:func:`merged_sum`,
:func:`merged_quantile`, :func:`merged_count`) is the one spelling of reading a state back.
"""

from __future__ import annotations

from typing import Final

from otel_llm import _semconv as sc
from otel_llm._figures import GENERATION_MS, STALL_MS, TTFT_MS, WALL_MS, Figure
from otel_llm._show._sql._table import TABLE, TYPED
from otel_llm._show._sql._views import (
    CALL_COLUMNS,
    CALL_OF_ATTEMPT,
    IDENTITY,
    STARTED_AT,
    WINNER_OF_CALL,
    ClickHouse,
    ViewColumn,
)

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
CALLS: Final = "calls"
COUNTED_SUFFIX: Final = "_count"
"""``ttft_ms_count``: the rows whose figure is known (a quantile over none is no row)."""
QUANTILE_SUFFIX: Final = "_q"

_BY_ALIAS: Final = {c.alias: c for c in (*IDENTITY, *CALL_COLUMNS)}
KEYS: Final = tuple(_BY_ALIAS[name] for name in ("service", "source", "provider", "model"))
"""The identity a rollup row is for, as the views name it."""
HEDGED: Final = "hedged"
HEDGE_WON: Final = "hedge_won"
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


_CALL_ROLE: Final = f"{_q(TYPED['LlmRole'].name)} = '{sc.SPAN_ROLE_CALL}'"
_ATTEMPT_ROLE: Final = f"{_q(TYPED['LlmRole'].name)} = '{sc.SPAN_ROLE_ATTEMPT}'"
_KEY_TYPES: Final = {
    "service": "LowCardinality(String)",
    "source": "LowCardinality(Nullable(String))",
    "provider": "LowCardinality(Nullable(String))",
    "model": "LowCardinality(Nullable(String))",
}
_FIGURE_TYPE: Final = "Nullable(Int64)"


def _figure(expr: str) -> str:
    """``expr`` as the states' argument type (a state's type names it exactly)."""
    return f"CAST({expr} AS {_FIGURE_TYPE})"


def _engine(dialect: ClickHouse) -> str:
    return "ReplicatedAggregatingMergeTree()" if dialect.cluster else "AggregatingMergeTree()"


def _table(dialect: ClickHouse, name: str, minutes: tuple[str, ...], values: list[str]) -> str:
    keys = [*minutes, *(k.alias for k in KEYS)]
    columns = [f"    {m} DateTime" for m in minutes]
    columns += [f"    {k.alias} {_KEY_TYPES[k.alias]}" for k in KEYS]
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
    return values


def _call_values() -> list[str]:
    values = [f"{name} AggregateFunction(count)" for name in (CALLS, HEDGED, HEDGE_WON)]
    values += [f"{name} AggregateFunction(sum, {_FIGURE_TYPE})" for name in HEDGE_SUMS]
    return values


def _winner_select(source: str, where: str = "") -> str:
    """The winners' states of the spans in ``source`` (the inserted block, in the view)."""
    (call, number), (span, winner) = CALL_OF_ATTEMPT, WINNER_OF_CALL
    attempt_of = {c.alias: c.column for c in (*IDENTITY, ViewColumn(call, "ParentSpanId"))}
    attempt_of[number] = TYPED["AttemptNumber"].name
    call_of = {c.alias: c.column for c in CALL_COLUMNS}
    figures = {f.name: _q(f.column) for f in (*SUMMED, *QUANTILED)}
    inner = ", ".join(
        [
            f"{_q(STARTED_AT.column)} AS a_started",
            f"{_q(attempt_of[call])} AS a_call",
            f"{_q(attempt_of[number])} AS a_number",
            *(f"{_column(k)} AS a_{k.alias}" for k in KEYS),
            *(f"{column} AS a_{name}" for name, column in figures.items()),
        ]
    )
    states = [f"countState() AS {CALLS}"]
    states += [f"sumState({_figure(f'a_{f.name}')}) AS {f.name}" for f in SUMMED]
    states += [f"countState({_figure(f'a_{f.name}')}) AS {count_column(f)}" for f in QUANTILED]
    states += [
        f"quantilesState({_levels()})({_figure(f'a_{f.name}')}) AS {quantile_state(f)}"
        for f in QUANTILED
    ]
    keys = ",\n    ".join(f"a_{k.alias} AS {k.alias}" for k in KEYS)
    state_sql = ",\n    ".join(states)
    extra = f" AND {where}" if where else ""
    return f"""SELECT
    toStartOfMinute(c.{_q(STARTED_AT.column)}) AS {CALL_MINUTE},
    toStartOfMinute(a_started) AS {MINUTE},
    {keys},
    {state_sql}
FROM {source} AS c
INNER JOIN (SELECT {inner} FROM {source} WHERE {_ATTEMPT_ROLE}) AS a
    ON a_call = c.{_q(call_of[span])} AND a_number = c.{_q(call_of[winner])}
WHERE c.{_CALL_ROLE}{extra}
GROUP BY {CALL_MINUTE}, {MINUTE}, {", ".join(k.alias for k in KEYS)}"""


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


def _view_name(table: str) -> str:
    return f"{table}_mv"


def rollup_statements(dialect: ClickHouse) -> tuple[str, ...]:
    """The two rollup tables and the materialized views that feed them (idempotent)."""
    source = dialect.relation(TABLE)
    out: list[str] = [
        _table(dialect, WINNERS_ROLLUP, (CALL_MINUTE, MINUTE), _winner_values()),
        _table(dialect, CALLS_ROLLUP, (MINUTE,), _call_values()),
    ]
    for table, select in (
        (WINNERS_ROLLUP, _winner_select(source)),
        (CALLS_ROLLUP, _call_select(source)),
    ):
        out.append(
            f"CREATE MATERIALIZED VIEW IF NOT EXISTS {dialect.relation(_view_name(table))}"
            f"{dialect.on_cluster()}\nTO {dialect.relation(table)}\nAS {select}"
        )
    return tuple(out)


def _between(expr: str, start: str, end: str) -> str:
    return f"{expr} >= {start} AND {expr} < {end}"


def backfill_statements(dialect: ClickHouse, start: str, end: str) -> tuple[str, ...]:
    """Rebuild both rollups for the calls that started in [``start``, ``end``) (SQL instants,
    whole minutes) from the spans: drop those minutes' rows, then insert them again. Run it
    after loading spans the views did not see (an import, a block that split a call from its
    winner: :func:`coverage_sql`)."""
    source = dialect.relation(TABLE)
    started = _between(f"c.{_q(STARTED_AT.column)}", start, end)
    return (
        f"DELETE FROM {dialect.relation(WINNERS_ROLLUP)}{dialect.on_cluster()} "
        f"WHERE {_between(CALL_MINUTE, start, end)}",
        f"INSERT INTO {dialect.relation(WINNERS_ROLLUP)}\n{_winner_select(source, started)}",
        f"DELETE FROM {dialect.relation(CALLS_ROLLUP)}{dialect.on_cluster()} "
        f"WHERE {_between(MINUTE, start, end)}",
        f"INSERT INTO {dialect.relation(CALLS_ROLLUP)}\n"
        f"{_call_select(source, _between(_q(STARTED_AT.column), start, end))}",
    )


def coverage_sql(dialect: ClickHouse, start: str, end: str) -> str:
    """One row: the calls with a winner that started in [``start``, ``end``), as the spans
    count them and as the winners' rollup does (equal when it missed none)."""
    call_of = {c.alias: _q(c.column) for c in CALL_COLUMNS}
    (_, winner) = WINNER_OF_CALL
    return f"""SELECT
    (SELECT count() FROM {dialect.relation(TABLE)}
     WHERE {_CALL_ROLE} AND {call_of[winner]} IS NOT NULL
       AND {_between(_q(STARTED_AT.column), start, end)}) AS spans,
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
    elif table == CALLS_ROLLUP:
        minutes = (MINUTE,)
        values = [merged_count(name) for name in (CALLS, HEDGED, HEDGE_WON)]
        values += [merged_sum(name) for name in HEDGE_SUMS]
    else:
        raise ValueError(f"not a rollup: {table}")
    keys = ", ".join([*minutes, *(k.alias for k in KEYS)])
    return (
        f"SELECT {keys}, {', '.join(values)}\nFROM {dialect.relation(table)}\n"
        f"GROUP BY {keys}\nORDER BY {keys}"
    )
