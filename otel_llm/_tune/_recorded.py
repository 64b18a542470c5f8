"""The attempts a store recorded, read as the hedging model's timelines.

One row of ``otel_traces`` per attempt span (streamed or not, of every outcome), newest calls
first up to a cap, each with what the model needs to replay it: its call, source, start, leg,
number and outcome, whether its metering is complete, and its chunk timeline — the first
incremental chunk, every gap above the attempt's chunk-event floor with the arrival of the chunk
before it (for a failed attempt, also the silence from its last chunk to the failure), and its
end (the attempt's wall time). Which of them a replay may use is decided in
:mod:`otel_llm._tune._sample`.

Times come from the stored chunk events (``ChunkOffsetNs``: nanoseconds from the span start,
``ChunkGapNs``: the silence before the chunk) and the span's ``Duration``: the same monotonic
clock the client metered with (event timestamps are the span start plus monotonic offsets), so
a timeline equals the attempt as it happened to the nanosecond the span recorded.

The end of a successful attempt is its wall time, not its last chunk: the call returns when the
stream ends, and the tail after the last chunk (a usage frame, ``[DONE]``) is latency the caller
waits for that no hedge can shorten (a finished stream starts no hedge, trips no watchdog).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import duckdb

from otel_llm import _semconv as sc
from otel_llm._errors import ConfigurationError
from otel_llm._measure._stalls import NS_PER_MS
from otel_llm._show._sql._table import (
    CHUNK_GAP_COLUMN,
    CHUNK_INDEX_COLUMN,
    CHUNK_OFFSET_COLUMN,
    DURATION,
    PARENT_SPAN_ID,
    SPAN_ID,
    STATUS_CODE,
    TABLE,
    TIMESTAMP,
    TRACE_ID,
    column_for,
    is_error_sql,
    naive_utc,
)
from otel_llm._tune._hedging_model import Timeline
from otel_llm._visible import visible

NS_PER_S: Final = 1_000_000_000
SERVICE_KEY: Final = "--service"
_SERVICE: Final = "ServiceName"
EVENTS_DAMAGED: Final = "incomplete:chunk_events_damaged"
"""The metering of an attempt whose stored chunk events are not one event per entry (lists of
different lengths) or hold a negative time: no writer of ours makes one, so its timeline cannot
be trusted and the replay leaves it out as incomplete metering."""


@dataclass(frozen=True, slots=True)
class RecordedAttempt:
    """One attempt span of the store."""

    call: str
    """Its call's trace and span id (``trace/span``): the attempts of one call share it."""
    started_at: datetime
    source: str
    leg: str | None
    """``primary`` or ``hedge``."""
    number: int
    """``otel_llm.attempt.number``: 1 for the call's first attempt."""
    outcome: str | None
    streamed: bool
    metering: str | None
    """``otel_llm.metering.status`` (``exact`` when every figure can be trusted)."""
    floor_ms: int
    """Every gap longer than this has a chunk event (``ChunkEventsFloorMs``)."""
    timeline: Timeline
    service: str = ""
    """The ``service.name`` of the process that made it (``ServiceName``): a client hedges only
    to its own sources, so only attempts of the same service are its call's hedge legs."""


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """What a recorded call itself took: its wall time and its requests (the sanity line), and
    whether it succeeded (its span's status is not an error)."""

    wall_s: float
    requests: int
    ok: bool = True


@dataclass(frozen=True, slots=True)
class Recorded:
    """The attempts of the newest calls of a range, and those calls' own figures."""

    attempts: tuple[RecordedAttempt, ...]
    calls: dict[str, RecordedCall]
    calls_in_range: int
    """Calls in the range (more than :attr:`calls` when the cap left older ones out)."""


