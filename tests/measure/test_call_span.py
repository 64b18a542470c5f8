"""``error_text_recordable``: which errors' text a wrapped call's spans may record."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from the internet

import anthropic
import httpx
import httpx2
import litellm
import openai
import pydantic
import pytest
from google.genai import errors as genai_errors

from otel_llm import _semconv as sc
from otel_llm._errors import TruncatedStream
from otel_llm._measure._call_span import error_text_recordable


class _Answer(pydantic.BaseModel):
    city: str


def _validation_error() -> pydantic.ValidationError:
    try:
        _Answer.model_validate_json("the model's answer")
    except pydantic.ValidationError as error:
        return error
    raise AssertionError("unreachable")


_REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")

SAID_BY_THE_PROVIDER_OR_TRANSPORT: list[BaseException] = [
    openai.APIConnectionError(request=_REQUEST),
    anthropic.APITimeoutError(request=_REQUEST),
    genai_errors.ClientError(400, {"error": {"message": "bad", "status": "INVALID_ARGUMENT"}}),
    litellm.exceptions.BadRequestError("bad", model="m", llm_provider="openai"),
    httpx.RemoteProtocolError("peer closed connection"),
    httpx2.ReadTimeout("timed out"),
    TruncatedStream("the stream ended without a finish reason"),
]
MAYBE_CONTENT: list[BaseException] = [
    _validation_error(),
    ValueError("the application's own, quoting the answer"),
    openai.OpenAIError("an SDK's own error, not its API layer's"),
]


@pytest.mark.parametrize("error", SAID_BY_THE_PROVIDER_OR_TRANSPORT, ids=lambda e: type(e).__name__)
def test_an_sdk_api_or_transport_error_keeps_its_text(error: BaseException) -> None:
    """The errors an SDK's HTTP/API layer, an HTTP library or otel-llm raises are recorded
    whole, content capture or not."""
    assert error_text_recordable(error, content=False)


@pytest.mark.parametrize("error", MAYBE_CONTENT, ids=lambda e: type(e).__name__)
def test_any_other_error_keeps_its_text_only_with_content_capture(error: BaseException) -> None:
    """A validation error, an SDK helper's own, the application's: by type only unless
    content capture is on."""
    assert not error_text_recordable(error, content=False)
    assert error_text_recordable(error, content=True)


def test_request_integers_past_64_bits_are_left_out() -> None:
    """A request's integer that OTLP cannot carry (a ``seed`` of 2**64) is left out of the
    call span: the OTLP encoder logged its traceback for every export of such a span."""
    from otel_llm._measure._call_span import request_attributes

    attributes = request_attributes(
        {"seed": 2**64, "max_tokens": -(2**63) - 1, "n": 2, "temperature": 0.5}
    )
    assert attributes == {
        sc.GEN_AI_REQUEST_CHOICE_COUNT: 2,
        sc.GEN_AI_REQUEST_TEMPERATURE: 0.5,
    }
    edges = request_attributes({"seed": 2**63 - 1, "max_tokens": -(2**63)})
    assert edges == {sc.GEN_AI_REQUEST_SEED: 2**63 - 1, sc.GEN_AI_REQUEST_MAX_TOKENS: -(2**63)}
