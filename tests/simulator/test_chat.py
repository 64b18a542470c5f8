"""Chat completions' additions (``otel_llm/simulator/_chat.py``): Azure OpenAI's deployment
route with the openai SDK's Azure clients, the mid-stream error fault and refusals."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import openai
import pytest

from otel_llm import Source
from otel_llm import _errors as e
from otel_llm._act._pool import Pool
from otel_llm._act._transport import chat_completion
from otel_llm.simulator import SCRIPT_HEADER, Script, Silence, SimulatedProvider, ThreadedProvider

SCALE = 0.001
API_VERSION = "2024-10-21"
MESSAGES: list[Any] = [{"role": "user", "content": "say something"}]


def header(script: Script) -> dict[str, str]:
    return {SCRIPT_HEADER: script.model_dump_json()}


def words(stem: str, count: int) -> str:
    return " ".join(f"{stem}{k}" for k in range(count))


@pytest.fixture(scope="module")
def threaded() -> Iterator[ThreadedProvider]:
    scripts = {"deployment-3": Script(chunk_count=3)}
    with SimulatedProvider.start_in_thread(time_scale=SCALE, scripts=scripts) as running:
        yield running


@pytest.fixture
def azure(threaded: ThreadedProvider) -> Iterator[openai.AzureOpenAI]:
    client = openai.AzureOpenAI(
        azure_endpoint=threaded.url, api_key="sim", api_version=API_VERSION, max_retries=0
    )
    with client:
        yield client


def test_azure_streams_from_the_deployment_route(
    azure: openai.AzureOpenAI, threaded: ThreadedProvider
) -> None:
    """AzureOpenAI streams from /openai/deployments/{deployment}/chat/completions: the script
    registered for the deployment answers, usage included, through a keepalive silence."""
    before = threaded.stats.requests_by_model.get("deployment-3", 0)
    chunks = list(
        azure.chat.completions.create(
            model="deployment-3",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == words("word", 3)
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 3
    assert threaded.stats.requests_by_model["deployment-3"] == before + 1
    silence = Script(
        chunk_count=3, silences=(Silence(after_chunk=0, duration_s=30, keepalive_every_s=10),)
    )
    again = azure.chat.completions.create(
        model="any-deployment", messages=MESSAGES, stream=True, extra_headers=header(silence)
    )
    assert "".join(c.choices[0].delta.content or "" for c in again if c.choices) == words("word", 3)


def test_azure_non_streamed_and_embeddings(azure: openai.AzureOpenAI) -> None:
    """A non-streamed Azure answer (script from extra_body) and Azure embeddings."""
    answer = azure.chat.completions.create(
        model="deployment-x", messages=MESSAGES, extra_body={"sim": {"chunk_count": 2}}
    )
    assert answer.choices[0].message.content == words("word", 2)
    assert answer.model == "deployment-x"
    vectors = azure.embeddings.create(model="deployment-x", input=["alpha", "beta"])
    assert [len(item.embedding) for item in vectors.data] == [8, 8]


async def test_async_azure_and_its_errors() -> None:
    """AsyncAzureOpenAI streams; a scripted 429 on the deployment route is a RateLimitError."""
    async with SimulatedProvider(time_scale=SCALE) as running:
        client = openai.AsyncAzureOpenAI(
            azure_endpoint=running.url, api_key="sim", api_version=API_VERSION, max_retries=0
        )
        async with client:
            stream = await client.chat.completions.create(
                model="d",
                messages=MESSAGES,
                stream=True,
                extra_headers=header(Script(chunk_count=4)),
            )
            text = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
            assert "".join(text) == words("word", 4)
            with pytest.raises(openai.RateLimitError) as raised:
                await client.chat.completions.create(
                    model="d",
                    messages=MESSAGES,
                    extra_headers=header(Script(error_status=429, retry_after="3")),
                )
            assert raised.value.response.headers["retry-after"] == "3"


# The error fault and refusals on chat completions.


@pytest.fixture
def sdk(threaded: ThreadedProvider) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=threaded.base_url, api_key="sim", max_retries=0) as client:
        yield client


def test_error_fault_raises_the_openai_sdk_s_api_error(sdk: openai.OpenAI) -> None:
    """error: an {"error": …} data line after the chunks; the openai SDK raises its generic
    APIError with the provider's message and body, after yielding the chunks before it."""
    script = Script(
        chunk_count=4,
        fault="error",
        fault_after_chunk=1,
        fault_status=429,
        error_message="slow down",
    )
    text: list[str] = []

    def read() -> None:
        for chunk in sdk.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, extra_headers=header(script)
        ):
            text.extend(choice.delta.content or "" for choice in chunk.choices)

    with pytest.raises(openai.APIError) as raised:
        read()
    assert not isinstance(raised.value, openai.APIStatusError)
    assert raised.value.message == "slow down"
    assert raised.value.body == {"message": "slow down", "type": "rate_limit_error", "code": None}
    assert "".join(text) == words("word", 2)


def test_refusal_streams_in_delta_refusal(sdk: openai.OpenAI) -> None:
    """A refusal script streams its words in delta.refusal, and the answer's message.refusal."""
    script = Script(chunk_count=3, refusal=True)
    chunks = list(
        sdk.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, extra_headers=header(script)
        )
    )
    refusal = "".join(chunk.choices[0].delta.refusal or "" for chunk in chunks if chunk.choices)
    assert refusal == words("word", 3)
    assert all(not chunk.choices or not chunk.choices[0].delta.content for chunk in chunks)
    answer = sdk.chat.completions.create(model="m", messages=MESSAGES, extra_headers=header(script))
    assert (answer.choices[0].message.refusal, answer.choices[0].message.content) == (
        words("word", 3),
        None,
    )


@pytest.fixture
async def pool() -> AsyncIterator[Pool]:
    async with httpx2.AsyncClient() as client:
        yield Pool(client=client)


@pytest.mark.parametrize(
    ("code", "error"), [(None, e.ServerError), ("content_filter", e.ContentFiltered)]
)
async def test_otel_llm_transport_reads_the_error_fault(
    pool: Pool, code: str | None, error: type[e.ProviderError]
) -> None:
    """otel-llm's own transport takes the chat error fault for the provider's error: transient
    unless its code names a permanent one."""
    script = Script(chunk_count=4, fault="error", fault_after_chunk=1, error_code=code)
    async with SimulatedProvider(time_scale=SCALE) as running:
        source = Source(name="sim", provider="sim", base_url=running.base_url, model="m")
        payload = {"messages": MESSAGES, "sim": script.model_dump(mode="json")}
        with pytest.raises(error, match="simulated provider error"):
            await chat_completion(pool, source, payload, stream=True)
