"""The deriving span processor: figures from events, equal to the client's, winner onto the call."""

from __future__ import annotations

import logging

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import Span

from otel_llm import _semconv as sc
from otel_llm._measure._spans import AttemptSpan
from otel_llm._measure._stalls import NS_PER_MS, StallFigures
from otel_llm.testing import Spans, figures_of

MS = NS_PER_MS


def run_attempt(
    spans: Spans,
    arrivals_ms: list[float],
    end_ms: float,
    *,
    threshold_ms: int = 1000,
    outcome: str = sc.OUTCOME_OK,
    number: int = 1,
    streamed: bool = True,
    context: object | None = None,
) -> StallFigures:
    attempt = AttemptSpan(
        spans.tracer,
        "chat sim",
        attributes={sc.ATTEMPT_NUMBER: number},
        threshold_ms=threshold_ms,
        streamed=streamed,
        start_ns=0,
        context=context,  # type: ignore[arg-type]
    )
    for t in arrivals_ms:
        attempt.clock.mark_at(int(t * MS))
    return attempt.finish(outcome, end_ns=int(end_ms * MS))


derived = figures_of
"""The figures the processor derived (the public helper, under the tests' short name)."""


@pytest.mark.parametrize("threshold", [200, 1000, 5000])
def test_processor_equals_client_figures(spans: Spans, threshold: int) -> None:
    """The processor derives from the span exactly what the client computed."""
    arrivals = [1630.4, 1650, 1670.9, 56_570, 56_590, 59_600.2, 59_610]
    client = run_attempt(spans, arrivals, 59_615.7, threshold_ms=threshold)
    (span,) = spans.attempts()
    assert derived(span) == client
    assert span.attributes[sc.METERING_STATUS] == sc.METERING_EXACT  # type: ignore[index]
    assert span.attributes[sc.STALL_THRESHOLD_MS] == threshold  # type: ignore[index]


def test_attempt_threshold_wins_over_processor_default(spans: Spans) -> None:
    """The processor derives with the threshold recorded on the span, not its own default."""
    run_attempt(spans, [0, 600, 1200], 1300, threshold_ms=500)
    (span,) = spans.attempts()
    assert span.attributes[sc.STALL_COUNT] == 2  # type: ignore[index]


def test_processor_default_applies_without_span_threshold() -> None:
    """A span that did not record its threshold is derived at the processor's default."""
    pipeline = Spans(threshold_ms=300)
    tracer = pipeline.tracer
    span = tracer.start_span(
        "chat x",
        start_time=0,
        attributes={
            sc.SPAN_ROLE: sc.SPAN_ROLE_ATTEMPT,
            sc.GEN_AI_REQUEST_STREAM: True,
            sc.CHUNK_COUNT_RECORDED: 2,
            sc.CHUNK_EVENTS_RECORDED: 2,
            sc.CHUNK_EVENTS_FLOOR_MS: 100,
        },
    )
    span.add_event(sc.CHUNK_EVENT, {sc.CHUNK_INDEX: 0}, timestamp=10 * MS)
    span.add_event(
        sc.CHUNK_EVENT, {sc.CHUNK_INDEX: 1, sc.CHUNK_GAP_NS: 400 * MS}, timestamp=410 * MS
    )
    span.end(end_time=420 * MS)
    (out,) = pipeline.attempts()
    assert out.attributes[sc.STALL_MS] == 400  # type: ignore[index]
    assert out.attributes[sc.STALL_THRESHOLD_MS] == 300  # type: ignore[index]


def test_non_streamed_attempt_has_wall_only(spans: Spans) -> None:
    """A non-streamed attempt gets wall and net generation, and no stall figures (not
    observable is not zero)."""
    client = run_attempt(spans, [], 2500, streamed=False)
    (span,) = spans.attempts()
    assert derived(span) == client == StallFigures(2500, 2500, None, None, None, None, None)
    assert span.attributes[sc.METERING_STATUS] == sc.METERING_NOT_STREAMED  # type: ignore[index]


