"""Configuration: env keys, settings object, constructor arguments; guards (a hedge trigger
below its watchdog)."""

from __future__ import annotations

import pytest

from otel_llm import (
    CallStats,
    Client,
    ClientSettings,
    ConfigurationError,
    ConfigWarning,
    EmbeddingSettings,
    HedgeSettings,
    RetrySettings,
    Source,
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
    monkeypatch.setenv("LLM__AZURE__2__API_VERSION", "2024-10-21")
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


@pytest.mark.parametrize("scope", ["LLM__HEDGE", "A__B", "LLM_", "_LLM", "llm-chat"])
def test_a_scope_that_would_make_its_keys_ambiguous_is_refused(scope: str) -> None:
    """A scope is one segment of its keys: with the separator ``__`` in it (or a ``_`` at an
    end, which makes one) ``LLM__HEDGE``'s keys would be ``LLM``'s hedge keys; refused when the
    client is made, naming ``scope``."""
    with pytest.raises(ConfigurationError, match=r"^scope: "):
        Client([Source(name="a", provider="openai", base_url=BASE, model="m")], scope=scope)


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
        ("LLM__STREAM__STALL_THRESHOLD_MS", "\u00b2", "LLM__STREAM__STALL_THRESHOLD_MS"),
        ("LLM__STREAM__STALL_THRESHOLD_MS", "\uff11\uff12", "LLM__STREAM__STALL_THRESHOLD_MS"),
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
    """The constructor rejects a threshold that is not a positive integer."""
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


def test_inter_chunk_budget_defaults_to_30_s_unless_timeout_s_is_given() -> None:
    """Out of the box the watchdog allows 60 s for the first chunk and 30 s between chunks; a
    source that sets ``timeout_s`` has it for both (the budget between chunks falls back to
    it); ``inter_token_timeout_s`` wins over both. A stall trigger at or past the default 30 s
    is refused with the key to set."""
    plain = source("a")
    assert (plain.effective_ttft_timeout_s, plain.effective_inter_chunk_timeout_s) == (60, 30)
    given = source("a", timeout_s=45)
    assert (given.effective_ttft_timeout_s, given.effective_inter_chunk_timeout_s) == (45, 45)
    same = source("a", timeout_s=60)  # given, even at the default value
    assert same.effective_inter_chunk_timeout_s == 60
    both = source("a", timeout_s=45, inter_token_timeout_s=12, ttft_timeout_s=20)
    assert (both.effective_ttft_timeout_s, both.effective_inter_chunk_timeout_s) == (20, 12)
    with pytest.raises(ConfigurationError, match="set inter_token_timeout_s above it"):
        Client([source("a"), source("b")], hedge_stall_after_s=30)
    assert Client([source("a"), source("b")], hedge_stall_after_s=29.5).settings.hedge


def test_guard_triggers_below_call_deadline() -> None:
    """Either trigger at or past call_deadline_s is refused."""
    sources = [source("a"), source("b")]
    with pytest.raises(ConfigurationError, match="HEDGE__AFTER_S"):
        Client(sources, hedge_after_s=20, call_deadline_s=20)
    with pytest.raises(ConfigurationError, match="HEDGE__STALL_AFTER_S"):
        Client(sources, hedge_stall_after_s=25, call_deadline_s=20)


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
    env.delenv("LLM__AZURE__2__API_VERSION")
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


def test_new_policy_keys_have_three_layers(env: pytest.MonkeyPatch) -> None:
    """Pool limits, same-source retries, the Retry-After bound, the content-filter and
    context-length decisions and the breaker's cool-downs: env, settings object, argument."""
    env.setenv("LLM__POOL__MAX_CONNECTIONS", "64")
    env.setenv("LLM__POOL__MAX_KEEPALIVE_CONNECTIONS", "8")
    env.setenv("LLM__RETRY__SAME_SOURCE_RETRIES", "2")
    env.setenv("LLM__RETRY__RATE_LIMIT_MAX_WAIT_S", "3")
    env.setenv("LLM__RETRY__FAILOVER_ON_CONTENT_FILTER", "true")
    env.setenv("LLM__BREAKER__FIRST_COOLDOWN_S", "0.5")
    settings = ClientSettings()
    assert (settings.pool.max_connections, settings.pool.max_keepalive_connections) == (64, 8)
    assert (settings.retry.same_source_retries, settings.retry.rate_limit_max_wait_s) == (2, 3.0)
    assert settings.retry.failover_on_content_filter is True
    assert settings.breaker.effective_first_cooldown_s == 0.5
    client = Client(
        settings=settings, pool_max_connections=16, same_source_retries=0,
        failover_on_content_filter=False, breaker_first_cooldown_s=2,
    )  # fmt: skip
    assert client.settings.pool.max_connections == 16
    assert client.settings.retry.same_source_retries == 0
    assert client.settings.retry.failover_on_content_filter is False
    assert client.settings.breaker.first_cooldown_s == 2


def test_policy_defaults() -> None:
    """The defaults the docs state: a pool for many concurrent streams, one same-source
    retry, a 10 s Retry-After bound, content filters propagate, context length fails over,
    cool-downs from 1 s up to 5 s, the 1000 ms stall threshold."""
    settings = ClientSettings(sources=(source("a"),))
    assert (settings.pool.max_connections, settings.pool.max_keepalive_connections) == (1000, 100)
    assert settings.retry.same_source_retries == 1
    assert settings.retry.rate_limit_max_wait_s == 10.0
    assert settings.retry.failover_on_content_filter is False
    assert settings.retry.failover_on_context_length is True
    assert (settings.breaker.effective_first_cooldown_s, settings.breaker.cooldown_s) == (1.0, 5.0)
    assert settings.stream.stall_threshold_ms == 1000


def test_call_stats_defaults() -> None:
    """CallStats() is all-unknown figures and zero counts (fields are only ever added)."""
    stats = CallStats()
    assert (stats.ttft_ms, stats.generation_ms, stats.stall_ms, stats.stall_count) == (None,) * 4
    assert (stats.wall_ms, stats.chunk_count, stats.stall_threshold_ms) == (None,) * 3
    assert (stats.attempts, stats.hedges, stats.hedge_won, stats.retries) == (0, 0, False, 0)
    assert (stats.sources_tried, stats.backoff_ms, stats.call_ms) == ((), 0, None)
    assert (stats.hedge_waste_tokens, stats.hedge_waste_chunks, stats.waited_ms) == (None,) * 3


def test_guard_stall_after_s_against_the_timeout_fallback() -> None:
    """With no inter_token_timeout_s the watchdog's budget is timeout_s: a stall trigger at or
    above the shortest of those is refused, naming the key."""
    sources = [source("a", timeout_s=5), source("b", timeout_s=60, inter_token_timeout_s=8)]
    with pytest.raises(ConfigurationError, match="inter-chunk timeout") as caught:
        Client(sources, hedge_stall_after_s=5)
    assert caught.value.key == "LLM__HEDGE__STALL_AFTER_S"
    assert Client(sources, hedge_stall_after_s=4.9).settings.hedge.stall_after_s == 4.9


@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), True])
def test_stall_after_s_rejects_non_positive_non_finite_and_booleans(bad: object) -> None:
    """0, −1, inf, nan and True (which pydantic would read as 1.0) are refused; the error from
    a Client argument names the key."""
    with pytest.raises(ConfigurationError) as caught:
        Client([source("a"), source("b")], hedge_stall_after_s=bad)  # type: ignore[arg-type]
    assert caught.value.key == "LLM__HEDGE__STALL_AFTER_S"


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan"])
def test_stall_after_s_from_env_is_checked_too(env: pytest.MonkeyPatch, value: str) -> None:
    """The same values from the environment are refused, naming the key."""
    env.setenv("LLM__HEDGE__STALL_AFTER_S", value)
    with pytest.raises(ConfigurationError) as caught:
        ClientSettings()
    assert caught.value.key == "LLM__HEDGE__STALL_AFTER_S"


