"""Processes that spin on the CPU beside a measurement: the busy machine of the targets."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cpu_burners(count: int = 2, max_s: float = 3600.0) -> Iterator[None]:
    """``count`` processes running ``while 1: pass`` (each stops by itself after ``max_s``)."""
    code = f"import time\nend = time.monotonic() + {max_s!r}\nwhile time.monotonic() < end: pass"
    burners = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait(timeout=10)