def test_cancelled_attempt_has_no_stall_figures(spans: Spans) -> None:
    """A cancelled hedge loser carries no stall figures, only that it was cancelled: its end
    was censored."""
    run_attempt(spans, [10, 3000, 3010], 4000, outcome=sc.OUTCOME_HEDGE_CANCELLED)
    (span,) = spans.attempts()
    attrs = span.attributes or {}
    assert sc.STALL_MS not in attrs
    assert sc.GENERATION_MS not in attrs
    assert attrs[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_HEDGE_CANCELLED
    assert attrs[sc.WALL_MS] == 4000


def test_winner_figures_are_copied_onto_the_call_span(spans: Spans) -> None:
    """The call span carries the winning attempt's figures, not the loser's."""
    call = spans.tracer.start_span("chat sim", attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_CALL})
    ctx = trace.set_span_in_context(call)
    run_attempt(spans, [10, 20, 5000, 5010], 5020, number=1, context=ctx)
    winner = run_attempt(spans, [100, 110, 120], 130, number=2, context=ctx)
    call.set_attribute(sc.CALL_WINNER_ATTEMPT, 2)
    call.end()
    (call_span,) = spans.calls()
    attrs = call_span.attributes or {}
    assert attrs[sc.STALL_MS] == winner.stall_ms == 0
    assert attrs[sc.WALL_MS] == winner.wall_ms == 130
    assert attrs[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == pytest.approx(0.1)


def test_the_call_span_carries_its_winners_long_gaps_and_model(spans: Spans) -> None:
    """Beside the figures, the call span carries the winner's model and, in order, its gaps
    longer than the floor (100 ms) — not the loser's, not the winner's shorter gaps — so a
    query re-derives the winner's stalls at any threshold from 100 ms from the call alone."""
    call = spans.tracer.start_span("chat sim", attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_CALL})
    ctx = trace.set_span_in_context(call)
    run_attempt(spans, [10, 20, 5000, 5010], 5020, number=1, context=ctx)
    # gaps 50, 100 (not longer than the floor), 101, 2000, 30 ms
    winner = run_attempt(spans, [100, 150, 250, 351, 2351, 2381], 2400, number=2, context=ctx)
    call.set_attribute(sc.CALL_WINNER_ATTEMPT, 2)
    call.end()
    (call_span,) = spans.calls()
    attrs = call_span.attributes or {}
    assert attrs[sc.CALL_WINNER_GAPS_FLOOR_MS] == 100
    assert list(attrs[sc.CALL_WINNER_GAPS_NS]) == [101 * MS, 2000 * MS]  # type: ignore[arg-type]
    assert attrs[sc.STALL_COUNT] == winner.stall_count == 1
    assert sc.CALL_WINNER_MODEL not in attrs  # this attempt named no model, source, provider
    assert sc.CALL_WINNER_SOURCE not in attrs
    assert sc.CALL_WINNER_PROVIDER not in attrs
    (first, second) = spans.attempts()
    assert sc.CALL_WINNER_GAPS_NS not in (second.attributes or {})  # on the call span only
    assert attrs[sc.CALL_WINNER_STARTED_AT_NS] == second.start_time != first.start_time


