"""Shared test doubles: an in-memory span pipeline that checks every span ends, and a leak check."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_llm import _semconv as sc
from otel_llm.measure._processor import DerivingSpanProcessor

IN_CI = bool(os.environ.get("CI") or os.environ.get("OTEL_LLM_CI"))


def require(condition: bool, reason: str) -> None:
    """Skip locally when a tool is missing; in CI a missing tool is a failure, never a skip."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


class SpanTracker(SpanProcessor):
    """Remembers every span started and ended, to prove each started span ended exactly once."""

    def __init__(self) -> None:
        self.started: dict[int, str] = {}
        self.ended: dict[int, int] = {}
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        with self._lock:
            self.started[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        with self._lock:
            self.ended[span.context.span_id] = self.ended.get(span.context.span_id, 0) + 1

    def open_spans(self) -> list[str]:
        with self._lock:
            return [name for sid, name in self.started.items() if sid not in self.ended]

    def ended_twice(self) -> list[int]:
        with self._lock:
            return [sid for sid, count in self.ended.items() if count > 1]


class Spans:
    """An SDK tracer provider whose spans go through the deriving processor into memory."""

    def __init__(self, *, max_events: int | None = None, threshold_ms: int = 1000) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracker = SpanTracker()
        self.processor = DerivingSpanProcessor(
            [SimpleSpanProcessor(self.exporter)], default_threshold_ms=threshold_ms
        )
        limits = SpanLimits(max_events=max_events) if max_events is not None else None
        self.provider = TracerProvider(span_limits=limits)
        self.provider.add_span_processor(self.tracker)
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("tests")

    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def attempts(self) -> list[ReadableSpan]:
        return [s for s in self.finished() if (s.attributes or {}).get(sc.SPAN_ROLE) == "attempt"]

    def calls(self) -> list[ReadableSpan]:
        return [s for s in self.finished() if (s.attributes or {}).get(sc.SPAN_ROLE) == "call"]


@pytest.fixture
def spans() -> Iterator[Spans]:
    """In-memory spans; after the test every started span must have ended exactly once."""
    pipeline = Spans()
    yield pipeline
    pipeline.provider.force_flush()
    assert pipeline.tracker.open_spans() == [], "spans left open"
    assert pipeline.tracker.ended_twice() == [], "spans ended twice"
    pipeline.provider.shutdown()


@pytest.fixture
async def no_leftover_tasks() -> AsyncIterator[None]:
    """After every async test no asyncio task of the test is left running."""
    before = asyncio.all_tasks()
    yield None
    current = asyncio.current_task()
    leftover = [
        task
        for task in asyncio.all_tasks() - before
        if task is not current and not task.done() and not _is_finaliser(task)
    ]
    assert leftover == [], f"tasks left running: {leftover}"


def _is_finaliser(task: asyncio.Task[object]) -> bool:
    """The loop's own task closing an async generator that was dropped half-way (httpx2's byte
    iterators when a stream is cut short) — not a task any code under test started."""
    return type(task.get_coro()).__name__ == "async_generator_athrow"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every async test gets the leftover-task check."""
    for item in items:
        function = getattr(item, "function", None)
        if function is not None and inspect.iscoroutinefunction(function):
            item.fixturenames.insert(0, "no_leftover_tasks")  # type: ignore[attr-defined]
