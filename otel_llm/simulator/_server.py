"""The aiohttp application of the simulated provider.

Routes (each answering route one :class:`~._wire.Wire`, served by :func:`answering`):

=================================================================  =========================
``POST /v1/chat/completions``                                       OpenAI chat completions
``POST /openai/deployments/{deployment}/chat/completions``          the same, Azure OpenAI
``POST /v1/responses``                                              OpenAI Responses
``POST /v1/messages``                                               Anthropic Messages
``POST /model/{model}/invoke``                                      the same, Amazon Bedrock
``POST /model/{model}/invoke-with-response-stream``                 the same, streamed
``POST /{v1,v1beta,v1alpha}/models/{model}:generateContent``        Gemini
``POST /{v1,v1beta,v1alpha}/models/{model}:streamGenerateContent``  Gemini, streamed
``POST /v1/embeddings``, ``/openai/deployments/{d}/embeddings``     OpenAI / Azure embeddings
``GET /v1/models``, ``GET /health``
=================================================================  =========================

Every answering route has the one request flow of :func:`answering`: the request gets its script
from :func:`select_script` (header ``X-Sim-Script``, body field ``sim``, model, preset, default —
the model being the body's ``model``, or the path's for Gemini, Azure and Bedrock); the streamed
answer is the wire's plan of that script, written event by event by :func:`stream` in the wire's
framing (every write goes to the socket at once, so the client sees the scripted timing). Every
wait is ``time_scale × scripted seconds``, at most :data:`MAX_WAIT_S`.

The request counters live in a :class:`ProviderStats` at ``app[STATS_KEY]``. Client disconnects
are detected promptly when the app runs with ``handler_cancellation=True`` (as
:class:`SimulatedProvider` and :func:`serve` do): the handler is cancelled when the connection
drops, even in the middle of a silence. Otherwise they are noticed at the next write.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import socket
import struct
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from otel_llm._errors import ConfigurationError
from otel_llm.simulator._anthropic import ANTHROPIC_MESSAGES
from otel_llm.simulator._bedrock import BEDROCK, BEDROCK_STREAMED
from otel_llm.simulator._bedrock import ROUTE as BEDROCK_ROUTE
from otel_llm.simulator._bedrock import STREAM_ROUTE as BEDROCK_STREAM_ROUTE
from otel_llm.simulator._chat import (
    AZURE_CHAT_COMPLETIONS,
    CHAT_COMPLETIONS,
    body_model,
    embeddings_answer,
    error_body,
    scripted_error,
)
from otel_llm.simulator._frames import Pause, Send, Step, cut
from otel_llm.simulator._gemini import GEMINI
from otel_llm.simulator._gemini import ROUTE as GEMINI_ROUTE
from otel_llm.simulator._presets import PRESETS
from otel_llm.simulator._provider_stats import ProviderStats, RequestRecord
from otel_llm.simulator._responses import RESPONSES
from otel_llm.simulator._script import Script
from otel_llm.simulator._select import (
    SCRIPT_HEADER,
    BadRequest,
    Origin,
    ScriptSource,
    checked_registry,
    draw_key,
    resolve_default,
    select_script,
)
from otel_llm.simulator._wire import OPENAI_SSE, Asked, Framing, Wire, WireName

MAX_WAIT_S = 600.0
"""No single wait of the simulator lasts longer than this, in real seconds."""

MAX_EMBEDDING_DIMENSIONS = 4096
DEFAULT_EMBEDDING_DIMENSIONS = 8

WIRES: Mapping[WireName, Wire] = {
    wire.name: wire for wire in (CHAT_COMPLETIONS, RESPONSES, ANTHROPIC_MESSAGES, GEMINI)
}
"""Every wire format by name (Azure's route serves the ``chat`` format)."""

ORIGIN_HEADER = "X-Sim-Origin"
"""Response header naming where the script came from: header, body, model, preset, default."""

STATS_KEY = web.AppKey("otel_llm_simulator_stats", ProviderStats)
"""``app[STATS_KEY]`` is the :class:`ProviderStats` of an app made by :func:`create_app`."""


@dataclass(slots=True)
class _Simulator:
    """Configuration and state of one app."""

    scripts: Mapping[str, ScriptSource]
    default: ScriptSource
    time_scale: float
    rng: random.Random
    seed: int
    stats: ProviderStats
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    draws: Counter[str] = field(default_factory=Counter)

    def rng_for(self, key: str | None) -> random.Random:
        """The generator a request's script is drawn from.

        Without a key: the server's generator, in arrival order. With one: a generator seeded by
        ``(seed, key, n)`` where ``n`` counts the earlier requests with that key — the same draw
        whatever the concurrency, and a retry of the same call draws afresh.
        """
        if key is None:
            return self.rng
        occurrence = self.draws[key]
        self.draws[key] = occurrence + 1
        return random.Random(f"{self.seed}/{key}/{occurrence}")

    def real_s(self, scripted_s: float) -> float:
        """Real seconds of a scripted duration."""
        return min(MAX_WAIT_S, scripted_s * self.time_scale)

    async def wait(self, scripted_s: float) -> None:
        """Wait a scripted duration (always yields to the loop)."""
        await asyncio.sleep(self.real_s(scripted_s))


_SIMULATOR = web.AppKey("otel_llm_simulator", _Simulator)


def _reject(error: BadRequest) -> web.Response:
    return web.json_response(error_body(str(error), status=400, code=error.code), status=400)


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # nested past the limit
        raise BadRequest(f"the request body is not JSON: {exc}", code="invalid_json") from exc
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object", code="invalid_json")
    return body


def _script_for(
    request: web.Request, sim: _Simulator, body: Mapping[str, Any], model: str
) -> tuple[Script, Origin]:
    return select_script(
        header=request.headers.get(SCRIPT_HEADER),
        body=body,
        model=model,
        registry=sim.scripts,
        default=sim.default,
        rng=sim.rng_for(draw_key(body)),
    )


def _scripted_error(script: Script, headers: Mapping[str, str]) -> web.Response:  # embeddings
    status, error, error_headers = scripted_error(script)
    return web.json_response(error, status=status, headers={**headers, **error_headers})


def _error_answer(
    wire: Wire, script: Script, status: int, headers: Mapping[str, str]
) -> web.Response:
    error = wire.error(script, status)
    return web.json_response(error.body, status=error.status, headers={**headers, **error.headers})


def _reset(request: web.Request) -> None:
    """Abort the connection with a TCP reset (SO_LINGER 0), as a crashed upstream would."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def _pause(
    response: web.StreamResponse, sim: _Simulator, step: Pause, until: float, keepalive: bytes
) -> None:
    """Wait for a scripted pause that ends at loop time ``until``, writing ``keepalive`` at the
    keepalive period (on the pause's own timeline, so a late ping does not move the next one);
    a format without keepalives (empty ``keepalive``) only waits."""
    loop = asyncio.get_running_loop()
    if step.keepalive_every_s is not None and keepalive:
        every = sim.real_s(step.keepalive_every_s)
        start = until - sim.real_s(step.seconds)
        for beat in range(1, step.keepalive_count() + 1):  # counted, not accumulated floats
            at = start + beat * every
            if at >= until:  # the pause was capped at MAX_WAIT_S: no ping past its end
                break
            await asyncio.sleep(max(0.0, at - loop.time()))
            await response.write(keepalive)
    await asyncio.sleep(max(0.0, until - loop.time()))


async def stream(
    request: web.Request,
    sim: _Simulator,
    plan: Sequence[Step],
    record: RequestRecord,
    headers: Mapping[str, str],
    framing: Framing = OPENAI_SSE,
) -> web.StreamResponse:
    """Write a streamed answer step by step: the one interpreter of every wire format's plan."""
    keepalive = framing.keepalive
    response = web.StreamResponse(headers={**headers, "Cache-Control": "no-cache"})
    response.content_type = framing.content_type
    try:
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        timeline = loop.time()  # when the last pause was due to end
        for step in plan:
            if isinstance(step, Send):
                await response.write(framing.encode(step))
            elif isinstance(step, Pause):
                if step.cadence:
                    # on the stream's timeline: the cadence absorbs late writes before it
                    timeline += sim.real_s(step.seconds)
                else:
                    # from the previous write's actual end: a late write never shortens a
                    # silence (a loaded machine may stretch a stream, never hide a silence)
                    timeline = loop.time() + sim.real_s(step.seconds)
                await _pause(response, sim, step, timeline, keepalive)
            else:
                _reset(request)
                record.outcome = "aborted"
                return response
        await response.write_eof()
    except ConnectionResetError:
        record.outcome = "disconnected"
    return response


async def complete(
    request: web.Request,
    sim: _Simulator,
    wire: Wire,
    script: Script,
    answer: Mapping[str, Any],
    record: RequestRecord,
    headers: Mapping[str, str],
) -> web.StreamResponse:
    """Answer at once after the script's whole duration: ``answer`` as JSON, or the scripted
    fault (a reset; a body cut in half for truncate and malformed; the ``fault_status`` error
    in the wire's shape for error)."""
    await sim.wait(script.nominal_duration_s)
    if script.fault == "reset":
        _reset(request)
        record.outcome = "aborted"
        return web.Response()
    if script.fault == "error":
        return _error_answer(wire, script, script.fault_status, headers)
    text = json.dumps(answer)
    if script.fault is not None:  # truncate / malformed: a body that is not JSON
        text = cut(text)
    return web.Response(text=text, content_type="application/json", headers=headers)


def answering(wire: Wire) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The request handler of one wire format: the one request flow of every API."""

    def reject(error: BadRequest) -> web.Response:
        return web.json_response(wire.rejection(str(error), error.code), status=400)

    async def handle(request: web.Request) -> web.StreamResponse:
        sim = request.app[_SIMULATOR]
        try:
            asked = Asked(await _json_body(request), request.match_info, request.query)
            model = wire.model(asked)
        except BadRequest as exc:
            with sim.stats.track(""):
                return reject(exc)
        with sim.stats.track(model) as record:
            try:
                wire.check(asked.body)
                script, origin = _script_for(request, sim, asked.body, model)
            except BadRequest as exc:
                return reject(exc)
            headers = {ORIGIN_HEADER: origin}
            await sim.wait(script.hold_s)
            if script.error_status is not None:
                return _error_answer(wire, script, script.error_status, headers)
            reply = wire.reply(script, asked, model, next(sim.ids), int(time.time()))
            key = draw_key(asked.body)
            if key is not None:
                sim.stats.record_script(reply.id, key, script)
            if wire.streamed(asked):
                plan = wire.plan(script, reply)
                return await stream(request, sim, plan, record, headers, wire.framing(reply))
            answer = wire.answer(script, reply)
            return await complete(request, sim, wire, script, answer, record, headers)

    return handle


def _texts(value: object) -> list[str]:
    """Embedding inputs as text: a string, a list of strings, or token lists (as text)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value:
        if all(isinstance(item, int) for item in value):
            return [json.dumps(value)]
        if all(isinstance(item, str | list) for item in value):
            return [item if isinstance(item, str) else json.dumps(item) for item in value]
    raise BadRequest("'input' must be a string or a non-empty list", code="invalid_input")


def _dimensions(body: Mapping[str, Any]) -> int:
    value = body.get("dimensions", DEFAULT_EMBEDDING_DIMENSIONS)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequest("'dimensions' must be an integer", code="invalid_dimensions")
    if not 1 <= value <= MAX_EMBEDDING_DIMENSIONS:
        raise BadRequest(
            f"'dimensions' must be between 1 and {MAX_EMBEDDING_DIMENSIONS}",
            code="invalid_dimensions",
        )
    return value


def _embeddings(
    model_of: Callable[[Asked], str],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The embeddings handler: deterministic vectors after ``hold_s`` and
    ``first_chunk_delay_s``; errors as scripted. ``model_of`` reads the model (from the body, or
    Azure's deployment)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        sim = request.app[_SIMULATOR]
        try:
            body = await _json_body(request)
            model = model_of(Asked(body, request.match_info, request.query))
        except BadRequest as exc:
            with sim.stats.track(""):
                return _reject(exc)
        with sim.stats.track(model):
            try:
                texts = _texts(body.get("input"))
                dimensions = _dimensions(body)
                script, origin = _script_for(request, sim, body, model)
            except BadRequest as exc:
                return _reject(exc)
            headers = {ORIGIN_HEADER: origin}
            await sim.wait(script.hold_s)
            if script.error_status is not None:
                return _scripted_error(script, headers)
            await sim.wait(script.first_chunk_delay_s)
            encoding = "base64" if body.get("encoding_format") == "base64" else "float"
            answer = embeddings_answer(
                texts, model=script.model_name or model, dimensions=dimensions, encoding=encoding
            )
            return web.json_response(answer, headers=headers)

    return handle


async def _models(request: web.Request) -> web.StreamResponse:
    sim = request.app[_SIMULATOR]
    names = sorted({*sim.scripts, *PRESETS})
    return web.json_response(
        {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "otel-llm-simulator"}
                for name in names
            ],
        }
    )


async def _health(request: web.Request) -> web.StreamResponse:
    return web.json_response({"status": "ok"})


async def _on_startup(app: web.Application) -> None:
    app[STATS_KEY].mark_serving()  # a provider stopped and started again serves anew


async def _on_shutdown(app: web.Application) -> None:
    app[STATS_KEY].mark_shutting_down()


def create_app(
    *,
    scripts: Mapping[str, ScriptSource] | None = None,
    default: ScriptSource | str | None = None,
    time_scale: float = 1.0,
    seed: int = 0,
) -> web.Application:
    """The simulated provider as an aiohttp application.

    ``scripts`` maps model names to scripts or presets (a request for that model gets it);
    ``default`` answers every other model — a script, a preset, or a registered/preset name
    (``None`` is ``Script()``); anything else is a :class:`~otel_llm.ConfigurationError` here,
    not an HTTP 500 at the first request (as is a time scale that is not a positive finite
    number). ``time_scale`` multiplies every scripted duration;
    ``seed`` seeds the generator sampling presets draw from, in request order (or per
    :data:`SCRIPT_KEY_FIELD` key, independent of the order).
    """
    number = isinstance(time_scale, int | float) and not isinstance(time_scale, bool)
    if not (number and math.isfinite(time_scale) and time_scale > 0):
        raise ConfigurationError(
            "time_scale", f"must be a positive finite number, not {time_scale!r}"
        )
    registry = checked_registry(scripts)
    stats = ProviderStats()
    app = web.Application()
    app[STATS_KEY] = stats
    app[_SIMULATOR] = _Simulator(
        scripts=registry,
        default=resolve_default(default, registry),
        time_scale=time_scale,
        rng=random.Random(seed),
        seed=seed,
        stats=stats,
    )
    app.on_startup.append(_on_startup)
    app.on_shutdown.append(_on_shutdown)
    app.router.add_post("/v1/chat/completions", answering(CHAT_COMPLETIONS))
    app.router.add_post("/v1/responses", answering(RESPONSES))
    app.router.add_post("/v1/messages", answering(ANTHROPIC_MESSAGES))
    app.router.add_post(GEMINI_ROUTE, answering(GEMINI))
    app.router.add_post(BEDROCK_ROUTE, answering(BEDROCK))
    app.router.add_post(BEDROCK_STREAM_ROUTE, answering(BEDROCK_STREAMED))
    azure = "/openai/deployments/{deployment}"
    app.router.add_post(f"{azure}/chat/completions", answering(AZURE_CHAT_COMPLETIONS))
    app.router.add_post("/v1/embeddings", _embeddings(lambda asked: body_model(asked.body)))
    app.router.add_post(f"{azure}/embeddings", _embeddings(lambda asked: asked.path["deployment"]))
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    return app
