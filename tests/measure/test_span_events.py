"""Adding many events at once: the same events, drops and warnings as ``add_event()`` each."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.util.types import AttributeValue

from otel_llm import _semconv as sc
from otel_llm._measure._span_events import add_events

NAME = sc.CHUNK_EVENT
TIMESTAMPS = [1_700_000_000_000_000_000 + i * 150_000_000 for i in range(6)]
ATTRIBUTES: list[dict[str, AttributeValue]] = [{sc.CHUNK_INDEX: 0}]
ATTRIBUTES += [{sc.CHUNK_INDEX: i, sc.CHUNK_GAP_NS: 150_000_000 + i} for i in range(1, 6)]


def _shape(span: ReadableSpan) -> tuple[Any, ...]:
    """Everything an exporter reads of a span's events."""
    events = tuple(
        (e.name, e.timestamp, dict(e.attributes or {}), e.dropped_attributes) for e in span.events
    )
    return events, span.dropped_events


def _both(limits: SpanLimits | None = None, *, before: int = 0) -> tuple[SdkSpan, SdkSpan]:
    """Two live SDK spans of one provider, each already holding ``before`` other events."""
    tracer = TracerProvider(span_limits=limits).get_tracer("tests")
    spans = []
    for _ in range(2):
        span = tracer.start_span("attempt", start_time=1)
        for i in range(before):
            span.add_event("other", {"n": i}, timestamp=2 + i)
        assert isinstance(span, SdkSpan)
        spans.append(span)
    return spans[0], spans[1]


def _one_by_one(span: trace.Span) -> None:
    for timestamp, attributes in zip(TIMESTAMPS, ATTRIBUTES, strict=True):
        span.add_event(NAME, attributes, timestamp=timestamp)


@pytest.mark.parametrize(
    ("limits", "before"),
    [
        pytest.param(None, 0, id="default-limits"),
        pytest.param(None, 3, id="after-other-events"),
        pytest.param(SpanLimits(max_events=4), 0, id="over-the-event-limit"),
        pytest.param(SpanLimits(max_events=7), 3, id="other-events-pushed-out"),
        pytest.param(SpanLimits(max_event_attributes=1), 0, id="attributes-trimmed"),
    ],
)
def test_same_events_as_add_event_one_by_one(limits: SpanLimits | None, before: int) -> None:
    """The span holds exactly what add_event() per event leaves: names, timestamps,
    attributes, dropped attributes, and the count of events the limit dropped."""
    ours, theirs = _both(limits, before=before)
    add_events(ours, NAME, TIMESTAMPS, [dict(a) for a in ATTRIBUTES], most_attributes=2)
    _one_by_one(theirs)
    ours.end(end_time=10**19)
    theirs.end(end_time=10**19)
    assert _shape(ours) == _shape(theirs)


def test_event_attributes_cannot_be_changed() -> None:
    """Like the SDK's, the events' attributes are read-only mappings."""
    ours, _ = _both()
    add_events(ours, NAME, TIMESTAMPS, [dict(a) for a in ATTRIBUTES], most_attributes=2)
    ours.end(end_time=10**19)
    first = ours.events[1].attributes
    assert first == {sc.CHUNK_INDEX: 1, sc.CHUNK_GAP_NS: 150_000_001}
    with pytest.raises(TypeError):
        first[sc.CHUNK_GAP_NS] = 0  # type: ignore[index]


def test_an_ended_span_takes_no_events_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """After end(), nothing is added and the SDK's warning is logged, as for add_event()."""
    ours, _ = _both()
    ours.end(end_time=10**19)
    with caplog.at_level(logging.WARNING):
        add_events(ours, NAME, TIMESTAMPS, ATTRIBUTES, most_attributes=2)
    assert ours.events == ()
    assert "ended span" in caplog.text


class _CountingSpan(SdkSpan):
    """An SDK span subclass that sees every event added."""

    added: list[str]

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        self.added.append(name)
        super().add_event(name, attributes, timestamp)


def test_a_span_class_that_overrides_add_event_is_called_for_each() -> None:
    """A subclass that overrides add_event() gets every event through it."""
    span = _CountingSpan("attempt", context=trace.INVALID_SPAN_CONTEXT)
    span.added = []
    span.start(start_time=1)
    add_events(span, NAME, TIMESTAMPS, ATTRIBUTES, most_attributes=2)
    span.end(end_time=10**19)
    assert span.added == [NAME] * len(TIMESTAMPS)
    assert [e.timestamp for e in span.events] == TIMESTAMPS


class _RecordingApiSpan(trace.NonRecordingSpan):
    """A span of another implementation than the SDK's: it only records the calls."""

    def __init__(self) -> None:
        super().__init__(trace.INVALID_SPAN_CONTEXT)
        self.calls: list[tuple[str, Any, int | None]] = []

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        self.calls.append((name, attributes, timestamp))


def test_other_spans_get_add_event_per_event() -> None:
    """A span that is not the SDK's gets add_event() per event, in order."""
    span = _RecordingApiSpan()
    add_events(span, NAME, TIMESTAMPS, ATTRIBUTES, most_attributes=2)
    assert span.calls == [
        (NAME, attributes, timestamp)
        for timestamp, attributes in zip(TIMESTAMPS, ATTRIBUTES, strict=True)
    ]


def test_one_attribute_mapping_per_timestamp() -> None:
    """Columns of different lengths are refused before anything is added."""
    ours, _ = _both()
    with pytest.raises(ValueError, match="one attribute mapping per timestamp"):
        add_events(ours, NAME, TIMESTAMPS, ATTRIBUTES[:-1], most_attributes=2)
    ours.end(end_time=10**19)
    assert ours.events == ()


def test_an_sdk_span_without_the_expected_internals_gets_add_event() -> None:
    """Should an SDK release keep its events elsewhere, the events still arrive, one by one."""
    ours, theirs = _both()
    ours._events = list(ours._events)  # not the SDK's BoundedList
    add_events(ours, NAME, TIMESTAMPS, [dict(a) for a in ATTRIBUTES], most_attributes=2)
    _one_by_one(theirs)
    ours.end(end_time=10**19)
    theirs.end(end_time=10**19)
    assert [(e.name, e.timestamp, dict(e.attributes or {})) for e in ours.events] == [
        (e.name, e.timestamp, dict(e.attributes or {})) for e in theirs.events
    ]
