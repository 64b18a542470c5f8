"""What an optional feature needs installed, read from the package's own metadata (the extras
of ``pyproject.toml``), so a hint never names a requirement the package does not declare.

otel-llm is not on a package index yet: ``pip install 'otel-llm[report]'`` would fail, so a
hint names the requirements themselves, which any index has.
"""

from __future__ import annotations

import re
from importlib import metadata
from typing import Final

DISTRIBUTION: Final = "otel-llm"
_EXTRA: Final = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def requirements(extra: str) -> list[str]:
    """The requirements of ``extra`` as declared (``["aiohttp>=3.10"]``); ``[]`` when the
    package's metadata cannot be read."""
    try:
        declared = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []
    found = []
    for line in declared:
        requirement, _, marker = line.partition(";")
        match = _EXTRA.search(marker)
        if match is not None and match.group(1) == extra:
            found.append(requirement.strip().replace(" ", ""))
    return found


def install_hint(extra: str) -> str:
    """``pip install 'aiohttp>=3.10' (otel-llm's testing extra)``."""
    needed = requirements(extra)
    if not needed:
        return f"install otel-llm with its {extra} extra"
    return "pip install " + " ".join(f"'{r}'" for r in needed) + f" (otel-llm's {extra} extra)"