def test_the_call_span_names_what_answered(spans: Spans) -> None:
    """The winner's model, source and provider on the call span, whatever the call span says
    of its own (a failover may cross providers)."""
    call = spans.tracer.start_span(
        "chat sim",
        attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_CALL, sc.GEN_AI_PROVIDER_NAME: "anthropic"},
    )
    ctx = trace.set_span_in_context(call)
    for number, (source, provider, model) in enumerate(
        [("a", "anthropic", "claude"), ("b", "openai", "gpt")], start=1
    ):
        attempt = AttemptSpan(
            spans.tracer,
            "chat sim",
            attributes={
                sc.ATTEMPT_NUMBER: number,
                sc.ATTEMPT_SOURCE: source,
                sc.GEN_AI_PROVIDER_NAME: provider,
                sc.GEN_AI_REQUEST_MODEL: model,
            },
            threshold_ms=1000,
            streamed=True,
            start_ns=0,
            context=ctx,
        )
        for t in (10, 20):
            attempt.clock.mark_at(t * MS)
        attempt.finish(sc.OUTCOME_OK, end_ns=30 * MS)
    call.set_attribute(sc.CALL_WINNER_ATTEMPT, 2)
    call.end()
    (call_span,) = spans.calls()
    attrs = call_span.attributes or {}
    assert attrs[sc.CALL_WINNER_SOURCE] == "b"
    assert attrs[sc.CALL_WINNER_PROVIDER] == "openai"
    assert attrs[sc.CALL_WINNER_MODEL] == "gpt"
    assert attrs[sc.GEN_AI_PROVIDER_NAME] == "anthropic"  # the call's own, untouched


def test_a_winner_whose_events_were_thinned_carries_the_events_floor() -> None:
    """When the winner's chunk events were thinned above a floor higher than 100 ms, its
    shorter gaps are unknown: the call says so with that floor, and carries every gap above."""
    pipeline = Spans(max_events=12)
    call = pipeline.tracer.start_span("chat x", attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_CALL})
    ctx = trace.set_span_in_context(call)
    gaps_ms = [300 + (i % 7) + (1700 if i % 13 == 5 else 0) for i in range(39)]
    arrivals = [float(sum(gaps_ms[:i])) for i in range(40)]  # 294-306 ms, and three of 2 s
    run_attempt(pipeline, arrivals, arrivals[-1] + 1, context=ctx)
    call.end()
    (attempt,) = pipeline.attempts()
    floor = (attempt.attributes or {})[sc.CHUNK_EVENTS_FLOOR_MS]
    (call_span,) = pipeline.calls()
    attrs = call_span.attributes or {}
    assert isinstance(floor, int)
    assert floor > 100
    assert attrs[sc.CALL_WINNER_GAPS_FLOOR_MS] == floor
    above = [gap * MS for gap in gaps_ms if gap > floor]
    assert list(attrs[sc.CALL_WINNER_GAPS_NS]) == above  # type: ignore[arg-type]
    assert len(above) == 3


def test_a_call_without_a_winner_says_so_and_one_unseen_says_nothing(spans: Spans) -> None:
    """A call no attempt won (its attempts failed) carries a gap floor and nothing else of a
    winner, so a store knows its row is whole; a call whose winner this processor never saw
    (it ended elsewhere, or was forgotten) carries nothing, so a store looks the winner up."""
    failed = spans.tracer.start_span("chat sim", attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_CALL})
    run_attempt(
        spans, [10, 20], 30, outcome=sc.OUTCOME_ERROR, context=trace.set_span_in_context(failed)
    )
    failed.end()
    unseen = spans.tracer.start_span("chat sim", attributes={sc.SPAN_ROLE: sc.SPAN_ROLE_CALL})
    unseen.set_attribute(sc.CALL_WINNER_ATTEMPT, 1)
    unseen.end()
    failed_span, unseen_span = spans.calls()
    carried = {
        key: value
        for key, value in (failed_span.attributes or {}).items()
        if key.startswith("otel_llm.call.winner")
    }
    assert carried == {sc.CALL_WINNER_GAPS_FLOOR_MS: 100}
    assert sc.STALL_MS not in (failed_span.attributes or {})
    unseen_attributes = unseen_span.attributes or {}
    assert sc.CALL_WINNER_GAPS_FLOOR_MS not in unseen_attributes
    assert sc.CALL_WINNER_GAPS_NS not in unseen_attributes


