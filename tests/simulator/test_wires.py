"""Every wire format played from the same script: the same words, chunk events and timeline on
chat completions, Responses, Anthropic Messages and Gemini (raw HTTP and the stream plans)."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from otel_llm.simulator import (
    ORIGIN_HEADER,
    SCRIPT_HEADER,
    Script,
    Silence,
    SimulatedProvider,
    ThreadedProvider,
    chunk_indices,
    scripted_figures,
)
from otel_llm.simulator._anthropic import STOP_REASONS
from otel_llm.simulator._frames import Reply, tool_arguments
from otel_llm.simulator._gemini import FINISH_REASONS
from otel_llm.simulator._responses import INCOMPLETE_REASONS
from otel_llm.simulator._server import WIRES
from tests.support.wire_events import (
    WIRE_NAMES,
    Carried,
    Event,
    carried,
    chunk_events,
    finish_of,
    is_error_event,
    is_json,
    joined,
    plan_events,
)

SCALE = 0.001
"""Scripted seconds run a thousand times faster: a scripted 100 s silence takes 0.1 s."""

MESSAGES = [{"role": "user", "content": "say something"}]


def request(
    wire: str, *, model: str = "sim-model", stream: bool = True, **extra: Any
) -> tuple[str, dict[str, Any]]:
    """Path and body of a request to ``wire`` (``azure``: the chat wire on Azure's route)."""
    if wire == "chat":
        return "/v1/chat/completions", {
            "model": model,
            "messages": MESSAGES,
            "stream": stream,
            **extra,
        }
    if wire == "azure":
        path = f"/openai/deployments/{model}/chat/completions?api-version=2024-10-21"
        return path, {"messages": MESSAGES, "stream": stream, **extra}
    if wire == "responses":
        return "/v1/responses", {
            "model": model,
            "input": "say something",
            "stream": stream,
            **extra,
        }
    if wire == "anthropic":
        body = {"model": model, "max_tokens": 64, "messages": MESSAGES, "stream": stream}
        return "/v1/messages", {**body, **extra}
    action = "streamGenerateContent?alt=sse" if stream else "generateContent"
    contents = [{"role": "user", "parts": [{"text": "say something"}]}]
    return f"/v1beta/models/{model}:{action}", {"contents": contents, **extra}


def header(script: Script) -> dict[str, str]:
    return {SCRIPT_HEADER: script.model_dump_json()}


@dataclass
class Stream:
    """One streamed answer as it arrived: every event and comment, with its arrival time."""

    status: int
    headers: httpx2.Headers
    items: list[tuple[float, Event | None]] = field(default_factory=list)
    """``(arrival, event)``; ``None`` for an SSE comment."""

    @property
    def events(self) -> list[Event]:
        return [event for _, event in self.items if event is not None]

    def chunks(self, wire: str) -> list[Carried]:
        return chunk_events(wire, self.events)

    def chunk_arrivals(self, wire: str) -> list[float]:
        return [
            at for at, event in self.items if event is not None and carried(wire, event) is not None
        ]


async def read(
    client: httpx2.AsyncClient, wire: str, script: Script | None = None, **extra: Any
) -> Stream:
    path, body = request(wire, **extra)
    headers = header(script) if script is not None else {}
    async with client.stream("POST", path, json=body, headers=headers) as response:
        received = Stream(response.status_code, response.headers)
        name: str | None = None
        data: list[str] = []
        async for line in response.aiter_lines():
            now = time.monotonic()
            if line.startswith(":"):
                received.items.append((now, None))
            elif line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data.append(line.removeprefix("data: "))
            elif not line and data:
                received.items.append((now, Event(name, "\n".join(data))))
                name, data = None, []
    return received


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider(time_scale=SCALE) as running:
        yield running


@pytest.fixture
async def client(provider: SimulatedProvider) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(base_url=provider.url, timeout=10.0) as http:
        yield http


def words(stem: str, count: int) -> str:
    return " ".join(f"{stem}{k}" for k in range(count))


# The same script on every format: a property over the stream plans.


@st.composite
def scripts(draw: st.DrawFn) -> Script:
    """Any valid script: phases, silences with keepalives, every fault, finish reasons."""
    count = draw(st.integers(0, 10))
    reasoning = draw(st.integers(0, count))
    tool_call = reasoning < count and draw(st.booleans())
    silences = (
        draw(
            st.lists(
                st.builds(
                    Silence,
                    after_chunk=st.integers(0, count - 1),
                    duration_s=st.floats(0.0, 50.0),
                    keepalive_every_s=st.none() | st.floats(1.0, 20.0),
                ),
                max_size=3,
            )
        )
        if count
        else []
    )
    fault = draw(st.sampled_from([None, "reset", "truncate", "malformed", "error"]))
    return Script(
        chunk_count=count,
        reasoning_chunks=reasoning,
        tool_call=tool_call,
        refusal=not tool_call and draw(st.booleans()),
        words_per_chunk=draw(st.integers(1, 3)),
        role_chunk=draw(st.booleans()),
        first_chunk_delay_s=draw(st.floats(0.0, 5.0)),
        chunk_interval_s=draw(st.floats(0.0, 2.0)),
        silences=tuple(silences),
        usage=draw(st.booleans()),
        done=draw(st.booleans()),
        finish_reason=draw(st.sampled_from([None, "stop", "length", "content_filter", "other"])),
        responses_reasoning=draw(st.sampled_from(["summary", "text"])),
        fault=fault,
        fault_after_chunk=draw(st.integers(-1, count - 1)) if fault else 0,
        fault_status=draw(st.sampled_from([429, 500, 503, 529])),
    )


def _expected_finish(wire: str, script: Script) -> str:
    reason = script.final_reason
    if wire == "chat":
        return reason
    if wire == "responses":
        incomplete = INCOMPLETE_REASONS.get(reason)
        return "completed" if incomplete is None else f"incomplete:{incomplete}"
    if wire == "anthropic":
        return STOP_REASONS.get(reason, reason)
    return FINISH_REASONS.get(reason, reason)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts())
