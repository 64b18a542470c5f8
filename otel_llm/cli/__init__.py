"""The ``otel-llm`` command line: ``demo``, ``query`` and ``provider``."""

from otel_llm.cli._app import app, main

__all__ = ["app", "main"]