def timeline_of_events(
    *,
    outcome: str | None,
    duration_ns: int,
    floor_ms: int,
    indexes: Sequence[int | None] | None,
    gaps_ns: Sequence[int | None] | None,
    offsets_ns: Sequence[int | None] | None,
) -> Timeline:
    """The timeline of one attempt from its stored chunk events: the first chunk (index 0),
    every recorded gap strictly longer than ``floor_ms`` as (arrival of the chunk before it,
    gap), and the end (``duration_ns``); ``ok`` when the outcome is ``ok``.

    A completed attempt without a chunk (the model ended at once) completes at its recorded
    end: its first chunk is taken to be that end, so no replay waits on it for a timeout.

    A failed attempt's last silence — from its last chunk (always recorded) to the failure or
    the kill — is a gap too, its last, when it is longer than the floor: the stall that ended
    it is the one a stall hedge or a shorter watchdog would have cut."""
    first = math.inf
    last: int | None = None
    gaps: list[tuple[float, float]] = []
    floor_ns = floor_ms * NS_PER_MS
    for index, gap, offset in zip(indexes or (), gaps_ns or (), offsets_ns or (), strict=True):
        if offset is None:
            continue
        last = offset if last is None else max(last, offset)
        if index == 0:
            first = offset / NS_PER_S
        elif gap is not None and gap > floor_ns:
            gaps.append(((offset - gap) / NS_PER_S, gap / NS_PER_S))
    gaps.sort()
    ok = outcome == sc.OUTCOME_OK
    if ok and first == math.inf:  # it ended at once, without a chunk: done at its time,
        first = duration_ns / NS_PER_S  # not a hang that waits for a timeout
    if not ok and last is not None and duration_ns - last > floor_ns:
        gaps.append((last / NS_PER_S, (duration_ns - last) / NS_PER_S))
    return Timeline(first, duration_ns / NS_PER_S, tuple(gaps), ok=ok)


def chunk_events_agree(
    indexes: Sequence[int | None] | None,
    gaps_ns: Sequence[int | None] | None,
    offsets_ns: Sequence[int | None] | None,
) -> bool:
    """Whether the chunk-event columns of one attempt hold one entry per event (equal lengths)
    and no negative time, as every writer of the store makes them."""
    lists = (indexes or (), gaps_ns or (), offsets_ns or ())
    if len({len(values) for values in lists}) > 1:
        return False
    return all(value is None or value >= 0 for values in lists for value in values)


def _q(column: str) -> str:
    return f'"{column}"'


_ROLE: Final = column_for(sc.SPAN_ROLE)
_OPERATION: Final = column_for(sc.GEN_AI_OPERATION_NAME)
_NUMBER: Final = column_for(sc.ATTEMPT_NUMBER)
_ATTEMPT_COLUMNS: Final = (
    TRACE_ID,
    PARENT_SPAN_ID,
    TIMESTAMP,
    column_for(sc.ATTEMPT_SOURCE),
    column_for(sc.ATTEMPT_LEG),
    _NUMBER,
    column_for(sc.ATTEMPT_OUTCOME),
    column_for(sc.GEN_AI_REQUEST_STREAM),
    column_for(sc.METERING_STATUS),
    column_for(sc.CHUNK_EVENTS_FLOOR_MS),
    DURATION,
    CHUNK_INDEX_COLUMN,
    CHUNK_GAP_COLUMN,
    CHUNK_OFFSET_COLUMN,
    _SERVICE,
)


def _role(role: str, alias: str = "") -> str:
    return f"{alias}{_q(_ROLE)} = '{role}'"