def test_every_format_plays_the_same_script(script: Script) -> None:
    """For any script, every format's plan carries the chat format's text in the same number of
    chunk events at the same scripted times (Gemini: a tool call is one event at the phase's last
    chunk), ends with the mapped finish, or is cut at the scripted fault with the format's own
    error event or one non-JSON line."""
    reply = Reply(id="x_sim000001", created=0, model="m", prompt_tokens=3, include_usage=True)
    plans = {name: plan_events(WIRES[name].plan(script, reply)) for name in WIRE_NAMES}
    chat_timed = [
        (timed.at_s, found)
        for timed in plans["chat"]
        if (found := carried("chat", timed.event)) is not None
    ]
    cut = script.fault in ("reset", "truncate", "error")
    last = script.fault_after_chunk if cut else script.chunk_count - 1
    for name, timed in plans.items():
        events = [item.event for item in timed]
        sent = [index for index in chunk_indices(script, name) if index <= last]
        chunks = [(item.at_s, found) for item in timed if (found := carried(name, item.event))]
        assert len(chunks) == len(sent), name
        truth = scripted_figures(script, threshold_s=1.0, wire=name)  # type: ignore[arg-type]
        assert truth.chunk_count == len(chunks), name
        assert truth.ttft_s == (pytest.approx(chunks[0][0]) if chunks else None), name
        assert [at for at, _ in chunks] == pytest.approx([chat_timed[k][0] for k in sent]), name
        found = [chunk for _, chunk in chunks]
        chat_found = [chunk for _, chunk in chat_timed]
        for kind in ("reasoning", "content"):
            assert joined(found, kind) == joined(chat_found, kind), (name, kind)
        arguments = joined(found, "tool")
        if script.tool_call and last == script.chunk_count - 1:  # the whole call went out
            assert json.loads(arguments) == json.loads(joined(chat_found, "tool")), name
        elif name != "gemini":  # cut short: a prefix (chat's first piece is the call's head)
            assert tool_arguments(script).startswith(arguments), name
        else:
            assert arguments == "", name
        finishes = [reason for event in events if (reason := finish_of(name, event))]
        assert finishes == ([] if cut else [_expected_finish(name, script)]), name
        errors = [event for event in events if is_error_event(name, event)]
        assert bool(errors) == (script.fault == "error"), name
        broken = [event for event in events if event.data != "[DONE]" and not is_json(event.data)]
        assert len(broken) == (script.fault == "malformed"), name
        if name == "responses":  # every parsed event numbered in order, from 0
            numbers = [event.json()["sequence_number"] for event in events if is_json(event.data)]
            assert numbers == list(range(len(numbers)))


