"""The claim ``otel-llm collector`` holds on a store while its collector runs: a lock file in
the store's spool folder, locked for as long as the collector runs, with the ports it listens
on written in it. ``init()`` reads it so that an application sending its spans over OTLP to that
collector does not also write them into the same store (each span would be stored twice).

Small and free of heavy imports: ``init()`` reads it on the way up."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final
from urllib.parse import urlsplit

SPOOL_SUFFIX: Final = ".otlp"
"""The spool folder of a store sits beside it: ``<store>.otlp``."""
SPOOL_LOCK: Final = ".collector.lock"
"""The claim's lock file, in the spool folder."""
_LOOKS_S: Final = 0.5
"""How long a collector taking the claim waits out applications looking at it (each holds it
shared for well under a millisecond)."""
_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost"})
"""The hosts that reach ``otel-llm collector``, which listens on 127.0.0.1 alone: not ``::1``
nor another ``127.*`` address (an application sending there is refused, and with its embedded
store left off it would lose every span)."""


def spool_path(store: Path) -> Path:
    """The spool folder of the store at ``store``: beside it, however the path names it
    (``.``, ``..``, ``a/..``: the working directory or a parent is the store; a symbolic link
    to it or to a folder above it: beside its real path), so the claim of a store is found
    under every name of its path."""
    absolute = Path(os.path.realpath(store))  # links followed, "." and ".." taken away
    if not absolute.name:  # the root: nothing is beside it
        return absolute / SPOOL_SUFFIX
    return absolute.with_name(absolute.name + SPOOL_SUFFIX)


class StoreClaimed(Exception):
    """Another collector holds the store's claim."""


def claim(store: Path) -> BinaryIO:
    """Take the store's claim (the spool folder must exist); the open lock file, whose closing
    gives it up. :class:`StoreClaimed` when another collector holds it. An application's
    ``init()`` looking whether one does holds the lock shared for an instant: that is waited
    out (:data:`_LOOKS_S`)."""
    handle = (spool_path(store) / SPOOL_LOCK).open("a+b")
    deadline = time.monotonic() + _LOOKS_S
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() < deadline:
                time.sleep(0.01)
                continue
            handle.close()
            raise StoreClaimed from None
        return handle


def announce(
    handle: BinaryIO, ports: tuple[int, ...], *, protocols: Mapping[str, int] | None = None
) -> None:
    """Write the ports the collector holding the claim listens on (127.0.0.1) into it, and
    which of them speaks which OTLP protocol (``grpc``, ``http/protobuf``)."""
    handle.seek(0)
    handle.truncate()
    said: dict[str, object] = {"ports": list(ports)}
    if protocols:
        said["protocols"] = dict(protocols)
    handle.write(json.dumps(said).encode())
    handle.flush()


@dataclass(frozen=True, slots=True)
class LiveCollector:
    """The collector that holds a store's claim now."""

    ports: tuple[int, ...]
    """The ports it listens on, on 127.0.0.1 (empty until it has said)."""
    protocols: tuple[tuple[str, int], ...] = ()
    """(OTLP protocol, its port) for each protocol it speaks (empty: not said)."""

    def receives(self, url: str, protocol: str | None = None) -> bool:
        """Whether an OTLP exporter sending to ``url`` over ``protocol`` (``grpc``,
        ``http/protobuf``; ``None``: not known) reaches this collector: at one of its hosts,
        on the port of that protocol, without TLS, which it does not speak (``https://``
        always speaks it; gRPC does for a ``host:port`` unless a ``*_INSECURE`` variable says
        ``true``)."""
        from otel_llm._otlp_endpoint import _grpc_tls  # here: init() reads it on the way up

        parts = urlsplit(url if "://" in url else f"//{url}")  # gRPC may name host:port only
        host = (parts.hostname or "").lower()
        scheme = parts.scheme.lower()
        grpc = protocol == "grpc" or (protocol is None and not scheme)  # host:port: gRPC's
        if scheme == "https" or (grpc and _grpc_tls("spans", scheme)):
            return False
        ports = {port for speaks, port in self.protocols if speaks == protocol} or set(self.ports)
        with contextlib.suppress(ValueError):
            port = parts.port
            return host in _LOOPBACK and port in ports
        return False


def live_collector(store: Path) -> LiveCollector | None:
    """The collector that holds ``store``'s claim now, if one does."""
    try:
        handle = (spool_path(store) / SPOOL_LOCK).open("rb")
    except OSError:  # no spool folder: no collector ever ran on this store
        return None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # held: a collector runs
        except OSError:
            return None
        else:
            return None  # nobody holds it (taking it shared is released by closing)
        try:
            said = json.loads(handle.read(4096) or b"{}")
            ports = tuple(int(port) for port in said.get("ports", ()))
            protocols = tuple(
                (str(name), int(port)) for name, port in said.get("protocols", {}).items()
            )
        except (ValueError, TypeError, AttributeError):
            ports, protocols = (), ()
    return LiveCollector(ports, protocols)
