"""The ``otel-llm`` command line: ``demo``, ``query``, ``report``, ``tune``, ``provider`` …"""

from otel_llm.cli._app import app, main

__all__ = ["app", "main"]
