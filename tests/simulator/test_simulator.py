"""The simulated provider, driven over real loopback HTTP (``otel_llm/simulator``)."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import math
import random
import re
import statistics
import struct
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import pytest
from aiohttp import web
from pydantic import ValidationError

from otel_llm import simulator
from otel_llm._errors import ConfigurationError
from otel_llm._measure._chunks import is_incremental
from otel_llm.simulator import (
    MAX_WAIT_S,
    ORIGIN_HEADER,
    PRESETS,
    SCRIPT_HEADER,
    SCRIPT_KEY_FIELD,
    Script,
    Silence,
    SimulatedProvider,
    create_app,
    measured,
    oracle,
    sample_measured,
    scripted_figures,
    serve,
)
from otel_llm.simulator._frames import Pause
from otel_llm.simulator._provider import is_loopback

SCALE = 0.001
"""Scripted seconds run a thousand times faster: a scripted 100 s silence takes 0.1 s."""

MESSAGES = [{"role": "user", "content": "say something"}]


@pytest.fixture
async def provider() -> AsyncIterator[SimulatedProvider]:
    async with SimulatedProvider(time_scale=SCALE) as running:
        yield running


@pytest.fixture
async def client(provider: SimulatedProvider) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(base_url=provider.base_url, timeout=10.0) as http:
        yield http


def header(script: Script) -> dict[str, str]:
    return {SCRIPT_HEADER: script.model_dump_json()}


def chat(*, stream: bool = True, usage: bool = False, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "sim-model", "messages": MESSAGES, "stream": stream}
    if usage:
        body["stream_options"] = {"include_usage": True}
    body.update(extra)
    return body


@dataclass
class Received:
    """The non-empty lines of one streamed answer and when each arrived."""

    status: int
    headers: Mapping[str, str]
    lines: list[str] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)

    @property
    def payloads(self) -> list[dict[str, Any]]:
        """Every ``data:`` payload that is JSON, in order ([DONE] excluded)."""
        return [json.loads(data) for data in self.data if data != "[DONE]" and _is_json(data)]

    @property
    def data(self) -> list[str]:
        return [line.removeprefix("data: ") for line in self.lines if line.startswith("data: ")]

    @property
    def chunks(self) -> list[dict[str, Any]]:
        """The incremental chunks, classified by the SDK's own rule."""
        return [payload for payload in self.payloads if is_incremental(payload)]

    @property
    def deltas(self) -> list[dict[str, Any]]:
        return [chunk["choices"][0]["delta"] for chunk in self.chunks]

    def chunk_arrivals(self) -> list[float]:
        return [
            at
            for line, at in zip(self.lines, self.arrivals, strict=True)
            if line.startswith("data: ")
            and _is_json(line[6:])
            and line != "data: [DONE]"
            and is_incremental(json.loads(line[6:]))
        ]


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


