"""Synthetic calls generated inside ClickHouse (chDB) by SQL over ``numbers()``: the exporter's
columns of a call span and its attempt spans, inserted with the exporter's columns only, so
ClickHouse computes the typed columns and the materialized views fill the rollups as they would
for the Collector. Millions of calls build in minutes, none of them row by row from Python — the
rollup tests (a few thousand calls) and the 10M-call ClickHouse benchmark use it.

Each call (deterministic from its number and ``seed``) is one of:

- 80 %: one attempt, ok (30 % of them stalled one to three times);
- 8 %: failed over — the first source answers 500, the next one streams;
- 7 %: hedged — the primary stalls, a hedge leg starts 0.5 to 3.5 s later (often in the next
  minute), and one of the two wins (the other is ``hedge_cancelled``, with waste);
- 3 %: not streamed;
- 2 %: failed — two attempts, both 500, no winner.

Three sources (``a``/``sim``, ``b``/``sim``, ``eu``/``sim-eu``) with four models each, two
services; the call span carries its winner's figures and source and the first source's model,
as the client writes it; stalled attempts carry a chunk event per stall above the event floor.
"""

from __future__ import annotations

from typing import Final

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
from otel_llm._show._sql._clickhouse import DATABASE
from otel_llm._show._sql._table import BASE_COLUMNS, TABLE

THRESHOLD_MS: Final = 100
FLOOR_MS: Final = 100
SOURCES: Final = (("a", "sim", "smooth"), ("b", "sim", "stall"), ("eu", "sim-eu", "stalls"))
SERVICES: Final = ("chat-api", "batch-jobs")
MODELS_PER_SOURCE: Final = 4


