"""Secrets stay out of every error the library raises: its text, repr, attributes and the
formatted traceback, chained causes and contexts included."""

from __future__ import annotations

import base64
import logging
import os
import traceback
from collections.abc import AsyncIterator, Iterable

import httpx2
import pytest
from pydantic import SecretStr

from otel_llm import (
    AllSourcesExhausted,
    Client,
    ClientSettings,
    ConfigurationError,
    OtelLLMError,
    Source,
)
from otel_llm.simulator import Script, SimulatedProvider
from otel_llm.testing import Spans
from tests.support.exceptions import chain
from tests.support.redis_server import free_port

KEY = "sk-proj-TOPSECRETkey0123456789"
PASSWORD = "hunter2-url-password"
REDIS_PASSWORD = "redis-pass-0123456789"
SECRETS = (KEY, PASSWORD, REDIS_PASSWORD)


def texts_of(error: BaseException) -> Iterable[str]:
    """Everything a user or a log may print of ``error``."""
    yield "".join(traceback.format_exception(error))
    for current in chain(error):
        yield str(current)
        yield repr(current)
        yield repr(current.args)
        yield repr(getattr(current, "__dict__", {}))


def assert_clean(error: BaseException) -> None:
    for text in texts_of(error):
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked in {type(error).__name__}: {text}"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in list(os.environ):
        if key.upper().startswith(("LLM__", "EMBEDDING__")):
            monkeypatch.delenv(key)
    return monkeypatch


def test_a_misspelled_key_does_not_show_the_secret(clean_env: pytest.MonkeyPatch) -> None:
    """``…__APIKEY=sk-…`` is a clean ConfigurationError naming the key; pydantic's error,
    which repeats the input value, is not chained to it."""
    clean_env.setenv("LLM__OPENAI__1__BASE_URL", "https://api.test/v1")
    clean_env.setenv("LLM__OPENAI__1__MODEL", "m")
    clean_env.setenv("LLM__OPENAI__1__APIKEY", KEY)
    with pytest.raises(ConfigurationError, match="LLM__OPENAI__1__APIKEY") as caught:
        ClientSettings()
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None
    assert_clean(caught.value)


@pytest.mark.parametrize(
    "url", [f"ftp://user:{PASSWORD}@host/v1", f"https://user:{PASSWORD}@/v1", "not a url"]
)
def test_an_invalid_base_url_is_not_echoed_with_its_password(
    clean_env: pytest.MonkeyPatch, url: str
) -> None:
    """A BASE_URL that is refused is named without its credentials."""
    clean_env.setenv("LLM__OPENAI__1__BASE_URL", url)
    clean_env.setenv("LLM__OPENAI__1__MODEL", "m")
    with pytest.raises(ConfigurationError, match="LLM__OPENAI__1__BASE_URL") as caught:
        Client()
    assert_clean(caught.value)


def test_a_base_url_password_stays_out_of_reprs() -> None:
    """A source (and the client) with credentials in the URL show them redacted."""
    source = Source(
        name="a", provider="p", base_url=f"https://user:{PASSWORD}@gw.test/v1", model="m",
        api_key=SecretStr(KEY), api_key_header="api-key",  # Authorization is the URL's
    )  # fmt: skip
    client = Client([source])
    for text in (repr(source), str(source), repr(client), repr(client.settings)):
        assert PASSWORD not in text
        assert KEY not in text
    assert "user:[REDACTED]@gw.test" in repr(source)
    assert PASSWORD in source.secrets()
    assert KEY in source.secrets()


@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("LLM__ADMISSION__REDIS_URL", f"http://:{REDIS_PASSWORD}@host:6379/0"),
        ("LLM__ADMISSION__REDIS_URL", f"redis//:{REDIS_PASSWORD}@host"),
    ],
)
def test_an_invalid_redis_url_is_a_configuration_error(
    clean_env: pytest.MonkeyPatch, env: str, value: str
) -> None:
    """Not a bare ValueError from the Redis client (whose message repeats the URL)."""
    clean_env.setenv("LLM__ADMISSION__BACKEND", "redis")
    clean_env.setenv(env, value)
    clean_env.setenv("LLM__OPENAI__1__BASE_URL", "https://api.test/v1")
    clean_env.setenv("LLM__OPENAI__1__MODEL", "m")
    with pytest.raises(ConfigurationError, match=env) as caught:
        Client()
    assert_clean(caught.value)


