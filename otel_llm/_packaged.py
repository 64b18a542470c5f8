"""Files otel-llm ships beside its code: the Collector's build files and configs, and the
Grafana dashboards with their provisioning.

A wheel carries them inside the package, under ``otel_llm/_data/<name>``; a checkout (an
editable install, ``./dev``) has them at the repository's top level, ``<name>/``. Either way
:func:`packaged` finds them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from otel_llm._errors import OtelLLMError

DATA: Final = "_data"
"""The folder inside the installed package that holds the shipped files (see pyproject.toml)."""
COLLECTOR: Final = "collector"
DASHBOARDS: Final = "dashboards"


def packaged(name: str, marker: str, error: type[OtelLLMError] = OtelLLMError) -> Path:
    """The shipped folder ``name`` (``collector`` or ``dashboards``): the first of the wheel's
    ``otel_llm/_data/<name>`` and the checkout's ``<name>/`` that holds ``marker``; ``error``
    when neither does."""
    package = Path(__file__).resolve().parent
    candidates = (package / DATA / name, package.parent / name)
    for candidate in candidates:
        if (candidate / marker).is_file():
            return candidate
    raise error(
        f"otel-llm's {name} files are missing (looked for {marker} in "
        f"{' and '.join(str(c) for c in candidates)}); reinstall otel-llm"
    )
