"""What a source's provider means, checked when the source is made: the wire format and the
``gen_ai.provider.name`` it chooses, public base URLs, the key's header, Azure OpenAI's
deployment route, the fields only some providers take, the per-source environment keys of every
provider — and the translation of a chat request for the Anthropic and Gemini APIs, field by
field."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx2
import pytest

from otel_llm import Client, ClientSettings, ConfigurationError, InvalidRequest, Source
from otel_llm import _semconv as sc
from otel_llm._act._wire import wire_for
from otel_llm._defaults import DEFAULTS
from otel_llm.simulator import Script, SimulatedProvider
from otel_llm.testing import Scripted, Spans, sse_answer
from tests.support.sim_sources import PROVIDERS, sim_source

KEY = "sk-0123456789-SECRET-KEY"


def make(**fields: Any) -> Source:
    given: dict[str, Any] = {"name": "s", "model": "m"}
    return Source(**{**given, **fields})


@pytest.mark.parametrize(
    ("provider", "api", "telemetry", "base_url", "header"),
    [
        ("openai", "chat", "openai", DEFAULTS.openai_base_url, "Authorization"),
        ("anthropic", "anthropic", "anthropic", DEFAULTS.anthropic_base_url, "x-api-key"),
        ("gemini", "gemini", "gcp.gemini", DEFAULTS.gemini_base_url, "x-goog-api-key"),
        ("gcp.gemini", "gemini", "gcp.gemini", DEFAULTS.gemini_base_url, "x-goog-api-key"),
    ],
)
def test_a_known_provider_chooses_its_api_name_url_and_key_header(
    provider: str, api: str, telemetry: str, base_url: str, header: str
) -> None:
    """``openai``, ``anthropic`` and ``gemini`` (or the convention's ``gcp.gemini``) choose
    their wire format, their convention name and their key header, and need no base URL."""
    source = make(provider=provider, api_key=KEY)
    assert (source.api, source.provider_name, source.base_url, source.key_header) == (
        api, telemetry, base_url, header,
    )  # fmt: skip
    assert source.wire is wire_for(api)
    assert KEY not in repr(source)


@pytest.mark.parametrize("provider", ["deepseek", "vllm", "my-gateway", "sim"])
def test_any_other_provider_is_openai_compatible_under_its_own_name(provider: str) -> None:
    """An unknown name is an OpenAI-compatible endpoint, reported as named; it needs a URL."""
    source = make(provider=provider, base_url="http://gw.test/v1")
    assert (source.api, source.provider_name, source.key_header) == (
        "chat", provider, "Authorization",
    )  # fmt: skip
    with pytest.raises(ConfigurationError, match=r"Source\.base_url"):
        make(provider=provider)


@pytest.mark.parametrize(
    ("fields", "key", "words"),
    [
        ({"provider": "OpenAI"}, "Source.provider", "lower-case"),
        ({"provider": "anthropic messages"}, "Source.provider", "lower-case"),
        ({"provider": "gcp.vertex_ai"}, "Source.provider", "Vertex AI"),
        ({"provider": "vertex_ai"}, "Source.provider", "Vertex AI"),
        ({"provider": "anthropic", "api_key_header": "api-key"}, "Source.api_key_header",
         "own header"),
        ({"provider": "gemini", "api_key_header": "Authorization"}, "Source.api_key_header",
         "own header"),
        ({"provider": "openai", "deployment": "d"}, "Source.deployment", "provider='azure'"),
        ({"provider": "gemini", "api_version": "v1beta"}, "Source.api_version", "base_url"),
        ({"provider": "openai", "api_version": "2024-10-21"}, "Source.api_version", "base_url"),
        ({"provider": "azure", "base_url": "https://r.openai.azure.com"}, "Source.api_version",
         "api-version"),
        ({"provider": "azure", "base_url": "https://r.openai.azure.com/openai/deployments/x",
          "api_version": "1", "deployment": "y"}, "Source.deployment", "keep one"),
        ({"provider": "azure", "base_url": "https://r.openai.azure.com", "api_version": "1",
          "deployment": "a/b"}, "Source.deployment", "no '/'"),
        ({"provider": "azure",
          "base_url": "https://r.openai.azure.com/openai/deployments/d?api-version=2024-02-01",
          "api_version": "2025-04-01-preview"}, "Source.api_version", "keep one"),
        ({"provider": "anthropic", "max_tokens": 0}, "Source.max_tokens", "greater than"),
        ({"provider": "sim", "base_url": "http://127.0.0.1:99999/v1"}, "Source.base_url",
         "port must be 1 to 65535"),
        ({"provider": "sim", "base_url": "http://127.0.0.1:0/v1"}, "Source.base_url",
         "port must be 1 to 65535"),
        ({"provider": "sim", "base_url": "http://api.example .com/v1"}, "Source.base_url",
         "must name a host"),
        ({"provider": "sim", "base_url": "http://api\u00a0example.com/v1"}, "Source.base_url",
         "must name a host"),
        ({"provider": "sim", "base_url": "http://api.example%20.com/v1"}, "Source.base_url",
         "must name a host"),
        ({"provider": "sim", "base_url": "http://api.ex%41mple.com/v1"}, "Source.base_url",
         "must name a host"),
        ({"provider": "openai", "name": "s\nforged log line"}, "Source.name", "line breaks"),
        ({"provider": "openai", "model": "m\x1b[2J"}, "Source.model", "control characters"),
        ({"provider": "openai", "model": "m\u202e"}, "Source.model", "control characters"),
        ({"provider": "anthropic", "api_version": "2023-06-01\r\nX-Injected: 1"},
         "Source.api_version", "line breaks"),
        ({"provider": "azure", "base_url": "https://r.openai.azure.com", "api_version": "1",
          "deployment": "d\n"}, "Source.deployment", "control characters"),
        ({"provider": "openai", "requests_per_minute": "10"}, "Source.requests_per_minute",
         "must be a number, got str"),
        ({"provider": "openai", "timeout_s": "5"}, "Source.timeout_s", "must be a number"),
        ({"provider": "openai", "priority": "1"}, "Source.priority", "must be a number"),
    ],
)  # fmt: skip
def test_a_bad_name_or_an_impossible_combination_is_refused_when_made(
    fields: dict[str, Any], key: str, words: str
) -> None:
    """A provider name that is not one, or fields that cannot go together, is a
    ConfigurationError naming the field — when the source is made, not at the first call."""
    with pytest.raises(ConfigurationError) as caught:
        make(**fields)
    assert caught.value.key == key
    assert words in str(caught.value)


def test_a_name_newer_than_the_pythons_unicode_is_taken() -> None:
    """U+1FAE8 (Unicode 15) in a source's name, model or Azure deployment is taken under any
    Python, as otel-llm shows it as itself; a format character beside it is still refused."""
    shaking = "\U0001fae8"
    source = make(provider="openai", name=f"fast {shaking}", model=f"m{shaking}")
    assert (source.name, source.model) == (f"fast {shaking}", f"m{shaking}")
    azure = make(
        provider="azure",
        base_url="https://r.openai.azure.com",
        api_version="2024-10-21",
        deployment=f"d{shaking}",
    )
    assert azure.deployment == f"d{shaking}"
    with pytest.raises(ConfigurationError) as caught:
        make(provider="openai", model=f"m{shaking}\U000e0001")
    assert caught.value.key == "Source.model"


@pytest.mark.parametrize(
    ("fields", "chat", "embeddings"),
    [
        ({"base_url": "https://r.openai.azure.com", "api_version": "2024-10-21"},
         "https://r.openai.azure.com/openai/deployments/m/chat/completions?api-version=2024-10-21",
         "https://r.openai.azure.com/openai/deployments/m/embeddings?api-version=2024-10-21"),
        ({"base_url": "https://r.openai.azure.com/openai/", "api_version": "2024-10-21",
          "deployment": "prod gpt"},
         "https://r.openai.azure.com/openai/deployments/prod%20gpt/chat/completions"
         "?api-version=2024-10-21",
         "https://r.openai.azure.com/openai/deployments/prod%20gpt/embeddings"
         "?api-version=2024-10-21"),
        ({"base_url": "https://r.openai.azure.com/openai/deployments/d?api-version=2024-06-01"},
         "https://r.openai.azure.com/openai/deployments/d/chat/completions"
         "?api-version=2024-06-01",
         "https://r.openai.azure.com/openai/deployments/d/embeddings?api-version=2024-06-01"),
        ({"base_url": "https://r.openai.azure.com/openai/deployments/d", "api_version": "v"},
         "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=v",
         "https://r.openai.azure.com/openai/deployments/d/embeddings?api-version=v"),
        ({"base_url": "https://r.openai.azure.com/openai/deployments/d?api-version=2024-06-01",
          "api_version": "2024-06-01"},
         "https://r.openai.azure.com/openai/deployments/d/chat/completions"
         "?api-version=2024-06-01",
         "https://r.openai.azure.com/openai/deployments/d/embeddings?api-version=2024-06-01"),
        ({"base_url": "https://r.openai.azure.com/openai/v1"},
         "https://r.openai.azure.com/openai/v1/chat/completions",
         "https://r.openai.azure.com/openai/v1/embeddings"),
        ({"base_url": "https://apim.example.com/v1"},
         "https://apim.example.com/v1/chat/completions",
         "https://apim.example.com/v1/embeddings"),
    ],
    ids=["resource-endpoint", "deployment-field", "whole-url", "whole-url-plus-version",
         "whole-url-plus-same-version", "v1-route", "gateway-v1-route"],
)  # fmt: skip
def test_azure_routes(fields: dict[str, Any], chat: str, embeddings: str) -> None:
    """Azure OpenAI: a resource endpoint becomes the deployment's route (the deployment
    defaults to the model), with ``api-version`` on every request; a whole deployment URL or
    a ``/v1`` route (Azure's v1 API, or a gateway's) is kept as given."""
    source = make(provider="azure", **fields)
    assert (source.chat_url, source.embeddings_url) == (chat, embeddings)
    assert (source.provider_name, source.key_header) == ("azure.ai.openai", "api-key")


async def test_an_azure_request_keeps_its_version_and_sends_the_api_key_header(
    spans: Spans,
) -> None:
    """Built from its fields, an Azure source's request goes to the deployment with its
    ``api-version`` and the key in ``api-key`` only."""
    requests: list[httpx2.Request] = []

    async def answer(request: httpx2.Request) -> httpx2.Response:
        requests.append(request)
        return sse_answer()

    script = Scripted({"res": [answer]})
    source = make(provider="azure", base_url="http://res.test", api_version="2024-10-21",
                  deployment="prod", api_key=KEY)  # fmt: skip
    async with Client([source], http_client=script.client(), tracer_provider=spans.provider) as c:
        await c.chat([{"role": "user", "content": "hi"}])
    (request,) = requests
    assert request.url.path == "/openai/deployments/prod/chat/completions"
    assert request.url.params["api-version"] == "2024-10-21"
    assert request.headers["api-key"] == KEY
    assert "authorization" not in request.headers


async def test_an_azure_v1_route_names_the_deployment_as_the_body_model(spans: Spans) -> None:
    """On a ``/v1`` route the body's model picks the deployment, so ``deployment`` goes there;
    the spans still report the model asked for."""
    requests: list[httpx2.Request] = []

    async def answer(request: httpx2.Request) -> httpx2.Response:
        requests.append(request)
        return sse_answer()

    script = Scripted({"res": [answer]})
    source = make(provider="azure", base_url="http://res.test/openai/v1", model="gpt-4o",
                  deployment="my-prod-deployment", api_key=KEY)  # fmt: skip
    async with Client([source], http_client=script.client(), tracer_provider=spans.provider) as c:
        await c.chat([{"role": "user", "content": "hi"}])
    (request,) = requests
    assert request.url.path == "/openai/v1/chat/completions"
    assert json.loads(request.content)["model"] == "my-prod-deployment"
    (attempt,) = spans.attempts()
    assert (attempt.attributes or {})[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o"


async def test_an_azure_v1_route_embeds_with_the_deployment_as_the_body_model() -> None:
    """Embeddings on a ``/v1`` route name the deployment in the body too."""
    requests: list[httpx2.Request] = []

    async def answer(request: httpx2.Request) -> httpx2.Response:
        requests.append(request)
        return httpx2.Response(200, json={"data": [{"index": 0, "embedding": [0.5, 0.25]}]})

    script = Scripted({"res": [answer]})
    source = make(provider="azure", base_url="http://res.test/openai/v1", model="emb-3",
                  deployment="my-embedding-deployment", api_key=KEY)  # fmt: skip
    async with Client([source], http_client=script.client()) as client:
        result = await client.embed("hi")
    (request,) = requests
    assert request.url.path == "/openai/v1/embeddings"
    assert json.loads(request.content)["model"] == "my-embedding-deployment"
    assert result.vectors == ((0.5, 0.25),)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for key in list(os.environ):
        if key.upper().startswith(("LLM__", "EMBEDDING__")):
            monkeypatch.delenv(key)
    return monkeypatch


def test_every_provider_from_environment_keys(clean_env: pytest.MonkeyPatch) -> None:
    """``LLM__{PROVIDER}__{N}__{FIELD}`` makes Anthropic, Gemini and Azure sources too, with
    public base URLs where a user expects them and the provider's own fields."""
    env = {
        "LLM__ANTHROPIC__1__MODEL": "claude-x",
        "LLM__ANTHROPIC__1__API_KEY": KEY,
        "LLM__ANTHROPIC__1__MAX_TOKENS": "2048",
        "LLM__GEMINI__2__MODEL": "gemini-x",
        "LLM__GEMINI__2__BASE_URL": "https://generativelanguage.googleapis.com/v1beta",
        "LLM__AZURE__3__BASE_URL": "https://res.openai.azure.com",
        "LLM__AZURE__3__MODEL": "gpt-4o",
        "LLM__AZURE__3__DEPLOYMENT": "prod",
        "LLM__AZURE__3__API_VERSION": "2024-10-21",
        "LLM__OPENAI__4__MODEL": "gpt-x",
    }
    for key, value in env.items():
        clean_env.setenv(key, value)
    anthropic, gemini, azure, openai = ClientSettings().sources
    assert (anthropic.name, anthropic.api, anthropic.base_url, anthropic.max_tokens) == (
        "anthropic-1", "anthropic", DEFAULTS.anthropic_base_url, 2048,
    )  # fmt: skip
    assert (gemini.api, gemini.base_url) == ("gemini", env["LLM__GEMINI__2__BASE_URL"])
    assert azure.chat_url == (
        "https://res.openai.azure.com/openai/deployments/prod/chat/completions"
        "?api-version=2024-10-21"
    )
    assert (openai.base_url, openai.provider_name) == (DEFAULTS.openai_base_url, "openai")
    assert KEY not in repr(ClientSettings())


