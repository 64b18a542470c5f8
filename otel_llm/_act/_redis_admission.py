"""Admission shared through Redis: one quota per source for every process and host.

Each limited bucket of a source is a Redis hash ``{prefix}:{source}:rpm`` or ``…:tpm`` (the
source in braces, a cluster hash tag, so both keys of a source live on one shard) holding its
capacity, level and the time of its last update. One Lua script, run atomically with the
server's clock (Redis 5 or later), reproduces :class:`~otel_llm._act._token_bucket.TokenBucket`
exactly: a missing bucket is full, a bucket whose capacity changed keeps its level (refilled at
the old rate until now, then capped at the new capacity: processes that disagree on a limit still
share one quota), an amount above the capacity is clamped to it, and a settlement may leave a debt
(a negative level). An idle bucket expires a while after it would be full again, which is what a
missing bucket means.

Sources with no limits never ask Redis. Every other call fails closed: when Redis cannot be
asked, :class:`~otel_llm.BackendUnavailable` is raised and nothing is admitted.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from urllib.parse import urlsplit

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.connection import UnixDomainSocketConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from otel_llm._act._admission import Limits
from otel_llm._act._groups import check_redis_url
from otel_llm._act._token_bucket import ROUNDING
from otel_llm._arguments import type_name
from otel_llm._defaults import DEFAULTS
from otel_llm._errors import BackendUnavailable, ConfigurationError
from otel_llm._redact import redact, redact_url, url_secrets

logger = logging.getLogger("otel_llm")

_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local mode, idle_s, rounding = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local caps, levels, stamps = {}, {}, {}
local wait = 0
for i, key in ipairs(KEYS) do
  local cap, amount = tonumber(ARGV[2 * i + 2]), tonumber(ARGV[2 * i + 3])
  local per_s = cap / 60
  local stored = redis.call('HMGET', key, 'capacity', 'level', 'at')
  local level, at = cap, now
  local was = tonumber(stored[1])
  if was then
    level, at = tonumber(stored[2]), tonumber(stored[3])
    if now > at then
      level, at = math.min(was, level + (now - at) * was / 60), now
    end
    level = math.min(cap, level)
  end
  if mode == 'acquire' then
    amount = math.min(amount, cap)
    local missing = amount - level
    if missing > cap * rounding then
      wait = math.max(wait, missing / per_s)
    end
    level = level - amount
  else
    level = math.min(cap, level + amount)
  end
  caps[i], levels[i], stamps[i] = cap, level, at
end
if wait > 0 then
  return string.format('%.17g', wait)
end
for i, key in ipairs(KEYS) do
  local cap, level = caps[i], levels[i]
  local ttl_s = idle_s
  if cap > 0 then
    ttl_s = idle_s + math.max(0, cap - level) / (cap / 60)
  end
  redis.call('HSET', key, 'capacity', string.format('%.17g', cap),
    'level', string.format('%.17g', level), 'at', string.format('%.17g', stamps[i]))
  redis.call('PEXPIRE', key, string.format('%.0f', math.ceil(ttl_s * 1000)))
end
return '0'
"""
"""KEYS: one hash per bucket. ARGV: ``acquire`` or ``settle``, the idle expiry, the shortfall
that is rounding (:data:`~otel_llm._act._token_bucket.ROUNDING`), then per bucket its capacity
(per minute) and amount. ``acquire`` takes the amount from every bucket and returns
``'0'``, or takes nothing and returns the seconds until every bucket would hold it; ``settle``
adds the amount (negative charges) to every bucket, capped at the capacity."""


def _check_pool(url: str, pool: BlockingConnectionPool) -> None:
    """A ValueError (naming no value of the URL) unless ``pool`` can make connections: a
    database that is a number ≥ 0, a socket with a path, and only options Redis takes."""
    settings = pool.connection_kwargs
    if pool.connection_class is UnixDomainSocketConnection:
        if not settings.get("path"):
            raise ValueError("a socket URL needs the path of the socket")
    elif urlsplit(url).path.replace("/", "") and "db" not in settings:
        raise ValueError("the path must be a database number (redis://host:6379/0)")
    if not isinstance(settings.get("db", 0), int) or settings.get("db", 0) < 0:
        raise ValueError("the database number must be 0 or more")
    try:
        pool.connection_class(**settings)  # takes the connection's settings; does not connect
    except TypeError as exc:  # an option of the query the connection does not take
        names = re.findall(r"'(\w+)'", str(exc))[-1:]
        option = repr(names[0]) if names else "an option"
        raise ValueError(f"the URL's query has {option}, which Redis does not take here") from None


