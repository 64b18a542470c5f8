"""A call that waits a long time without progress says so: source, reason, time so far —
first after ``long_wait_warn_after_s``, then at most every ``long_wait_warn_every_s``. On
virtual time: five minutes of 429s take no real time."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest

from otel_llm import AllSourcesExhausted
from otel_llm._act._source_state import Candidates
from otel_llm._act._stall_budget import StallBudget
from otel_llm._act._wait_warning import WaitWarning
from otel_llm._defaults import DEFAULTS
from otel_llm.testing import Scripted, Spans, error, run_virtual, sse_answer
from tests.support.processes import run_python
from tests.support.round_harness import state
from tests.support.scripted_clients import MESSAGES, client, source

WAITED = re.compile(r"has waited (\d+\.\d) s")


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The long-wait warnings logged through the library's logger."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "otel_llm"
        and record.levelno == logging.WARNING
        and "has waited" in record.getMessage()
    ]


def waited_of(message: str) -> float:
    """The time so far a warning reports."""
    found = WAITED.search(message)
    assert found is not None, message
    return float(found.group(1))


def test_the_schedule_fires_once_at_the_threshold_then_at_most_every_interval() -> None:
    """Not due before the threshold; due once when reached; then not again for ``every_s``."""
    warning = WaitWarning(due_at_s=30.0, every_s=60.0)
    assert not warning.due(29.9)
    assert warning.until_due_s(29.0) == pytest.approx(1.0)
    assert warning.due(30.5)
    assert not warning.due(31.0)
    assert not warning.due(90.4)
    assert warning.due(90.5)
    assert warning.until_due_s(100.0) == pytest.approx(50.5)


def test_a_source_answering_429_for_ever_warns_while_the_call_waits(
    spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    """A source that answers 429 for ever: the call warns at 30 s, 90 s, … (source with its
    URL, rate limited, the last answer, the time so far) and ends at the 300 s window."""
    script = Scripted({"a": [error(429, retry_after="7")]})

    async def main() -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client(script, spans, source("a")) as c:
            with pytest.raises(AllSourcesExhausted, match="without any output"):
                await c.chat(MESSAGES)
        return loop.time() - started

    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        elapsed = run_virtual(main())
    assert elapsed == pytest.approx(DEFAULTS.stall_window_s)
    found = warnings_of(caplog)
    assert [waited_of(message) for message in found] == [30.0, 90.0, 150.0, 210.0, 270.0]
    assert found[0] == (
        "otel-llm: a chat call has waited 30.0 s without any output (it gives up at "
        "stall_window_s=300): a at http://a.test/v1: rate limited for another 5.0 s, last "
        "failure: answered 429: scripted 429 (code=error)"
    )


def test_a_breaker_that_stays_open_is_the_reason_given(
    spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    """A source whose breaker keeps opening (every probe fails): the warning says the breaker
    is open and names the last failure."""
    script = Scripted({"a": [error(500)]})

    async def main() -> None:
        async with client(
            script, spans, source("a"), max_attempts=20, breaker_failure_threshold=1
        ) as c:
            with pytest.raises(AllSourcesExhausted, match="max_attempts=20 reached"):
                await c.chat(MESSAGES)

    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        run_virtual(main())
    found = warnings_of(caplog)
    assert found, "the call waited on the breaker for more than 30 s"
    assert 30.0 <= waited_of(found[0]) < 31.0
    assert re.search(
        r"a at http://a\.test/v1: circuit breaker open for another \d+\.\d s, "
        r"last failure: answered 500: scripted 500",
        found[0],
    ), found[0]


@pytest.mark.parametrize(
    ("answers", "options"),
    [
        pytest.param([error(429, retry_after="5"), sse_answer()], {}, id="short-wait"),
        pytest.param([error(429, retry_after="5")], {"stall_window_s": 20}, id="short-window"),
    ],
)
def test_no_warning_before_the_threshold(
    spans: Spans,
    caplog: pytest.LogCaptureFixture,
    answers: list[object],
    options: dict[str, object],
) -> None:
    """A call that waits less than ``long_wait_warn_after_s`` — answered after a short rate
    limit, or ended sooner by a short stall window — logs no long-wait warning."""
    script = Scripted({"a": answers})  # type: ignore[dict-item]

    async def main() -> None:
        async with client(script, spans, source("a"), **options) as c:
            try:
                await c.chat(MESSAGES)
            except AllSourcesExhausted:
                assert "stall_window_s" in options

    with caplog.at_level(logging.WARNING, logger="otel_llm"):
        run_virtual(main())
    assert warnings_of(caplog) == []


def test_a_call_waiting_for_admission_says_so_with_the_estimated_wait(
    spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    """A source allowing one request a minute: the second call waits a minute for admission,
    asking again every second. Its warning at 30 s says the source is out of admission quota
    for this request, for about the 30 s admission estimates — it said the source was
    "available", since the warning is given as the call wakes to ask again."""
    script = Scripted({"a": [sse_answer()] * 2})

    async def main() -> float:
        async with client(script, spans, source("a", requests_per_minute=1)) as c:
            await c.chat(MESSAGES)
            start = asyncio.get_running_loop().time()
            await c.chat(MESSAGES)
            return asyncio.get_running_loop().time() - start

    with caplog.at_level(logging.WARNING, "otel_llm"):
        waited = run_virtual(main())
    assert 59.0 < waited <= 60.0, waited
    (message,) = warnings_of(caplog)
    assert waited_of(message) == 30.0
    assert message.endswith(
        "a at http://a.test/v1: out of admission quota for this request, "
        "estimated for another 30.0 s"
    ), message


def test_waiting_a_float_step_short_of_a_bound_has_reached_it() -> None:
    """Waiting time is a difference of clock readings: 30 s of it can come out as
    29.999999999999996 s, and the 3.6e-15 s left is less than a clock near a minute can move.
    The warning is due then, and the stall window spent within as little."""
    warning = WaitWarning(due_at_s=30.0, every_s=60.0)
    assert warning.until_due_s(29.999999999999996) == 0.0
    assert warning.due(29.999999999999996)
    budget = StallBudget(started_at=53.78, window_s=120.0)
    now = 53.78 + 119.99999999999999
    assert 0 < budget.remaining_s(now) < 1e-9
    assert budget.exhausted(now)


FLOAT_STEP_SHORT = """
import asyncio
from otel_llm import AllSourcesExhausted, Client, Source
from otel_llm.simulator import Script, SimulatedProvider
from otel_llm.testing import run_virtual

