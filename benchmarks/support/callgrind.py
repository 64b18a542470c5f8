"""Counting a measured stretch of a worker process under callgrind, for the benchmarks.

The worker calls ``os.getppid()`` (:data:`MARKER`) right before and right after the stretch it
measures; callgrind dumps its counters at each call, so the second dump holds exactly the
measured stretch (the first: start-up; the final file: the exit). A worker that measures several
stretches marks each the same way: the dump at each closing marker holds its stretch.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence

MARKER = "getppid"
"""The C function whose calls make callgrind dump its counters (``os.getppid()``)."""
NICE = ["nice", "-n", "10"] if shutil.which("nice") else []
"""Callgrind runs yield the CPU to other work on the machine: their counts do not change."""


def totals_of(path: str) -> int:
    """The instruction total of one callgrind output file."""
    with open(path, encoding="utf-8") as handle:
        found = re.search(r"^(?:summary|totals): (\d+)", handle.read(), re.MULTILINE)
    if found is None:
        raise SystemExit(f"no instruction total in {path}")
    return int(found.group(1))


@contextlib.contextmanager
def marked_run(
    command: Sequence[str], env: dict[str, str], label: str, markers: int = 2
) -> Iterator[tuple[subprocess.CompletedProcess[str], list[str]]]:
    """Run ``command`` under callgrind; yield the finished process and its ``markers + 1``
    output files while they exist: the dump at each marker (the part since the one before),
    then the rest up to the exit. With two markers: before the first, the measured stretch,
    after it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        done = subprocess.run(
            [
                *NICE,
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                f"--dump-before={MARKER}",
                *command,
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{label} under callgrind failed:\n{done.stderr[-3000:]}")
        parts = sorted(glob.glob(out + ".*"), key=lambda part: int(part.rsplit(".", 1)[1]))
        if parts != [f"{out}.{index}" for index in range(1, markers + 1)]:
            raise SystemExit(
                f"{label}: expected {markers} dumps at the {MARKER}() markers, got {parts}; "
                "something else called it"
            )
        yield done, [*parts, out]
