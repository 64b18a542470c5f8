"""Admission: per-source request-rate and token-rate limits.

A request is admitted when both of its source's buckets hold enough: one request, and the
estimated tokens (prompt estimate + ``max_tokens``), which are pre-deducted. When the answer's
usage is known the reservation is settled: the difference is refunded or charged. The
in-process backend (:class:`LocalAdmission`) serves one process; the Redis backend
(:mod:`otel_llm._act._redis_admission`) lets several processes or hosts share one quota. An
unreachable backend raises :class:`~otel_llm.BackendUnavailable` — calls fail closed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from otel_llm._act._token_bucket import TokenBucket
from otel_llm._defaults import DEFAULTS


@dataclass(frozen=True, slots=True)
class Limits:
    """A source's limits; ``None`` means unlimited."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None

    @property
    def unlimited(self) -> bool:
        """True when neither limit is set."""
        return self.requests_per_minute is None and self.tokens_per_minute is None


def estimate_prompt_tokens(payload: Mapping[str, Any]) -> int:
    """Prompt tokens of a request, estimated at ~4 characters a token."""
    prompt = payload.get("messages", payload.get("input", ""))
    text = prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False)
    return len(text) // DEFAULTS.chars_per_token + 1


def estimate_tokens(payload: Mapping[str, Any]) -> int:
    """Tokens to pre-deduct for a request: the prompt estimate plus the output cap."""
    output = payload.get("max_completion_tokens") or payload.get("max_tokens")
    if not isinstance(output, int) or isinstance(output, bool) or output < 0:
        output = DEFAULTS.output_tokens_estimate if "messages" in payload else 0
    return estimate_prompt_tokens(payload) + output


class Admission(Protocol):
    """Where admission decisions are made."""

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        """Admit one request of ``tokens`` (return 0.0, both deducted) or return the seconds
        until it could be admitted (nothing deducted). Cancelled, it deducts nothing, or gives
        back what it deducted: the client cancels a hedge's admission whenever the primary
        finishes while it answers."""
        ...

    async def settle(self, source: str, limits: Limits, extra_tokens: int) -> None:
        """Correct a reservation by ``extra_tokens`` (actual − estimate; negative refunds)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def _loop_time() -> float:
    return asyncio.get_running_loop().time()


class LocalAdmission:
    """Admission inside one process (the default)."""

    def __init__(self, clock: Callable[[], float] = _loop_time) -> None:
        self._clock = clock
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def _bucket(self, source: str, kind: str, per_minute: float, now: float) -> TokenBucket:
        key = (source, kind)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket.full(per_minute, per_minute / 60.0, now)
        elif bucket.capacity != per_minute:  # a changed limit keeps the level, capped at it
            bucket = self._buckets[key] = bucket.resized(per_minute, per_minute / 60.0, now)
        return bucket

    def _pairs(
        self, source: str, limits: Limits, tokens: int, now: float
    ) -> list[tuple[TokenBucket, float]]:
        pairs = []
        if limits.requests_per_minute is not None:
            pairs.append((self._bucket(source, "rpm", limits.requests_per_minute, now), 1.0))
        if limits.tokens_per_minute is not None:
            pairs.append(
                (self._bucket(source, "tpm", limits.tokens_per_minute, now), float(tokens))
            )
        return pairs

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        now = self._clock()
        pairs = self._pairs(source, limits, tokens, now)
        wait = max((bucket.wait_for(amount, now) for bucket, amount in pairs), default=0.0)
        if wait > 0:
            return wait
        for bucket, amount in pairs:
            bucket.take(amount, now)
        return 0.0

    async def settle(self, source: str, limits: Limits, extra_tokens: int) -> None:
        if limits.tokens_per_minute is None or extra_tokens == 0:
            return
        now = self._clock()
        self._bucket(source, "tpm", limits.tokens_per_minute, now).adjust(-extra_tokens, now)

    async def aclose(self) -> None:
        return None