def test_a_tool_call_is_one_chunk_on_gemini() -> None:
    """Gemini sends a function call whole at the time of the tool phase's last chunk: its chunk
    count and gaps follow from the script (the phase's gaps add up to one)."""
    script = Script(
        first_chunk_delay_s=1.0,
        chunk_count=6,
        reasoning_chunks=2,
        tool_call=True,
        chunk_interval_s=0.5,
        hold_s=0.5,
        silences=(Silence(after_chunk=3, duration_s=4.0),),
    )
    assert chunk_indices(script, "gemini") == (0, 1, 5)
    assert chunk_indices(script) == (0, 1, 2, 3, 4, 5)
    chat = scripted_figures(script, threshold_s=1.0)
    gemini = scripted_figures(script, threshold_s=1.0, wire="gemini")
    assert (chat.chunk_count, gemini.chunk_count) == (6, 3)
    assert chat.stall_count == 1
    assert chat.stall_s == pytest.approx(4.5)
    # gaps on Gemini: 0.5 (thought0 → thought1), then 0.5 + 0.5 + 4.5 + 0.5 → the call
    assert gemini.stall_count == 1
    assert gemini.stall_s == pytest.approx(6.0)
    assert gemini.longest_gap_s == pytest.approx(6.0)
    assert gemini.wall_s == chat.wall_s == pytest.approx(0.5 + 1.0 + 2.5 + 4.0)
    assert chat.ttft_s == gemini.ttft_s == pytest.approx(1.5)
    only_tool = Script(chunk_count=3, tool_call=True, chunk_interval_s=1.0, first_chunk_delay_s=0)
    assert scripted_figures(only_tool, threshold_s=1.0, wire="gemini").ttft_s == pytest.approx(2.0)
    assert scripted_figures(Script(chunk_count=0), threshold_s=1.0).ttft_s is None
    for name in ("responses", "anthropic"):
        assert scripted_figures(script, threshold_s=1.0, wire=name) == chat


# Over HTTP: what each format writes.


@pytest.mark.parametrize("wire", [*WIRE_NAMES, "azure"])
async def test_a_stall_is_measured_on_every_format(client: httpx2.AsyncClient, wire: str) -> None:
    """A meter reading any format's chunk events on arrival counts the scripted chunks and
    finds the scripted stall (a 0.45 s silence against a 0.15 s threshold, cadence 0.01 s)."""
    script = Script(
        chunk_count=6,
        reasoning_chunks=1,
        tool_call=wire in ("gemini", "anthropic"),
        first_chunk_delay_s=10.0,
        chunk_interval_s=10.0,
        silences=(Silence(after_chunk=1, duration_s=450.0, keepalive_every_s=100.0),),
    )
    name = "chat" if wire == "azure" else wire
    received = await read(client, wire, script)
    assert received.status == 200
    arrivals = received.chunk_arrivals(name)
    truth = scripted_figures(script, threshold_s=0.15, time_scale=SCALE, wire=name)
    assert len(arrivals) == truth.chunk_count == len(chunk_indices(script, name))
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert sum(gap > 0.15 for gap in gaps) == truth.stall_count == 1
    assert max(gaps) >= 0.5 * truth.longest_gap_s