def test_an_environment_key_of_an_impossible_combination_is_named(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """A provider field on the wrong provider is refused naming its environment key."""
    clean_env.setenv("LLM__GEMINI__1__MODEL", "g")
    clean_env.setenv("LLM__GEMINI__1__DEPLOYMENT", "d")
    with pytest.raises(ConfigurationError) as caught:
        ClientSettings()
    assert caught.value.key == "LLM__GEMINI__1__DEPLOYMENT"


def test_numbers_as_text_are_read_from_the_environment_and_settings(
    clean_env: pytest.MonkeyPatch,
) -> None:
    """The environment, and a settings object given a mapping, spell a source's numbers as
    text and are parsed (a ``Source(...)`` made in code takes numbers only); a port out of range
    is refused naming the environment key."""
    clean_env.setenv("LLM__OPENAI__1__MODEL", "m")
    clean_env.setenv("LLM__OPENAI__1__REQUESTS_PER_MINUTE", "10")
    assert ClientSettings().sources[0].requests_per_minute == 10.0
    given = {"name": "s", "provider": "sim", "base_url": "http://h/v1", "model": "m"}
    assert ClientSettings(sources=[{**given, "priority": "4"}]).sources[0].priority == 4
    clean_env.setenv("LLM__OPENAI__1__BASE_URL", "http://127.0.0.1:70000/v1")
    with pytest.raises(ConfigurationError) as caught:
        ClientSettings()
    assert caught.value.key == "LLM__OPENAI__1__BASE_URL"


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_embeddings_are_refused_where_the_api_has_none(
    provider: str, clean_env: pytest.MonkeyPatch
) -> None:
    """An embeddings client with an Anthropic or Gemini source is refused when it is made."""
    with pytest.raises(ConfigurationError, match="no embeddings endpoint"):
        Client([make(provider=provider)], scope="EMBEDDING")


async def test_embed_on_a_chat_client_with_such_a_source_sends_nothing(spans: Spans) -> None:
    """``embed()`` on a chat client whose sources include an Anthropic one is refused before
    any request."""
    script = Scripted({"a": [sse_answer()]})
    sources = [make(name="a", provider="openai", base_url="http://a.test/v1"),
               make(name="b", provider="anthropic", priority=1)]  # fmt: skip
    async with Client(sources, http_client=script.client(), tracer_provider=spans.provider) as c:
        with pytest.raises(ConfigurationError, match="no embeddings endpoint"):
            await c.embed("text")
    assert script.seen == []


# --- translation ------------------------------------------------------------------------------


def translated(api: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The body the ``api`` wire sends for ``payload``."""
    source = make(provider=api, api_key=KEY)
    return wire_for(api).request(source, payload, stream=True).body


SYSTEM_AND_TURNS = {
    "messages": [
        {"role": "system", "content": "rule one"},
        {"role": "developer", "content": [{"type": "text", "text": "rule two"}]},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "2"}]},
    ],
    "max_completion_tokens": 99,
    "stop": "END",
    "stream_options": {"include_usage": True},
    "model": "ignored: each source sends its own",
}


def test_what_crosses_to_anthropic() -> None:
    """System and developer prompts become ``system``, the roles stay, parts become text
    blocks, ``max_completion_tokens`` is ``max_tokens`` and ``stop`` ``stop_sequences``."""
    assert translated("anthropic", SYSTEM_AND_TURNS) == {
        "model": "m",
        "max_tokens": 99,
        "system": [{"type": "text", "text": "rule one"}, {"type": "text", "text": "rule two"}],
        "messages": [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "2"}],
            },
        ],
        "stop_sequences": ["END"],
        "stream": True,
    }


def test_what_crosses_to_gemini() -> None:
    """System prompts become ``systemInstruction``, assistant turns ``model`` turns, parts
    text parts, the settings ``generationConfig``."""
    payload = {**SYSTEM_AND_TURNS, "temperature": 0.3, "top_p": 0.5, "seed": 7}
    assert translated("gemini", payload) == {
        "contents": [
            {"role": "user", "parts": [{"text": "q1"}]},
            {"role": "model", "parts": [{"text": "a1"}]},
            {"role": "user", "parts": [{"text": "q"}, {"text": "2"}]},
        ],
        "systemInstruction": {"parts": [{"text": "rule one"}, {"text": "rule two"}],
                              "role": "user"},
        "generationConfig": {"maxOutputTokens": 99, "temperature": 0.3, "topP": 0.5,
                             "stopSequences": ["END"], "seed": 7},
    }  # fmt: skip


USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize("api", ["anthropic", "gemini"])
@pytest.mark.parametrize(
    ("payload", "key", "words"),
    [
        ({"tools": []}, "tools", "tools"),
        ({"tool_choice": "auto"}, "tool_choice", "tools"),
        ({"response_format": {"type": "json_object"}}, "response_format", "response format"),
        ({"n": 3}, "n", "several choices"),
        ({"logprobs": True}, "logprobs", "log probabilities"),
        ({"user": "u1"}, "user", "'user'"),
        ({"max_tokens": 0}, "max_tokens", "whole number"),
        ({"stop": 5}, "stop", "stop other than"),
        ({"messages": "hi"}, "messages", "not a list"),
        ({"messages": [{"role": "system", "content": "rules"}]}, "messages",
         "no user or assistant message"),
        ({"messages": []}, "messages", "no user or assistant message"),
        ({"messages": [USER, {"role": "system", "content": "late"}]}, "messages[1].role",
         "after the conversation started"),
        ({"messages": [{"role": "tool", "content": "42", "tool_call_id": "c"}]},
         "messages[0].tool_call_id", "'tool_call_id'"),
        ({"messages": [{"role": "tool", "content": "42"}]}, "messages[0].role", "tool results"),
        ({"messages": [{"role": "user", "name": "bob", "content": "hi"}]}, "messages[0].name",
         "'name'"),
        ({"messages": [{"role": "critic", "content": "hi"}]}, "messages[0].role", "'critic'"),
        ({"messages": [{"role": "assistant", "content": None}]}, "messages[0].content",
         "without content"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
         "messages[0].content[0]", "audio"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": "x",
                                                      "cache_control": {}}]}]},
         "messages[0].content[0]", "other than its text"),
    ],
)  # fmt: skip
def test_what_does_not_cross_is_refused_naming_the_field(
    api: str, payload: dict[str, Any], key: str, words: str
) -> None:
    """Anything beyond text, system prompts and the common settings is a ConfigurationError
    naming the field, the source and its API — nothing is dropped silently."""
    source = make(provider=api)
    with pytest.raises(ConfigurationError) as caught:
        wire_for(api).check(source, {"messages": [USER], **payload})
    assert caught.value.key == key
    assert words in str(caught.value)
    assert "'s'" in str(caught.value)


@pytest.mark.parametrize(
    ("payload", "anthropic", "gemini"),
    [
        ({"temperature": 0.5}, False, True),
        ({"top_p": 0.5}, False, True),
        ({"seed": 1}, False, True),
        ({"presence_penalty": 0.5}, False, True),
        ({"temperature": 2.5}, False, False),
        ({"n": 1, "max_tokens": 5, "stop": ["a", "b"]}, True, True),
        ({"temperature": None, "top_p": None, "tools": None, "seed": None}, True, True),
    ],
)
def test_which_settings_each_api_takes(
    payload: dict[str, Any], anthropic: bool, gemini: bool
) -> None:
    """Gemini takes the sampling settings within their range; the Messages API (of the
    version the client speaks, as the anthropic SDK has it) has none; both take max_tokens,
    stop and n=1, and a field set to ``None`` (not set, as code that passes its own optional
    settings through writes it)."""
    for api, takes in (("anthropic", anthropic), ("gemini", gemini)):
        try:
            wire_for(api).check(make(provider=api), {"messages": [USER], **payload})
        except ConfigurationError:
            taken = False
        else:
            taken = True
        assert taken is takes, (api, payload)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("content", ["a\ud800b", "\udfff", [{"type": "text", "text": "x\udc80"}]])
async def test_a_lone_surrogate_is_refused_before_sending(provider: str, content: object) -> None:
    """Text with a lone surrogate cannot be encoded as UTF-8: ``InvalidRequest`` on every
    API (it was a raw ``UnicodeEncodeError`` from the HTTP client), and nothing was sent."""
    async with SimulatedProvider(default=Script(chunk_count=1)) as sim:
        async with Client([sim_source(provider, sim)]) as client:
            with pytest.raises(InvalidRequest, match="UnicodeEncodeError"):
                await client.chat([{"role": "user", "content": content}])
        assert sim.stats.requests == 0
