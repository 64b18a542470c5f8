"""Configuration: env keys, settings object, constructor arguments; guards (SPEC §4, R13)."""

from __future__ import annotations

import pytest

from otel_llm import Client, ConfigurationError, Source
from otel_llm.act._settings import (
    ClientSettings,
    ConfigWarning,
    EmbeddingSettings,
    HedgeSettings,
    RetrySettings,
    StreamSettings,
)

BASE = "http://127.0.0.1:9/v1"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A clean environment with two LLM sources."""
    import os

    for key in list(os.environ):
        if key.upper().startswith(("LLM__", "EMBEDDING__", "CUSTOM__")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("LLM__OPENAI__1__BASE_URL", BASE)
    monkeypatch.setenv("LLM__OPENAI__1__MODEL", "gpt-a")
    monkeypatch.setenv("LLM__OPENAI__1__API_KEY", "sk-env-secret-123456")
    monkeypatch.setenv("LLM__AZURE__2__BASE_URL", BASE)
    monkeypatch.setenv("LLM__AZURE__2__MODEL", "gpt-b")
    monkeypatch.setenv("LLM__AZURE__2__TIMEOUT_S", "30")
    return monkeypatch


def source(name: str, **fields: object) -> Source:
    return Source(name=name, provider="sim", base_url=BASE, model="m", **fields)  # type: ignore[arg-type]


def test_sources_from_four_segment_keys(env: pytest.MonkeyPatch) -> None:
    """{SCOPE}__{PROVIDER}__{N}__{FIELD} builds one source per provider and number."""
    settings = ClientSettings()
    assert [(s.name, s.provider, s.model, s.priority) for s in settings.sources] == [
        ("openai-1", "openai", "gpt-a", 1),
        ("azure-2", "azure", "gpt-b", 2),
    ]
    assert settings.sources[1].timeout_s == 30.0
    assert settings.sources[0].api_key is not None
    assert "sk-env-secret" not in repr(settings)


def test_scope_keys_and_reserved_words(env: pytest.MonkeyPatch) -> None:
    """Three-segment keys set scope groups; HEDGE/STREAM/RETRY are never providers."""
    env.setenv("LLM__HEDGE__AFTER_S", "2.5")
    env.setenv("LLM__HEDGE__STALL_AFTER_S", "5")
    env.setenv("LLM__STREAM__STALL_THRESHOLD_MS", "750")
    env.setenv("LLM__RETRY__MAX_ATTEMPTS", "7")
    settings = ClientSettings()
    assert settings.hedge.after_s == 2.5
    assert settings.hedge.stall_after_s == 5.0
    assert settings.stream.stall_threshold_ms == 750
    assert settings.retry.max_attempts == 7
    assert {s.provider for s in settings.sources} == {"openai", "azure"}


def test_three_layers_explicit_argument_wins(env: pytest.MonkeyPatch) -> None:
    """env < settings object < constructor argument, for scope keys and sources."""
    env.setenv("LLM__STREAM__STALL_THRESHOLD_MS", "750")
    assert ClientSettings().stream.stall_threshold_ms == 750
    settings = ClientSettings(stream=StreamSettings(stall_threshold_ms=500))
    assert settings.stream.stall_threshold_ms == 500
    client = Client(settings=settings, stall_threshold_ms=250)
    assert client.settings.stream.stall_threshold_ms == 250
    explicit = Client([source("mine")], settings=settings)
    assert [s.name for s in explicit.sources] == ["mine"]


def test_embedding_scope_reads_its_own_keys(env: pytest.MonkeyPatch) -> None:
    """The EMBEDDING scope reads EMBEDDING__* keys, not LLM__*."""
    env.setenv("EMBEDDING__OPENAI__1__BASE_URL", BASE)
    env.setenv("EMBEDDING__OPENAI__1__MODEL", "text-embedding-3-small")
    settings = EmbeddingSettings()
    assert [s.model for s in settings.sources] == ["text-embedding-3-small"]
    client = Client(scope="EMBEDDING")
    assert client.settings.scope == "EMBEDDING"
    custom = ClientSettings.for_scope("custom")
    env.setenv("CUSTOM__X__1__BASE_URL", BASE)
    env.setenv("CUSTOM__X__1__MODEL", "m")
    assert [s.name for s in custom().sources] == ["x-1"]


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("LLM__AZURE__2__TIMEOUT_S", "-1", "LLM__AZURE__2__TIMEOUT_S"),
        ("LLM__AZURE__2__TIMEOUT_S", "nan", "LLM__AZURE__2__TIMEOUT_S"),
        ("LLM__AZURE__2__BASE_URL", "ftp://x", "LLM__AZURE__2__BASE_URL"),
        ("LLM__AZURE__2__COLOUR", "blue", "LLM__AZURE__2__COLOUR"),
        ("LLM__STREAM__STALL_THRESHOLD_MS", "0", "LLM__STREAM__STALL_THRESHOLD_MS"),
        ("LLM__STREAM__STALL_THRESHOLD_MS", "1.5", "LLM__STREAM__STALL_THRESHOLD_MS"),
        ("LLM__STREAM__STALL_THRESHOLD_MS", "true", "LLM__STREAM__STALL_THRESHOLD_MS"),
        ("LLM__HEDGE__AFTER_S", "0", "LLM__HEDGE__AFTER_S"),
        ("LLM__HEDGE__AFTER_S", "inf", "LLM__HEDGE__AFTER_S"),
        ("LLM__HEDGE__AFTR_S", "2", "LLM__HEDGE__AFTR_S"),
        ("LLM__RETRY__MAX_ATTEMPTS", "0", "LLM__RETRY__MAX_ATTEMPTS"),
        ("LLM__OPENAI__BASE_URL", "x", "LLM__OPENAI__BASE_URL"),
    ],
)
def test_invalid_values_name_the_key(
    env: pytest.MonkeyPatch, key: str, value: str, named: str
) -> None:
    """Every configuration error names the offending key."""
    env.setenv(key, value)
    with pytest.raises(ConfigurationError) as caught:
        ClientSettings()
    assert caught.value.key == named
    assert "sk-env-secret" not in str(caught.value)


@pytest.mark.parametrize("bad", [0, -5, True, 2.5, "100"])
def test_threshold_argument_must_be_positive_integer(env: pytest.MonkeyPatch, bad: object) -> None:
    """The constructor rejects a threshold that is not a positive integer (M5)."""
    with pytest.raises(ConfigurationError, match="STALL_THRESHOLD_MS"):
        Client(stall_threshold_ms=bad)  # type: ignore[arg-type]


def test_guard_after_s_below_shortest_timeout() -> None:
    """hedge_after_s >= min(timeout_s) is refused: the hedge could never start."""
    with pytest.raises(ConfigurationError, match="HEDGE__AFTER_S") as caught:
        Client([source("a", timeout_s=10), source("b", timeout_s=5)], hedge_after_s=5)
    assert "shortest first-chunk timeout" in str(caught.value)
    with pytest.raises(ConfigurationError, match="HEDGE__AFTER_S"):
        Client([source("a", ttft_timeout_s=3), source("b")], hedge_after_s=4)


def test_guard_stall_after_s_below_effective_inter_chunk_timeout() -> None:
    """stall_after_s >= min(inter_token_timeout_s or timeout_s) is refused."""
    with pytest.raises(ConfigurationError, match="HEDGE__STALL_AFTER_S"):
        Client(
            [source("a", timeout_s=60, inter_token_timeout_s=8), source("b", timeout_s=60)],
            hedge_stall_after_s=8,
        )
    accepted = Client(
        [source("a", timeout_s=60, inter_token_timeout_s=8), source("b", timeout_s=60)],
        hedge_stall_after_s=7.9,
    )
    assert accepted.settings.hedge.stall_after_s == 7.9


def test_guard_triggers_below_call_deadline() -> None:
    """Either trigger at or past call_deadline_s is refused."""
    sources = [source("a"), source("b")]
    with pytest.raises(ConfigurationError, match="HEDGE__AFTER_S"):
        Client(sources, hedge_after_s=20, call_deadline_s=20)
    with pytest.raises(ConfigurationError, match="HEDGE__STALL_AFTER_S"):
        Client(sources, hedge_stall_after_s=30, call_deadline_s=25)


def test_single_source_hedging_warns() -> None:
    """Hedging with one source is allowed, with a warning that no hedge can start."""
    with pytest.warns(ConfigWarning, match="single source"):
        Client([source("a")], hedge_stall_after_s=5)


def test_hedge_keys_on_embeddings_warn(env: pytest.MonkeyPatch) -> None:
    """Hedge keys on the non-streaming embeddings scope warn that they do nothing."""
    env.setenv("EMBEDDING__OPENAI__1__BASE_URL", BASE)
    env.setenv("EMBEDDING__OPENAI__1__MODEL", "e")
    env.setenv("EMBEDDING__HEDGE__AFTER_S", "1")
    with pytest.warns(ConfigWarning, match="embeddings"):
        EmbeddingSettings()


def test_no_source_is_a_clear_error(env: pytest.MonkeyPatch) -> None:
    """A client without any source says how to configure one."""
    env.delenv("LLM__OPENAI__1__BASE_URL")
    env.delenv("LLM__OPENAI__1__MODEL")
    env.delenv("LLM__OPENAI__1__API_KEY")
    env.delenv("LLM__AZURE__2__BASE_URL")
    env.delenv("LLM__AZURE__2__MODEL")
    env.delenv("LLM__AZURE__2__TIMEOUT_S")
    with pytest.raises(ConfigurationError, match="no source configured"):
        Client()


def test_duplicate_source_names_are_refused() -> None:
    """Two sources with the same name are refused."""
    with pytest.raises(ConfigurationError, match="unique"):
        Client([source("a"), source("a")])


def test_defaults_hedging_off() -> None:
    """With both hedge keys unset hedging is off."""
    assert not HedgeSettings().enabled
    assert RetrySettings().max_attempts >= 1
