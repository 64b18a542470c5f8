"""The groups of scope-level keys (``{SCOPE}__{GROUP}__{FIELD}``): the stream, hedging, retry,
breaker, pool and admission settings, each a strict model with its own rules. A group's
``argument_prefix`` names its fields' ``Client`` arguments (``hedge_`` + ``after_s``): the
constructor's keywords are generated from here (``_settings.CLIENT_ARGUMENTS``).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator

from otel_llm._act._config_model import StrictModel
from otel_llm._defaults import DEFAULTS
from otel_llm._measure._stalls import threshold_from_text, threshold_rule


class Group(StrictModel):
    """A scope-level group of keys (``{SCOPE}__{GROUP}__*``). ``argument_prefix`` makes a
    field's ``Client`` argument (``hedge_`` + ``after_s``); ``None``: no arguments."""

    argument_prefix: ClassVar[str | None] = ""


def _positive(value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"must be a finite number > 0, got {value!r}")


def _non_negative(value: float) -> float:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"must be a finite number >= 0, got {value!r}")
    return value


class StreamSettings(Group):
    """``{SCOPE}__STREAM__*``: metering."""

    argument_prefix: ClassVar[str | None] = ""

    stall_threshold_ms: int = DEFAULTS.stall_threshold_ms
    """A gap strictly longer than this is a stall (positive integer of milliseconds)."""

    @field_validator("stall_threshold_ms", mode="before")
    @classmethod
    def _strict_threshold(cls, value: Any) -> Any:
        return threshold_rule(threshold_from_text(value))  # the one parser, the one rule


class HedgeSettings(Group):
    """``{SCOPE}__HEDGE__*``: hedged requests. Both triggers unset = hedging off."""

    argument_prefix: ClassVar[str | None] = "hedge_"

    after_s: float | None = None
    """Start a hedge when the primary has no incremental chunk after this long (the first-token
    trigger)."""
    stall_after_s: float | None = None
    """Start a hedge when a gap between the primary's chunks grows beyond this (the stall trigger;
    streams only)."""
    budget_ratio: float = DEFAULTS.hedge_budget_ratio
    """Hedge legs are capped at this fraction of primary rounds (plus ``budget_burst``)."""
    budget_burst: float = DEFAULTS.hedge_budget_burst
    """Hedge legs that may start back to back when the budget is full."""
    first_token_burst: float = DEFAULTS.hedge_first_token_burst
    """With both triggers set, the stall trigger keeps the whole budget and the first-token
    trigger spends only what the full budget overflows, saving at most this many hedges
    (:class:`~otel_llm._act._hedge_budget.HedgeBudgets`); unused with one trigger."""

    @field_validator("after_s", "stall_after_s")
    @classmethod
    def _positive_seconds(cls, value: float | None) -> float | None:
        _positive(value)
        return value

    @field_validator("budget_ratio")
    @classmethod
    def _ratio(cls, value: float) -> float:
        return _non_negative(value)

    @field_validator("budget_burst", "first_token_burst")
    @classmethod
    def _burst(cls, value: float) -> float:
        if not math.isfinite(value) or value < 1:
            raise ValueError(f"must be a finite number >= 1, got {value!r}")
        return value

    @property
    def enabled(self) -> bool:
        """True when either trigger is set."""
        return self.after_s is not None or self.stall_after_s is not None


