"""The warning a call logs when it has waited a long time without progress (pure schedule).

A source that answers 429 for ever, or whose breaker stays open, keeps a call waiting until
``stall_window_s`` (5 minutes by default) is spent. Without a word that looks like a hang, so a
call that has waited :attr:`~otel_llm._defaults.Defaults.long_wait_warn_after_s` of the time
the window counts says so — which sources, why each is unavailable, how long so far, when the
window ends the call — and repeats it at most every
:attr:`~otel_llm._defaults.Defaults.long_wait_warn_every_s`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from otel_llm._act._stall_budget import RESOLUTION_S
from otel_llm._defaults import DEFAULTS
from otel_llm._errors import source_label


@dataclass(slots=True)
class WaitWarning:
    """When the next warning of one call is due, in seconds of waiting (as the stall budget
    counts them)."""

    due_at_s: float = DEFAULTS.long_wait_warn_after_s
    every_s: float = DEFAULTS.long_wait_warn_every_s

    def due(self, waited_s: float) -> bool:
        """True when a warning is due after ``waited_s`` of waiting (within
        :data:`~otel_llm._act._stall_budget.RESOLUTION_S`); the next one is then due
        ``every_s`` later."""
        if waited_s + RESOLUTION_S < self.due_at_s:
            return False
        self.due_at_s = waited_s + self.every_s
        return True

    def until_due_s(self, waited_s: float) -> float:
        """Seconds of further waiting before the next warning is due (0: due now)."""
        left = self.due_at_s - waited_s
        return left if left > RESOLUTION_S else 0.0


def wait_message(
    operation: str,
    waited_s: float,
    window_s: float,
    *,
    had_output: bool,
    sources: Iterable[tuple[str, str, str]],
) -> str:
    """The warning's text. ``sources`` holds ``(name, url, why)`` per source still in play."""
    since = "since its last output" if had_output else "without any output"
    detail = "; ".join(f"{source_label(name, url)}: {why}" for name, url, why in sources)
    return (
        f"otel-llm: a {operation} call has waited {waited_s:.1f} s {since} "
        f"(it gives up at stall_window_s={window_s:g}): {detail or 'no source left'}"
    )
