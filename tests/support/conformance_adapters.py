"""A deliberately wrong adapter for the conformance suite's own tests: otel-llm read back, then
one chunk too many, the first chunk 250 ms late and every finish reason ``length``."""

from __future__ import annotations

import dataclasses

from otel_llm.conformance import ADAPTERS, Case, Measured, Recorded

_OTEL_LLM = ADAPTERS["otel-llm"]
TTFT_SHIFT_S = 0.25


def _read_wrong(recorded: Recorded, case: Case) -> Measured:
    right = _OTEL_LLM.read(recorded, case)
    return dataclasses.replace(
        right,
        chunk_count=None if right.chunk_count is None else right.chunk_count + 1,
        ttft_s=None if right.ttft_s is None else right.ttft_s + TTFT_SHIFT_S,
        finish_reasons=("length",),
    )


WRONG = dataclasses.replace(_OTEL_LLM, name="wrong-on-purpose", read=_read_wrong)
"""otel-llm's adapter with a read that is off by a known amount."""
