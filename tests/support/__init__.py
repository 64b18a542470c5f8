"""What the tests share: servers they start (Redis, the simulated provider's processes), stores
and spans they build, a browser for the report, and the benchmarks loaded as modules. A test
file never imports another test file; it imports from here."""

from __future__ import annotations

from pathlib import Path
from typing import Final

REPOSITORY: Final = Path(__file__).resolve().parents[2]
"""The repository's root (where ``otel_llm``, ``benchmarks`` and ``docs`` are)."""
