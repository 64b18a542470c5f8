"""Anthropic's Messages API as Amazon Bedrock serves it (``InvokeModel`` and
``InvokeModelWithResponseStream``), played from the same scripts as ``/v1/messages``.

What differs from Anthropic's own API is the envelope, not the events:

- the model is in the path (``POST /model/{model}/invoke``, and ``…/invoke-with-response-stream``
  for a stream); the body carries neither ``model`` nor ``stream``;
- a streamed answer is an AWS event stream (``application/vnd.amazon.eventstream``), not SSE:
  each of Anthropic's events is one binary message whose headers say ``:message-type`` ``event``
  and ``:event-type`` ``chunk``, and whose JSON payload holds the event's JSON, base64-encoded,
  under ``bytes``. Every message is framed as AWS frames it: total and header lengths, a CRC-32
  of that prelude, the headers, the payload, a CRC-32 of the whole message;
- a mid-stream error is an exception message (``:message-type`` ``exception``), its
  ``:exception-type`` Bedrock's name for it (``modelStreamErrorException``, or
  ``throttlingException`` for a 429, ``serviceUnavailableException`` for a 503/529);
- there is no keepalive: a scripted silence with keepalives is written as silence.

The simulator does not check the request's AWS signature (as it checks no key).
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from dataclasses import replace

from otel_llm.simulator._anthropic import ANTHROPIC_MESSAGES
from otel_llm.simulator._frames import Send
from otel_llm.simulator._wire import Asked, Framing

CONTENT_TYPE = "application/vnd.amazon.eventstream"
"""The content type of a streamed Bedrock answer."""

STREAM_ROUTE = "/model/{model}/invoke-with-response-stream"
ROUTE = "/model/{model}/invoke"

_STRING = 7
"""The AWS event stream header value type of a string."""

_EXCEPTION_TYPES = {429: "throttlingException", 503: "serviceUnavailableException"}
"""Bedrock's exception of a mid-stream error by its status; any other is a model stream error."""


def _headers(pairs: dict[str, str]) -> bytes:
    out = bytearray()
    for name, value in pairs.items():
        key, text = name.encode(), value.encode()
        out += struct.pack("!B", len(key)) + key + struct.pack("!BH", _STRING, len(text)) + text
    return bytes(out)


def message(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event stream message."""
    encoded = _headers(headers)
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack("!I", binascii.crc32(body))


def _error_status(data: str) -> int:
    kind = json.loads(data).get("error", {}).get("type")
    return {"rate_limit_error": 429, "overloaded_error": 503}.get(kind, 500)


def encode(send: Send) -> bytes:
    """Anthropic's event ``send`` as Bedrock writes it."""
    if send.event == "error":
        kind = _EXCEPTION_TYPES.get(_error_status(send.data), "modelStreamErrorException")
        detail = json.loads(send.data).get("error", {}).get("message", "")
        headers = {
            ":exception-type": kind,
            ":content-type": "application/json",
            ":message-type": "exception",
        }
        return message(headers, json.dumps({"message": detail}).encode())
    chunk = base64.b64encode(send.data.encode()).decode()
    headers = {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return message(headers, json.dumps({"bytes": chunk}).encode())


EVENT_STREAM = Framing(CONTENT_TYPE, b"", encode)
"""Bedrock's framing: one event stream message per event, no keepalive."""


def _model(asked: Asked) -> str:
    return asked.path["model"]


BEDROCK_STREAMED = replace(
    ANTHROPIC_MESSAGES,
    model=_model,
    streamed=lambda _: True,
    framing=lambda _: EVENT_STREAM,
)
"""``InvokeModelWithResponseStream``: Anthropic's events in AWS event stream messages."""

BEDROCK = replace(ANTHROPIC_MESSAGES, model=_model, streamed=lambda _: False)
"""``InvokeModel``: Anthropic's complete message."""
