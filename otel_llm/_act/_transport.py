"""HTTP transport: one request flow for every wire format (:mod:`otel_llm._act._wire`) —
OpenAI-compatible chat completions, the Anthropic Messages API, the Gemini API — and for
OpenAI-compatible ``/embeddings``.

Requests go through ``httpx2`` (see :mod:`otel_llm._act._pool`); streams are parsed with its
server-sent-events reader, and each event goes to the source's wire's reader. For every
incremental chunk the transport calls ``clock.mark()`` — the whole metering cost of the hot
path. Every failure becomes one of the errors in :mod:`otel_llm._errors`: a chunk of the wrong
shape is a :class:`MalformedStream` naming the field, a stream that ends incomplete (its finish
reason never came) is a :class:`TruncatedStream`, never a successful partial answer.

Errors are raised *outside* the ``except`` blocks that caught the lower-layer failure, and never
chained to it: an ``httpx2`` error holds the request (its URL and key header), a
``JSONDecodeError`` the whole document. The library's error carries what it needs, redacted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx2

from otel_llm import _errors as e
from otel_llm._act import _json
from otel_llm._act._completion import (
    Completion,
    Embeddings,
    ShapeError,
    embeddings_from_json,
)
from otel_llm._act._http_errors import (
    TRANSPORT_FAILURES,
    ErrorContext,
    not_found_hint,
    transport_error,
)
from otel_llm._act._pool import Pool
from otel_llm._act._source import Source
from otel_llm._act._sse import EventTooLarge, SSEDecoder
from otel_llm._act._wire import StreamReader, json_problem, request_headers, stream_error
from otel_llm._defaults import DEFAULTS
from otel_llm._measure._chunks import ChunkClock
from otel_llm._redact import public_url, redact


def request_timeout(source: Source) -> httpx2.Timeout:
    """The transport timeouts of one attempt at ``source``."""
    return httpx2.Timeout(source.timeout_s, connect=source.connect_timeout_s)


def redirected(response: httpx2.Response, source: Source) -> e.PermanentError:
    """The error of an answer that redirects (3xx). The client never follows one: the API key
    travels in a header of the provider's own (``x-api-key``, ``api-key``, ``x-goog-api-key``)
    that an HTTP library carries along to wherever the redirect points, another host included.
    The base URL is the setup to fix, so the source is not asked again in that call."""
    location = response.headers.get("location")
    where = ""
    if location:
        try:
            target = public_url(str(response.request.url.join(location)))
        except (httpx2.InvalidURL, ValueError):
            target = "a URL that does not parse"
        where = f" to {redact(target, source.secrets())}"
    return e.PermanentError(
        f"answered {response.status_code}, a redirect{where}: the client does not follow "
        "redirects (the API key would go along); set base_url to where it points",
        status_code=response.status_code,
        source=source.name,
    )


async def _raise_for_status(response: httpx2.Response, source: Source) -> None:
    """The provider's error for an answer that is no success (its body read up to
    :attr:`~otel_llm._defaults.Defaults.max_error_body_bytes`: :func:`_error_body`)."""
    if response.status_code < 300:
        return
    if response.status_code < 400:
        raise redirected(response, source)
    raw = await _error_body(response)
    status = response.status_code
    raise source.wire.error(
        status,
        raw.decode("utf-8", "replace"),
        ErrorContext(
            source=source.name,
            secrets=source.secrets(),
            headers=response.headers,
            now_epoch_s=time.time(),
            not_found_hint=(
                not_found_hint(source.public_url, public_url(str(response.request.url)))
                if status == 404
                else ""
            ),
        ),
    )


async def _error_body(response: httpx2.Response) -> bytes:
    """The first :attr:`~otel_llm._defaults.Defaults.max_error_body_bytes` of an error answer's
    body — what its message is read from. The rest is never read: an error body of hundreds of
    megabytes, or one that never ends, costs the limit, not the body (the caller closes the
    response, and with it the connection). A read that fails keeps what came before."""
    limit = DEFAULTS.max_error_body_bytes
    kept = bytearray()
    # the body is read through an async generator: closing it stops the read at once
    body = response.aiter_bytes()
    try:
        async for piece in body:
            kept += piece[: limit - len(kept)]
            if len(kept) >= limit:
                break
    except TRANSPORT_FAILURES:
        pass  # the status and what came say enough
    finally:
        await body.aclose()
    return bytes(kept)


async def chat_completion(
    pool: Pool,
    source: Source,
    payload: Mapping[str, Any],
    *,
    stream: bool,
    clock: ChunkClock | None = None,
    on_connected: Callable[[], None] | None = None,
) -> Completion:
    """Run one chat attempt at ``source``, in its wire format, and return the assembled answer.

    With ``stream=True`` every incremental chunk is marked on ``clock`` as it arrives.
    ``on_connected`` is called when the pool gives the request its connection (see
    :meth:`~otel_llm._act._pool.Pool.lease`).
    """
    wire = source.wire
    outgoing = wire.request(source, payload, stream=stream)
    failure: e.ProviderError
    async with pool.lease(on_connected) as lease:
        request = lease.http.build_request(
            "POST",
            outgoing.url,
            json=outgoing.body,
            headers=outgoing.headers,
            timeout=request_timeout(source),
            extensions=lease.extensions,
        )
        try:
            response = await lease.http.send(request, stream=True, follow_redirects=False)
            try:
                await _raise_for_status(response, source)
                if not stream:
                    return await _read_json(response, source)
                reader = wire.reader(source, clock)
                await _read_stream(response, source, reader, clock)
            finally:
                await response.aclose()
        except TRANSPORT_FAILURES as exc:
            failure = transport_error(
                exc,
                source=source.name,
                chunks=clock.count if clock is not None else 0,
                secrets=source.secrets(),
            )
        else:
            if reader.complete:
                return reader.result()
            failure = e.TruncatedStream(reader.truncation(), source=source.name)
        raise failure  # inside the lease (a failed request), outside the except (no chain)


async def _read_json(response: httpx2.Response, source: Source) -> Completion:
    document = _json_body(await response.aread(), source, "chat")
    try:
        return source.wire.answer(source, document)
    except ShapeError as exc:
        failure = _malformed_response(exc, source, "chat completion")
    raise failure


def _json_body(raw: bytes, source: Source, what: str) -> dict[str, Any]:
    """A non-streamed answer's JSON object; MalformedStream when it is not one."""
    try:
        payload = _json.loads(raw)
    except ValueError as exc:
        failure = e.MalformedStream(
            f"answered {what} with a body that is not JSON ({len(raw)} bytes; {json_problem(exc)})",
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


async def _read_stream(
    response: httpx2.Response,
    source: Source,
    reader: StreamReader,
    clock: ChunkClock | None,
) -> None:
    """Consume the SSE stream into ``reader``.

    Like the SDKs, the body is read on after the API's end marker (``[DONE]``,
    ``message_stop``), so the connection goes back to the pool clean — for at most
    :attr:`~otel_llm._defaults.Defaults.drain_after_done_s` and a bounded number of events, and
    a failure of that read is no failure of the call. Nor is a failed read once the answer is
    complete without its end marker (a finish reason for every choice), and that read — for a
    usage frame and the end marker — lasts at most
    :attr:`~otel_llm._defaults.Defaults.wait_after_finish_s`: the connection is dropped, the
    answer stands. The events are decoded from the body's bytes
    (:mod:`otel_llm._act._sse`: a leading byte-order mark dropped, undecodable bytes as U+FFFD,
    every event bounded in size); what each means is the reader's
    (:class:`~otel_llm._act._wire.StreamReader`).
    """
    content_type = response.headers.get("content-type", "")
    if content_type.partition(";")[0].strip().lower() != "text/event-stream":
        raise e.MalformedStream(
            f"answered a streaming request with content type {content_type!r}",
            source=source.name,
        )
    read = reader.read
    mark = clock.mark if clock is not None else None
    decoder = SSEDecoder()
    # the body is read through an async generator: closing it closes the body read at once
    body = response.aiter_bytes()
    failure: e.ProviderError | None = None
    finished = False  # every choice has its finish reason: the rest of the read is bounded
    try:
        async with asyncio.timeout(None) as rest:
            async for piece in body:
                for kind, data in decoder.feed(piece):
                    if read(kind, data):
                        if mark is not None:
                            mark()
                    elif reader.ended:
                        break
                    if not finished and reader.finish_reason is not None and reader.complete:
                        finished = True
                        if clock is not None:
                            clock.finished = True  # no reason to hedge or kill now
                        rest.reschedule(
                            asyncio.get_running_loop().time() + DEFAULTS.wait_after_finish_s
                        )
                else:
                    continue
                await _drain(body, decoder)  # the end marker came
                return
            for kind, data in decoder.close():  # a last line ended by a lone CR
                if read(kind, data) and mark is not None:
                    mark()
    except TimeoutError:
        if not finished:
            raise
        # ``rest`` expired: nothing followed the complete answer in time, and it stands
    except ShapeError as exc:
        after = f"chunk event after {clock.count} chunks" if clock is not None else "a chunk"
        failure = e.MalformedStream(f"sent a malformed {after}: {exc}", source=source.name)
    except EventTooLarge as exc:
        chunks = clock.count if clock is not None else 0
        where = f"after {chunks} chunks" if chunks else "before the first chunk"
        failure = e.MalformedStream(
            f"sent an unreadable event stream {where} ({exc})", source=source.name
        )
    except TRANSPORT_FAILURES:
        if not reader.complete:
            raise
        # every choice had finished: what broke was the wait for a usage frame or the end
        # marker, and the answer stands (the response is closed, its connection not reused)
    finally:
        await body.aclose()
    if failure is not None:
        raise failure  # outside the except: nothing chained


_DRAIN_FAILURES: tuple[type[Exception], ...] = (*TRANSPORT_FAILURES, EventTooLarge)
"""What may end the read after the end marker without failing the call."""


async def _drain(body: AsyncIterator[bytes], decoder: SSEDecoder) -> None:
    """Read what follows the end marker, within bounds; nothing in it, and no failure to read
    it, changes the answer."""
    events = 0
    try:
        async with asyncio.timeout(DEFAULTS.drain_after_done_s):
            async for piece in body:
                events += len(decoder.feed(piece))
                if events > DEFAULTS.events_after_done:
                    return
    except _DRAIN_FAILURES:
        return


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
    if not source.wire.embeddings:
        raise embeddings_refused(source)
    body = dict(payload)
    body["model"] = source.request_model
    body["encoding_format"] = "float"
    failure: e.ProviderError
    async with pool.lease() as lease:
        request = lease.http.build_request(
            "POST",
            source.embeddings_url,
            json=body,
            headers=request_headers(source),
            timeout=request_timeout(source),
            extensions=lease.extensions,
        )
        try:
            # streamed, so an error body is read only up to its limit; an answer whole (a
            # batch of vectors may be large, as the API sends it)
            response = await lease.http.send(request, stream=True, follow_redirects=False)
            try:
                await _raise_for_status(response, source)
                raw = await response.aread()
            finally:
                await response.aclose()
        except TRANSPORT_FAILURES as exc:
            failure = transport_error(exc, source=source.name, chunks=0, secrets=source.secrets())
        else:
            result = _json_body(raw, source, "embeddings")
            if "error" in result and "data" not in result:
                raise stream_error(result, source=source.name, secrets=source.secrets())
            try:
                return embeddings_from_json(result, inputs=embedding_inputs(payload))
            except ShapeError as exc:
                failure = _malformed_response(exc, source, "embeddings answer")
        raise failure


def embeddings_refused(source: Source) -> e.ConfigurationError:
    """The error of an embeddings call that would reach a source whose API has none."""
    return e.ConfigurationError(
        f"sources[{source.name}]",
        f"source {source.name!r} ({source.provider}) has no embeddings endpoint the client "
        "calls: embeddings go to OpenAI-compatible and Azure sources; nothing was sent",
    )
