"""Hostile streams through the real SDKs, instrumented and not: what the application receives —
every item and the exception, if any — is the same either way, every span ends exactly once,
and the chunks counted are those the SDK delivered, by each API's rule (read here, apart from
the wrappers' readers).

A stream is a random list of events of the API's format — real ones, as the simulated provider
writes them, and hostile ones (not JSON, wrong types, unknown events, comments, empty data) —
written with random line endings, cut at a random byte and ended cleanly or with a reset, served
by a raw loopback server."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import anthropic
import httpx2
import openai
import pytest
from google import genai
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_llm import _semconv as sc
from otel_llm import (
    instrument_anthropic,
    instrument_google_genai,
    instrument_openai,
    uninstrument_anthropic,
    uninstrument_google_genai,
    uninstrument_openai,
)
from otel_llm.simulator import Script
from otel_llm.simulator._anthropic import ANTHROPIC_MESSAGES
from otel_llm.simulator._chat import CHAT_COMPLETIONS
from otel_llm.simulator._frames import Send
from otel_llm.simulator._gemini import GEMINI
from otel_llm.simulator._responses import RESPONSES
from otel_llm.simulator._wire import Asked, Wire
from otel_llm.testing import Spans
from tests.support.raw_server import RawServer

pytestmark = pytest.mark.filterwarnings(
    "ignore:Inheritance class AiohttpClientSession from ClientSession:DeprecationWarning"
)

SCRIPTS = (
    Script(chunk_count=3),
    Script(chunk_count=3, reasoning_chunks=1),
    Script(chunk_count=3, tool_call=True),
    Script(chunk_count=3, finish_reason="length"),
    Script(chunk_count=3, fault="error", fault_after_chunk=1),
)
BODIES: dict[str, dict[str, Any]] = {
    "chat": {
        "messages": [{"role": "user", "content": "x"}],
        "stream_options": {"include_usage": True},
    },
    "responses": {"input": "x"},
    "anthropic": {"messages": [{"role": "user", "content": "x"}], "max_tokens": 5},
    "gemini": {"contents": [{"role": "user", "parts": [{"text": "x"}]}]},
}  # fmt: skip


def _real_events(wire: Wire) -> list[bytes]:
    """Every distinct event the simulated provider writes for :data:`SCRIPTS` on ``wire``."""
    asked = Asked(BODIES[wire.name], {"model": "m"}, {"alt": "sse"})
    seen: dict[bytes, None] = {}
    for script in SCRIPTS:
        reply = wire.reply(script, asked, "m", 1, 0)
        for step in wire.plan(script, reply):
            if isinstance(step, Send):
                seen[step.encoded()] = None
    return list(seen)


def _data(payload: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload)}\n\n".encode()


HOSTILE: list[bytes] = [
    b"data: {not json\n\n",
    b"data: []\n\n",
    b"data: 5\n\n",
    b"data: \n\n",
    b": a comment\n\n",
    b'event: ping\ndata: {"type": "ping"}\n\n',
    b"id: 7\nretry: 10\n\n",
    _data({"type": 5}),
    _data({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}}),
    _data({"type": "content_block_delta", "index": "0", "delta": None}, "content_block_delta"),
    _data({"type": "something_new", "x": [1, 2]}, "something_new"),
    _data({"type": "response.output_text.delta", "delta": ["x"]}),
    _data({"choices": "none"}),
    _data({"choices": [{"index": "z", "delta": {"content": 7}}]}),
    _data({"candidates": [{"content": {"parts": "text"}}]}),
    _data({"candidates": 3, "usageMetadata": "many"}),
]
EVENTS = {
    name: _real_events(wire)
    for name, wire in {
        "chat": CHAT_COMPLETIONS,
        "responses": RESPONSES,
        "anthropic": ANTHROPIC_MESSAGES,
        "gemini": GEMINI,
    }.items()
}


@st.composite
def bodies(draw: st.DrawFn, wire: str) -> tuple[list[bytes], bool]:
    """A stream of ``wire``'s events and hostile ones, cut and split at random."""
    events = draw(st.lists(st.sampled_from(EVENTS[wire] + HOSTILE), max_size=14))
    newline = draw(st.sampled_from([b"\n", b"\r\n"]))
    body = b"".join(event.replace(b"\n", newline) for event in events)
    if body and draw(st.booleans()):
        body = body[: draw(st.integers(0, len(body) - 1))]
    cuts = sorted(set(draw(st.lists(st.integers(0, max(0, len(body))), max_size=4))))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    return [piece for piece in pieces if piece], draw(st.booleans())


