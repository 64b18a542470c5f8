"""Every clock of the process on the suite's virtual time.

The suite runs its cases on an event loop whose clock jumps to the next timer
(:class:`~otel_llm.testing.VirtualTimeLoop`), the simulated provider on the same loop, so a
scripted 30 s silence takes no real time and arrives at exactly its scripted moment. An
instrumentation under test reads time its own way — ``time.time()``, ``time.perf_counter()``,
``timeit.default_timer``, the OpenTelemetry SDK's ``time_ns()`` for span and event timestamps —
so :func:`install` makes every one of those read the loop's virtual time: the ``time`` module's
functions, ``timeit.default_timer``, and the same functions already bound by name in the modules
imported so far (``from time import time_ns``). Each clock keeps its own origin (wall time stays
near the real date, monotonic clocks near their real value) and moves by the loop's virtual
seconds; between runs of the loop it stands still.

Process-wide by design: :func:`install` is for a process that runs the suite and nothing else
(``python -m otel_llm.conformance`` runs each instrumentation in such a process). The
standard library's own waits (``threading``, ``queue``, ``asyncio``) keep the real clock.
"""

from __future__ import annotations

import asyncio
import sys
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

NS_PER_S = 1_000_000_000

_CLOCKS = ("time", "monotonic", "perf_counter")
"""The ``time`` functions patched, each in seconds (float) and ``_ns`` (int) form."""


@dataclass(slots=True)
class VirtualClocks:
    """The virtual time every patched clock reads: the running virtual loop's ``time()``."""

    origins_ns: dict[str, int]
    """Each clock's real reading when :func:`install` ran."""
    originals: dict[str, Callable[[], Any]]
    """The real functions, by ``time`` attribute name."""
    loop: asyncio.AbstractEventLoop | None = None
    """The virtual loop the clocks follow (set by :meth:`follow`)."""
    base_ns: int = 0
    """Virtual nanoseconds of the loops followed before ``loop``."""
    frozen_ns: int = 0
    patched: dict[str, Callable[[], Any]] = field(default_factory=dict)

    def virtual_ns(self) -> int:
        """Virtual nanoseconds since :func:`install` (standing still between loops)."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            self.frozen_ns = self.base_ns + int(loop.time() * NS_PER_S)
        return self.frozen_ns

    def follow(self, loop: asyncio.AbstractEventLoop) -> None:
        """Follow ``loop`` from now on (its time starts at 0; the clocks go on from where they
        stand)."""
        self.base_ns = self.virtual_ns() - int(loop.time() * NS_PER_S)
        self.loop = loop


_INSTALLED: VirtualClocks | None = None


def installed() -> VirtualClocks | None:
    """The process's virtual clocks, if :func:`install` ran."""
    return _INSTALLED


def _stdlib(module_name: str) -> bool:
    return module_name.partition(".")[0] in sys.stdlib_module_names


def install() -> VirtualClocks:
    """Put every clock of the process on virtual time (idempotent); see the module."""
    global _INSTALLED
    if _INSTALLED is not None:
        return _INSTALLED
    originals: dict[str, Callable[[], Any]] = {}
    origins: dict[str, int] = {}
    for name in _CLOCKS:
        originals[name] = getattr(time, name)
        originals[f"{name}_ns"] = getattr(time, f"{name}_ns")
        origins[name] = originals[f"{name}_ns"]()
    clocks = VirtualClocks(origins_ns=origins, originals=originals)

    def seconds(name: str) -> Callable[[], float]:
        origin = origins[name]
        return lambda: (origin + clocks.virtual_ns()) / NS_PER_S

    def nanoseconds(name: str) -> Callable[[], int]:
        origin = origins[name]
        return lambda: origin + clocks.virtual_ns()

    for name in _CLOCKS:
        clocks.patched[name] = seconds(name)
        clocks.patched[f"{name}_ns"] = nanoseconds(name)
    replacement = {id(originals[name]): clocks.patched[name] for name in originals}
    for module_name, module in list(sys.modules.items()):
        if module is None or _stdlib(module_name):
            continue
        for attribute, value in list(vars(module).items()):
            swapped = replacement.get(id(value))
            if swapped is not None and value is originals.get(getattr(value, "__name__", "")):
                setattr(module, attribute, swapped)
    for name, function in clocks.patched.items():
        setattr(time, name, function)
    timeit.default_timer = clocks.patched["perf_counter"]
    _INSTALLED = clocks
    return clocks