@pytest.mark.parametrize(
    ("wire", "pings"),
    [("chat", 4), ("responses", 4), ("anthropic", 4), ("gemini", 0)],
)
async def test_keepalives_in_each_format(client: httpx2.AsyncClient, wire: str, pings: int) -> None:
    """A silence with keepalives sends `: ping` comments on the OpenAI formats, `event: ping`
    on Anthropic (besides the one after message_start) and nothing on Gemini — only inside the
    silence."""
    script = Script(
        chunk_count=4, silences=(Silence(after_chunk=1, duration_s=50.0, keepalive_every_s=10.0),)
    )
    received = await read(client, wire, script)
    marks = [
        "ping" if event is None or event.name == "ping" else "chunk"
        for _, event in received.items
        if event is None or event.name == "ping" or carried(wire, event) is not None
    ]
    chunk_at = [index for index, mark in enumerate(marks) if mark == "chunk"]
    inside = [index for index, mark in enumerate(marks) if mark == "ping" and index > chunk_at[0]]
    assert len(inside) == pings
    assert all(chunk_at[1] < index < chunk_at[2] for index in inside)
    opening = [index for index, mark in enumerate(marks) if mark == "ping" and index < chunk_at[0]]
    assert len(opening) == (1 if wire == "anthropic" else 0)


@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_the_opening_goes_out_before_the_first_chunk_delay(
    client: httpx2.AsyncClient, wire: str
) -> None:
    """With role_chunk each format's opening (chat's role chunk, response.created,
    message_start, Gemini's usage-only response) arrives at once, none of it a chunk; without
    it the Responses and Anthropic openings still come, with the first chunk."""
    delayed = Script(chunk_count=2, first_chunk_delay_s=300.0)
    with_role = await read(client, wire, delayed)
    first_at, first = with_role.items[0]
    assert first is not None
    assert carried(wire, first) is None
    assert with_role.chunk_arrivals(wire)[0] - first_at >= 0.15
    without = await read(client, wire, Script(chunk_count=2, role_chunk=False))
    leading = without.events[0]
    if wire in ("responses", "anthropic"):
        assert leading.name == with_role.events[0].name in ("response.created", "message_start")
        assert [event.name for event in without.events].count(leading.name) == 1
    else:
        assert carried(wire, leading) is not None
    assert len(without.chunks(wire)) == len(with_role.chunks(wire)) == 2


async def test_gemini_without_alt_sse_streams_one_json_array(client: httpx2.AsyncClient) -> None:
    """Without ?alt=sse Gemini's stream is one JSON array of the same responses; a truncated one
    is not JSON."""
    script = Script(chunk_count=3, reasoning_chunks=1)
    sse = await read(client, "gemini", script)
    body = request("gemini")[1]
    path = "/v1beta/models/sim-model:streamGenerateContent"
    whole = await client.post(path, json=body, headers=header(script))
    assert whole.headers["content-type"].startswith("application/json")
    assert [_anonymous(item) for item in whole.json()] == [
        _anonymous(event.json()) for event in sse.events
    ]
    cut = await client.post(
        path,
        json=body,
        headers=header(Script(chunk_count=3, fault="truncate", fault_after_chunk=1)),
    )
    assert cut.text.startswith("[")
    assert not is_json(cut.text)


def _anonymous(response: dict[str, Any]) -> dict[str, Any]:
    """A Gemini response without its id (each request has its own)."""
    return {key: value for key, value in response.items() if key != "responseId"}