def _array(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def _s(expr: str) -> str:
    """A value as an attribute's text ('' when NULL: the key is then left out)."""
    return f"ifNull(toString({expr}), '')"


def _calls(first: int, count: int, total: int, end_ns: int, spread_ns: int, seed: int) -> str:
    """One row per call with everything its spans need, attempts as arrays (index j - 1)."""
    h = f"cityHash64(number, {seed})"
    sources, providers, models = (_array(tuple(s[i] for s in SOURCES)) for i in range(3))
    return f"""
SELECT
    number AS i,
    {h} AS r,
    r % 100 AS roll,
    multiIf(roll < 80, 'single', roll < 88, 'failover', roll < 95, 'hedge',
            roll < 98, 'unstreamed', 'failed') AS kind,
    if(kind = 'single' OR kind = 'unstreamed', 1, 2) AS n,
    kind = 'hedge' AND bitAnd(intDiv(r, 7), 1) = 1 AS hedge_won,
    multiIf(kind = 'failed', NULL, kind = 'failover', 2, hedge_won, 2, 1) AS winner,
    {_array(SERVICES)}[1 + intDiv(r, 3) % {len(SERVICES)}] AS service,
    toInt64({end_ns - spread_ns} + number * {spread_ns // max(total, 1)}
        + intDiv(r, 11) % 1000000) AS call_ns,
    [1 + intDiv(r, 100) % 3, 1 + (intDiv(r, 100) + 1) % 3] AS src,
    arrayMap(s -> {sources}[s], src) AS source,
    arrayMap(s -> {providers}[s], src) AS provider,
    arrayMap(s -> {models}[s] || '-' || toString(intDiv(r, 1000) % {MODELS_PER_SOURCE}), src)
        AS model,
    arrayMap(j -> multiIf(
        kind = 'single' OR kind = 'unstreamed', '{sc.OUTCOME_OK}',
        kind = 'failed', '{sc.OUTCOME_ERROR}',
        kind = 'failover', if(j = 1, '{sc.OUTCOME_ERROR}', '{sc.OUTCOME_OK}'),
        j = winner, '{sc.OUTCOME_OK}', '{sc.OUTCOME_HEDGE_CANCELLED}'), [1, 2]) AS outcome,
    arrayMap(j -> if(kind = 'hedge' AND j = 2, '{sc.LEG_HEDGE}', '{sc.LEG_PRIMARY}'), [1, 2])
        AS leg,
    kind != 'unstreamed' AS stream,
    arrayMap(j -> if(outcome[j] = '{sc.OUTCOME_OK}', 1, 0), [1, 2]) AS has_figures,
    arrayMap(j -> if(kind = 'hedge' AND j = 1, 1 + intDiv(r, 10000 * j) % 3,
        if(intDiv(r, 10000 * j) % 10 < 7, 0, 1 + intDiv(r, 100000 * j) % 3)), [1, 2])
        AS stalls,
    arrayMap(j -> toInt64(150 + intDiv(r, 1000000 * j) % 1500), [1, 2]) AS each_stall_ms,
    arrayMap(j -> toInt64(20 + intDiv(r, 10000000 * j) % 800), [1, 2]) AS ttft,
    arrayMap(j -> toInt64(20 + intDiv(r, 100000000 * j) % 200), [1, 2]) AS chunks,
    arrayMap(j -> stalls[j] * each_stall_ms[j], [1, 2]) AS stall_ms,
    arrayMap(j -> ttft[j] + chunks[j] * 5 + stall_ms[j], [1, 2]) AS wall,
    arrayMap(j -> if(outcome[j] = '{sc.OUTCOME_ERROR}', toInt64(3), wall[j]), [1, 2]) AS took_ms,
    [toInt64(100000),
     multiIf(kind = 'hedge', toInt64((500 + intDiv(r, 1000000000) % 3000) * 1000000),
             toInt64((took_ms[1] + 50) * 1000000))] AS offset_ns,
    if(kind = 'hedge', 1, 0) AS hedges,
    if(kind = 'hedge', 7 + intDiv(r, 17) % 40, NULL) AS waste_chunks,
    if(kind = 'hedge', waste_chunks * 3, NULL) AS waste_tokens,
    intDiv(r, 13) % 100 AS input_tokens
FROM numbers({first}, {count})"""


def _attempt_attributes() -> str:
    """The attempt span's attributes (j: its number), empty values left out."""
    figures = "has_figures[j] = 1 AND stream"
    pairs = [
        (sc.SPAN_ROLE, f"'{sc.SPAN_ROLE_ATTEMPT}'"),
        (sc.GEN_AI_OPERATION_NAME, "'chat'"),
        (sc.GEN_AI_PROVIDER_NAME, "provider[j]"),
        (sc.GEN_AI_REQUEST_MODEL, "model[j]"),
        (sc.GEN_AI_RESPONSE_MODEL, "if(has_figures[j] = 1, model[j], NULL)"),
        (sc.ATTEMPT_SOURCE, "source[j]"),
        (sc.GEN_AI_REQUEST_STREAM, "if(stream, 'true', NULL)"),
        (sc.ATTEMPT_LEG, "leg[j]"),
        (sc.ATTEMPT_NUMBER, "j"),
        (sc.ATTEMPT_OUTCOME, "outcome[j]"),
        (
            sc.ERROR_TYPE,
            f"multiIf(outcome[j] = '{sc.OUTCOME_ERROR}', '500', "
            f"outcome[j] = '{sc.OUTCOME_HEDGE_CANCELLED}', 'CancelledError', NULL)",
        ),
        (TTFT_MS.attribute, f"if({figures}, ttft[j], NULL)"),
        (WALL_MS.attribute, "if(has_figures[j] = 1, wall[j], NULL)"),
        (
            GENERATION_MS.attribute,
            f"if({figures}, wall[j] - stall_ms[j], if(has_figures[j] = 1, wall[j], NULL))",
        ),
        (STALL_MS.attribute, f"if({figures}, stall_ms[j], NULL)"),
        (STALL_COUNT.attribute, f"if({figures}, stalls[j], NULL)"),
        (
            MAX_INTER_CHUNK_MS.attribute,
            f"if({figures}, if(stalls[j] > 0, each_stall_ms[j], 6), NULL)",
        ),
        (CHUNK_COUNT.attribute, f"if({figures}, chunks[j], NULL)"),
        (sc.STALL_THRESHOLD_MS, str(THRESHOLD_MS)),
        (sc.METERING_STATUS, f"if(stream, '{sc.METERING_EXACT}', '{sc.METERING_NOT_STREAMED}')"),
        (sc.CHUNK_EVENTS_FLOOR_MS, str(FLOOR_MS)),
        (sc.GEN_AI_USAGE_INPUT_TOKENS, "if(has_figures[j] = 1, input_tokens, NULL)"),
        (sc.GEN_AI_USAGE_OUTPUT_TOKENS, "if(has_figures[j] = 1, chunks[j], NULL)"),
    ]
    return _map(pairs)


def _call_attributes() -> str:
    w = "ifNull(winner, 1)"
    known = "winner IS NOT NULL"
    figures = f"{known} AND stream"
    pairs = [
        (sc.SPAN_ROLE, f"'{sc.SPAN_ROLE_CALL}'"),
        (sc.GEN_AI_OPERATION_NAME, "'chat'"),
        (sc.GEN_AI_PROVIDER_NAME, f"provider[{w}]"),
        (sc.GEN_AI_REQUEST_MODEL, "model[1]"),
        (sc.GEN_AI_RESPONSE_MODEL, f"if({known}, model[{w}], NULL)"),
        (sc.ATTEMPT_SOURCE, f"if({known}, source[{w}], NULL)"),
        (sc.GEN_AI_REQUEST_STREAM, "if(stream, 'true', NULL)"),
        (sc.ERROR_TYPE, f"if({known}, NULL, '500')"),
        (sc.CALL_ATTEMPTS, "n"),
        (sc.CALL_HEDGES, "hedges"),
        (sc.CALL_HEDGE_WON, "if(kind = 'hedge', if(hedge_won, 'true', 'false'), 'false')"),
        (sc.CALL_WINNER_ATTEMPT, "winner"),
        (sc.CALL_HEDGE_WASTE_TOKENS, "waste_tokens"),
        (sc.CALL_HEDGE_WASTE_CHUNKS, "waste_chunks"),
        (TTFT_MS.attribute, f"if({figures}, ttft[{w}], NULL)"),
        (WALL_MS.attribute, f"if({known}, wall[{w}], NULL)"),
        (
            GENERATION_MS.attribute,
            f"if({figures}, wall[{w}] - stall_ms[{w}], if({known}, wall[{w}], NULL))",
        ),
        (STALL_MS.attribute, f"if({figures}, stall_ms[{w}], NULL)"),
        (STALL_COUNT.attribute, f"if({figures}, stalls[{w}], NULL)"),
        (
            MAX_INTER_CHUNK_MS.attribute,
            f"if({figures}, if(stalls[{w}] > 0, each_stall_ms[{w}], 6), NULL)",
        ),
        (CHUNK_COUNT.attribute, f"if({figures}, chunks[{w}], NULL)"),
        (sc.STALL_THRESHOLD_MS, str(THRESHOLD_MS)),
        (
            sc.METERING_STATUS,
            f"if({known}, if(stream, '{sc.METERING_EXACT}', '{sc.METERING_NOT_STREAMED}'), NULL)",
        ),
        (sc.GEN_AI_USAGE_INPUT_TOKENS, f"if({known}, input_tokens, NULL)"),
        (sc.GEN_AI_USAGE_OUTPUT_TOKENS, f"if({known}, chunks[{w}], NULL)"),
    ]
    return _map(pairs)


def _map(pairs: list[tuple[str, str]]) -> str:
    entries = ",\n        ".join(f"'{key}', {_s(value)}" for key, value in pairs)
    return f"mapFilter((k, v) -> v != '', map(\n        {entries}))"


def _events() -> tuple[str, str, str]:
    """The attempt's chunk events: one per stall (its gap above the floor), at its arrival."""
    stalled = "if(has_figures[j] = 1 AND stream, stalls[j], 0)"
    arrival = "ttft[j] + (e + 1) * (chunks[j] - 1) / (stalls[j] + 1) * 5 + e * each_stall_ms[j]"
    times = (
        f"arrayMap(e -> fromUnixTimestamp64Nano(toInt64(span_ns + toInt64(({arrival}) * 1e6))), "
        f"range({stalled}))"
    )
    names = f"arrayMap(e -> '{sc.CHUNK_EVENT}', range({stalled}))"
    attributes = (
        f"arrayMap(e -> map('{sc.CHUNK_INDEX}', toString(toInt64((e + 1) * (chunks[j] - 1) "
        f"/ (stalls[j] + 1))), '{sc.CHUNK_GAP_NS}', toString(each_stall_ms[j] * 1000000)), "
        f"range({stalled}))"
    )
    return times, names, attributes


def insert_sql(
    first: int, count: int, *, end_ns: int, spread_ns: int, seed: int = 1, total: int | None = None
) -> str:
    """The INSERT of calls ``first`` … ``first + count - 1`` (of ``total``, default the same),
    starting over the ``spread_ns`` before ``end_ns`` in call-number order."""
    all_calls = total if total is not None else first + count
    span_ids = "lower(leftPad(hex(cityHash64(i, {seed}, {k})), 16, '0'))"
    call_id = span_ids.format(seed=seed, k=0)
    times, names, attributes = _events()
    columns = {
        "Timestamp": "fromUnixTimestamp64Nano(span_ns)",
        "TraceId": f"lower(hex(MD5(toString(i * 1000 + {seed}))))",
        "SpanId": span_ids.format(seed=seed, k="j"),
        "ParentSpanId": f"if(j = 0, '', {call_id})",
        "TraceState": "''",
        "SpanName": "if(j = 0, 'chat', 'chat attempt')",
        "SpanKind": "if(j = 0, 'SPAN_KIND_INTERNAL', 'SPAN_KIND_CLIENT')",
        "ServiceName": "service",
        "ResourceAttributes": "map('service.name', service)",
        "ScopeName": "'otel_llm'",
        "ScopeVersion": "'1'",
        "SpanAttributes": f"if(j = 0, {_call_attributes()}, {_attempt_attributes()})",
        "Duration": "toUInt64(if(j = 0, (offset_ns[n] + took_ms[n] * 1000000), "
        "took_ms[j] * 1000000))",
        "StatusCode": "if((j = 0 AND winner IS NULL) OR (j > 0 AND outcome[j] = "
        f"'{sc.OUTCOME_ERROR}'), 'STATUS_CODE_ERROR', 'STATUS_CODE_UNSET')",
        "StatusMessage": "''",
        "Events.Timestamp": f"if(j = 0, [], {times})",
        "Events.Name": f"if(j = 0, [], {names})",
        "Events.Attributes": f"if(j = 0, [], {attributes})",
        "Links.TraceId": "[]",
        "Links.SpanId": "[]",
        "Links.TraceState": "[]",
        "Links.Attributes": "[]",
    }
    assert list(columns) == [name for name, _ in BASE_COLUMNS]
    names_sql = ", ".join(f"`{name}`" for name in columns)
    select = ",\n    ".join(f"{expr} AS `{name}`" for name, expr in columns.items())
    calls = _calls(first, count, all_calls, end_ns, spread_ns, seed)
    return f"""INSERT INTO {DATABASE}.{TABLE} ({names_sql})
SELECT
    {select}
FROM (
    SELECT *, arrayJoin(range(n + 1)) AS j,
        if(j = 0, call_ns, call_ns + offset_ns[j]) AS span_ns
    FROM ({calls})
)"""