def test_hundred_thousand_chunk_attempt_is_exact(spans: Spans) -> None:
    """A 100,000-chunk stream keeps exact figures within the SDK's default event limit."""
    arrivals = [1630.0 + i * 2.5 for i in range(100_000)]
    for i in range(20_000, 100_000):
        arrivals[i] += 54_900  # one long silence
    for i in range(70_000, 100_000):
        arrivals[i] += 1_500
    client = run_attempt(spans, arrivals, arrivals[-1] + 3)
    (span,) = spans.attempts()
    assert span.dropped_events == 0
    assert len(span.events) <= 128
    assert derived(span) == client
    assert (client.stall_count, client.chunk_count) == (2, 100_000)


def test_event_limit_below_budget_raises_floor_and_stays_exact() -> None:
    """With a tight event limit the floor rises instead of the SDK dropping chunk events."""
    pipeline = Spans(max_events=12)
    arrivals = [i * 300.0 for i in range(40)]  # 39 gaps of 300 ms, above the 100 ms floor
    client = run_attempt(pipeline, arrivals, arrivals[-1] + 1)
    (span,) = pipeline.attempts()
    assert span.dropped_events == 0
    assert derived(span) == client


def test_more_stalls_than_the_event_budget_stay_exact_at_the_threshold() -> None:
    """With more stalls than chunk events fit, the floor rises above the threshold and the span
    carries the exact stall sum and count at its threshold: figures still equal the client's."""
    pipeline = Spans(max_events=12)
    arrivals = [i * 1500.0 + (i % 3) for i in range(150)]  # 149 stalls at 1000 ms
    client = run_attempt(pipeline, arrivals, arrivals[-1] + 1)
    (span,) = pipeline.attempts()
    attrs = span.attributes or {}
    assert attrs[sc.CHUNK_EVENTS_FLOOR_MS] > 1000
    assert attrs[sc.METERING_STATUS] == sc.METERING_EXACT
    assert derived(span) == client
    assert client.stall_count == 149


def streamed_attempt(pipeline: Spans, *, chunks: int, **attributes: int) -> Span:
    """A streamed attempt span started at 0 that says it recorded ``chunks`` chunk events."""
    return pipeline.tracer.start_span(
        "chat x",
        start_time=0,
        attributes={
            sc.SPAN_ROLE: sc.SPAN_ROLE_ATTEMPT,
            sc.GEN_AI_REQUEST_STREAM: True,
            sc.CHUNK_COUNT_RECORDED: chunks,
            sc.CHUNK_EVENTS_RECORDED: chunks,
            **attributes,
        },
    )


def test_threshold_below_the_floor_without_known_stalls_is_flagged() -> None:
    """A span derived at a threshold below its event floor, other than the one it was measured
    at, is flagged incomplete and keeps only its wall time."""
    pipeline = Spans(threshold_ms=500)
    span = streamed_attempt(pipeline, chunks=2, **{sc.CHUNK_EVENTS_FLOOR_MS: 2000})
    span.add_event(sc.CHUNK_EVENT, {sc.CHUNK_INDEX: 0}, timestamp=10 * MS)
    gap = {sc.CHUNK_INDEX: 1, sc.CHUNK_GAP_NS: 3000 * MS}
    span.add_event(sc.CHUNK_EVENT, gap, timestamp=3010 * MS)
    span.end(end_time=3020 * MS)
    attrs = pipeline.attempts()[0].attributes or {}
    assert attrs[sc.METERING_STATUS] == sc.METERING_INCOMPLETE_FLOOR
    assert attrs[sc.WALL_MS] == 3020
    assert sc.STALL_MS not in attrs


def test_dropped_events_are_detected_on_real_spans() -> None:
    """When the SDK dropped chunk events, the processor flags the span."""
    pipeline = Spans(max_events=5)
    span = streamed_attempt(pipeline, chunks=8)
    for i in range(8):
        attrs = {sc.CHUNK_INDEX: i} if i == 0 else {sc.CHUNK_INDEX: i, sc.CHUNK_GAP_NS: 2000 * MS}
        span.add_event(sc.CHUNK_EVENT, attrs, timestamp=i * 2000 * MS)
    span.end(end_time=16_001 * MS)
    (out,) = pipeline.attempts()
    assert out.attributes[sc.METERING_STATUS] == sc.METERING_INCOMPLETE_DROPPED  # type: ignore[index]
    assert sc.STALL_MS not in (out.attributes or {})