@pytest.mark.parametrize("wire", [*WIRE_NAMES, "azure"])
async def test_selection_on_every_format(wire: str) -> None:
    """Header beats body beats registered model (the URL's for Gemini and Azure) beats preset
    beats the default, on every route."""
    scripts = {"custom": Script(chunk_count=3)}
    name = "chat" if wire == "azure" else wire
    async with (
        SimulatedProvider(scripts=scripts, default=Script(chunk_count=2), time_scale=SCALE) as sim,
        httpx2.AsyncClient(base_url=sim.url, timeout=10.0) as http,
    ):

        async def answer(model: str, script: Script | None = None, **extra: Any) -> tuple[int, str]:
            received = await read(http, wire, script, model=model, **extra)
            return len(received.chunks(name)), received.headers[ORIGIN_HEADER]

        assert await answer("custom", Script(chunk_count=7), sim={"chunk_count": 5}) == (
            7,
            "header",
        )
        assert await answer("custom", sim={"chunk_count": 5}) == (5, "body")
        assert await answer("custom") == (3, "model")
        assert await answer("smooth") == (40, "preset")
        assert await answer("anything") == (2, "default")
    assert sim.stats.requests_by_model == {"custom": 3, "smooth": 1, "anything": 1}


@pytest.mark.parametrize(
    ("wire", "body", "reason"),
    [
        ("responses", {"model": "m"}, "'input' must be"),
        ("anthropic", {"model": "m", "messages": MESSAGES}, "max_tokens"),
        ("anthropic", {"model": "m", "max_tokens": 5}, "messages"),
        ("gemini", {}, "'contents' must be"),
        ("azure", {"stream": True}, "'messages' must be"),
    ],
)
async def test_bad_requests_are_answered_in_the_format_s_shape(
    client: httpx2.AsyncClient, wire: str, body: dict[str, Any], reason: str
) -> None:
    """A request the format rejects is a 400 in that format's error shape, naming the field."""
    path = request(wire)[0]
    response = await client.post(path, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert reason in error["message"]
    if wire == "anthropic":
        assert response.json()["type"] == "error"
        assert error["type"] == "invalid_request_error"
    if wire == "gemini":
        assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    invalid = await client.post(path, json=request(wire)[1], headers={SCRIPT_HEADER: '{"nope": 1}'})
    assert invalid.status_code == 400
    assert "nope: Extra inputs" in invalid.json()["error"]["message"]


@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_non_streamed_answers_carry_the_same_words(
    client: httpx2.AsyncClient, wire: str
) -> None:
    """A non-streamed answer on each format carries the streamed text and the reasoning."""
    script = Script(chunk_count=5, reasoning_chunks=2, words_per_chunk=2)
    path, body = request(wire, stream=False)
    answer = (await client.post(path, json=body, headers=header(script))).json()
    text, thought = words("word", 6), words("thought", 4)
    if wire == "chat":
        message = answer["choices"][0]["message"]
        assert (message["content"], message["reasoning_content"]) == (text, thought)
    elif wire == "responses":
        reasoning, message = answer["output"]
        assert reasoning["summary"][0]["text"] == thought
        assert message["content"][0]["text"] == text
    elif wire == "anthropic":
        thinking, block = answer["content"]
        assert (thinking["thinking"], block["text"]) == (thought, text)
    else:
        parts = answer["candidates"][0]["content"]["parts"]
        assert parts == [{"text": thought, "thought": True}, {"text": text}]


@pytest.mark.parametrize("wire", ["responses", "anthropic", "gemini"])
async def test_a_non_streamed_error_fault_is_the_format_s_error(
    client: httpx2.AsyncClient, wire: str
) -> None:
    """The error fault on a non-streamed request answers fault_status with the format's body."""
    script = Script(chunk_count=2, fault="error", fault_status=529, fault_after_chunk=0)
    path, body = request(wire, stream=False)
    response = await client.post(path, json=body, headers=header(script))
    assert response.status_code == 529
    error = response.json()["error"]
    expected = {"responses": "server_error", "anthropic": "overloaded_error", "gemini": "INTERNAL"}
    assert error.get("type", error.get("status")) == expected[wire]


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON value."""

FIELDS = st.sampled_from(
    [
        "model",
        "messages",
        "input",
        "contents",
        "max_tokens",
        "stream",
        "sim",
        "sim_key",
        "system",
        "instructions",
        "systemInstruction",
        "stream_options",
    ]
)


@pytest.fixture(scope="module")
def threaded_sim() -> Iterator[ThreadedProvider]:
    with SimulatedProvider.start_in_thread(time_scale=1e-5) as running:
        yield running


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    wire=st.sampled_from([*WIRE_NAMES, "azure"]),
    fields=st.dictionaries(FIELDS, JSON, max_size=6),
    stream=st.booleans(),
)
def test_hostile_bodies_are_answered_never_crash(
    threaded_sim: ThreadedProvider, wire: str, fields: dict[str, Any], stream: bool
) -> None:
    """Any JSON body on any route is answered (200, or a 400 in the format's shape): the
    simulator never fails on what a client sends."""
    path, body = request(wire, stream=stream)
    with httpx2.Client(base_url=threaded_sim.url, timeout=10.0) as http:
        answer = http.post(path, json={**body, **fields})
    assert answer.status_code in (200, 400), answer.text
    if answer.status_code == 400:
        assert answer.json()["error"]["message"]
    assert threaded_sim.stats.outcomes.get("failed", 0) == 0


def _sdk_types(wire: str) -> tuple[TypeAdapter[Any], TypeAdapter[Any]]:
    """The SDK's own types of a streamed event and of a complete answer on ``wire``."""
    if wire == "chat":
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        return TypeAdapter(ChatCompletionChunk), TypeAdapter(ChatCompletion)
    if wire == "responses":
        from openai.types.responses import Response, ResponseStreamEvent

        return TypeAdapter(ResponseStreamEvent), TypeAdapter(Response)
    if wire == "anthropic":
        from anthropic.types import Message, RawMessageStreamEvent

        return TypeAdapter(RawMessageStreamEvent), TypeAdapter(Message)
    from google.genai.types import GenerateContentResponse

    return TypeAdapter(GenerateContentResponse), TypeAdapter(GenerateContentResponse)


SDK_SHAPED = [
    Script(chunk_count=3),
    Script(chunk_count=4, reasoning_chunks=2, usage=False),
    Script(chunk_count=4, reasoning_chunks=2, responses_reasoning="text"),
    Script(chunk_count=4, reasoning_chunks=1, tool_call=True),
    Script(chunk_count=3, refusal=True, finish_reason="content_filter"),
    Script(chunk_count=3, finish_reason="length", role_chunk=False),
    Script(chunk_count=0),
]
"""Scripts whose every event has a type in each SDK (the standard finish reasons, no
fault: an error event is each SDK's error, not a stream event)."""


@pytest.mark.parametrize("wire", WIRE_NAMES)
@pytest.mark.parametrize("script", SDK_SHAPED, ids=range(len(SDK_SHAPED)))
def test_every_event_and_answer_validates_against_the_sdk_s_own_types(
    wire: str, script: Script
) -> None:
    """Each streamed event (but Anthropic's ping, which its SDK reads apart) and each complete
    answer passes validation by the SDK's generated types: the fields the API documents as
    always present are there, with their types (the SDKs build their objects without
    validating, so a missing field reads as None in an application, not as an error)."""
    event_type, answer_type = _sdk_types(wire)
    server = WIRES[wire]
    reply = Reply(id="x_sim000001", created=0, model="m", prompt_tokens=3, include_usage=True)
    for timed in plan_events(server.plan(script, reply)):
        if timed.event.name != "ping" and timed.event.data != "[DONE]":
            event_type.validate_python(timed.event.json())
    answer_type.validate_python(server.answer(script, reply))