def test_redis_admission_refuses_a_bad_url_cleanly() -> None:
    """Built directly, RedisAdmission raises ConfigurationError too, the password redacted."""
    pytest.importorskip("redis")
    from otel_llm import RedisAdmission

    with pytest.raises(ConfigurationError, match="redis_url") as caught:
        RedisAdmission(f"redis://:{REDIS_PASSWORD}@host:notaport/0")
    assert_clean(caught.value)


async def test_an_unreachable_redis_fails_closed_cleanly() -> None:
    """BackendUnavailable for a closed port: no password in it or behind it."""
    pytest.importorskip("redis")
    from otel_llm import BackendUnavailable, Limits, RedisAdmission

    down = RedisAdmission(f"redis://:{REDIS_PASSWORD}@127.0.0.1:{free_port()}/0")
    try:
        with pytest.raises(BackendUnavailable) as caught:
            await down.acquire("s", Limits(requests_per_minute=1), 1)
    finally:
        await down.aclose()
    assert_clean(caught.value)


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    echo = Script(error_status=401, error_message=f"Incorrect API key provided: {KEY}")
    scripts = {
        "echo": echo,
        "hold": Script(hold_s=5.0),
        "stall": Script(first_chunk_delay_s=5.0),
        "cut": Script(fault="truncate", fault_after_chunk=2),
        "bad": Script(fault="malformed", fault_after_chunk=1),
    }
    async with SimulatedProvider(scripts=scripts) as running:
        yield running


def source_at(base_url: str, model: str, **fields: object) -> Source:
    """A source with the key; where the URL has user information (sent as the Authorization
    header), the key goes in the ``api-key`` header."""
    if "@" in base_url:
        fields.setdefault("api_key_header", "api-key")
    return Source(
        name=model, provider="p", base_url=base_url, model=model, api_key=SecretStr(KEY),
        **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def with_password(base_url: str) -> str:
    return base_url.replace("http://", f"http://user:{PASSWORD}@")


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        ("echo", {}),
        ("hold", {"timeout_s": 0.2}),
        ("stall", {"ttft_timeout_s": 0.2}),
        ("cut", {}),
        ("bad", {}),
    ],
)
async def test_every_call_failure_is_clean(
    provider: SimulatedProvider, spans: Spans, model: str, fields: dict[str, object]
) -> None:
    """Provider echoes of the key, read timeouts, watchdog kills, truncated and malformed
    streams, against a base URL with a password: the error, its chain and the spans are
    clean."""
    source = source_at(with_password(provider.base_url), model, **fields)
    async with Client([source], tracer_provider=spans.provider, max_attempts=1,
                      same_source_retries=0) as client:  # fmt: skip
        with pytest.raises(OtelLLMError) as caught:
            await client.chat([{"role": "user", "content": "x"}])
    assert_clean(caught.value)
    for span in spans.finished():
        dumped = span.to_json()
        assert KEY not in dumped
        assert PASSWORD not in dumped


async def test_a_refused_connection_is_clean(spans: Spans) -> None:
    """A connection error from the HTTP library (whose error holds the request, headers and
    URL) reaches the caller without it."""
    source = source_at(f"http://user:{PASSWORD}@127.0.0.1:{free_port()}/v1", "m")
    async with Client([source], tracer_provider=spans.provider, max_attempts=1,
                      same_source_retries=0) as client:  # fmt: skip
        with pytest.raises(AllSourcesExhausted) as caught:
            await client.chat([{"role": "user", "content": "x"}])
    assert "ConnectError" in str(caught.value)
    assert_clean(caught.value)