class _Exploding(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("downstream is broken")


def test_processor_never_raises(spans: Spans) -> None:
    """A failing downstream processor does not break the span pipeline or the caller."""
    spans.processor._downstream = (_Exploding(), *spans.processor.downstream)
    run_attempt(spans, [1, 2], 3)
    assert len(spans.attempts()) == 1


def test_a_downstream_failing_on_every_span_is_one_warning(
    spans: Spans, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A downstream processor that raises on every span costs one warning with its traceback,
    then debug lines — as a failing processor of the provider does — not an ERROR traceback
    per span (200 calls logged 200)."""
    from otel_llm._measure import _processor
    from otel_llm._measure._faults import TelemetryFaults

    monkeypatch.setattr(_processor, "FAULTS", TelemetryFaults())  # none reported before
    spans.processor._downstream = (_Exploding(), *spans.processor.downstream)
    with caplog.at_level(logging.DEBUG, logger="otel_llm"):
        for _ in range(200):
            run_attempt(spans, [1, 2], 3)
    assert len(spans.attempts()) == 200  # the processors after it still get every span
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 1
    assert loud[0].exc_info is not None
    assert "downstream is broken" in loud[0].getMessage()


def test_span_ends_once_even_if_finish_called_twice(spans: Spans) -> None:
    """finish() is idempotent: the span ends exactly once and figures do not change."""
    attempt = AttemptSpan(
        spans.tracer, "chat x", attributes={}, threshold_ms=1000, streamed=True, start_ns=0
    )
    attempt.clock.mark_at(5 * MS)
    first = attempt.finish(sc.OUTCOME_OK, end_ns=10 * MS)
    second = attempt.finish(sc.OUTCOME_ERROR, end_ns=99 * MS)
    assert first == second
    assert len(spans.attempts()) == 1


@pytest.mark.parametrize("floor", ["abc", "100", 100.5, True])
def test_a_floor_of_another_type_is_incomplete_not_a_traceback(
    floor: object, caplog: pytest.LogCaptureFixture
) -> None:
    """An attempt span whose chunk-event floor is not a whole number (another
    instrumentation's, or one an exporter rewrote) is forwarded with its wall time and
    ``incomplete:events_missing`` — not a ValueError logged with its traceback for every such
    span and the span forwarded without figures or status."""
    pipeline = Spans(threshold_ms=300)
    for _ in range(3):
        span = pipeline.tracer.start_span(
            "chat x",
            start_time=0,
            attributes={
                sc.SPAN_ROLE: sc.SPAN_ROLE_ATTEMPT,
                sc.GEN_AI_REQUEST_STREAM: True,
                sc.CHUNK_COUNT_RECORDED: 2,
                sc.CHUNK_EVENTS_RECORDED: 2,
                sc.CHUNK_EVENTS_FLOOR_MS: floor,  # type: ignore[dict-item]
            },
        )
        span.add_event(sc.CHUNK_EVENT, {sc.CHUNK_INDEX: 0}, timestamp=10 * MS)
        span.add_event(
            sc.CHUNK_EVENT, {sc.CHUNK_INDEX: 1, sc.CHUNK_GAP_NS: 400 * MS}, timestamp=410 * MS
        )
        span.end(end_time=420 * MS)
    for out in pipeline.attempts():
        attributes = out.attributes or {}
        assert attributes[sc.METERING_STATUS] == sc.METERING_INCOMPLETE_MISSING
        assert attributes[sc.WALL_MS] == 420
        assert sc.STALL_MS not in attributes
    assert "Traceback" not in caplog.text
