"""Shutting down in the children ``multiprocessing`` makes by fork.

Such a child (a ``Process``, a ``Pool``'s workers) ends with ``os._exit``: no exit handler runs
there, so what a writer or exporter still held — every span of a short task — was lost. The
parent registers, once per owner, a hook ``multiprocessing`` runs in each such child, which
hands the owner's ``shutdown()`` to ``multiprocessing``'s own exit finalizers: they run before
``os._exit``.
"""

from __future__ import annotations

import sys
from typing import Final, Protocol

CHILD_EXIT_PRIORITY: Final = 10
"""Where a shutdown stands among a child's exit finalizers (higher runs sooner; the pool's own
are 15 and below): the store's writer and the OTLP exporters stand together."""


class ShutsDown(Protocol):
    def shutdown(self) -> object: ...


def shut_down_in_children(owner: ShutsDown) -> bool:
    """Have each ``multiprocessing`` fork child made from now on shut ``owner`` down as it
    exits; False when this process never imported ``multiprocessing`` (it makes no such
    child)."""
    util = sys.modules.get("multiprocessing.util")
    if util is None:
        return False
    util.register_after_fork(owner, _when_the_child_exits)
    return True


def _when_the_child_exits(owner: ShutsDown) -> None:
    """In a multiprocessing child (after multiprocessing cleared the parent's finalizers)."""
    util = sys.modules["multiprocessing.util"]
    util.Finalize(owner, owner.shutdown, exitpriority=CHILD_EXIT_PRIORITY)
