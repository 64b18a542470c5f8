"""Shared fixtures: the public in-memory span pipeline (``otel_llm.testing.Spans``) checked for
spans that never ended, and a leftover-task check on every async test."""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import AsyncIterator, Iterator

import pytest

from otel_llm.testing import Spans

IN_CI = bool(os.environ.get("CI") or os.environ.get("OTEL_LLM_CI"))


def require(condition: bool, reason: str) -> None:
    """Skip locally when a tool is missing; in CI a missing tool is a failure, never a skip."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture
def spans() -> Iterator[Spans]:
    """In-memory spans; after the test every started span must have ended exactly once."""
    pipeline = Spans()
    yield pipeline
    pipeline.check()
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
