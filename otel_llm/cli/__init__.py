"""The ``otel-llm`` command line: ``demo``, ``query``, ``report``, ``tune``, ``provider`` …

``otel-llm --version`` answers from here, before the application (typer, rich, DuckDB and the
store's modules) is imported: a version check costs an interpreter's start and little more.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from otel_llm._version import __version__

if TYPE_CHECKING:
    import typer

VERSION_FLAG = "--version"


def version_line() -> str:
    """What ``otel-llm --version`` prints."""
    return f"otel-llm {__version__}"


def main() -> None:
    """Entry point of the ``otel-llm`` console script."""
    if sys.argv[1:] == [VERSION_FLAG]:
        print(version_line())
        return
    from otel_llm.cli._app import app

    app()


def __getattr__(name: str) -> Any:
    if name == "app":  # the typer application, imported on first use
        from otel_llm.cli._app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["VERSION_FLAG", "app", "main", "version_line"]

if TYPE_CHECKING:
    app: typer.Typer
