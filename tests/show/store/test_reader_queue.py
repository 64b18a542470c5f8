"""A reader of the store holds the compaction lock shared even when it cannot queue for it."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest

from otel_llm._show._store._segments import LOCK, QUEUE_LOCK, SegmentStore


def test_a_reader_that_cannot_queue_still_holds_off_merges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue lock file refuses a lock (a file system whose flock refuses an exclusive lock
    on a file opened read-only, as Linux's NFS does): the reader reads unqueued, still holding
    the compaction lock shared, so no merge runs under it."""
    store = SegmentStore(tmp_path / "store")
    store.create()
    flock = fcntl.flock

    def queue_refused(fd: int, operation: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(QUEUE_LOCK) and operation & fcntl.LOCK_EX:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", queue_refused)
    with (
        store.reading(),
        (store.path / LOCK).open("a+b") as other,
        pytest.raises(BlockingIOError),
    ):
        flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
