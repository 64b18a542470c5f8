"""HTTP transport for OpenAI-compatible ``/chat/completions`` and ``/embeddings``.

Requests go through ``httpx2`` (see :mod:`otel_llm._act._pool`); streams are parsed with its
server-sent-events reader. For every incremental chunk the transport calls ``clock.mark()`` —
the whole metering cost of the hot path. Every failure becomes one of the errors in
:mod:`otel_llm._errors`: a chunk of the wrong shape is a :class:`MalformedStream` naming the
field, a stream that ends incomplete (:func:`~otel_llm._measure._chunks.stream_complete`) is a
:class:`TruncatedStream`, never a successful partial answer.

Errors are raised *outside* the ``except`` blocks that caught the lower-layer failure, and never
chained to it: an ``httpx2`` error holds the request (its URL and ``Authorization`` header), a
``JSONDecodeError`` the whole document. The library's error carries what it needs, redacted.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any, cast

import httpx2

from otel_llm import _errors as e
from otel_llm._act import _json
from otel_llm._act._completion import (
    Completion,
    Embeddings,
    ShapeError,
    StreamAssembler,
    completion_from_json,
    embeddings_from_json,
)
from otel_llm._act._http_errors import (
    not_found_hint,
    provider_error,
    stream_error,
    transport_error,
)
from otel_llm._act._pool import Pool
from otel_llm._act._source import Source
from otel_llm._defaults import DEFAULTS
from otel_llm._measure._chunks import ChunkClock
from otel_llm._redact import public_url


def request_headers(source: Source) -> dict[str, str]:
    """HTTP headers for a request to ``source`` (the only place the key is read)."""
    headers = {"Content-Type": "application/json"}
    basic = source.userinfo_header
    if basic is not None:
        headers["Authorization"] = basic
    if source.api_key is not None:
        key = source.api_key.get_secret_value()
        header = source.key_header
        headers[header] = f"Bearer {key}" if header == "Authorization" else key
    return headers


def request_timeout(source: Source) -> httpx2.Timeout:
    """The transport timeouts of one attempt at ``source``."""
    return httpx2.Timeout(source.timeout_s, connect=source.connect_timeout_s)


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


async def _raise_for_status(response: httpx2.Response, source: Source) -> None:
    if response.status_code < 400:
        return
    try:
        raw = await response.aread()
    except httpx2.HTTPError:
        raw = b""
    raise provider_error(
        response.status_code,
        raw[: DEFAULTS.max_error_body_bytes].decode("utf-8", "replace"),
        headers=response.headers,
        source=source.name,
        secrets=source.secrets(),
        now_epoch_s=time.time(),
        not_found_hint=(
            not_found_hint(source.public_url, public_url(str(response.request.url)))
            if response.status_code == 404
            else ""
        ),
    )


async def chat_completion(
    pool: Pool,
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
    failure: e.ProviderError
    async with pool.lease() as lease:
        request = lease.http.build_request(
            "POST",
            source.chat_url,
            json=body,
            headers=request_headers(source),
            timeout=request_timeout(source),
            extensions=lease.extensions,
        )
        try:
            response = await lease.http.send(request, stream=True)
            try:
                await _raise_for_status(response, source)
                if not stream:
                    return await _read_json(response, source)
                assembler = StreamAssembler()
                await _read_stream(response, source, assembler, clock)
            finally:
                await response.aclose()
        except httpx2.HTTPError as exc:
            failure = transport_error(
                exc,
                source=source.name,
                chunks=clock.count if clock is not None else 0,
                secrets=source.secrets(),
            )
        else:
            if assembler.complete:
                return assembler.result()
            failure = e.TruncatedStream(
                "stream ended without a finish reason"
                + ("" if assembler.finish_reason is None else " for every choice"),
                source=source.name,
            )
        raise failure  # inside the lease (a failed request), outside the except (no chain)


async def _read_json(response: httpx2.Response, source: Source) -> Completion:
    payload = _json_body(await response.aread(), source, "chat")
    if "error" in payload and "choices" not in payload:
        raise stream_error(payload, source=source.name, secrets=source.secrets())
    try:
        return completion_from_json(payload)
    except ShapeError as exc:
        failure = _malformed_response(exc, source, "chat completion")
    raise failure


def _json_body(raw: bytes, source: Source, what: str) -> dict[str, Any]:
    """A non-streamed answer's JSON object; MalformedStream when it is not one."""
    try:
        payload = _json.loads(raw)
    except ValueError as exc:
        failure = e.MalformedStream(
            f"answered {what} with a body that is not JSON "
            f"({len(raw)} bytes; {_json_problem(exc)})",
            source=source.name,
        )
    else:
        if isinstance(payload, dict):
            return payload
        failure = e.MalformedStream(
            f"answered {what} with JSON that is not an object", source=source.name
        )
    raise failure


