"""Adding many events to a span in one step: what ``add_event()`` per event would add, cheaper.

``Span.add_event()`` of the OpenTelemetry SDK wraps every event's attributes in a
``BoundedAttributes`` (a lock, a validation pass, a mapping copy) and takes two locks to append
it: about 39k instructions per event, four times the whole budget of a chunk event. The API has
no public way to add events without that, so for a span of the SDK's own class, with limits
under which that validation changes nothing, the events are built as the SDK's ``Event`` with
read-only attribute mappings and appended under the span's lock in one ``extend`` — the SDK's
own bounded list, so its limit on events and its count of dropped events work as for
``add_event()``. Any other span (another SDK, a subclass that overrides how events are added,
limits that would trim the attributes, a span already ended) gets ``add_event()`` per event,
exactly as before.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import cache
from itertools import repeat
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import Event
    from opentelemetry.sdk.util import BoundedList

_SDK_TRACE = "opentelemetry.sdk.trace"
"""Imported by whoever made an SDK span; never by this module (``import otel_llm`` stays light)."""
_DIRECT: dict[type, bool] = {}
"""Per span class: whether it adds events the SDK's way (checked once per class)."""


def _adds_like_the_sdk(kind: type) -> bool:
    """True for the SDK's span class, and subclasses that keep its way of adding events
    (``add_event`` and ``_add_event``: a subclass that replaces either is left to do it)."""
    direct = _DIRECT.get(kind)
    if direct is None:
        direct = _DIRECT[kind] = _SDK_TRACE in sys.modules and _is_plain_sdk_span(kind)
    return direct


def _is_plain_sdk_span(kind: type) -> bool:
    from opentelemetry.sdk.trace import Span as SdkSpan

    if not issubclass(kind, SdkSpan):
        return False
    return (kind.add_event, kind._add_event) == (SdkSpan.add_event, SdkSpan._add_event)


@cache
def _sdk_types() -> tuple[type[Event], type[BoundedList[Any]]]:
    """The SDK's event class and bounded list (imported once an SDK span was seen)."""
    from opentelemetry.sdk.trace import Event
    from opentelemetry.sdk.util import BoundedList

    return Event, BoundedList


class ChunkRun(NamedTuple):
    """The integers of chunk events added in one step, as the meter held them: their times,
    indexes and the gaps of those that have one (all but chunk 0)."""

    stamps: Sequence[int]
    indexes: Sequence[int]
    gaps: Sequence[int]
    first_alone: bool
    """The first event is chunk 0, with no gap before it."""


@cache
def chunk_event_class() -> type[Event]:
    """The SDK's ``Event`` under a name of its own, for chunk events built here from
    :func:`otel_llm._measure._events.chunk_event_attributes` (an integer index and, but for
    chunk 0, an integer gap, in that order, behind a read-only view nobody else holds): a
    reader that sees this exact class may take those attributes as they are, unchecked. The
    first event of those added in one step carries them all as a :class:`ChunkRun` in ``run``
    (:func:`chunk_run` reads it), so a reader of the whole run needs no walk over the events."""
    from opentelemetry.sdk.trace import Event

    class ChunkEvent(Event):
        __slots__ = ("run",)

    return ChunkEvent


def chunk_run(events: Sequence[Event]) -> ChunkRun | None:
    """The run of chunk events that ``events`` is exactly (no event before, after or missing
    from the step that added it), or ``None``. The first event added in one step carries the
    run; a list that starts with it and is as long as it holds nothing else, since events are
    only ever appended, and dropped (by the SDK's limit) oldest first."""
    if not events:
        return None
    run: ChunkRun | None = getattr(events[0], "run", None)
    if run is None or len(run.stamps) != len(events):
        return None
    return run


def leading_chunk_run(events: Sequence[Event], chunk_name: str) -> ChunkRun | None:
    """The run of chunk events (named ``chunk_name``) that ``events`` starts with, when every
    event after it is of another kind — a failed attempt's exception event, recorded after its
    chunks — or ``None``: what a reader of the chunk events alone needs (a reader of every
    event takes :func:`chunk_run`)."""
    if not events:
        return None
    run: ChunkRun | None = getattr(events[0], "run", None)
    if run is None:
        return None
    size = len(run.stamps)
    if size == len(events):
        return run
    if size > len(events) or any(event.name == chunk_name for event in events[size:]):
        return None
    return run


def _events_list(span: Any, most_attributes: int) -> BoundedList[Any] | None:
    """The SDK span's bounded event list when adding to it directly equals ``add_event()``."""
    if not _adds_like_the_sdk(type(span)):
        return None
    events = getattr(span, "_events", None)
    limits = getattr(span, "_limits", None)
    if not isinstance(events, _sdk_types()[1]) or limits is None:
        return None  # not the SDK release this was written against: the public way
    if not hasattr(span, "_lock") or not hasattr(span, "_end_time"):
        return None
    max_attributes = getattr(limits, "max_event_attributes", None)
    if max_attributes is not None and max_attributes < most_attributes:
        return None  # the SDK would drop some attributes: let it
    return events


def add_events(
    span: trace.Span,
    name: str,
    timestamps_ns: Sequence[int],
    attributes: Sequence[dict[str, Any]],
    *,
    most_attributes: int,
    chunks: ChunkRun | None = None,
) -> None:
    """Add one event named ``name`` per timestamp (epoch nanoseconds), in order, with the
    matching attributes: what ``span.add_event(name, attributes[i], timestamp=...)`` for each
    would add. Attribute values must be ints, floats or bools (they are not length-limited),
    keys non-empty strings and no event may have more than ``most_attributes`` of them: the
    validation skipped on the direct path is then a no-op.

    The dicts are handed over, not copied (the SDK copies each; a copy costs as much as the
    rest of the event): the events see them through read-only views, so the caller must keep
    no reference to them. ``chunks``: they are chunk events from
    :func:`~otel_llm._measure._events.chunk_event_attributes` with these integers, made as
    :func:`chunk_event_class` where the direct path is taken (the first carrying ``chunks``)."""
    if len(timestamps_ns) != len(attributes):
        raise ValueError("one attribute mapping per timestamp")
    events_list = _events_list(span, most_attributes)
    if events_list is not None:
        event = chunk_event_class() if chunks is not None else _sdk_types()[0]
        events = list(map(event, repeat(name), map(MappingProxyType, attributes), timestamps_ns))
        if chunks is not None and events:
            events[0].run = chunks  # type: ignore[attr-defined]
        sdk_span: Any = span  # the SDK's private lock and end time, as add_event() reads them
        with sdk_span._lock:
            if sdk_span._end_time is None:
                events_list.extend(events)
                return
    for timestamp, attrs in zip(timestamps_ns, attributes, strict=True):
        span.add_event(name, attrs, timestamp=timestamp)
