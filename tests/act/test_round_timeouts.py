"""A ``TimeoutError`` inside a round is the call deadline only when the deadline's own timer
fired: one raised by other code the round runs — an admission backend asked for the hedge (a
socket timeout is a ``TimeoutError``) — reaches the caller as it is, as it does when the same
backend raises it for the primary, never relabelled "call deadline reached" (without a deadline
that label was a ``TypeError``). On virtual time over the scripted transport."""

from __future__ import annotations

import pytest

from otel_llm import AllSourcesExhausted, Limits, LocalAdmission
from otel_llm.testing import Scripted, Spans, run_virtual, sse_answer
from tests.support.scripted_clients import MESSAGES, client, timed_stream


class TimesOut(LocalAdmission):
    """The in-process backend; asked for ``source``, it raises its own ``TimeoutError`` (as a
    backend whose socket timed out would)."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        if source == self.source:
            raise TimeoutError("the backend's own socket timed out")
        return await super().acquire(source, limits, tokens)


@pytest.mark.parametrize("deadline", [None, 600.0], ids=["no-deadline", "far-deadline"])
def test_a_timeout_error_from_the_hedges_admission_is_not_the_deadline(
    spans: Spans, deadline: float | None
) -> None:
    """The primary's first chunk is late, the hedge's admission raises ``TimeoutError``: the
    caller gets that error, not "call deadline reached" (nor, without a deadline, a
    ``TypeError`` from formatting it)."""
    script = Scripted({"a": [timed_stream(3.0)], "b": [sse_answer()]})

    async def main() -> None:
        options = {"hedge_after_s": 1.0, "call_deadline_s": deadline}
        async with client(script, spans, admission=TimesOut("b"), **options) as c:
            await c.chat(MESSAGES)

    with pytest.raises(TimeoutError, match="the backend's own socket timed out"):
        run_virtual(main())
    assert "b" not in script.seen


def test_the_deadline_reached_during_a_round_is_still_the_deadline(spans: Spans) -> None:
    """The primary's first chunk comes after the call deadline: the call ends at the deadline
    as ``AllSourcesExhausted`` naming it."""
    script = Scripted({"a": [timed_stream(30.0)], "b": [timed_stream(30.0)]})

    async def main() -> None:
        async with client(script, spans, call_deadline_s=5.0) as c:
            await c.chat(MESSAGES)

    with pytest.raises(AllSourcesExhausted, match="call deadline of 5 s reached"):
        run_virtual(main())