class RedisAdmission:
    """Admission kept in Redis at ``url``, shared by everyone using the same ``key_prefix``.

    ``timeout_s`` bounds connecting and each answer; a failed command is not retried (a retry
    could charge twice), so an unreachable server fails the call within about that time. The
    process keeps at most ``DEFAULTS.admission_max_connections`` connections to Redis (a
    ``max_connections`` query in the URL sets another number); a burst of more concurrent
    calls queues for them, each waiting ``timeout_s`` at most.
    """

    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = DEFAULTS.admission_key_prefix,
        timeout_s: float = DEFAULTS.admission_timeout_s,
    ) -> None:
        if not isinstance(url, str):
            raise ConfigurationError("redis_url", f"must be a Redis URL, got {type_name(url)}")
        if (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, int | float)
            or not math.isfinite(timeout_s)
            or timeout_s <= 0
        ):
            raise ConfigurationError("timeout_s", f"must be a finite number > 0, got {timeout_s!r}")
        self._prefix = key_prefix
        self._where = redact_url(url)
        self._secrets = url_secrets(url)
        problem = None
        try:
            check_redis_url(url)
            # a blocking pool: a burst of acquirers waits for a connection instead of failing
            # (the plain pool refuses past its size, or opens a socket per waiting call)
            pool = BlockingConnectionPool.from_url(
                url,
                max_connections=DEFAULTS.admission_max_connections,
                timeout=timeout_s,
                socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s,
                retry=Retry(NoBackoff(), 0),
            )
            _check_pool(url, pool)
            self._redis = Redis(connection_pool=pool)
        except ValueError as exc:  # redis' own messages repeat the URL, password included
            problem = redact(str(exc), (url, *self._secrets))
        if problem is not None:
            raise ConfigurationError("redis_url", f"{problem} ({self._where})")
        self._script = self._redis.register_script(_SCRIPT)
        self._giving_back: set[asyncio.Future[None]] = set()

    def _key(self, source: str, kind: str) -> str:
        return f"{self._prefix}:{{{source}}}:{kind}"

    async def _run(self, operation: str, buckets: list[tuple[str, float, float]]) -> float:
        keys = [key for key, _, _ in buckets]
        args: list[str | float] = [operation, DEFAULTS.admission_idle_expiry_s, ROUNDING]
        for _, capacity, amount in buckets:
            args += [capacity, amount]
        try:
            answer = await self._script(keys=keys, args=args)
        except (RedisError, OSError) as exc:
            reason = redact(f"{type(exc).__name__}: {exc}", self._secrets)
        else:
            return float(answer)
        # raised unchained: the client library's errors may carry the connection's settings
        raise BackendUnavailable(
            f"admission backend Redis at {self._where} failed during {operation}: {reason}"
        )

    async def acquire(self, source: str, limits: Limits, tokens: int) -> float:
        """Admit one request of ``tokens`` (0.0, both buckets charged) or return the seconds
        until it could be admitted (nothing charged); raises ``BackendUnavailable``."""
        buckets = []
        if limits.requests_per_minute is not None:
            buckets.append((self._key(source, "rpm"), float(limits.requests_per_minute), 1.0))
        if limits.tokens_per_minute is not None:
            buckets.append(
                (self._key(source, "tpm"), float(limits.tokens_per_minute), float(tokens))
            )
        if not buckets:
            return 0.0
        run = asyncio.ensure_future(self._run("acquire", buckets))
        try:
            return await asyncio.shield(run)
        except asyncio.CancelledError:
            # the script may have run already: its answer is awaited, and what it took given
            # back, apart from the cancelled call, which goes on at once (a call's deadline
            # and a caller's timeout hold however slow Redis is); aclose waits for it
            give_back = asyncio.ensure_future(self._give_back(run, buckets))
            self._giving_back.add(give_back)
            give_back.add_done_callback(self._giving_back.discard)
            raise

    async def _give_back(
        self, run: asyncio.Future[float], buckets: list[tuple[str, float, float]]
    ) -> None:
        """Return what the acquire ``run`` took (its amounts, clamped as it clamped them)."""
        try:
            if await run == 0.0:
                given = [
                    (key, capacity, min(amount, capacity)) for key, capacity, amount in buckets
                ]
                await self._run("settle", given)
        except BackendUnavailable as exc:
            logger.warning("otel-llm: could not give back a cancelled admission: %s", exc)

    async def settle(self, source: str, limits: Limits, extra_tokens: int) -> None:
        """Charge ``extra_tokens`` to the token bucket (negative refunds, capped at capacity)."""
        if limits.tokens_per_minute is None or extra_tokens == 0:
            return
        bucket = (self._key(source, "tpm"), float(limits.tokens_per_minute), -float(extra_tokens))
        await self._run("settle", [bucket])

    async def aclose(self) -> None:
        """Close the connections to Redis (once what cancelled acquires took is given back)."""
        await asyncio.gather(*self._giving_back, return_exceptions=True)
        await self._redis.aclose(close_connection_pool=True)
