"""HTTP transport for OpenAI-compatible ``/chat/completions`` and ``/embeddings``.

Streams are parsed with ``httpx-sse``. For every incremental chunk the transport calls
``clock.mark()`` — the whole metering cost of the hot path (SPEC M1). Every failure becomes one
of the errors in :mod:`otel_llm._errors`; a stream that ends without a finish reason or
``[DONE]`` is a :class:`TruncatedStream`, never a successful partial answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import httpx
from httpx_sse import EventSource

from otel_llm import _errors as e
from otel_llm.act._completion import (
    Completion,
    Embeddings,
    StreamAssembler,
    completion_from_json,
    embeddings_from_json,
)
from otel_llm.act._http_errors import provider_error, stream_error, transport_error
from otel_llm.act._source import Source
from otel_llm.measure._chunks import ChunkClock

_MAX_ERROR_BODY = 64 * 1024


def request_headers(source: Source) -> dict[str, str]:
    """HTTP headers for a request to ``source`` (the only place the key is read)."""
    headers = {"Content-Type": "application/json"}
    if source.api_key is not None:
        headers["Authorization"] = f"Bearer {source.api_key.get_secret_value()}"
    return headers


def request_timeout(source: Source) -> httpx.Timeout:
    """The transport timeouts of one attempt at ``source``."""
    return httpx.Timeout(source.timeout_s, connect=source.connect_timeout_s)


def chat_body(source: Source, payload: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """The JSON body of a chat request: the caller's fields, the source's model, the stream flag."""
    body = dict(payload)
    body["model"] = source.model
    body["stream"] = stream
    if stream:
        options = dict(body.get("stream_options") or {})
        options.setdefault("include_usage", True)
        body["stream_options"] = options
    else:
        body.pop("stream_options", None)
    return body


async def _raise_for_status(response: httpx.Response, source: Source) -> None:
    if response.status_code < 400:
        return
    try:
        raw = await response.aread()
    except httpx.HTTPError:
        raw = b""
    raise provider_error(
        response.status_code,
        raw[:_MAX_ERROR_BODY].decode("utf-8", "replace"),
        headers=response.headers,
        source=source.name,
        secrets=source.secrets(),
        now_epoch_s=time.time(),
    )


async def chat_completion(
    http: httpx.AsyncClient,
    source: Source,
    payload: Mapping[str, Any],
    *,
    stream: bool,
    clock: ChunkClock | None = None,
) -> Completion:
    """Run one chat completion at ``source`` and return the assembled answer.

    With ``stream=True`` every incremental chunk is marked on ``clock`` as it arrives.
    """
    body = chat_body(source, payload, stream=stream)
    request = http.build_request(
        "POST",
        source.chat_url,
        json=body,
        headers=request_headers(source),
        timeout=request_timeout(source),
    )
    chunks = 0
    try:
        response = await http.send(request, stream=True)
        try:
            await _raise_for_status(response, source)
            if not stream:
                return await _read_json(response, source)
            assembler = StreamAssembler()
            done = await _read_stream(response, source, assembler, clock)
            chunks = clock.count if clock is not None else 0
        finally:
            await response.aclose()
    except httpx.HTTPError as exc:
        chunks = clock.count if clock is not None else chunks
        raise transport_error(exc, source=source.name, chunks=chunks) from exc
    if not done and assembler.finish_reason is None:
        raise e.TruncatedStream(
            f"{source.name} stream ended without a finish reason or [DONE]", source=source.name
        )
    return assembler.result()


async def _read_json(response: httpx.Response, source: Source) -> Completion:
    raw = await response.aread()
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise e.MalformedStream(
            f"{source.name} answered with a body that is not JSON", source=source.name
        ) from exc
    if not isinstance(payload, dict):
        raise e.MalformedStream(f"{source.name} answered with a non-object", source=source.name)
    if "error" in payload and "choices" not in payload:
        raise stream_error(payload, source=source.name, secrets=source.secrets())
    return completion_from_json(payload)


async def _read_stream(
    response: httpx.Response,
    source: Source,
    assembler: StreamAssembler,
    clock: ChunkClock | None,
) -> bool:
    """Consume the SSE stream into ``assembler``; True when ``[DONE]`` arrived.

    Like the openai SDK, the body is read to its end after ``[DONE]``, so the connection goes
    back to the pool clean.
    """
    content_type = response.headers.get("content-type", "")
    if "text/event-stream" not in content_type:
        raise e.MalformedStream(
            f"{source.name} answered a streaming request with content type {content_type!r}",
            source=source.name,
        )
    feed = assembler.feed
    mark = clock.mark if clock is not None else None
    events = EventSource(response).aiter_sse()
    done = False
    try:
        async for event in events:
            data = event.data
            if done or not data:
                continue
            if data == "[DONE]":
                done = True
                continue
            try:
                chunk = json.loads(data)
            except ValueError as exc:
                raise e.MalformedStream(
                    f"{source.name} sent an event that is not JSON ({len(data)} bytes, "
                    f"after {clock.count if clock is not None else 'unknown'} chunks)",
                    source=source.name,
                ) from exc
            if not isinstance(chunk, dict):
                raise e.MalformedStream(
                    f"{source.name} sent a chunk that is not an object", source=source.name
                )
            if "error" in chunk and not chunk.get("choices"):
                raise stream_error(chunk, source=source.name, secrets=source.secrets())
            if feed(chunk) and mark is not None:
                mark()
            if clock is not None and assembler.finish_reason is not None:
                clock.finished = True  # the answer is complete: no more reason to hedge or kill
    finally:
        await events.aclose()
    return done


async def embeddings(
    http: httpx.AsyncClient, source: Source, payload: Mapping[str, Any]
) -> Embeddings:
    """Run one embeddings request at ``source`` (float vectors)."""
    body = dict(payload)
    body["model"] = source.model
    body["encoding_format"] = "float"
    try:
        response = await http.post(
            source.embeddings_url,
            json=body,
            headers=request_headers(source),
            timeout=request_timeout(source),
        )
        await _raise_for_status(response, source)
        result = response.json()
    except httpx.HTTPError as exc:
        raise transport_error(exc, source=source.name, chunks=0) from exc
    except ValueError as exc:
        raise e.MalformedStream(
            f"{source.name} answered embeddings with a body that is not JSON", source=source.name
        ) from exc
    if not isinstance(result, dict) or "data" not in result:
        raise e.MalformedStream(
            f"{source.name} answered embeddings without data", source=source.name
        )
    try:
        return embeddings_from_json(result)
    except (TypeError, ValueError) as exc:
        raise e.MalformedStream(
            f"{source.name} answered embeddings that are not float vectors", source=source.name
        ) from exc
