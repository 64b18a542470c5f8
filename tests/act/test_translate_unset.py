"""A request field set to ``None`` is not set when a request crosses to Anthropic or Gemini."""

from __future__ import annotations

from typing import Any

import pytest

from otel_llm import ConfigurationError, Source
from otel_llm._act._wire import wire_for

USER = {"role": "user", "content": "hi"}


def _limit(api: str, payload: dict[str, Any]) -> object:
    source = Source(name="s", model="m", provider=api, api_key="k")
    body = wire_for(api).request(source, {"messages": [USER], **payload}, stream=True).body
    return body["max_tokens"] if api == "anthropic" else body["generationConfig"]["maxOutputTokens"]


@pytest.mark.parametrize("api", ["anthropic", "gemini"])
def test_max_tokens_is_sent_beside_a_max_completion_tokens_of_none(api: str) -> None:
    """Code passing its optional settings through writes ``max_completion_tokens=None`` beside
    the ``max_tokens`` it set: the limit sent is that ``max_tokens``, either way round."""
    assert _limit(api, {"max_completion_tokens": None, "max_tokens": 7}) == 7
    assert _limit(api, {"max_tokens": None, "max_completion_tokens": 7}) == 7


@pytest.mark.parametrize("api", ["anthropic", "gemini"])
def test_a_refused_max_tokens_is_named_beside_a_max_completion_tokens_of_none(api: str) -> None:
    with pytest.raises(ConfigurationError, match="max_tokens") as caught:
        _limit(api, {"max_completion_tokens": None, "max_tokens": 0})
    assert "max_completion_tokens" not in str(caught.value)


@pytest.mark.parametrize("unset", ["max_tokens", "max_completion_tokens"])
@pytest.mark.parametrize("provider", ["openai", "azure"])
def test_a_chat_sources_max_tokens_applies_beside_a_limit_of_none(
    provider: str, unset: str
) -> None:
    """An OpenAI-compatible source with ``max_tokens``: a call whose limit is ``None`` sets no
    limit, so the source's applies (and the ``None`` is not sent beside it); a limit the call
    sets wins."""
    source = Source(
        name="s", model="m", provider=provider, api_key="k", max_tokens=50, base_url=_BASE[provider]
    )
    body = wire_for("chat").request(source, {"messages": [USER], unset: None}, stream=True).body
    assert body["max_tokens"] == 50
    assert "max_completion_tokens" not in body
    set_body = wire_for("chat").request(source, {"messages": [USER], unset: 9}, stream=True).body
    assert set_body[unset] == 9
    assert "max_tokens" not in set_body or unset == "max_tokens"


_BASE = {
    "openai": "https://api.openai.com/v1",
    "azure": "https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21",
}


ECHOED = {  # an assistant message as the openai SDK dumps it (``message.model_dump()``)
    "role": "assistant",
    "content": "hello",
    "refusal": None,
    "annotations": None,
    "audio": None,
    "function_call": None,
    "tool_calls": None,
}


@pytest.mark.parametrize("api", ["anthropic", "gemini"])
def test_a_message_field_of_none_is_not_set(api: str) -> None:
    """A message's field set to ``None`` — an assistant message echoed back as the openai SDK
    dumps it, ``tool_calls=None`` and all, or a part's ``None`` field — is not set, as a
    request field of ``None`` is not: the conversation crosses as its text."""
    source = Source(name="s", model="m", provider=api, api_key="k")
    part = {"type": "text", "text": "again", "cache_control": None}
    messages = [USER, ECHOED, {"role": "user", "name": None, "content": [part]}]
    body = wire_for(api).request(source, {"messages": messages}, stream=True).body
    if api == "anthropic":
        assert body["messages"] == [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "again"},
        ]
    else:
        assert body["contents"] == [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [{"text": "hello"}]},
            {"role": "user", "parts": [{"text": "again"}]},
        ]


@pytest.mark.parametrize("api", ["anthropic", "gemini"])
def test_a_message_field_that_is_set_is_still_refused(api: str) -> None:
    """Only ``None`` is not set: tool calls that are there (an empty list too) are refused."""
    source = Source(name="s", model="m", provider=api, api_key="k")
    for calls in ([], [{"id": "c", "type": "function"}]):
        echoed = {**ECHOED, "tool_calls": calls}
        with pytest.raises(ConfigurationError) as caught:
            wire_for(api).request(source, {"messages": [USER, echoed]}, stream=True)
        assert caught.value.key == "messages[1].tool_calls"


HUGE = "x" * 100_000


@pytest.mark.parametrize("api", ["anthropic", "gemini"])
@pytest.mark.parametrize(
    "payload",
    [
        {"messages": [{"role": HUGE, "content": "hi"}]},
        {"messages": [{"role": "user", "content": [{"type": HUGE}]}]},
        {"messages": [{"role": "user", "content": "hi", HUGE: 1}]},
        {"messages": [USER], HUGE: 1},
    ],
    ids=["role", "part-type", "message-field", "request-field"],
)
def test_a_refusal_names_a_huge_value_in_a_few_words(api: str, payload: dict[str, Any]) -> None:
    """What the caller wrote is named, not repeated: a role, a part's type or a field name of
    100 000 characters appears cut short in the ConfigurationError."""
    source = Source(name="s", model="m", provider=api, api_key="k")
    with pytest.raises(ConfigurationError) as caught:
        wire_for(api).request(source, payload, stream=True)
    assert len(str(caught.value)) < 600
    assert "xxxxxxxx" in str(caught.value)