async def test_a_users_http_client_error_is_clean(spans: Spans) -> None:
    """With the user's own httpx2 client (a mock that fails), the chain is clean too."""

    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError(f"refused {request.url} {request.headers}", request=request)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(refuse))
    source = source_at(f"http://user:{PASSWORD}@mock.test/v1", "m")
    async with Client([source], http_client=http, tracer_provider=spans.provider,
                      max_attempts=1, same_source_retries=0) as client:  # fmt: skip
        with pytest.raises(AllSourcesExhausted) as caught:
            await client.chat([{"role": "user", "content": "x"}])
    await http.aclose()
    assert_clean(caught.value)


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"base_url": f"ftp://user:{PASSWORD}@host/v1"}, "Source.base_url"),
        ({"apikey": KEY}, "Source.apikey"),
        ({"api_key": KEY + "\u2019"}, "Source.api_key"),
        ({"api_key": f"{KEY[:8]}\u00a0{KEY[8:]}"}, "Source.api_key"),
    ],
)
def test_a_source_built_directly_refuses_cleanly(fields: dict[str, str], key: str) -> None:
    """``Source(...)`` as the README builds it: a bad URL, a misspelled field, a key with a
    pasted curly quote or a non-breaking space — a ConfigurationError naming the field, never
    pydantic's error (which repeats the input) and never the value."""
    base = {"name": "a", "provider": "p", "base_url": "https://api.test/v1", "model": "m"}
    with pytest.raises(ConfigurationError) as caught:
        Source(**{**base, **fields})  # type: ignore[arg-type]
    assert caught.value.key == key
    assert_clean(caught.value)


def test_surrounding_whitespace_of_a_key_is_dropped() -> None:
    """A key read from a file with its newline is the key (keys never contain whitespace)."""
    source = Source(name="a", provider="p", base_url="https://api.test/v1", model="m",
                    api_key=SecretStr(f"  {KEY}\n"))  # fmt: skip
    assert source.api_key is not None
    assert source.api_key.get_secret_value() == KEY


async def test_user_information_travels_as_a_header_never_in_a_logged_url(
    provider: SimulatedProvider, spans: Spans, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx2 logs every request URL at INFO: a password in ``base_url`` is sent as the Basic
    ``Authorization`` header it stands for, and the URL requested carries none of it — read
    back from httpx2's own log at DEBUG and from the server's view of the request."""
    seen: list[httpx2.Request] = []

    async def record(request: httpx2.Request) -> None:
        seen.append(request)

    base = with_password(provider.base_url)
    http = httpx2.AsyncClient(event_hooks={"request": [record]})
    source = Source(name="a", provider="p", base_url=base, model="plain")
    with caplog.at_level(logging.DEBUG, logger="httpx2"):
        async with Client([source], tracer_provider=spans.provider, http_client=http) as client:
            await client.chat([{"role": "user", "content": "hi"}])
    await http.aclose()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "HTTP Request" in logged, "httpx2 logged the request"
    assert PASSWORD not in logged
    assert "user:" not in logged
    (request,) = seen
    assert not request.url.userinfo
    pair = base64.b64decode(request.headers["authorization"].removeprefix("Basic "))
    assert pair == f"user:{PASSWORD}".encode()


@pytest.mark.parametrize("name", ["key", "api_key", "token", "password", "Access_Token"])
def test_a_credential_in_the_query_is_refused_at_construction(name: str) -> None:
    with pytest.raises(ConfigurationError, match="credential in its query") as caught:
        Source(name="a", provider="p", base_url=f"https://x.test/v1?{name}={KEY}", model="m")
    assert KEY not in str(caught.value)
    Source(name="a", provider="p", base_url="https://x.test/v1?api-version=2024-10-21", model="m")


def test_user_information_and_a_bearer_key_are_refused_together() -> None:
    with pytest.raises(ConfigurationError, match="both would be the Authorization header"):
        Source(
            name="a", provider="p", base_url=f"https://u:{PASSWORD}@x.test/v1", model="m",
            api_key=SecretStr(KEY),
        )  # fmt: skip