async def read_stream(
    client: httpx2.AsyncClient,
    script: Script | None = None,
    *,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Received:
    request_headers = dict(headers or {})
    if script is not None:
        request_headers.update(header(script))
    async with client.stream(
        "POST", "/chat/completions", json=body or chat(), headers=request_headers
    ) as response:
        received = Received(response.status_code, response.headers)
        async for line in response.aiter_lines():
            if line:
                received.lines.append(line)
                received.arrivals.append(time.monotonic())
    return received


async def post_chat(
    client: httpx2.AsyncClient, script: Script, *, stream: bool = False
) -> httpx2.Response:
    return await client.post("/chat/completions", json=chat(stream=stream), headers=header(script))


def words(stem: str, count: int) -> str:
    return " ".join(f"{stem}{k}" for k in range(count))


# Streams.


async def test_stream_sends_the_scripted_chunks_in_order(client: httpx2.AsyncClient) -> None:
    """A stream carries chunk_count chunks of deterministic text, then stop and [DONE]."""
    received = await read_stream(client, Script(chunk_count=5, words_per_chunk=2))
    assert received.status == 200
    assert received.headers["content-type"].startswith("text/event-stream")
    assert len(received.chunks) == 5
    assert "".join(delta["content"] for delta in received.deltas) == words("word", 10)
    assert {chunk["object"] for chunk in received.payloads} == {"chat.completion.chunk"}
    assert len({chunk["id"] for chunk in received.payloads}) == 1
    assert received.payloads[-1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "finish_reason": "stop",
    }
    assert received.data[-1] == "[DONE]"


async def test_silence_is_the_longest_gap_between_chunks(client: httpx2.AsyncClient) -> None:
    """A scripted silence after chunk 2 is the longest gap; the cadence elsewhere is short."""
    script = Script(
        chunk_count=6, chunk_interval_s=1.0, silences=(Silence(after_chunk=2, duration_s=250.0),)
    )
    arrivals = (await read_stream(client, script)).chunk_arrivals()
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert len(gaps) == 5
    assert max(range(5), key=gaps.__getitem__) == 2
    assert gaps[2] >= 0.5 * 250.0 * SCALE


async def test_a_late_write_never_shortens_the_silence_after_it(
    client: httpx2.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pause runs from the previous write's actual end: when the chunk before a silence is
    written 150 ms late (a loaded machine), the silence after it is still whole."""
    writes: list[tuple[float, bytes]] = []
    original = web.StreamResponse.write

    async def late_write(self: web.StreamResponse, data: bytes | bytearray | memoryview) -> None:
        if b"word2" in bytes(data):
            await asyncio.sleep(0.15)
        await original(self, data)
        writes.append((time.monotonic(), bytes(data)))

    monkeypatch.setattr(web.StreamResponse, "write", late_write)
    silence_s = 0.2
    script = Script(
        chunk_count=5,
        chunk_interval_s=0.0,
        first_chunk_delay_s=0.0,
        silences=(Silence(after_chunk=2, duration_s=silence_s / SCALE),),
    )
    await read_stream(client, script)
    times = {
        json.loads(data[6:])["choices"][0]["delta"]["content"].strip(): at
        for at, data in writes
        if b'"content"' in data
    }
    assert times["word3"] - times["word2"] >= silence_s


async def test_a_late_write_is_caught_up_by_the_cadence_after_it(
    client: httpx2.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cadence pauses run on the stream's timeline: a chunk written 0.5 s late does not push
    the chunks after it back by 0.5 s (the stream is not stretched by a busy moment)."""
    writes: list[tuple[float, bytes]] = []
    original = web.StreamResponse.write

    async def late_write(self: web.StreamResponse, data: bytes | bytearray | memoryview) -> None:
        if b"word1" in bytes(data):
            await asyncio.sleep(0.5)
        await original(self, data)
        writes.append((time.monotonic(), bytes(data)))

    monkeypatch.setattr(web.StreamResponse, "write", late_write)
    interval_s = 0.1
    script = Script(chunk_count=8, chunk_interval_s=interval_s / SCALE, first_chunk_delay_s=0.0)
    await read_stream(client, script)
    times = [at for at, data in writes if b'"content"' in data]
    assert len(times) == 8
    # on the timeline the last chunk is due 0.7 s after the first; pushed back it would be
    # 1.2 s at the earliest, so 1.1 leaves a loaded machine 0.4 s of lateness
    assert times[-1] - times[0] < 1.1
    assert times[1] - times[0] >= 0.5


async def test_keyed_draws_do_not_depend_on_arrival_order() -> None:
    """With sim_key, a preset's draw depends on the seed, the key and how often the key came
    before, not on arrival order; the server keeps each script by answer id and by key."""
    keys = [f"call-{n}" for n in range(6)]

    async def draw(order: list[str]) -> tuple[dict[str, list[Script]], dict[str, str]]:
        async with (
            SimulatedProvider(time_scale=1e-5, seed=5) as running,
            httpx2.AsyncClient(base_url=running.base_url, timeout=10.0) as http,
        ):
            answers = await asyncio.gather(
                *(
                    http.post(
                        "/chat/completions",
                        json=chat(stream=False, model="measured", **{SCRIPT_KEY_FIELD: key}),
                    )
                    for key in order
                )
            )
            ids = {key: answer.json()["id"] for key, answer in zip(order, answers, strict=True)}
            again = await http.post(
                "/chat/completions",
                json=chat(stream=False, model="measured", **{SCRIPT_KEY_FIELD: keys[0]}),
            )
            assert again.status_code == 200
            by_key = {key: list(running.stats.scripts_for(key)) for key in keys}
            assert all(running.stats.script_of(ids[key]) == by_key[key][0] for key in keys)
            return by_key, ids

    forward, _ = await draw(keys)
    backward, _ = await draw(list(reversed(keys)))
    assert forward == backward
    for key in keys:
        assert forward[key][0] == sample_measured(random.Random(f"5/{key}/0"))
    assert forward[keys[0]][1] == sample_measured(random.Random(f"5/{keys[0]}/1"))
    assert len({script.model_dump_json() for script in forward.values() for script in script}) > 1


async def test_a_draw_key_must_be_text(client: httpx2.AsyncClient) -> None:
    """A sim_key that is not text of 1 to 200 characters is a 400 naming the field."""
    for key in (3, "", "k" * 201):
        answer = await client.post(
            "/chat/completions", json=chat(model="measured", **{SCRIPT_KEY_FIELD: key})
        )
        assert answer.status_code == 400
        assert SCRIPT_KEY_FIELD in answer.json()["error"]["message"]


def test_scripted_figures_follow_the_script() -> None:
    """The ground truth: gaps are the cadence plus the silences after a chunk; a gap equal to
    the threshold is no stall; a tail silence adds wall time, not a gap; gaps within the band
    are counted apart."""
    script = Script(
        first_chunk_delay_s=0.5,
        chunk_count=5,
        chunk_interval_s=0.1,
        hold_s=0.2,
        silences=(
            Silence(after_chunk=1, duration_s=1.0),
            Silence(after_chunk=1, duration_s=0.5),
            Silence(after_chunk=2, duration_s=0.9),
            Silence(after_chunk=4, duration_s=3.0),
        ),
    )
    # gaps: 0.1, 1.6, 1.0, 0.1; wall 0.2 + 0.5 + 2.8 + 3.0 (tail)
    figures = scripted_figures(script, threshold_s=1.0)
    assert figures.stall_count == 1
    assert figures.stall_s == pytest.approx(1.6)
    assert figures.longest_gap_s == pytest.approx(1.6)
    assert figures.wall_s == pytest.approx(6.5)
    assert figures.near_count == 0
    assert figures.stall_count_range == (1, 1)
    banded = scripted_figures(script, threshold_s=1.0, band_s=0.05)
    assert (banded.near_count, banded.near_stall_count) == (1, 0)
    assert banded.stall_count_range == (1, 2)
    assert scripted_figures(script, threshold_s=0.99, band_s=0.05).stall_count_range == (1, 2)
    scaled = scripted_figures(script, threshold_s=0.5, time_scale=0.5)
    assert (scaled.stall_count, scaled.stall_s) == (1, pytest.approx(0.8))
    assert scaled.wall_s == pytest.approx(3.25)
    capped = scripted_figures(
        Script(chunk_count=2, silences=(Silence(after_chunk=0, duration_s=10 * MAX_WAIT_S),)),
        threshold_s=1.0,
    )
    assert capped.longest_gap_s == pytest.approx(MAX_WAIT_S + 0.02)
    assert scripted_figures(Script(chunk_count=1), threshold_s=1.0).longest_gap_s == 0.0


@pytest.mark.parametrize(
    ("faulty", "chunks", "stalls", "wall_s"),
    [
        ({"fault": "truncate", "fault_after_chunk": 2}, 3, 0, 0.5 + 2 * 0.1),
        ({"fault": "error", "fault_after_chunk": 3}, 4, 0, 0.5 + 3 * 0.1),
        ({"fault": "reset", "fault_after_chunk": 6}, 7, 1, 0.5 + 6 * 0.1 + 3.0),
        ({"fault": "reset", "fault_after_chunk": -1}, 0, None, 0.5),
        ({"fault": "malformed", "fault_after_chunk": 2}, 10, 1, 0.5 + 9 * 0.1 + 3.0),
        ({"error_status": 429, "hold_s": 0.25}, 0, None, 0.25),
    ],
)
def test_scripted_figures_end_where_a_fault_ends_the_stream(
    faulty: dict[str, Any], chunks: int, stalls: int | None, wall_s: float
) -> None:
    """A stream cut by a fault (truncate, error, reset) is the truth up to the chunk the fault
    follows, its later silences never sent; a malformed line cuts nothing; an error answer has
    no chunk (its wall time is the hold)."""
    script = Script(
        first_chunk_delay_s=0.5,
        chunk_count=10,
        chunk_interval_s=0.1,
        silences=(Silence(after_chunk=4, duration_s=3.0),),
        **faulty,
    )
    figures = scripted_figures(script, threshold_s=1.0)
    assert figures.chunk_count == chunks
    assert figures.ttft_s == (None if not chunks else pytest.approx(0.5 + faulty.get("hold_s", 0)))
    if stalls is not None:
        assert figures.stall_count == stalls
    else:
        assert (figures.stall_count, figures.longest_gap_s) == (0, 0.0)
    assert figures.wall_s == pytest.approx(wall_s)


async def test_role_chunk_comes_first_and_is_not_a_chunk(client: httpx2.AsyncClient) -> None:
    """The role-only chunk is the first event and carries no output; it can be switched off."""
    with_role = await read_stream(client, Script(chunk_count=2))
    first = with_role.payloads[0]
    assert first["choices"][0]["delta"] == {"role": "assistant"}
    assert not is_incremental(first)
    without = await read_stream(client, Script(chunk_count=2, role_chunk=False))
    assert is_incremental(without.payloads[0])
    assert len(without.chunks) == len(with_role.chunks) == 2


async def test_keepalives_are_sent_during_a_silence(client: httpx2.AsyncClient) -> None:
    """A silence with keepalive_every_s sends `: ping` comments between the two chunks only."""
    script = Script(
        chunk_count=4,
        silences=(Silence(after_chunk=1, duration_s=50.0, keepalive_every_s=10.0),),
    )
    lines = (await read_stream(client, script)).lines
    pings = [index for index, line in enumerate(lines) if line == ": ping"]
    chunk_lines = [index for index, line in enumerate(lines) if "word" in line]
    assert len(pings) == 4
    assert all(chunk_lines[1] < index < chunk_lines[2] for index in pings)


async def test_keepalives_stop_at_the_end_of_a_capped_silence(
    client: httpx2.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A silence cut to MAX_WAIT_S sends only the pings that fit in it, none after its end."""
    monkeypatch.setattr("otel_llm.simulator._server.MAX_WAIT_S", 0.05)
    script = Script(  # 200 s with a ping every 20 s: 0.2 s real, capped to 0.05 s
        chunk_count=3,
        silences=(Silence(after_chunk=0, duration_s=200.0, keepalive_every_s=20.0),),
    )
    lines = (await read_stream(client, script)).lines
    assert lines.count(": ping") == 2  # at 0.02 s and 0.04 s; 0.06 s is past the end


@pytest.mark.parametrize(
    ("seconds", "every", "pings"),
    [(50.0, 10.0, 4), (55.0, 10.0, 5), (0.3, 0.1, 2), (0.7, 0.1, 6), (5.0, 10.0, 0), (0.0, 1.0, 0)],
)
def test_keepalive_count_is_exact_at_the_end_of_a_silence(
    seconds: float, every: float, pings: int
) -> None:
    """Pings go at every multiple of the period strictly before the silence ends; a multiple
    that equals the end only up to float rounding sends none (no extra ping at the boundary)."""
    assert Pause(seconds, every).keepalive_count() == pings
    assert Pause(seconds).keepalive_count() == 0


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_reasoning_phase_comes_first(client: httpx2.AsyncClient, key: str) -> None:
    """The first reasoning_chunks chunks carry only reasoning under the chosen key, then content."""
    script = Script.model_validate({"chunk_count": 5, "reasoning_chunks": 3, "reasoning_key": key})
    received = await read_stream(client, script)
    deltas = received.deltas
    assert [set(delta) for delta in deltas] == [{key}] * 3 + [{"content"}] * 2
    assert "".join(delta[key] for delta in deltas[:3]) == words("thought", 3)
    assert "".join(delta["content"] for delta in deltas[3:]) == words("word", 2)


async def test_tool_call_streams_as_deltas(client: httpx2.AsyncClient) -> None:
    """A tool call arrives as id/name first, then argument pieces, with finish_reason tool_calls."""
    received = await read_stream(client, Script(chunk_count=4, tool_call=True))
    calls = [delta["tool_calls"][0] for delta in received.deltas]
    assert len(calls) == 4
    assert calls[0]["id"].startswith("call_")
    assert calls[0]["function"]["name"] == "lookup"
    assert all("id" not in call and "name" not in call["function"] for call in calls[1:])
    arguments = "".join(call["function"]["arguments"] for call in calls)
    assert json.loads(arguments) == {"query": words("arg", 4)}
    assert received.payloads[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_usage_frame_only_when_asked_for(client: httpx2.AsyncClient) -> None:
    """include_usage adds a usage-only frame before [DONE]; without it, or usage=False, none."""
    script = Script(chunk_count=4, reasoning_chunks=1, words_per_chunk=2)
    asked = await read_stream(client, script, body=chat(usage=True))
    frame = asked.payloads[-1]
    assert frame["choices"] == []
    assert frame["usage"] == {
        "prompt_tokens": 2,
        "completion_tokens": 8,
        "total_tokens": 10,
        "completion_tokens_details": {"reasoning_tokens": 2},
    }
    assert asked.data[-1] == "[DONE]"
    for received in (
        await read_stream(client, script),
        await read_stream(client, Script(usage=False), body=chat(usage=True)),
    ):
        assert all("usage" not in payload for payload in received.payloads)


async def test_model_name_defaults_to_the_requested_model(client: httpx2.AsyncClient) -> None:
    """Chunks report the requested model unless the script names another."""
    echoed = await read_stream(client, Script(chunk_count=1))
    renamed = await read_stream(client, Script(chunk_count=1, model_name="gpt-sim-2"))
    assert {payload["model"] for payload in echoed.payloads} == {"sim-model"}
    assert {payload["model"] for payload in renamed.payloads} == {"gpt-sim-2"}


# Faults.


async def test_reset_fault_is_a_connection_error(
    client: httpx2.AsyncClient, provider: SimulatedProvider
) -> None:
    """A reset fault aborts the TCP connection: the client sees a transport error."""
    with pytest.raises(httpx2.TransportError):
        await read_stream(client, Script(chunk_count=5, fault="reset", fault_after_chunk=1))
    assert provider.stats.aborted == 1
    assert provider.stats.disconnected == 0


async def test_truncate_fault_ends_without_finish_or_done(client: httpx2.AsyncClient) -> None:
    """A truncate fault ends the response cleanly, without finish_reason or [DONE]."""
    received = await read_stream(
        client, Script(chunk_count=5, fault="truncate", fault_after_chunk=2)
    )
    assert len(received.chunks) == 3
    assert "[DONE]" not in received.data
    assert all(payload["choices"][0]["finish_reason"] is None for payload in received.payloads)


async def test_malformed_fault_sends_one_non_json_line(client: httpx2.AsyncClient) -> None:
    """A malformed fault sends one data line that is not JSON, then the stream carries on."""
    received = await read_stream(
        client, Script(chunk_count=4, fault="malformed", fault_after_chunk=1)
    )
    broken = [data for data in received.data if data != "[DONE]" and not _is_json(data)]
    assert len(broken) == 1
    assert received.data.index(broken[0]) == 3  # role, chunk 0, chunk 1, then the broken line
    assert len(received.chunks) == 4
    assert received.data[-1] == "[DONE]"


async def test_missing_done(client: httpx2.AsyncClient) -> None:
    """done=False keeps the finish reason but ends the stream cleanly without [DONE]."""
    received = await read_stream(client, Script(chunk_count=3, done=False), body=chat(usage=True))
    assert "[DONE]" not in received.data
    reasons = [payload["choices"][0]["finish_reason"] for payload in received.payloads[:-1]]
    assert reasons[-1] == "stop"
    assert received.payloads[-1]["choices"] == []


# Errors and holds.


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("status", "code", "kind", "retry_after", "retry_after_ms"),
    [
        (429, "rate_limit_exceeded", "rate_limit_error", "7", "1500"),
        (429, None, "rate_limit_error", "Wed, 21 Oct 2015 07:28:00 GMT", None),
        (500, None, "server_error", None, None),
        (503, "overloaded", "server_error", "2", None),
        (400, "context_length_exceeded", "invalid_request_error", None, None),
        (401, "invalid_api_key", "authentication_error", None, None),
    ],
)
async def test_error_answers(
    client: httpx2.AsyncClient,
    stream: bool,
    status: int,
    code: str | None,
    kind: str,
    retry_after: str | None,
    retry_after_ms: str | None,
) -> None:
    """An error script answers its status with an OpenAI error body and the Retry-After headers."""
    script = Script(
        error_status=status,
        error_code=code,
        error_message=f"scripted {status}",
        retry_after=retry_after,
        retry_after_ms=retry_after_ms,
    )
    response = await post_chat(client, script, stream=stream)
    assert response.status_code == status
    expected = {"message": f"scripted {status}", "type": kind, "code": code}
    assert response.json() == {"error": expected}
    assert response.headers.get("retry-after") == retry_after
    assert response.headers.get("retry-after-ms") == retry_after_ms


async def test_hold_delays_the_answer(client: httpx2.AsyncClient) -> None:
    """hold_s holds the request before it is answered at all, error or not."""
    for script in (Script(hold_s=200.0, error_status=429), Script(hold_s=200.0, chunk_count=1)):
        started = time.monotonic()
        response = await post_chat(client, script)
        assert time.monotonic() - started >= 0.5 * 200.0 * SCALE
        assert response.status_code == (script.error_status or 200)


# Non-streamed answers, embeddings, models.


async def test_non_streamed_completion(client: httpx2.AsyncClient) -> None:
    """A non-streamed request gets one chat.completion with the streamed text and usage."""
    script = Script(chunk_count=3, words_per_chunk=2)
    response = await post_chat(client, script)
    answer = response.json()
    assert response.status_code == 200
    assert answer["object"] == "chat.completion"
    choice = answer["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": words("word", 6)}
    assert choice["finish_reason"] == "stop"
    assert answer["usage"]["completion_tokens"] == 6
    streamed = await read_stream(client, script)
    assert "".join(delta["content"] for delta in streamed.deltas) == choice["message"]["content"]


async def test_non_streamed_reasoning_and_tool_call(client: httpx2.AsyncClient) -> None:
    """A non-streamed answer carries reasoning and the whole tool call when scripted."""
    script = Script(chunk_count=4, reasoning_chunks=2, tool_call=True)
    response = await post_chat(client, script)
    answer = response.json()
    message = answer["choices"][0]["message"]
    assert message["content"] is None
    assert message["reasoning_content"] == words("thought", 2)
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == "lookup"
    assert json.loads(call["function"]["arguments"]) == {"query": words("arg", 2)}
    assert answer["choices"][0]["finish_reason"] == "tool_calls"
    assert answer["usage"]["completion_tokens_details"] == {"reasoning_tokens": 2}


async def test_non_streamed_faults(client: httpx2.AsyncClient) -> None:
    """Without streaming, reset aborts the connection and truncate sends a body that is not JSON."""
    with pytest.raises(httpx2.TransportError):
        await post_chat(client, Script(fault="reset"))
    response = await post_chat(client, Script(fault="truncate"))
    assert response.status_code == 200
    assert not _is_json(response.text)


async def test_embeddings_are_deterministic_unit_vectors(client: httpx2.AsyncClient) -> None:
    """Embeddings are hash-derived unit vectors: same input same vector, float and base64 agree."""
    body = {"model": "embed-sim", "input": ["alpha", "beta"], "dimensions": 16}
    first = (await client.post("/embeddings", json=body)).json()
    again = (await client.post("/embeddings", json=body)).json()
    packed = (await client.post("/embeddings", json={**body, "encoding_format": "base64"})).json()
    alpha, beta = (item["embedding"] for item in first["data"])
    assert first == again
    assert len(alpha) == 16
    assert alpha != beta
    assert math.isclose(math.fsum(value * value for value in alpha), 1.0)
    decoded = struct.unpack("<16f", base64.b64decode(packed["data"][0]["embedding"]))
    assert decoded == pytest.approx(alpha, abs=1e-6)
    bad = await client.post("/embeddings", json={"model": "embed-sim", "input": 3})
    assert bad.status_code == 400
    assert "'input'" in bad.json()["error"]["message"]


async def test_models_and_health(client: httpx2.AsyncClient) -> None:
    """/v1/models lists the presets and /health answers ok."""
    models = (await client.get("/models")).json()
    assert {"measured", "oracle", "smooth", "stall"} <= {model["id"] for model in models["data"]}
    health = await client.get(str(client.base_url).removesuffix("/v1/") + "/health")
    assert health.json() == {"status": "ok"}


# Script selection.


async def test_invalid_scripts_are_rejected_with_the_reason(client: httpx2.AsyncClient) -> None:
    """Bad scripts and requests get HTTP 400 with a message naming the problem."""
    cases: list[tuple[dict[str, Any], dict[str, str], str]] = [
        (chat(), {SCRIPT_HEADER: '{"chunk_countt": 3}'}, "chunk_countt: Extra inputs"),
        (chat(), {SCRIPT_HEADER: '{"chunk_count": 3'}, f"invalid script in {SCRIPT_HEADER}"),
        (chat(), {SCRIPT_HEADER: "no-such-preset"}, "unknown script 'no-such-preset'"),
        (chat(sim={"chunk_count": -1}), {}, "chunk_count: Input should be greater than"),
        (chat(sim=[1]), {}, "must be a JSON object script or a script name"),
        (
            chat(sim={"chunk_count": 2, "silences": [{"after_chunk": 5, "duration_s": 1}]}),
            {},
            "after_chunk=5",
        ),
        ({"messages": MESSAGES}, {}, "'model' must be"),
        ({"model": "m"}, {}, "'messages' must be a list"),
    ]
    for body, headers, reason in cases:
        response = await client.post("/chat/completions", json=body, headers=headers)
        assert response.status_code == 400, reason
        assert reason in response.json()["error"]["message"]
    broken = await client.post("/chat/completions", content=b"{not json")
    assert broken.status_code == 400
    assert "not JSON" in broken.json()["error"]["message"]


async def test_selection_order() -> None:
    """Header beats body beats registered model beats preset beats the default."""
    scripts = {"custom": Script(chunk_count=3), "smooth": Script(chunk_count=4)}
    default = Script(chunk_count=2)
    async with (
        SimulatedProvider(scripts=scripts, default=default, time_scale=SCALE) as running,
        httpx2.AsyncClient(base_url=running.base_url) as http,
    ):

        async def answer(
            model: str, *, sim: Any = None, script: Script | None = None
        ) -> tuple[int, str]:
            body = chat(stream=False, model=model)
            if sim is not None:
                body["sim"] = sim
            response = await http.post(
                "/chat/completions", json=body, headers=header(script) if script else {}
            )
            return response.json()["usage"]["completion_tokens"], response.headers[ORIGIN_HEADER]

        five = {"chunk_count": 5}
        assert await answer("custom", sim=five, script=Script(chunk_count=7)) == (7, "header")
        assert await answer("custom", sim=five) == (5, "body")
        assert await answer("custom", sim="smooth") == (4, "body")
        assert await answer("custom") == (3, "model")
        assert await answer("smooth") == (4, "model")  # a registered name shadows the preset
        assert await answer("reasoning") == (60, "preset")
        assert await answer("anything-else") == (2, "default")
    assert running.stats.requests_by_model == {
        "custom": 4,
        "smooth": 1,
        "reasoning": 1,
        "anything-else": 1,
    }


async def test_measured_preset_draws_a_fresh_script_per_request() -> None:
    """Model `measured` samples a new call per request from the seeded generator."""
    async with (
        SimulatedProvider(time_scale=1e-5, seed=7) as running,
        httpx2.AsyncClient(base_url=running.base_url) as http,
    ):
        sizes = []
        for _ in range(3):
            response = await http.post(
                "/chat/completions", json=chat(stream=False, model="measured")
            )
            sizes.append(response.json()["usage"]["completion_tokens"])
    rng = random.Random(7)
    assert sizes == [sample_measured(rng).chunk_count for _ in range(3)]


# Stats.


async def test_client_disconnect_is_counted_promptly(
    client: httpx2.AsyncClient, provider: SimulatedProvider
) -> None:
    """Closing a stream during a silence cancels the server's handler and counts a disconnect."""
    script = Script(chunk_count=3, silences=(Silence(after_chunk=0, duration_s=100_000.0),))
    async with client.stream(
        "POST", "/chat/completions", json=chat(), headers=header(script)
    ) as response:
        async for line in response.aiter_lines():
            if "word0" in line:
                assert provider.stats.in_flight == 1
                break
    async with asyncio.timeout(10):
        await provider.stats.wait_for_disconnects(1)
    assert provider.stats.in_flight == 0
    assert provider.stats.completed == 0


async def test_wait_for_requests_wakes_on_a_started_request(
    client: httpx2.AsyncClient, provider: SimulatedProvider
) -> None:
    """wait_for_requests returns once a request has started, while it is still being answered."""
    request = asyncio.create_task(post_chat(client, Script(hold_s=1e5)))
    await provider.stats.wait_for_requests(1)
    assert provider.stats.requests_by_model == {"sim-model": 1}
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    async with asyncio.timeout(10):
        await provider.stats.wait_for_disconnects(1)


# The measured distribution.


def _figures(scripts: list[Script]) -> dict[str, float]:
    slow = [script for script in scripts if script.longest_gap_silence_s > 20.0]
    silence = [script.silence_s for script in scripts]
    return {
        "median_ttfc_s": statistics.median(script.first_chunk_delay_s for script in scripts),
        "first_chunk_over_20s": sum(script.first_chunk_delay_s > 20.0 for script in scripts),
        "stalled_share": len(slow) / len(scripts),
        "slow_median_wall_s": statistics.median(script.nominal_duration_s for script in slow),
        "slow_median_longest_silence_s": statistics.median(
            script.longest_gap_silence_s for script in slow
        ),
        "silence_share": math.fsum(silence)
        / math.fsum(script.nominal_duration_s for script in scripts),
        "r_silence_chunks": statistics.correlation(
            silence, [float(script.chunk_count) for script in scripts]
        ),
        "reasoning_share": sum(script.reasoning_chunks > 0 for script in scripts) / len(scripts),
    }


def test_measured_sampler_reproduces_the_measured_figures() -> None:
    """4,000 seeded draws reproduce the medians, stall share and silence share of
    the measured distribution of 4,407 real calls."""
    rng = random.Random(4407)
    figures = _figures([sample_measured(rng) for _ in range(4000)])
    assert figures["median_ttfc_s"] == pytest.approx(1.63, rel=0.08)
    assert figures["first_chunk_over_20s"] <= 12
    assert figures["stalled_share"] == pytest.approx(0.19, abs=0.025)
    assert figures["slow_median_wall_s"] == pytest.approx(69.4, rel=0.1)
    assert figures["slow_median_longest_silence_s"] == pytest.approx(54.9, rel=0.1)
    assert figures["silence_share"] == pytest.approx(0.713, abs=0.04)
    assert abs(figures["r_silence_chunks"]) < 0.1
    assert figures["reasoning_share"] == pytest.approx(129 / 4407, abs=0.012)


def test_stall_probability_knob_and_paired_oracle() -> None:
    """stall_probability sets the stalled share; oracle draws the same calls without silences."""
    stalled = [measured(0.5)(rng) for rng in [random.Random(11)] for _ in range(2000)]
    assert _figures(stalled)["stalled_share"] == pytest.approx(0.5, abs=0.04)
    calls, quiet = random.Random(3), random.Random(3)
    for _ in range(200):
        call, without = measured()(calls), oracle()(quiet)
        assert without.silences == ()
        assert (without.first_chunk_delay_s, without.chunk_count, without.chunk_interval_s) == (
            call.first_chunk_delay_s,
            call.chunk_count,
            call.chunk_interval_s,
        )
    with pytest.raises(ValueError, match="stall_probability"):
        measured(1.5)


def test_fixed_presets_are_valid_scripts() -> None:
    """Every named preset yields a script of the advertised shape."""
    rng = random.Random(0)
    scripts = {name: preset(rng) for name, preset in PRESETS.items()}
    assert scripts["stall"].longest_gap_silence_s > 1.0
    assert scripts["keepalive-stall"].silences[0].keepalive_every_s is not None
    assert scripts["reasoning"].reasoning_chunks > 0
    assert scripts["slow-first"].first_chunk_delay_s > scripts["smooth"].first_chunk_delay_s
    assert scripts["oracle"].silences == ()


# Script validation.


def test_script_validation_names_the_problem() -> None:
    """Inconsistent or unknown script fields raise a validation error naming them."""
    bad: list[tuple[dict[str, Any], str]] = [
        ({"chunk_cout": 3}, "chunk_cout"),
        ({"chunk_count": 2, "reasoning_chunks": 3}, "reasoning_chunks (3) exceeds"),
        ({"chunk_count": 2, "reasoning_chunks": 2, "tool_call": True}, "tool_call needs"),
        ({"chunk_count": 2, "fault": "reset", "fault_after_chunk": 2}, "fault_after_chunk=2"),
        ({"fault": "explode"}, "fault"),
        ({"error_status": 200}, "error_status"),
        ({"retry_after": "1\r\nX: y"}, "printable"),
        (
            {"silences": [{"after_chunk": 0, "duration_s": 1000, "keepalive_every_s": 0.01}]},
            "keepalives",
        ),
        ({"first_chunk_delay_s": float("nan")}, "first_chunk_delay_s"),
        ({"chunk_count": 100_000, "words_per_chunk": 1_000}, "100000000 words of output"),
    ]
    for fields, reason in bad:
        with pytest.raises(ValidationError, match=re.escape(reason)):
            Script.model_validate(fields)
    assert Script.model_validate({"error_status": 429, "retry_after": 7}).retry_after == "7"


def test_nominal_duration_adds_delay_cadence_and_silences() -> None:
    """nominal_duration_s is first-chunk delay + (N-1) intervals + silences."""
    script = Script(
        first_chunk_delay_s=1.0,
        chunk_count=5,
        chunk_interval_s=0.5,
        silences=(Silence(after_chunk=1, duration_s=3.0), Silence(after_chunk=1, duration_s=2.0)),
    )
    assert script.nominal_duration_s == pytest.approx(8.0)
    assert script.longest_gap_silence_s == pytest.approx(5.0)


def test_app_configuration_is_checked() -> None:
    """A non-positive time scale, an unknown default or an unknown preset is refused up front."""
    with pytest.raises(ValueError, match="time_scale"):
        create_app(time_scale=0.0)
    with pytest.raises(ValueError, match="unknown default script 'nope'"):
        create_app(default="nope")
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        serve(preset="nope")
    assert is_loopback("127.0.0.1")
    assert is_loopback("::1")
    assert not is_loopback("0.0.0.0")


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"scripts": {"slow": {"first_chunk_delay_s": 5}}}, r"scripts\['slow'\]: .* not dict"),
        ({"scripts": {"slow": "stall"}}, r"scripts\['slow'\]: .* not str"),
        ({"default": {"chunk_count": 3}}, r"default: .* not dict"),
        ({"default": 42}, r"default: .* not int"),
    ],
)
def test_a_script_source_that_is_no_script_is_refused_up_front(
    given: dict[str, Any], said: str
) -> None:
    """A registered script or default that is neither a Script nor a preset (a JSON-like dict,
    a name) is refused when the app is made, not answered with a 500 at the first request."""
    with pytest.raises(ConfigurationError, match=said):
        create_app(**given)
    with pytest.raises(ConfigurationError, match=said):
        SimulatedProvider(**given)