# --- the SDKs, and each API's chunk rule read off the items they yield ---------------------------


def _dump(item: Any) -> str:
    dump = getattr(item, "model_dump_json", None)
    return dump(warnings=False) if callable(dump) else repr(item)


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _chat_chunk(item: Any) -> bool:
    choices = getattr(item, "choices", None)
    for choice in choices if isinstance(choices, list) else []:
        delta = getattr(choice, "delta", None)
        names = ("content", "reasoning_content", "reasoning", "refusal")
        if any(_text(getattr(delta, name, None)) for name in names):
            return True
        if getattr(delta, "tool_calls", None):
            return True
    return False


def _responses_chunk(item: Any) -> bool:
    kind = getattr(item, "type", None)
    return isinstance(kind, str) and kind.endswith(".delta") and _text(getattr(item, "delta", None))


def _anthropic_chunk(item: Any) -> bool:
    delta = getattr(item, "delta", None)
    field = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}
    name = (
        field.get(getattr(delta, "type", None))
        if getattr(item, "type", None) == ("content_block_delta")
        else None
    )
    return name is not None and _text(getattr(delta, name, None))


def _gemini_chunk(item: Any) -> bool:
    for candidate in item.candidates or []:
        for part in (candidate.content.parts or []) if candidate.content else []:
            if _text(part.text) or part.function_call is not None:
                return True
    return False


def _read_chat(url: str, into: list[Any]) -> None:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0, timeout=5) as client:
        into.extend(
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}], stream=True
            )
        )


def _read_responses(url: str, into: list[Any]) -> None:
    with openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0, timeout=5) as client:
        into.extend(client.responses.create(model="m", input="x", stream=True))


def _read_anthropic(url: str, into: list[Any]) -> None:
    with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, timeout=5) as client:
        into.extend(
            client.messages.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}], stream=True
            )
        )


def _read_gemini(url: str, into: list[Any]) -> None:
    options = types.HttpOptions(base_url=url, timeout=5000, retry_options=None)
    with genai.Client(api_key="k", http_options=options) as client:
        into.extend(client.models.generate_content_stream(model="m", contents="x"))


Reader = Callable[[str, list[Any]], None]
"""Reads the stream at the URL into the list, item by item (those before an exception kept)."""
Sdk = tuple[Reader, Callable[[Any], bool], Callable[..., None], Callable[[], None]]
SDKS: dict[str, Sdk] = {
    "chat": (_read_chat, _chat_chunk, instrument_openai, uninstrument_openai),
    "responses": (_read_responses, _responses_chunk, instrument_openai, uninstrument_openai),
    "anthropic": (_read_anthropic, _anthropic_chunk, instrument_anthropic, uninstrument_anthropic),
    "gemini": (_read_gemini, _gemini_chunk, instrument_google_genai, uninstrument_google_genai),
}


@pytest.fixture(scope="module")
def server() -> Iterator[RawServer]:
    with RawServer() as running:
        yield running


def _outcome(read: Reader, url: str) -> tuple[list[Any], str | None]:
    items: list[Any] = []
    try:
        read(url, items)
    except Exception as exc:  # what the application would see: its type
        return items, type(exc).__name__
    return items, None


@pytest.mark.parametrize("wire", sorted(SDKS))
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_hostile_stream_reads_the_same_instrumented(
    server: RawServer, wire: str, data: st.DataObject
) -> None:
    """The application's items and exception are the same with and without the wrapper; the
    spans end once; an ended stream counted exactly the chunks the SDK delivered."""
    read, is_chunk, instrument, uninstrument = SDKS[wire]
    server.pieces, server.reset = data.draw(bodies(wire))
    plain_items, plain_error = _outcome(read, server.url)
    spans = Spans()
    instrument(tracer_provider=spans.provider)
    try:
        items, error = _outcome(read, server.url)
    finally:
        uninstrument()
    assert [_dump(item) for item in items] == [_dump(item) for item in plain_items]
    assert error == plain_error
    spans.check()
    (attempt,) = spans.attempts()
    attributes = dict(attempt.attributes or {})
    if error is not None:
        assert attributes[sc.ATTEMPT_OUTCOME] == sc.OUTCOME_ERROR
    delivered = sum(map(is_chunk, items))
    assert attributes.get(sc.CHUNK_COUNT, 0) == delivered
    spans.provider.shutdown()