async def main():
    scripts = {
        "a": Script(error_status=400, hold_s=0.43276706790505337),
        "b": Script(error_status=429, retry_after="300"),
    }
    async with SimulatedProvider(scripts=scripts) as sim:
        sources = [
            Source(name=name, provider="openai", base_url=sim.base_url, model=name,
                   api_key="sk-test-0123456789")
            for name in ("a", "b")
        ]
        async with Client(sources, stall_window_s=120, rate_limit_max_wait_s=0) as client:
            for call in range(2):
                try:
                    await client.chat([{"role": "user", "content": "hi"}])
                except AllSourcesExhausted:
                    print(call, "exhausted")
                if call == 0:
                    await asyncio.sleep(25.07295311759609)

run_virtual(main(), real_io=True)
"""


def test_a_call_whose_waiting_falls_a_float_step_short_of_its_window_ends(tmp_path: Path) -> None:
    """Found by a fresh-context probe over random runs: a source refusing for good, another
    answering 429 for 300 s, and a second call 25.07295311759609 s after the first. Its waiting
    reached the 120 s window a float step short, so the wait for the rest (3.6e-15 s) could not
    move the clock: on virtual time the call waited for the same instant for ever (on the real
    clock it spins until the clock moves). A process of its own, so a hang fails the test."""
    done = run_python(FLOAT_STEP_SHORT, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "exhausted", "1", "exhausted"]


def test_a_source_out_of_quota_is_named_so_when_the_loop_wakes_late() -> None:
    """A real loop wakes a little after the one-second recheck it slept for: until admission's
    estimate has passed, the source is still out of quota for the request (it read as
    'available' a moment after each recheck). Once admitted, the estimate is forgotten."""
    a = state("a")
    candidates = Candidates([a], quota_until={"a": 11.0}, quota_estimate={"a": 40.0})
    assert candidates.why_unavailable(a, 11.003) == (
        "out of admission quota for this request, estimated for another 29.0 s"
    )
    assert candidates.why_unavailable(a, 40.0) == "not tried"
