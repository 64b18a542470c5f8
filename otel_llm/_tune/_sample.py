"""Which recorded attempts a replay may use, the calls it replays, the pools its hedge legs are
drawn from, and whether that is enough to recommend a setting.

**Usable attempts** are the streamed chat attempts whose metering is complete (``exact``) and
that ended by themselves: ``ok``, or failed (``error``, ``watchdog_killed``: a failure at its
wall time, as the recording client saw it). Left out, and counted:

* **censored** — a hedge loser (``hedge_cancelled``, primary or hedge leg), an attempt the caller
  cancelled (``cancelled``), a wrapped stream its consumer closed or dropped: each was cut short
  by someone else, so its end says nothing about when it would have finished. (On a store of
  hedged traffic this drops the slow primaries whose hedge won, which makes the replay
  optimistic: tune is honest on unhedged traffic, and says how much it left out.)
* **incomplete metering** — an attempt whose chunk events were dropped or are missing
  (``incomplete:*``), or whose stored chunk-event columns disagree
  (:data:`~otel_llm._tune._recorded.EVENTS_DAMAGED`): its gaps cannot be trusted.
* **not streamed** — no chunk timeline, nothing for a stall trigger to see.

**Calls** are replayed through their first attempt (``otel_llm.attempt.number`` 1), in the order
they started (the hedge budget is spent in that order); a call whose first attempt is not usable
is left out (counted). ``source`` restricts them to the calls whose first attempt ran on it.
**Hedge and retry legs** are drawn from the usable attempts of the *other* sources of the
call's own service (``ServiceName``: a client hedges only to its own sources, so one
application's calls are never hedged with another's attempts), or of the same pool when that
service has one source only (:attr:`Sample.single_source`: the replay then
says what a second source *like this one* would buy — the client hedges only to a different
source, so a one-source client never hedges, and the outputs say so).

**The floor**: an attempt records every gap longer than its chunk-event floor
(``ChunkEventsFloorMs``, 100 ms by default; raised on an attempt whose stream outgrew its
event budget). The sample's floor is the one most usable attempts share (of equally common
ones, the lowest); an attempt whose floor is above it does not know every gap the replay needs
and is left out, counted (**floor above the common one**), so that one thinned attempt cannot
raise the floor for all. No trigger or watchdog at or below the sample's floor is tried.

**The rule** (:data:`MIN_CALLS`, :data:`MIN_POOL`): a recommendation needs at least 1,000 calls
— the p99 of N calls is decided by its slowest N / 100, so at 1,000 it rests on 10 calls, and
fewer leave it to a handful — and at least 200 attempts in every pool hedge legs are drawn from:
a hedge leg wins or loses by its first chunk and its own stalls, and a rate such as the 19 % of
calls with a silence above 20 s is known to ±3 points (one standard error) from 200 attempts,
to ±9 from 20.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from otel_llm import _semconv as sc
from otel_llm._errors import ConfigurationError
from otel_llm._tune._hedging_model import Timeline
from otel_llm._tune._recorded import SERVICE_KEY, Recorded, RecordedAttempt, RecordedCall
from otel_llm._visible import visible

MIN_CALLS: Final = 1000
"""Calls (usable first attempts) a recommendation needs: its p99 rests on ≥ 10 of them."""
MIN_POOL: Final = 200
"""Usable attempts every pool of hedge legs needs."""
RULE: Final = (
    f"at least {MIN_CALLS:,} usable calls (so a p99 rests on at least {MIN_CALLS // 100} calls "
    f"above it) and at least {MIN_POOL} usable attempts in every pool hedge legs are drawn from"
)
"""The rule, as the outputs state it."""

SOURCE_KEY: Final = "--source"
SINGLE_SOURCE_NOTE: Final = (
    "one source only: hedge legs were drawn from its own attempts, but the client hedges only "
    "to a different source, so a hedge setting needs a second source to take effect (a "
    "one-source client never hedges)"
)

HEDGE_LOSER: Final = "hedge_loser"
CANCELLED: Final = "cancelled"
INCOMPLETE: Final = "metering_incomplete"
NOT_STREAMED: Final = "not_streamed"
FLOOR_ABOVE: Final = "floor_above_common"
"""An attempt whose chunk-event floor is above the one most attempts share."""
CENSORED: Final = frozenset({HEDGE_LOSER, CANCELLED})
"""Reasons an attempt is censored (cut short by someone else) rather than unusable."""

_FAILED_BY_THEMSELVES: Final = frozenset({sc.OUTCOME_ERROR, sc.OUTCOME_WATCHDOG_KILLED})
_CUT_SHORT: Final = frozenset({sc.OUTCOME_CANCELLED, sc.OUTCOME_CLOSED, sc.OUTCOME_DROPPED})


def left_out_because(attempt: RecordedAttempt) -> str | None:
    """Why a replay may not use ``attempt`` (one of the reasons above); ``None``: usable."""
    if attempt.outcome == sc.OUTCOME_HEDGE_CANCELLED:
        return HEDGE_LOSER
    if attempt.outcome in _CUT_SHORT:
        return CANCELLED
    if not attempt.streamed or attempt.metering == sc.METERING_NOT_STREAMED:
        return NOT_STREAMED
    if attempt.metering != sc.METERING_EXACT:
        return INCOMPLETE
    if attempt.outcome != sc.OUTCOME_OK and attempt.outcome not in _FAILED_BY_THEMSELVES:
        return INCOMPLETE  # no outcome recorded: the span did not say how it ended
    return None


@dataclass(frozen=True, slots=True)
class Sample:
    """What a replay runs on: the calls' first attempts in time order and the hedge pools."""

    primaries: tuple[Timeline, ...]
    primary_sources: tuple[str, ...]
    """The source of each primary."""
    pools: dict[str, tuple[Timeline, ...]]
    """The pool hedge and retry legs are drawn from, for a primary of each source."""
    sources: dict[str, int]
    """Usable attempts per source, of those the replay uses."""
    attempts_used: int
    censored: int
    left_out: dict[str, int]
    """Attempts left out by reason (censored ones included), and ``calls_left_out``."""
    floor_ms: int
    recorded: tuple[RecordedCall, ...]
    """The replayed calls as they were recorded (the sanity line)."""
    source: str | None
    calls_in_range: int
    problems: tuple[str, ...] = field(default=())
    """Why the data is not enough to recommend (empty: it is)."""
    single_source: bool = False
    """Whether the usable attempts (of a replayed call's service) ran on exactly one source:
    hedge legs are then drawn from its own pool, and a hedge setting takes effect only on a
    client with a second source."""
    primary_pools: tuple[str, ...] = ()
    """The pool of each primary (a key of :attr:`pools`); empty: its source's."""
    services: dict[str, int] = field(default_factory=dict)
    """Calls replayed per service when the range has calls of several (empty: of one)."""

    @property
    def pool_keys(self) -> tuple[str, ...]:
        """The key of each primary's pool in :attr:`pools`."""
        return self.primary_pools or self.primary_sources

    @property
    def notes(self) -> tuple[str, ...]:
        """What a reader of the recommendation must know (not a reason to refuse)."""
        notes = [SINGLE_SOURCE_NOTE] if self.single_source else []
        if self.services:
            counts = ", ".join(f"{name} {count:,}" for name, count in self.services.items())
            notes.append(
                f"calls of {len(self.services)} services ({counts}): each call's hedge legs are "
                "drawn from its own service's other sources (a client hedges only to its own), "
                f"but one setting is replayed for all of them ({SERVICE_KEY} tunes one)"
            )
        return tuple(notes)

    @property
    def calls(self) -> int:
        """Calls the replay runs."""
        return len(self.primaries)

    @property
    def enough(self) -> bool:
        """Whether :data:`RULE` holds."""
        return not self.problems

    @property
    def calls_recorded(self) -> int:
        """Calls whose first attempt was looked at: replayed, or left out (not usable)."""
        return self.calls + self.left_out.get("calls_left_out", 0)

    def calls_to_record(self) -> int | None:
        """About how many calls recorded like these would meet :data:`RULE`: the calls and
        every hedge pool grow with the calls at this run's share of usable ones. ``None``
        when none was usable (no share to scale by)."""
        if not self.calls or any(not len(pool) for pool in self.pools.values()):
            return None
        recorded = self.calls_recorded
        needed = -(-recorded * MIN_CALLS // self.calls)  # ceil, in integers
        for pool in self.pools.values():
            needed = max(needed, -(-recorded * MIN_POOL // len(pool)))
        return needed


def sample(recorded: Recorded, source: str | None = None) -> Sample:
    """The sample of ``recorded`` (see the module docstring); ``source`` that has no attempt in
    the range is a :class:`ConfigurationError` naming ``--source``."""
    attempts = recorded.attempts
    every_source = sorted({a.source for a in attempts})
    if source is not None and source not in every_source:
        known = ", ".join(visible(name) for name in every_source) or "none"
        raise ConfigurationError(
            SOURCE_KEY, f"no attempt ran on source {source!r} in the range (sources: {known})"
        )
    reasons = [left_out_because(a) for a in attempts]
    floor_ms = common_floor_ms(
        [a.floor_ms for a, r in zip(attempts, reasons, strict=True) if r is None]
    )
    reasons = [
        FLOOR_ABOVE if reason is None and a.floor_ms > floor_ms else reason
        for a, reason in zip(attempts, reasons, strict=True)
    ]
    usable = [i for i, reason in enumerate(reasons) if reason is None]
    sources_of: dict[str, set[str]] = {}  # usable sources per service
    for i in usable:
        sources_of.setdefault(attempts[i].service, set()).add(attempts[i].source)
    first: dict[str, int] = {}
    for index, attempt in enumerate(attempts):
        known_first = first.get(attempt.call)
        if known_first is None or attempt.number < attempts[known_first].number:
            first[attempt.call] = index
    firsts = sorted(first.values())  # the attempts are in start order
    if source is not None:
        firsts = [i for i in firsts if attempts[i].source == source]
    primaries = [i for i in firsts if reasons[i] is None]
    services = Counter(attempts[i].service for i in primaries)
    several = len({attempts[i].service for i in firsts}) > 1

    def key_of(index: int) -> str:
        """The pool a call on this attempt's source and service draws from, by name."""
        name = attempts[index].source
        return f"{name} in service {attempts[index].service}" if several else name

    def pool_of(index: int) -> list[int]:
        # a client hedges only to its own sources: the other sources of the call's service
        service, name = attempts[index].service, attempts[index].source
        single = len(sources_of.get(service, ())) <= 1
        return [
            i
            for i in usable
            if attempts[i].service == service and (single or attempts[i].source != name)
        ]

    pool_index = {key_of(i): pool_of(i) for i in sorted(primaries, key=key_of)}
    used = set(primaries).union(*pool_index.values())
    left: dict[str, int] = dict.fromkeys(
        (HEDGE_LOSER, CANCELLED, INCOMPLETE, NOT_STREAMED, FLOOR_ABOVE), 0
    )
    for reason in reasons:  # of every attempt read, whichever source it ran on
        if reason is not None:
            left[reason] = left.get(reason, 0) + 1
    left["calls_left_out"] = len(firsts) - len(primaries)
    problems = _problems(len(primaries), {k: len(v) for k, v in pool_index.items()})
    counts: dict[str, int] = {}
    for i in sorted(used):
        counts[attempts[i].source] = counts.get(attempts[i].source, 0) + 1
    return Sample(
        primaries=tuple(attempts[i].timeline for i in primaries),
        primary_sources=tuple(attempts[i].source for i in primaries),
        primary_pools=tuple(key_of(i) for i in primaries),
        pools={name: tuple(attempts[i].timeline for i in v) for name, v in pool_index.items()},
        sources=counts,
        attempts_used=len(used),
        censored=sum(left.get(reason, 0) for reason in CENSORED),
        left_out=left,
        floor_ms=floor_ms,
        recorded=tuple(recorded.calls[attempts[i].call] for i in primaries),
        source=source,
        calls_in_range=recorded.calls_in_range,
        problems=problems,
        single_source=any(
            len(sources_of.get(service, ())) == 1 for service in services or sources_of
        ),
        services=dict(sorted(services.items())) if several else {},
    )


def common_floor_ms(floors: Sequence[int]) -> int:
    """The chunk-event floor most of ``floors`` share (of equally common ones, the lowest;
    0 when there is none)."""
    if not floors:
        return 0
    counts = Counter(floors)
    return min(counts, key=lambda floor: (-counts[floor], floor))


def _problems(calls: int, pools: dict[str, int]) -> tuple[str, ...]:
    found: list[str] = []
    if calls < MIN_CALLS:
        found.append(f"{calls:,} usable calls, fewer than {MIN_CALLS:,}")
    for name, size in pools.items():
        if size < MIN_POOL:
            found.append(
                f"{size:,} usable attempts to draw hedge legs from for calls on {visible(name)}, "
                f"fewer than {MIN_POOL}"
            )
    return tuple(found)


def recording_advice(s: Sample) -> str:
    """What recording would meet the rule, in one sentence."""
    needed = s.calls_to_record()
    if needed is None:
        return (
            "Enough: no call here had a usable first attempt; record streamed calls with "
            "exact metering (unhedged ones are all usable)."
        )
    share = s.calls / max(1, s.calls_recorded)
    hedged = s.left_out.get(HEDGE_LOSER, 0) > 0
    return (
        f"Enough: about {needed:,} calls recorded like these ({share:.0%} of them had a usable "
        "first attempt)"
        + (
            "; fewer if unhedged, as every completed unhedged streamed call is usable."
            if hedged
            else "."
        )
    )
