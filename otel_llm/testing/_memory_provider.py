"""The simulated provider in memory: scripted answers through ``httpx2.MockTransport``, timed on
the event loop's clock.

:class:`~otel_llm.simulator.SimulatedProvider` serves scripts over real HTTP on 127.0.0.1, where
time is real. :class:`MemoryProvider` serves the same answers — the simulator's own
:func:`~otel_llm.simulator._chat.stream_plan`, event for event — to an ``httpx2.AsyncClient``
in the same process: every pause is an ``asyncio.sleep`` on the running loop, so on
:func:`~otel_llm.testing.run_virtual`'s loop an hour-long stream takes no real time and every
gap the client measures is exactly the scripted one.

Each source (the first label of the request's host, ``http://<source>.test/v1``) draws the
script of every request from a preset with a generator of its own, seeded once: requests to
different sources are independent, as real providers' stalls are, and the same seeds and the
same order of requests give the same scripts. :attr:`MemoryProvider.served` keeps every script
served, in order, as the ground truth of what the client saw.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

import httpx2

from otel_llm.simulator._chat import CHAT_COMPLETIONS, completion, scripted_error, stream_plan
from otel_llm.simulator._frames import Pause, Reply, Send, cut, prompt_tokens
from otel_llm.simulator._presets import Preset
from otel_llm.simulator._script import Script


@dataclass(frozen=True, slots=True)
class Served:
    """One request the provider answered: the source asked, its script, whether it streamed."""

    source: str
    script: Script
    stream: bool


@dataclass
class MemoryProvider:
    """Answers each request to ``http://<source>.test/v1`` with a fresh draw of ``preset`` from
    that source's own generator (``random.Random(seeds[source])``); a source missing from
    ``seeds`` is refused with a 404. Pass :meth:`client` as ``Client(http_client=…)``."""

    preset: Preset
    seeds: Mapping[str, int]
    served: list[Served] = field(default_factory=list)
    _rngs: dict[str, random.Random] = field(default_factory=dict, repr=False)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    def __post_init__(self) -> None:
        self._rngs = {source: random.Random(seed) for source, seed in self.seeds.items()}

    def client(self) -> httpx2.AsyncClient:
        """An ``httpx2.AsyncClient`` whose every request this provider answers."""
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        source = request.url.host.split(".")[0]
        rng = self._rngs.get(source)
        if rng is None:
            return httpx2.Response(404, json={"error": {"message": f"no source {source!r}"}})
        body = json.loads(request.content)
        script = self.preset(rng)
        stream = body.get("stream") is True
        self.served.append(Served(source, script, stream))
        options = body.get("stream_options")
        reply = Reply(
            id=f"chatcmpl-mem{next(self._ids):06d}",
            created=0,
            model=script.model_name or str(body.get("model")),
            prompt_tokens=prompt_tokens(body.get("messages")),
            include_usage=isinstance(options, dict) and options.get("include_usage") is True,
            empty_keepalive=script.keepalive == "empty_delta",
        )
        await asyncio.sleep(script.hold_s)
        if script.error_status is not None:
            status, error_body, headers = scripted_error(script)
            return httpx2.Response(status, headers=headers, json=error_body)
        if not stream:
            await asyncio.sleep(script.nominal_duration_s)
            if script.fault == "reset":
                raise httpx2.ReadError("connection reset by the simulated provider")
            if script.fault == "error":  # the fault's status with the format's error body
                status, error_body, headers = scripted_error(script, script.fault_status)
                return httpx2.Response(status, headers=headers, json=error_body)
            text = json.dumps(completion(script, reply))
            if script.fault is not None:  # truncate / malformed: a body that is not JSON
                text = cut(text)
            return httpx2.Response(200, headers={"content-type": "application/json"}, text=text)
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=_events(script, reply)
        )


async def _events(script: Script, reply: Reply) -> AsyncIterator[bytes]:
    """The streamed answer's bytes, each event when the script says (the server's timing: a
    cadence pause keeps to the stream's timeline, a silence runs from the previous write), in
    the chat completions route's framing (its keepalive, the script's own)."""
    framing = CHAT_COMPLETIONS.framing(reply)
    loop = asyncio.get_running_loop()
    timeline = loop.time()
    for step in stream_plan(script, reply):
        if isinstance(step, Send):
            yield framing.encode(step)
        elif isinstance(step, Pause):
            start = timeline if step.cadence else loop.time()
            timeline = start + step.seconds
            if step.keepalive_every_s is not None:
                every = step.keepalive_every_s
                for beat in range(1, step.keepalive_count() + 1):
                    await asyncio.sleep(max(0.0, start + beat * every - loop.time()))
                    yield framing.keepalive
            await asyncio.sleep(max(0.0, timeline - loop.time()))
        else:
            raise httpx2.ReadError("connection reset by the simulated provider")
