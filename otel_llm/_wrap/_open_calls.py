"""The wrapped calls whose spans have not ended, ended at exit while they can still be exported.

A stream the application left unfinished (read part-way in a script that then exits, kept in a
global) is otherwise ended only when it is collected — at interpreter teardown, after the tracer
provider's own exit handler shut its exporters down, so its spans were lost. The exit handler
here ends each one as ``dropped`` first: exit handlers run last registered first, and it is
registered again after the provider's (by ``init()``, and by the first wrapped call). Only the
calls this process made: a forked child's exit ends none of its parent's.
"""

from __future__ import annotations

import atexit
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from otel_llm._wrap._recorder import CallRecorder

recorders: dict[int, CallRecorder] = {}
"""The recorders not ended yet, by id (a recorder leaves when it ends). A forked child starts
with none: the calls its parent had open are the parent's to end (ended in the child too, their
spans would be stored twice, once as dropped)."""

os.register_at_fork(after_in_child=recorders.clear)

hooked = False
"""Set once the exit handler is registered."""


def end_all() -> None:
    """End every wrapped call still open, as ``dropped``."""
    for recorder in list(recorders.values()):
        recorder.end_dropped()


def hook() -> None:
    """(Re)register :func:`end_all` to run at exit before every handler registered so far."""
    global hooked
    hooked = True
    atexit.unregister(end_all)
    atexit.register(end_all)