class RetrySettings(Group):
    """``{SCOPE}__RETRY__*``: retries, failover, deadline and the stall budget."""

    max_attempts: int = Field(default=DEFAULTS.max_attempts, ge=1, le=1000)
    """Transient failures a call may absorb (429s and hedge legs do not count extra)."""
    call_deadline_s: float | None = DEFAULTS.call_deadline_s
    """Bound on the whole call, waits included (``None``: none)."""
    stall_window_s: float = DEFAULTS.stall_window_s
    """Non-productive waiting after which a call that got no output gives up."""
    backoff_base_s: float = DEFAULTS.backoff_base_s
    backoff_max_s: float = DEFAULTS.backoff_max_s
    rate_limit_wait_s: float = DEFAULTS.rate_limit_wait_s
    """Wait after a 429 without Retry-After."""
    same_source_retries: int = Field(default=DEFAULTS.same_source_retries, ge=0, le=100)
    """Transient failures retried on the same source before failing over."""
    rate_limit_max_wait_s: float = DEFAULTS.rate_limit_max_wait_s
    """A 429 asking to wait at most this long is waited out on the same source (0: never)."""
    failover_on_content_filter: bool = DEFAULTS.failover_on_content_filter
    """Try the next source after a content-filter refusal (default: propagate it at once)."""
    failover_on_context_length: bool = DEFAULTS.failover_on_context_length
    """Try the next source after a context-length error (default: yes)."""

    @field_validator(
        "call_deadline_s", "stall_window_s", "backoff_base_s", "backoff_max_s", "rate_limit_wait_s"
    )
    @classmethod
    def _positive_seconds(cls, value: float | None) -> float | None:
        _positive(value)
        return value

    @field_validator("rate_limit_max_wait_s")
    @classmethod
    def _non_negative_seconds(cls, value: float) -> float:
        return _non_negative(value)


class BreakerSettings(Group):
    """``{SCOPE}__BREAKER__*``: the per-source circuit breaker."""

    argument_prefix: ClassVar[str | None] = "breaker_"

    failure_threshold: int = Field(default=DEFAULTS.breaker_failure_threshold, ge=1)
    """Consecutive transient failures that open the breaker."""
    first_cooldown_s: float | None = None
    """Cool-down after the breaker opens; each failed probe doubles it, up to ``cooldown_s``
    (unset: 1 s, or ``cooldown_s`` when that is shorter)."""
    cooldown_s: float = DEFAULTS.breaker_cooldown_s
    """The longest cool-down."""

    @field_validator("first_cooldown_s", "cooldown_s")
    @classmethod
    def _positive_seconds(cls, value: float | None) -> float | None:
        _positive(value)
        return value

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.first_cooldown_s is not None and self.first_cooldown_s > self.cooldown_s:
            raise ValueError(
                f"first_cooldown_s ({self.first_cooldown_s:g}) must not exceed cooldown_s "
                f"({self.cooldown_s:g})"
            )
        return self

    @property
    def effective_first_cooldown_s(self) -> float:
        """The first cool-down in force."""
        if self.first_cooldown_s is not None:
            return self.first_cooldown_s
        return min(DEFAULTS.breaker_first_cooldown_s, self.cooldown_s)


class PoolSettings(Group):
    """``{SCOPE}__POOL__*``: the client's HTTP connection pool."""

    argument_prefix: ClassVar[str | None] = "pool_"

    max_connections: int = Field(default=DEFAULTS.pool_max_connections, ge=1)
    """Connections open at once (each running stream holds one)."""
    max_keepalive_connections: int = Field(default=DEFAULTS.pool_max_keepalive_connections, ge=0)
    """Idle connections kept for reuse."""
    keepalive_expiry_s: float = DEFAULTS.pool_keepalive_expiry_s
    """How long an idle connection is kept."""

    @field_validator("keepalive_expiry_s")
    @classmethod
    def _positive_seconds(cls, value: float) -> float:
        _positive(value)
        return value


class AdmissionSettings(Group):
    """``{SCOPE}__ADMISSION__*``: where rate limits are kept. Its ``Client`` argument is
    an object (``admission=RedisAdmission(url)``), not one per field."""

    argument_prefix: ClassVar[str | None] = None

    backend: Literal["local", "redis"] = "local"
    redis_url: SecretStr | None = None
    key_prefix: str = DEFAULTS.admission_key_prefix

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_redis_url(value.get_secret_value())
        return value

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.backend == "redis" and self.redis_url is None:
            raise ValueError("backend 'redis' needs redis_url")
        return self


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def check_redis_url(url: str) -> None:
    """A ValueError (which never repeats the URL: it may hold a password) unless ``url`` is a
    Redis URL."""
    if not url.startswith(REDIS_SCHEMES):
        scheme = url.split("://", 1)[0] if "://" in url else "none"
        raise ValueError(
            f"must be a Redis URL starting with {', '.join(REDIS_SCHEMES)} "
            f"(scheme: {scheme[:20]!r})"
        )
