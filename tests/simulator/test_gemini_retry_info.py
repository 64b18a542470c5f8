"""Gemini's 429 carries the scripted ``Retry-After`` as a ``google.rpc.RetryInfo`` whose
``retryDelay`` is a protobuf Duration in JSON: decimal seconds (at most nine fractional digits,
no exponent) and ``s``; a value that is no finite number of seconds gives none."""

from __future__ import annotations

import json

import httpx2
import pytest

from otel_llm.simulator import SCRIPT_HEADER, Script, SimulatedProvider

RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


async def retry_delays(retry_after: str) -> list[str]:
    script = Script(error_status=429, retry_after=retry_after)
    async with (
        SimulatedProvider() as provider,
        httpx2.AsyncClient(base_url=provider.url) as http,
    ):
        response = await http.post(
            "/v1beta/models/m:generateContent",
            json={"contents": []},
            headers={SCRIPT_HEADER: script.model_dump_json()},
        )
    assert response.status_code == 429
    details = json.loads(response.text)["error"].get("details", [])
    return [d["retryDelay"] for d in details if d.get("@type") == RETRY_INFO]


@pytest.mark.parametrize(
    ("retry_after", "delays"),
    [
        ("7", ["7s"]),
        ("0.5", ["0.5s"]),
        ("0.00001", ["0.00001s"]),  # was "1e-05s"
        ("123456789.5", ["123456789.5s"]),  # was "1.23457e+08s": 211 s off
        ("0.0000000001", ["0s"]),  # finer than a nanosecond
        ("inf", []),  # was "infs"
        ("Wed, 21 Oct 2026 07:28:00 GMT", []),
    ],
)
async def test_retry_delay_is_a_protobuf_duration(retry_after: str, delays: list[str]) -> None:
    """Decimal seconds as protobuf's JSON writes them; none for what is no finite number."""
    assert await retry_delays(retry_after) == delays
