"""The Redis admission backend against a real redis-server: the in-process backend's decisions,
one quota shared across processes, and fail-closed errors that never show the password."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from redis.asyncio import Redis

from otel_llm import (
    BackendUnavailable,
    Client,
    ConfigurationError,
    Limits,
    LocalAdmission,
    RedisAdmission,
    Source,
)
from otel_llm._redact import redact_url
from otel_llm.simulator import SimulatedProvider
from tests.support.redis_server import (
    RedisServer,
    free_port,
    redis_url_fixture,  # noqa: F401 (provides ``redis_url``)
    require_redis_server,
)

RPM3 = Limits(requests_per_minute=3)
RPM5 = Limits(requests_per_minute=5)
TPM600 = Limits(tokens_per_minute=600)
BOTH = Limits(requests_per_minute=2, tokens_per_minute=600)
SECRET = "s3cret-redis-password"


@dataclass(frozen=True)
class Acquire:
    limits: Limits
    tokens: int = 1


@dataclass(frozen=True)
class Settle:
    limits: Limits
    extra_tokens: int


# Each scenario: steps, and the admit (A) / deny (D) pattern of its acquires. Every denial is
# short by at least 5 s of refill, so the few milliseconds the real clock runs cannot flip it.
SCENARIOS: dict[str, tuple[list[Acquire | Settle], str]] = {
    "requests-up-to-capacity": ([Acquire(RPM3)] * 4, "AAAD"),
    "tokens-above-capacity-clamped": ([Acquire(TPM600, 1000), Acquire(TPM600, 50)], "AD"),
    "both-limits-denial-charges-nothing": (
        [
            Acquire(BOTH, 100),  # rpm 1 left, tpm 500
            Acquire(BOTH, 550),  # tpm short: nothing taken, not even the request
            Acquire(BOTH, 100),  # rpm 0 left, tpm 400
            Acquire(BOTH, 300),  # rpm short: the 300 tokens are not taken
            Acquire(TPM600, 400),  # so 400 tokens are still there
            Acquire(Limits(requests_per_minute=2)),
        ],
        "ADADAD",
    ),
    "settle-refunds-and-charges": (
        [
            Acquire(TPM600, 500),  # 100 left
            Acquire(TPM600, 200),
            Settle(TPM600, -300),  # used 200 of 500: refund → 400
            Acquire(TPM600, 200),  # 200 left
            Settle(TPM600, 400),  # used 600 of 200: charge → -200
            Acquire(TPM600, 1),
            Settle(Limits(requests_per_minute=3), 10_000),  # no token limit: no-op
            Settle(TPM600, 0),  # nothing to settle
            Acquire(TPM600, 1),
        ],
        "ADADD",
    ),
    "fractional-capacity": ([Acquire(Limits(requests_per_minute=0.7))] * 2, "AD"),
    "refund-capped-at-capacity": (
        [Acquire(TPM600, 600), Settle(TPM600, -5000), Acquire(TPM600, 600), Acquire(TPM600, 60)],
        "AAD",
    ),
    "capacity-raised-keeps-level": (
        [*[Acquire(RPM3)] * 4, *[Acquire(RPM5)] * 2],
        "AAAD" + "DD",  # the raised limit is reached by refill, not at once
    ),
    "capacity-lowered-caps-level": (
        [*[Acquire(RPM5)] * 3, *[Acquire(RPM3)] * 3],
        "AAA" + "AAD",  # 2 left, under the lower limit
    ),
    "capacity-lowered-caps-tokens": (
        [Acquire(TPM600, 100), Acquire(Limits(tokens_per_minute=300), 300), Acquire(TPM600, 60)],
        "AAD",  # 500 left, capped at 300, all taken
    ),
}


CLOCKS_APART_S = 0.05
"""How far Redis's clock and this process's may disagree over one scenario (a small fraction of
every scenario's waits: a refill of 1/20 of a second at most, never a whole request)."""


@pytest.fixture
def prefix() -> str:
    """Key prefix of one test, so tests sharing the session's server never meet."""
    return f"test-{uuid.uuid4().hex}"


@pytest.fixture
async def backend(redis_url: str, prefix: str) -> AsyncIterator[RedisAdmission]:
    """The Redis backend on the session's server, with the test's own keys."""
    admission = RedisAdmission(redis_url, key_prefix=prefix)
    yield admission
    await admission.aclose()


async def run(
    admission: LocalAdmission | RedisAdmission, steps: list[Acquire | Settle]
) -> list[float]:
    waits = []
    for step in steps:
        if isinstance(step, Acquire):
            waits.append(await admission.acquire("src", step.limits, step.tokens))
        else:
            await admission.settle("src", step.limits, step.extra_tokens)
    return waits


def pattern(waits: list[float]) -> str:
    return "".join("A" if wait == 0.0 else "D" for wait in waits)


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_same_decisions_as_local_backend(name: str, backend: RedisAdmission) -> None:
    """Redis admits and denies exactly where the in-process backend does, with waits bounded."""
    steps, expected = SCENARIOS[name]
    frozen = await run(LocalAdmission(clock=lambda: 0.0), steps)
    started = time.monotonic()
    shared = await run(backend, steps)
    elapsed = time.monotonic() - started
    assert pattern(frozen) == expected
    assert pattern(shared) == expected
    for local_wait, redis_wait in zip(frozen, shared, strict=True):
        # Redis's clock runs: it has refilled at most ``elapsed`` seconds' worth — give or take
        # how two clocks disagree: Redis reads the wall clock, as of when it took the command,
        # and this test a monotonic one (6.77 ms of refill against 6.62 ms measured here, once,
        # beside two CPU burners).
        assert local_wait - elapsed - CLOCKS_APART_S <= redis_wait <= local_wait + 1e-6
        assert (redis_wait > 0) == (local_wait > 0)


async def test_idle_buckets_expire(
    backend: RedisAdmission,
    redis_url: str,
    prefix: str,
) -> None:
    """Bucket keys carry an expiry: about two minutes after they would be full again."""
    assert await backend.acquire("src", BOTH, 300) == 0.0
    raw = Redis.from_url(redis_url, decode_responses=True)
    try:
        keys = sorted(str(key) for key in await raw.keys(f"{prefix}:*"))
        assert keys == [f"{prefix}:{{src}}:rpm", f"{prefix}:{{src}}:tpm"]
        rpm_ttl_ms, tpm_ttl_ms = [await raw.pttl(key) for key in keys]
    finally:
        await raw.aclose()
    assert 120_000 + 30_000 - 5_000 < rpm_ttl_ms <= 120_000 + 30_000  # 1 of 2 a minute
    assert 120_000 + 30_000 - 5_000 < tpm_ttl_ms <= 120_000 + 30_000  # 300 of 600 a minute


async def test_unlimited_sources_do_not_need_the_backend() -> None:
    """Without limits (or without a token limit, for settle) Redis is never asked."""
    down = RedisAdmission(f"redis://127.0.0.1:{free_port()}/0")
    try:
        assert await down.acquire("src", Limits(), 10_000) == 0.0
        await down.settle("src", Limits(requests_per_minute=3), 500)
        await down.settle("src", TPM600, 0)
    finally:
        await down.aclose()


async def test_unreachable_redis_fails_closed_without_the_password() -> None:
    """A closed port raises BackendUnavailable naming the operation; the password never shows."""
    port = free_port()
    down = RedisAdmission(f"redis://:{SECRET}@127.0.0.1:{port}/0")
    try:
        with pytest.raises(BackendUnavailable) as caught:
            await down.acquire("src", RPM3, 1)
        with pytest.raises(BackendUnavailable, match="during settle"):
            await down.settle("src", TPM600, 5)
    finally:
        await down.aclose()
    message = str(caught.value)
    assert "during acquire" in message
    assert f"redis://:[REDACTED]@127.0.0.1:{port}/0" in message
    assert SECRET not in message
    assert SECRET not in repr(caught.value)
    assert "ConnectionError" in message, "the client library's error is named"
    assert caught.value.__cause__ is None, "not chained: redis errors may carry settings"
    assert caught.value.__context__ is None


async def test_wrong_password_fails_closed_without_either_password() -> None:
    """A rejected AUTH is BackendUnavailable too, and shows neither the right nor the wrong one."""
    require_redis_server()
    with RedisServer(password="right-password-123") as server:
        wrong = RedisAdmission(f"redis://:wrong-password-456@127.0.0.1:{server.port}/0")
        try:
            with pytest.raises(BackendUnavailable) as caught:
                await wrong.acquire("src", RPM3, 1)
        finally:
            await wrong.aclose()
    assert "wrong-password-456" not in str(caught.value)
    assert "right-password-123" not in str(caught.value)


async def test_error_answer_fails_closed(
    backend: RedisAdmission,
    redis_url: str,
    prefix: str,
) -> None:
    """An error answer from Redis (a bucket key of the wrong type) is BackendUnavailable."""
    raw = Redis.from_url(redis_url)
    try:
        await raw.set(f"{prefix}:{{src}}:rpm", "not a hash")
    finally:
        await raw.aclose()
    with pytest.raises(BackendUnavailable, match="during acquire"):
        await backend.acquire("src", RPM3, 1)


async def test_redis_killed_mid_run_fails_closed() -> None:
    """Once the server dies, the next acquire raises BackendUnavailable instead of admitting."""
    require_redis_server()
    with RedisServer() as server:
        admission = RedisAdmission(server.url)
        try:
            assert await admission.acquire("src", RPM3, 1) == 0.0
            server.kill()
            started = time.monotonic()
            with pytest.raises(BackendUnavailable, match="during acquire"):
                await admission.acquire("src", RPM3, 1)
            assert time.monotonic() - started < 2.0  # at once: refused, not retried
        finally:
            await admission.aclose()


def test_redact_url() -> None:
    """Passwords leave URLs in the authority and in the query; the rest stays readable."""
    cases = {
        "redis://127.0.0.1:6379/0": "redis://127.0.0.1:6379/0",
        "redis://:pw@host:6379/0": "redis://:[REDACTED]@host:6379/0",
        "rediss://user:pw@host/1": "rediss://user:[REDACTED]@host/1",
        "redis://pw@host": "redis://[REDACTED]@host",
        "unix:///run/redis.sock?db=0&password=pw": "unix:///run/redis.sock?[REDACTED]",
    }
    assert {url: redact_url(url) for url in cases} == cases


WORKER = """
import asyncio, json, sys, time
from otel_llm._act._admission import Limits
from otel_llm import RedisAdmission

async def main(url, prefix, rpm, denials_to_stop, max_attempts):
    admission = RedisAdmission(url, key_prefix=prefix)
    limits = Limits(requests_per_minute=rpm)
    await admission.acquire("warm-up", limits, 1)  # connected, script loaded
    print("ready", flush=True)
    sys.stdin.readline()
    admitted = denied = attempts = 0
    start = time.time()
    while denied < denials_to_stop and attempts < max_attempts:
        attempts += 1
        if await admission.acquire("shared", limits, 1) == 0.0:
            admitted += 1
        else:
            denied += 1
    end = time.time()
    await admission.aclose()
    print(json.dumps({"admitted": admitted, "attempts": attempts, "start": start, "end": end}))

asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
"""


def test_two_processes_share_one_quota(redis_url: str) -> None:
    """Two processes racing on one source admit its quota once, plus only what refilled."""
    rpm = 3000.0  # 50 a second: draining takes thousands of round trips, refill is measured
    prefix = f"test-{uuid.uuid4().hex}"
    args = [redis_url, prefix, str(rpm), "20", "50000"]
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        for worker in workers:  # both connected before either starts
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        outputs = [worker.communicate(timeout=30)[0] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    assert [worker.returncode for worker in workers] == [0, 0]
    results = [json.loads(output.strip().splitlines()[-1]) for output in outputs]
    admitted = sum(result["admitted"] for result in results)
    span_s = max(r["end"] for r in results) - min(r["start"] for r in results)
    bound = rpm + rpm / 60.0 * span_s
    detail = f"{results}, span {span_s:.3f}s, bound {bound:.1f}"
    assert rpm <= admitted <= bound, detail
    assert all(result["admitted"] > 0 for result in results), f"no contention: {detail}"


async def test_a_burst_of_concurrent_acquirers_is_served_on_few_connections(
    backend: RedisAdmission, redis_url: str
) -> None:
    """A thundering herd of acquirers in one process is served, none failed for want of a
    connection: they queue for a bounded pool (Redis sees a few dozen clients, not one each),
    and the quota is admitted exactly once — the script reads and writes atomically."""
    rpm = 300.0  # 5 a second refill: a bounded, measured excess
    herd = 1000
    limits = Limits(requests_per_minute=rpm)
    raw = Redis.from_url(redis_url)
    try:
        clients_before = int((await raw.info("clients"))["connected_clients"])
        started = time.monotonic()
        waits = await asyncio.gather(
            *(backend.acquire("herd", limits, 1) for _ in range(herd)), return_exceptions=True
        )
        elapsed = time.monotonic() - started
        clients_after = int((await raw.info("clients"))["connected_clients"])
    finally:
        await raw.aclose()
    errors = {str(wait) for wait in waits if isinstance(wait, BaseException)}
    assert not errors
    admitted = sum(1 for wait in waits if wait == 0.0)
    assert rpm <= admitted <= rpm + rpm / 60.0 * elapsed + 1, f"{admitted} in {elapsed:.2f}s"
    assert clients_after - clients_before <= 64, "one connection per waiting acquirer"


@pytest.mark.parametrize(
    ("url", "timeout_s", "says"),
    [
        (f"redis://:{SECRET}@127.0.0.1:6379/0?colour=blue", 2.0, "colour"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0?ssl_cert_reqs=none", 2.0, "ssl_cert_reqs"),
        (f"redis://:{SECRET}@127.0.0.1:6379/cache", 2.0, "database number"),
        (f"redis://:{SECRET}@127.0.0.1:6379/-1", 2.0, "database number"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0?db=-2", 2.0, "database number"),
        ("unix://", 2.0, "path of the socket"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0", 0.0, "timeout_s"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0", -1.0, "timeout_s"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0", float("nan"), "timeout_s"),
        (f"redis://:{SECRET}@127.0.0.1:6379/0", float("inf"), "timeout_s"),
    ],
)
def test_bad_settings_are_refused_when_made(url: str, timeout_s: float, says: str) -> None:
    """A URL that cannot work (an option redis does not know, a database that is no number,
    a socket without a path) or a timeout that is no positive finite number is a
    ConfigurationError at construction — not an error of some later call, and never a
    TypeError from inside the Redis client — and it never shows the password."""
    with pytest.raises(ConfigurationError) as caught:
        RedisAdmission(url, timeout_s=timeout_s)
    assert says in str(caught.value)
    assert SECRET not in str(caught.value)
    assert SECRET not in repr(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


@pytest.mark.parametrize("url", [None, b"redis://127.0.0.1:6379/0", 6379])
def test_a_url_that_is_no_text_is_refused(url: object) -> None:
    """A URL of the wrong type is a ConfigurationError naming the type."""
    with pytest.raises(ConfigurationError, match="redis_url: must be a Redis URL"):
        RedisAdmission(url)  # type: ignore[arg-type]


async def test_processes_that_disagree_on_a_limit_still_share_one_quota(
    redis_url: str, prefix: str
) -> None:
    """Two processes whose limits for one source differ (a rolling deploy that changes it)
    alternate on its bucket: the level is carried over, capped at the limit of whoever asks,
    so together they admit about the larger quota — not a full bucket at every change."""
    old, new = Limits(requests_per_minute=3), Limits(requests_per_minute=5)
    first, second = (RedisAdmission(redis_url, key_prefix=prefix) for _ in range(2))
    try:
        started = time.monotonic()
        waits = []
        for _ in range(20):
            waits.append(await first.acquire("src", old, 1))
            waits.append(await second.acquire("src", new, 1))
        elapsed = time.monotonic() - started
    finally:
        await first.aclose()
        await second.aclose()
    admitted = waits.count(0.0)
    assert admitted <= 5 + 5 / 60 * elapsed + 1, f"{admitted} of 40 in {elapsed:.2f}s"


class HeldReplies:
    """A TCP relay on 127.0.0.1 in front of Redis: requests go through at once, the server's
    replies only while ``flowing`` is set; ``held`` is set once a reply waits (so the command
    has run on the server)."""

    def __init__(self, redis_port: int) -> None:
        self.redis_port = redis_port
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.held = asyncio.Event()
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> HeldReplies:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.redis_port)
        for pump in (self._pump(reader, up_writer, False), self._pump(up_reader, writer, True)):
            task = asyncio.create_task(pump)
            self._tasks.add(task)

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, replies: bool
    ) -> None:
        try:
            while data := await reader.read(65536):
                if replies and not self.flowing.is_set():
                    self.held.set()
                    await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()


async def test_an_acquire_cancelled_while_redis_answers_gives_back_what_it_took(
    redis_url: str, prefix: str
) -> None:
    """A call cancelled after its admission script ran on Redis but before the answer came
    back (a hedge no longer needed, a caller's timeout over a slow link) gives back the
    request and the tokens it took — as in-process admission, which is never cut halfway —
    and its cancellation goes on at once, while Redis still holds the answer (the give-back
    runs apart; ``aclose`` waits for it)."""
    limits = Limits(requests_per_minute=1, tokens_per_minute=600)
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    async with HeldReplies(port) as relay:
        slow = RedisAdmission(f"redis://127.0.0.1:{relay.port}/0", key_prefix=prefix)
        direct = RedisAdmission(redis_url, key_prefix=prefix)
        try:
            assert await slow.acquire("warm-up", limits, 1) == 0.0  # connected, script loaded
            relay.flowing.clear()
            call = asyncio.create_task(slow.acquire("src", limits, 500))
            await asyncio.wait_for(relay.held.wait(), 10)  # it ran: 1 request, 500 tokens
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(call, 10)  # the relay still holds the answer
            assert not relay.flowing.is_set()
            relay.flowing.set()
            await slow.aclose()  # waits for the give-back
            assert await direct.acquire("src", limits, 600) == 0.0, "nothing was given back"
        finally:
            await slow.aclose()
            await direct.aclose()


async def test_chat_and_embeddings_sources_of_one_name_keep_their_own_quotas(
    redis_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Configured from the environment, the chat and the embeddings scope both name their
    first OpenAI source ``openai-0`` — two models with limits of their own. On one Redis each
    keeps its own quota, as in-process admission (a backend per client) keeps them: a chat
    call does not spend the embeddings' requests."""
    async with SimulatedProvider(time_scale=0.01) as sim:
        for scope in ("LLM", "EMBEDDING"):
            monkeypatch.setenv(f"{scope}__ADMISSION__BACKEND", "redis")
            monkeypatch.setenv(f"{scope}__ADMISSION__REDIS_URL", redis_url)
            monkeypatch.setenv(f"{scope}__ADMISSION__KEY_PREFIX", prefix)
            monkeypatch.setenv(f"{scope}__OPENAI__0__BASE_URL", sim.base_url)
            monkeypatch.setenv(f"{scope}__OPENAI__0__API_KEY", "sk-sim-0123456789")
            monkeypatch.setenv(f"{scope}__OPENAI__0__REQUESTS_PER_MINUTE", "1")
            monkeypatch.setenv(f"{scope}__RETRY__CALL_DEADLINE_S", "5")
        monkeypatch.setenv("LLM__OPENAI__0__MODEL", "chat-model")
        monkeypatch.setenv("EMBEDDING__OPENAI__0__MODEL", "embedding-model")
        async with Client() as chat, Client(scope="EMBEDDING") as embeddings:
            await chat.chat([{"role": "user", "content": "hi"}], stream=True)
            result = await embeddings.embed("hi")
    assert result.source == "openai-0"


async def test_two_calls_at_a_half_open_source_take_one_request_of_its_quota(
    redis_url: str, prefix: str
) -> None:
    """Two calls start at once at a source whose breaker is half-open: the first is its probe,
    the second goes to the next source. The source's quota is charged one request — the one
    sent. Admission was asked before the breaker: both calls were admitted during Redis's
    round trip, the breaker then refused the second, and its request stayed taken though it
    never reached the provider (a second call would have found the quota spent)."""
    limits = Limits(requests_per_minute=2)
    async with SimulatedProvider(time_scale=0.01) as sim:
        sources = [
            Source(name=name, provider="sim", base_url=sim.base_url, model="m", **extra)
            for name, extra in (("a", {"requests_per_minute": 2}), ("b", {}))
        ]
        admission = RedisAdmission(redis_url, key_prefix=prefix)
        direct = RedisAdmission(redis_url, key_prefix=prefix)
        try:
            async with Client(sources, admission=admission, breaker_failure_threshold=1) as client:
                (a,) = [state for state in client._states if state.name == "a"]
                a.breaker.record_failure(asyncio.get_running_loop().time() - 3600.0)
                assert client.breaker_state("a") == "open"  # and its cool-down is over
                messages = [{"role": "user", "content": "hi"}]
                first, second = await asyncio.gather(
                    client.chat(messages, stream=True), client.chat(messages, stream=True)
                )
                assert (first.source, second.source) == ("a", "b")
                assert client.breaker_state("a") == "closed", "the probe answered"
            assert await direct.acquire("a", limits, 1) == 0.0, "a request sent was charged"
            assert await direct.acquire("a", limits, 1) > 0.0, "only one was charged"
        finally:
            await admission.aclose()
            await direct.aclose()
