"""The OTLP headers variables are judged at ``init()``: one the exporters cannot parse is a
``ConfigurationError`` naming the variable — never the header's text, which is usually a
credential. (The OpenTelemetry exporters log such an entry whole, and drop it.)"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from otel_llm import ConfigurationError, Telemetry, init

SECRET = "s3cret-tok-9876"


@pytest.fixture
def otlp_env(otlp_env: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """An OTLP endpoint on a closed port (nothing is sent before shutdown), no other OTLP
    variable of the surrounding environment."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    return otlp_env


def _init(tmp_path: Path) -> Telemetry:
    return init(db_path=tmp_path / "store", set_global=False, duckdb=False)


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [
        ("OTEL_EXPORTER_OTLP_HEADERS", f"api-key:{SECRET}", "has no ="),
        ("OTEL_EXPORTER_OTLP_HEADERS", f"x-tenant=a,Authorization: Bearer {SECRET}", "has no ="),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"Authorization=Basic {SECRET},x", "has no ="),
        ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", f'authorization="{SECRET}"', "URL-encoded"),
        ("OTEL_EXPORTER_OTLP_HEADERS", f"api-key={SECRET}\u00e9", "URL-encoded"),
        ("OTEL_EXPORTER_OTLP_HEADERS", f"api key={SECRET}", "header name"),
    ],
)
def test_headers_the_exporters_cannot_parse_are_refused_without_their_text(
    tmp_path: Path,
    otlp_env: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    variable: str,
    value: str,
    why: str,
) -> None:
    """``api-key:TOKEN`` (HTTP's way of writing a header, OTLP's is ``api-key=TOKEN``) used to
    be dropped by the exporters with a warning that quoted it whole — the token in the log, every
    export then refused for want of it; now init() refuses it, naming the variable, and the
    token is nowhere."""
    otlp_env.setenv(variable, value)
    taken: list[Telemetry] = []
    with caplog.at_level(logging.DEBUG), pytest.raises(ConfigurationError) as caught:
        taken.append(_init(tmp_path))
    for telemetry in taken:
        telemetry.shutdown()
    error = caught.value
    assert error.key == variable
    assert why in str(error)
    assert SECRET not in str(error)
    assert SECRET not in repr(error)
    assert error.__cause__ is None
    assert error.__context__ is None
    assert all(SECRET not in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "   ",
        f"Authorization=Bearer%20{SECRET}",
        f"Authorization=Bearer {SECRET}",
        f" api-key = {SECRET} , x-tenant=a ",
        f"x-token={SECRET}==,empty=",
        f"api-key={SECRET}\n",
    ],
)
def test_headers_the_exporters_take_are_taken(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    otlp_env.setenv("OTEL_EXPORTER_OTLP_HEADERS", value)
    with caplog.at_level(logging.DEBUG):
        _init(tmp_path).shutdown()
    assert all(SECRET not in record.getMessage() for record in caplog.records)


def test_a_headers_variable_no_exporter_reads_is_not_judged(
    tmp_path: Path, otlp_env: pytest.MonkeyPatch
) -> None:
    """Each signal's own headers variable, when set, replaces the shared one (as the exporters
    read them), so a shared one that no exporter reads is none of init()'s business — nor are
    the headers of a signal that is not exported."""
    otlp_env.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"api-key:{SECRET}")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key=t")
    otlp_env.setenv("OTEL_METRICS_EXPORTER", "none")
    otlp_env.setenv("OTEL_EXPORTER_OTLP_METRICS_HEADERS", f"api-key:{SECRET}")
    _init(tmp_path).shutdown()
