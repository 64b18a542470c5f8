"""``extra_body`` beside what the client sets itself: an object field of the body that the
translation (or the client) also writes — Gemini's ``generationConfig``, chat completions'
``stream_options`` — is merged key by key, the extra keys winning; the translated settings are
never dropped without a word."""

from __future__ import annotations

from typing import Any

import pytest

from otel_llm import Source
from otel_llm._act._wire import wire_for

USER = {"role": "user", "content": "hi"}


def _body(provider: str, payload: dict[str, Any]) -> dict[str, Any]:
    source = Source(name="s", provider=provider, model="m", api_key="k-123456")
    request = wire_for(source.api).request(source, {"messages": [USER], **payload}, stream=True)
    return request.body


def test_gemini_thinking_config_keeps_the_translated_generation_settings() -> None:
    """The usual Gemini option, a thinking budget, lives in ``generationConfig``: passing it
    keeps the output limit, temperature and stop sequences the call set."""
    body = _body(
        "gemini",
        {
            "max_tokens": 64,
            "temperature": 0.2,
            "stop": ["END"],
            "extra_body": {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}}},
        },
    )
    assert body["generationConfig"] == {
        "maxOutputTokens": 64,
        "temperature": 0.2,
        "stopSequences": ["END"],
        "thinkingConfig": {"thinkingBudget": 0},
    }


def test_an_extra_key_wins_over_the_translated_one() -> None:
    body = _body(
        "gemini", {"max_tokens": 64, "extra_body": {"generationConfig": {"maxOutputTokens": 9}}}
    )
    assert body["generationConfig"] == {"maxOutputTokens": 9}


@pytest.mark.parametrize("provider", ["openai", "azure"])
def test_chat_stream_options_keep_the_usage_the_client_asks_for(provider: str) -> None:
    """An extra stream option keeps ``include_usage``, without which the answer has no usage
    (and admission settles nothing)."""
    source: dict[str, Any] = {}
    if provider == "azure":
        source = {"base_url": "https://r.openai.azure.com", "api_version": "2024-10-21"}
    given = Source(name="s", provider=provider, model="m", api_key="k-123456", **source)
    payload = {"messages": [USER], "extra_body": {"stream_options": {"include_obfuscation": False}}}
    body = wire_for("chat").request(given, payload, stream=True).body
    assert body["stream_options"] == {"include_usage": True, "include_obfuscation": False}


def test_a_field_the_client_does_not_set_is_set_as_it_is() -> None:
    body = _body("anthropic", {"extra_body": {"thinking": {"type": "enabled"}, "top_k": 5}})
    assert (body["thinking"], body["top_k"]) == ({"type": "enabled"}, 5)
    body = _body("gemini", {"extra_body": {"safetySettings": [{"category": "X"}]}})
    assert body["safetySettings"] == [{"category": "X"}]
