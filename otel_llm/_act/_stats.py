"""``CallStats``: where the time of one call went, taken from its winning attempt."""

from __future__ import annotations

from dataclasses import dataclass

from otel_llm._figures import FIGURE_NAMES
from otel_llm._measure._stalls import StallFigures


@dataclass(frozen=True, slots=True)
class CallStats:
    """Figures of one call. Fields are only ever added, never renamed.

    The timing figures come from the winning attempt: ``generation_ms`` is net of stalls
    (wall − stall, still including time to first chunk and the tail) and always comes with
    ``stall_ms``/``stall_count``, which are ``None`` when not observable (not streamed, or fewer
    than two incremental chunks). Chunks are not tokens.
    """

    ttft_ms: int | None = None
    generation_ms: int | None = None
    stall_ms: int | None = None
    stall_count: int | None = None
    max_inter_chunk_ms: int | None = None
    wall_ms: int | None = None
    chunk_count: int | None = None
    stall_threshold_ms: int | None = None
    attempts: int = 0
    hedges: int = 0
    hedge_won: bool = False
    sources_tried: tuple[str, ...] = ()
    retries: int = 0
    backoff_ms: int = 0
    hedge_waste_tokens: int | None = None
    """Tokens the losing legs used, where their usage is known (a cancelled loser's is not)."""
    hedge_waste_chunks: int | None = None
    """Incremental chunks the losing legs had received when they lost (always known)."""
    call_ms: int | None = None
    """Wall time of the whole call, retries and waits included."""
    waited_ms: int | None = None
    """Non-productive waiting of the call (backoff, rate limits, breaker, admission)."""

    @classmethod
    def from_winner(cls, figures: StallFigures, **call: object) -> CallStats:
        """Stats whose timing figures are ``figures`` of the winning attempt (every figure of
        the table, and the threshold they were measured at)."""
        timing = {name: getattr(figures, name) for name in FIGURE_NAMES}
        return cls(**timing, stall_threshold_ms=figures.threshold_ms, **call)  # type: ignore[arg-type]
