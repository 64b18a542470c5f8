"""Messages of the error hierarchy a user can act on: each source named once, with its URL
(never its credentials), and the cause once."""

from __future__ import annotations

import re
import traceback

import pytest

from otel_llm import AllSourcesExhausted, Client, ProviderConnectionError, ServerError, Source
from otel_llm._redact import public_url
from otel_llm.testing import Spans
from tests.support.exceptions import chain
from tests.support.redis_server import free_port

USER = "alice-login"
PASSWORD = "hunter2-url-password"
KEY = "sk-proj-TOPSECRETkey0123456789"
CAUSE = r"\(ConnectError: [^()]+\)"


def unreachable_sources() -> tuple[list[Source], list[str]]:
    """Two sources on closed 127.0.0.1 ports, the second with a user and password in its URL;
    and the URLs a message may show for them."""
    down, locked = free_port(), free_port()
    sources = [
        Source(
            name="down",
            provider="openai",
            base_url=f"http://127.0.0.1:{down}/v1",
            model="m",
            api_key=KEY,
        ),
        Source(
            name="locked",
            provider="openai",
            base_url=f"http://{USER}:{PASSWORD}@127.0.0.1:{locked}/v1",
            model="m",
        ),
    ]
    return sources, [f"http://127.0.0.1:{down}/v1", f"http://127.0.0.1:{locked}/v1"]


async def give_up(spans: Spans) -> tuple[AllSourcesExhausted, list[str]]:
    """A call on the two unreachable sources, one attempt each, and the error it ends with."""
    sources, urls = unreachable_sources()
    async with Client(sources, tracer_provider=spans.provider, max_attempts=2,
                      same_source_retries=0, backoff_base_s=0.01) as client:  # fmt: skip
        with pytest.raises(AllSourcesExhausted) as caught:
            await client.chat([{"role": "user", "content": "x"}])
    return caught.value, urls


async def test_an_unreachable_source_is_named_once_with_its_url_and_the_cause(
    spans: Spans,
) -> None:
    """The message of a call whose sources cannot be reached names each source once, at its URL
    without credentials, then the cause once."""
    error, (down, locked) = await give_up(spans)
    reason = f"connection failed before the first chunk {CAUSE}"
    expected = (
        r"max_attempts=2 reached: 2 failed rounds, 2 attempts \("
        rf"down at {re.escape(down)}: {reason}; locked at {re.escape(locked)}: {reason}\)"
    )
    message = str(error)
    assert re.fullmatch(expected, message), message
    assert message.count("down") == message.count("locked") == 1
    assert message.count("ConnectError") == 2
    assert error.urls == {"down": down, "locked": locked}
    assert re.fullmatch(reason, error.reasons["locked"])


async def test_each_attempts_error_names_its_source_once(spans: Spans) -> None:
    """The failures behind the call (its ExceptionGroup) and the attempt spans say
    ``source at url: reason`` — the source once, the cause once."""
    error, (down, locked) = await give_up(spans)
    group = error.__cause__
    assert isinstance(group, ExceptionGroup)
    texts = [str(failure) for failure in group.exceptions]
    assert all(isinstance(failure, ProviderConnectionError) for failure in group.exceptions)
    for text, (name, url) in zip(texts, [("down", down), ("locked", locked)], strict=True):
        pattern = rf"{name} at {re.escape(url)}: connection failed before the first chunk {CAUSE}"
        assert re.fullmatch(pattern, text), text
    attempts = sorted(spans.attempts(), key=lambda span: span.start_time or 0)
    assert [span.status.description for span in attempts] == texts
    (call,) = spans.calls()
    assert call.status.description == str(error)


async def test_credentials_never_appear_in_the_message_chain_or_spans(spans: Spans) -> None:
    """Neither the URL's user and password nor the API key appear in the message, a repr, the
    formatted traceback, any chained error or any span."""
    error, _ = await give_up(spans)
    texts = ["".join(traceback.format_exception(error))]
    for current in chain(error):
        texts += [str(current), repr(current), repr(current.args), repr(vars(current))]
    texts += [span.to_json() for span in spans.finished()]
    for text in texts:
        for secret in (USER, PASSWORD, KEY):
            assert secret not in text, f"{secret!r} leaked: {text}"


def test_a_provider_error_says_its_status_and_code_once() -> None:
    """``str()`` is ``source at url: reason``; the reason adds the status and the provider's
    code only when the message does not already say them."""
    said = ServerError("answered 503: overloaded", status_code=503, code="busy", source="a")
    said.url = "http://a.test/v1"
    assert str(said) == "a at http://a.test/v1: answered 503: overloaded (code=busy)"
    assert said.reason == "answered 503: overloaded (code=busy)"
    unsaid = ServerError("the gateway gave up", status_code=504)
    assert str(unsaid) == "the gateway gave up (status=504)"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pw-123456@h.test:8080/v1", "http://h.test:8080/v1"),
        ("https://token-abcdef@h.test/v1", "https://h.test/v1"),
        ("https://h.test/v1?api-key=abc", "https://h.test/v1?[REDACTED]"),
        ("http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1"),
        ("not a url", "[REDACTED]"),
    ],
)
def test_public_url_drops_user_information_and_the_query(url: str, shown: str) -> None:
    """The URL a message shows keeps scheme, host, port and path, and nothing of the user
    information or the query."""
    assert public_url(url) == shown
    assert public_url(shown) == shown