def read_recorded(
    conn: duckdb.DuckDBPyConnection,
    *,
    since: datetime | None,
    max_calls: int,
    service: str | None = None,
) -> Recorded:
    """The attempts of the newest ``max_calls`` generating calls (chat, Gemini's
    ``generate_content``) that started at or after ``since``
    (every call when ``None``), of ``service`` (every service when ``None``), in the order they
    started, with those calls' own figures. A ``service`` without a call in the range is a
    :class:`ConfigurationError` naming ``--service``."""
    operations = ", ".join(f"'{name}'" for name in sc.GENERATING_OPERATIONS)
    where = [_role(sc.SPAN_ROLE_CALL), f"coalesce({_q(_OPERATION)}, '') IN ({operations})"]
    params: list[Any] = []
    if since is not None:
        where.append(f"{_q(TIMESTAMP)} >= ?")
        params.append(naive_utc(since))
    if service is not None:
        _check_service(conn, service, where, params)
        where.append(f"coalesce({_q(_SERVICE)}, '') = ?")
        params.append(service)
    calls_sql = (
        f"SELECT {_q(TRACE_ID)} AS trace_id, {_q(SPAN_ID)} AS span_id, "
        f"{_q(DURATION)} AS duration_ns, "
        f"coalesce({_q(column_for(sc.CALL_ATTEMPTS))}, 1) AS requests, "
        f"{_q(TIMESTAMP)} AS started_at, "
        f"NOT {is_error_sql(_q(STATUS_CODE))} AS call_ok "
        f"FROM {TABLE} WHERE {' AND '.join(where)}"
    )
    in_range = conn.execute(f"SELECT count(*) FROM ({calls_sql})", params).fetchone()
    columns = ", ".join(f"a.{_q(c)}" for c in _ATTEMPT_COLUMNS)
    rows = conn.execute(
        f"""WITH calls AS (
            SELECT * FROM ({calls_sql}) ORDER BY started_at DESC, span_id LIMIT {int(max_calls)}
        )
        SELECT {columns}, c.duration_ns AS call_ns, c.requests AS call_requests, c.call_ok
        FROM calls c JOIN {TABLE} a
            ON a.{_q(PARENT_SPAN_ID)} = c.span_id AND a.{_q(TRACE_ID)} = c.trace_id
        WHERE {_role(sc.SPAN_ROLE_ATTEMPT, "a.")}
        ORDER BY a.{_q(TIMESTAMP)}, a.{_q(_NUMBER)}""",
        params,
    ).fetchall()
    attempts: list[RecordedAttempt] = []
    calls: dict[str, RecordedCall] = {}
    for row in rows:
        (trace, parent, started, source, leg, number, outcome, stream, metering, floor) = row[:10]
        duration, indexes, gaps, offsets, service_name, call_ns, call_requests, call_ok = row[10:]
        call = f"{trace}/{parent}"
        floor_ms = int(floor or 0)
        if chunk_events_agree(indexes, gaps, offsets):
            timeline = timeline_of_events(
                outcome=outcome,
                duration_ns=int(duration or 0),
                floor_ms=floor_ms,
                indexes=indexes,
                gaps_ns=gaps,
                offsets_ns=offsets,
            )
        else:  # damaged, or written by a foreign writer: left out, counted as incomplete
            metering = EVENTS_DAMAGED
            timeline = Timeline(math.inf, int(duration or 0) / NS_PER_S, ok=False)
        attempts.append(
            RecordedAttempt(
                call=call,
                started_at=started,
                source=str(source or ""),
                leg=leg,
                number=int(number or 1),
                outcome=outcome,
                streamed=bool(stream),
                metering=metering,
                floor_ms=floor_ms,
                timeline=timeline,
                service=str(service_name or ""),
            )
        )
        calls[call] = RecordedCall(
            int(call_ns or 0) / NS_PER_S, int(call_requests), ok=bool(call_ok)
        )
    total = int(in_range[0]) if in_range else 0
    return Recorded(tuple(attempts), calls, total)


def _check_service(
    conn: duckdb.DuckDBPyConnection, service: str, where: list[str], params: list[Any]
) -> None:
    """Raise a :class:`ConfigurationError` naming ``--service`` when no call of ``where`` ran
    in ``service``, with the services that did."""
    rows = conn.execute(
        f"SELECT DISTINCT coalesce({_q(_SERVICE)}, '') FROM {TABLE} WHERE {' AND '.join(where)}",
        params,
    ).fetchall()
    services = sorted(str(name) for (name,) in rows)
    if service not in services:
        known = ", ".join(visible(name) for name in services) or "none"
        raise ConfigurationError(
            SERVICE_KEY, f"no call of service {service!r} in the range (services: {known})"
        )
