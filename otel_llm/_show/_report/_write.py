"""``otel-llm report``'s file: where it goes, checked before any work, and written whole."""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from otel_llm._defaults import DEFAULTS
from otel_llm._errors import ConfigurationError
from otel_llm._show._report._data import OUTPUT_KEY, ReportData, collect
from otel_llm._show._report._html import render
from otel_llm._show._store._access import open_store
from otel_llm._show._store._segments import is_store


def default_output(store: Path) -> Path:
    """Where the report goes unless told: :attr:`Defaults.report_name` beside the store."""
    return store.absolute().parent / DEFAULTS.report_name


def check_output(path: Path) -> None:
    """Raise :class:`ConfigurationError` unless a report can be written at ``path``: a regular
    file or nothing yet (a link is followed to where it points), outside every store's
    directory (whose files otel-llm's writers manage). The report replaces what is
    there whole, so a device, a named pipe or a socket — ``/dev/null``, ``/dev/stdout`` — is
    refused rather than replaced by a file."""
    if path.is_dir():
        raise ConfigurationError(OUTPUT_KEY, f"{path} is a directory; give a file name")
    if path.exists() and not path.is_file():
        raise ConfigurationError(
            OUTPUT_KEY,
            f"{path} is not a regular file (a device, a named pipe or a socket): the report is "
            "a file of its own; give a file name",
        )
    folder = path.absolute().parent
    if not folder.is_dir():
        problem = "is not a directory" if folder.exists() else "does not exist"
        raise ConfigurationError(OUTPUT_KEY, f"cannot write {path}: {folder} {problem}")
    real = Path(os.path.realpath(folder))  # ``segments`` is a link into ``generations``
    if store := next((p for p in (real, *real.parents) if is_store(p)), None):
        raise ConfigurationError(
            OUTPUT_KEY,
            f"cannot write {path}: it is inside the store {store}, whose files otel-llm "
            "manages (a merge or a cleanup would remove the report); give a path outside it "
            "(the default is beside the store)",
        )
    try:  # for real: permission bits do not bind root, a read-only mount binds everyone
        with tempfile.TemporaryFile(dir=folder, prefix=f".{path.name}."):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigurationError(OUTPUT_KEY, f"cannot write {path}: {reason}") from None


def write_atomically(path: Path, text: str) -> None:
    """``text`` at ``path``: written to a hidden file beside it, flushed, renamed over it —
    a reader sees the old report or the new one, never half of one. A link at ``path`` stays a
    link: the file it points to is the one replaced."""
    path = Path(os.path.realpath(path))  # a link's target, not the link itself
    check_output(path)
    fd, tmp = tempfile.mkstemp(dir=path.absolute().parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fchmod(file.fileno(), 0o644)
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        reason = exc.strerror or type(exc).__name__
        raise ConfigurationError(OUTPUT_KEY, f"cannot write {path}: {reason}") from None


@dataclass(frozen=True, slots=True)
class Written:
    """What :func:`write_report` wrote."""

    path: Path
    bytes: int
    data: ReportData


def write_report(
    store: Path,
    output: Path | None = None,
    *,
    since: str | None = None,
    threshold_ms: int | None = None,
    now: datetime | None = None,
) -> Written:
    """Run the panels on the store at ``store`` and write the page to ``output`` (default:
    :func:`default_output`). Raises :class:`NotAStore` or :class:`ConfigurationError`."""
    path = output or default_output(store)
    check_output(path)
    with open_store(store) as conn:
        data = collect(conn, store, since=since, threshold_ms=threshold_ms, now=now)
    page = render(data)
    write_atomically(path, page)
    return Written(path, len(page.encode("utf-8")), data)
