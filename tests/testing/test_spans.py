"""The in-memory span pipeline (``otel_llm.testing.Spans``): what it is given is checked under
the names it was given by."""

from __future__ import annotations

import pytest

from otel_llm import ConfigurationError
from otel_llm.testing import Spans


@pytest.mark.parametrize("threshold_ms", [0, -5, 1.5, "1000", True])
def test_a_threshold_that_is_no_positive_integer_is_refused_by_its_own_name(
    threshold_ms: object,
) -> None:
    """``Spans(threshold_ms=0)`` is a ConfigurationError naming ``threshold_ms`` (it named the
    processor's ``default_threshold_ms``, a key the caller never wrote)."""
    with pytest.raises(ConfigurationError, match=r"^threshold_ms: must be a positive integer"):
        Spans(threshold_ms=threshold_ms)  # type: ignore[arg-type]