def test_stall_hedge_keys_on_embeddings_warn(env: pytest.MonkeyPatch) -> None:
    """EMBEDDING__HEDGE__STALL_AFTER_S alone warns too: embeddings are never hedged."""
    env.setenv("EMBEDDING__OPENAI__1__BASE_URL", BASE)
    env.setenv("EMBEDDING__OPENAI__1__MODEL", "e")
    env.setenv("EMBEDDING__HEDGE__STALL_AFTER_S", "2")
    with pytest.warns(ConfigWarning, match="embeddings"):
        EmbeddingSettings()


@pytest.mark.parametrize("key", ["LLM__STREAM__1__X", "LLM__HEDGE__2__AFTER_S", "LLM__POOL__1__Y"])
def test_four_segment_keys_under_a_reserved_word_are_refused(
    env: pytest.MonkeyPatch, key: str
) -> None:
    """A reserved word is never a provider: ``LLM__STREAM__1__X`` is an error naming the
    group's keys, and makes no source."""
    env.setenv(key, "1")
    with pytest.raises(ConfigurationError) as caught:
        ClientSettings()
    assert key.split("__")[1] in caught.value.key
    env.delenv(key)
    assert {s.provider for s in ClientSettings().sources} == {"openai", "azure"}


@pytest.mark.parametrize("field", ["timeout_s", "ttft_timeout_s", "requests_per_minute"])
def test_a_source_refuses_booleans_for_numbers(field: str) -> None:
    """``Source(timeout_s=True)`` is not one second: refused, naming the field."""
    with pytest.raises(ConfigurationError) as caught:
        Source(name="a", provider="p", base_url=BASE, model="m", **{field: True})  # type: ignore[arg-type]
    assert caught.value.key == f"Source.{field}"


def test_every_key_has_its_client_argument() -> None:
    """The third layer is generated from the settings model: each settings field has exactly
    one Client keyword (``hedge_after_s`` → ``hedge.after_s``), and the Client takes no key
    argument the model does not have."""
    import inspect

    from otel_llm._act._settings import CLIENT_ARGUMENTS

    others = {"self", "sources", "settings", "scope", "admission", "tracer_provider",
              "meter_provider", "http_client", "seed"}  # fmt: skip
    parameters = set(inspect.signature(Client.__init__).parameters) - others
    assert parameters == set(CLIENT_ARGUMENTS)
    assert CLIENT_ARGUMENTS["hedge_after_s"] == "hedge.after_s"
    assert CLIENT_ARGUMENTS["max_attempts"] == "retry.max_attempts"
    client = Client([source("a")], pool_keepalive_expiry_s=2.5, breaker_failure_threshold=9)
    assert client.settings.pool.keepalive_expiry_s == 2.5
    assert client.settings.breaker.failure_threshold == 9