# SDK compatibility and the thread runner.


async def test_async_openai_sdk_streams_through_the_simulator(provider: SimulatedProvider) -> None:
    """The async openai SDK streams content and usage via extra_body; a 429 is a RateLimitError."""
    sdk = openai.AsyncOpenAI(base_url=provider.base_url, api_key="sim", max_retries=0)
    async with sdk:
        stream = await sdk.chat.completions.create(
            model="sim-model",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"sim": {"chunk_count": 3, "reasoning_chunks": 1}},
        )
        text: list[str] = []
        usage = None
        async for chunk in stream:
            text.extend(choice.delta.content or "" for choice in chunk.choices)
            usage = chunk.usage or usage
        assert "".join(text) == words("word", 2)
        assert usage is not None
        assert usage.completion_tokens == 3
        with pytest.raises(openai.RateLimitError):
            await sdk.chat.completions.create(
                model="sim-model",
                messages=[{"role": "user", "content": "hi"}],
                extra_headers=header(Script(error_status=429, retry_after="1")),
            )


def test_thread_runner_serves_synchronous_clients() -> None:
    """The thread runner serves the synchronous openai SDK and closes cleanly."""
    with SimulatedProvider.start_in_thread(time_scale=SCALE) as running:
        sdk = openai.OpenAI(base_url=running.base_url, api_key="sim", max_retries=0)
        with sdk:
            stream = sdk.chat.completions.create(
                model="sim-model",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                extra_headers=header(Script(chunk_count=4)),
            )
            text = "".join(
                choice.delta.content or "" for chunk in stream for choice in chunk.choices
            )
            answer = sdk.chat.completions.create(
                model="sim-model",
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"sim": {"chunk_count": 2}},
            )
            vectors = sdk.embeddings.create(model="embed-sim", input="alpha")
        assert text == words("word", 4)
        assert answer.choices[0].message.content == words("word", 2)
        assert len(vectors.data[0].embedding) == 8
        assert running.stats.wait_blocking(lambda stats: stats.completed >= 3, timeout_s=10.0)
        assert running.base_url.startswith("http://127.0.0.1:")


def test_public_surface() -> None:
    """The simulator package exports exactly its documented names."""
    assert set(simulator.__all__) == {
        "MAX_WAIT_S",
        "MEASURED_FIT",
        "ORIGIN_HEADER",
        "PRESETS",
        "SCRIPT_FIELD",
        "SCRIPT_HEADER",
        "SCRIPT_KEY_FIELD",
        "STATS_KEY",
        "FixedPreset",
        "MeasuredFit",
        "MeasuredPreset",
        "Preset",
        "ProviderStats",
        "Script",
        "ScriptSource",
        "ScriptedFigures",
        "Silence",
        "SimulatedProvider",
        "ThreadedProvider",
        "WireName",
        "chunk_indices",
        "create_app",
        "measured",
        "oracle",
        "sample_measured",
        "scripted_figures",
        "serve",
    }
    assert all(hasattr(simulator, name) for name in simulator.__all__)