def _malformed_response(exc: ShapeError, source: Source, what: str) -> e.MalformedResponse:
    return e.MalformedResponse(f"answered a {what} of the wrong shape: {exc}", source=source.name)


def _json_problem(exc: ValueError) -> str:
    """Where JSON parsing failed, without the document (it may hold content)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at position {exc.pos}"
    return type(exc).__name__


async def _read_stream(
    response: httpx2.Response,
    source: Source,
    assembler: StreamAssembler,
    clock: ChunkClock | None,
) -> None:
    """Consume the SSE stream into ``assembler``.

    Like the openai SDK, the body is read on after ``[DONE]`` (a bounded number of events), so
    the connection goes back to the pool clean. A leading byte-order mark is dropped (the SSE
    rule), undecodable bytes become U+FFFD, events of a type other than ``message`` are not
    chunks, and an ``error`` event is the provider's error.
    """
    content_type = response.headers.get("content-type", "")
    if "text/event-stream" not in content_type.lower():
        raise e.MalformedStream(
            f"answered a streaming request with content type {content_type!r}",
            source=source.name,
        )
    response.encoding = "utf-8-sig"
    feed = assembler.feed
    mark = clock.mark if clock is not None else None
    # EventSource iterates with an async generator: closing it closes the body read at once
    events = cast(
        AsyncGenerator[httpx2.ServerSentEvent, None], httpx2.EventSource(response).__aiter__()
    )
    done_after = -1
    shape: ShapeError | None = None
    try:
        async for event in events:
            data = event.data
            if done_after >= 0:
                done_after += 1
                if done_after > DEFAULTS.events_after_done:
                    break
                continue
            if event.event != "message":
                if event.event == "error":
                    raise _error_event(data, source)
                continue
            if not data:
                continue
            if data == "[DONE]":
                done_after = 0
                continue
            try:
                incremental = feed(_chunk(data, source, clock))
            except ShapeError as exc:
                shape = exc
                break
            if incremental and mark is not None:
                mark()
            if clock is not None and not clock.finished and assembler.finish_reason is not None:
                clock.finished = assembler.complete  # complete: no reason to hedge or kill now
    finally:
        await events.aclose()
    if shape is not None:
        after = f"chunk event after {clock.count} chunks" if clock is not None else "a chunk"
        raise e.MalformedStream(f"sent a malformed {after}: {shape}", source=source.name)


def _chunk(data: str, source: Source, clock: ChunkClock | None) -> dict[str, Any]:
    """One event's chunk object; MalformedStream (or the provider's error) otherwise."""
    after = f"after {clock.count} chunks" if clock is not None else "in the stream"
    try:
        chunk = _json.loads(data)
    except ValueError as exc:
        failure: e.ProviderError = e.MalformedStream(
            f"sent an event that is not JSON ({len(data)} bytes, {after}; {_json_problem(exc)})",
            source=source.name,
        )
    else:
        if not isinstance(chunk, dict):
            failure = e.MalformedStream(
                f"sent a chunk that is not an object ({after})", source=source.name
            )
        elif "error" in chunk and not chunk.get("choices"):
            failure = stream_error(chunk, source=source.name, secrets=source.secrets())
        else:
            return chunk
    raise failure


def _error_event(data: str, source: Source) -> e.ProviderError:
    try:
        payload = _json.loads(data)
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        payload = {"error": {"message": data[:500]}}
    elif "error" not in payload:
        payload = {"error": payload}
    return stream_error(payload, source=source.name, secrets=source.secrets())


def embedding_inputs(payload: Mapping[str, Any]) -> int | None:
    """How many vectors an embeddings request asks for (``None``: cannot tell)."""
    value = payload.get("input")
    if isinstance(value, str):
        return 1
    if isinstance(value, list) and value:
        if all(isinstance(item, int) and not isinstance(item, bool) for item in value):
            return 1  # one input given as token ids
        return len(value)
    return None


async def embeddings(pool: Pool, source: Source, payload: Mapping[str, Any]) -> Embeddings:
    """Run one embeddings request at ``source`` (float vectors, one per input)."""
    body = dict(payload)
    body["model"] = source.model
    body["encoding_format"] = "float"
    failure: e.ProviderError
    async with pool.lease() as lease:
        try:
            response = await lease.http.post(
                source.embeddings_url,
                json=body,
                headers=request_headers(source),
                timeout=request_timeout(source),
                extensions=lease.extensions,
            )
            await _raise_for_status(response, source)
        except httpx2.HTTPError as exc:
            failure = transport_error(exc, source=source.name, chunks=0, secrets=source.secrets())
        else:
            result = _json_body(response.content, source, "embeddings")
            if "error" in result and "data" not in result:
                raise stream_error(result, source=source.name, secrets=source.secrets())
            try:
                return embeddings_from_json(result, inputs=embedding_inputs(payload))
            except ShapeError as exc:
                failure = _malformed_response(exc, source, "embeddings answer")
        raise failure