# --- hostile requests: what the SDK sends is the same instrumented --------------------------

_CHAT_ANSWER = {
    "id": "x",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "a"}, "finish_reason": "stop"}
    ],
}
_MESSAGES_ANSWER = {
    "id": "x",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "a"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


class _Unreadable:
    """A message whose content raises when read."""

    role = "user"

    @property
    def content(self) -> str:
        raise RuntimeError("not readable")


_TEXT = st.text(max_size=5)
_MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "system", 3, None]),
            "content": st.one_of(
                _TEXT,
                st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT})),
                st.integers(),
                st.none(),
            ),
        }
    ),
    st.builds(_Unreadable),
)
_PARAMETERS = st.dictionaries(
    st.sampled_from(["temperature", "max_tokens", "stop", "stop_sequences", "n", "seed", "model"]),
    st.one_of(
        st.integers(-(2**70), 2**70),
        st.floats(),
        _TEXT,
        st.lists(_TEXT, max_size=2),
        st.none(),
        st.booleans(),
    ),
    max_size=3,
)
_SHAPES: dict[str, Callable[[list[Any]], Any]] = {
    "list": list,
    "tuple": tuple,
    "generator": lambda messages: (message for message in messages),
    "iterator": iter,
}


def _request(sdk: str, arguments: Callable[[], dict[str, Any]]) -> tuple[list[bytes], str]:
    """The bodies the SDK sent for one call and how the call ended (``ok`` or the error's
    type), answered by a transport in memory."""
    sent: list[bytes] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append(request.read())
        return httpx2.Response(200, json=_CHAT_ANSWER if sdk == "openai" else _MESSAGES_ANSWER)

    http = httpx2.Client(transport=httpx2.MockTransport(answer))
    try:
        if sdk == "openai":
            client: Any = openai.OpenAI(
                api_key="k", base_url="http://sdk.test/v1", http_client=http, max_retries=0
            )
            create = client.chat.completions.create
        else:
            client = anthropic.Anthropic(
                api_key="k", base_url="http://sdk.test", http_client=http, max_retries=0
            )
            create = client.messages.create
        create(**arguments())
    except Exception as exc:
        return sent, type(exc).__name__
    finally:
        http.close()
    return sent, "ok"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sdk=st.sampled_from(["openai", "anthropic"]),
    messages=st.lists(_MESSAGE, max_size=3),
    shape=st.sampled_from(sorted(_SHAPES)),
    parameters=_PARAMETERS,
)
def test_a_hostile_request_is_sent_the_same_instrumented(
    monkeypatch: pytest.MonkeyPatch,
    sdk: str,
    messages: list[Any],
    shape: str,
    parameters: dict[str, Any],
) -> None:
    """Random prompts (a list, a tuple, a generator or an iterator of messages, some of odd
    types or unreadable) and request parameters of every type, content capture on: the SDK
    sends the same bodies and the call ends the same way, instrumented or not — recording the
    call reads nothing the SDK reads after it."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")

    def arguments() -> dict[str, Any]:
        sent = {"model": "m", "messages": _SHAPES[shape](messages), **parameters}
        if sdk == "anthropic":
            sent.setdefault("max_tokens", 5)
        return sent

    plain = _request(sdk, arguments)
    spans = Spans()
    instrument, uninstrument = (
        (instrument_openai, uninstrument_openai)
        if sdk == "openai"
        else (instrument_anthropic, uninstrument_anthropic)
    )
    instrument(tracer_provider=spans.provider)
    try:
        metered = _request(sdk, arguments)
    finally:
        uninstrument()
    assert metered == plain
    spans.check()
    spans.provider.shutdown()
