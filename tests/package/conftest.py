"""What the init() tests share: an environment without the surrounding OTLP variables."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.environment_variables import OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT

from otel_llm import _env as env

OTLP_VARIABLES = (
    *(
        name
        for constant, name in vars(env).items()
        if isinstance(name, str)
        and constant.startswith(
            ("OTEL_EXPORTER_", "OTEL_PYTHON_EXPORTER_", "OTEL_BSP_", "OTEL_METRIC", "OTEL_SPAN_")
        )
    ),
    env.OTEL_TRACES_EXPORTER,
    OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT,  # the SDK's, checked by init()
)
"""Every OTLP and export variable init() reads or checks, or the exporters it makes read
(named where otel-llm names them, so one it starts to read is cleared here too)."""


@pytest.fixture
def otlp_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No OTLP variable of the surrounding environment leaks into the test."""
    for name in OTLP_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
