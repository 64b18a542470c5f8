"""``otel-llm collector``: build if needed, run the OpenTelemetry Collector into the store.

The collector distribution is the one ``collector/manifest.yaml`` describes, built once per
manifest by ``collector/build.sh`` (or the binary ``$OTEL_LLM_COLLECTOR_BIN`` names). With the
``duckdb`` config it receives OTLP on 127.0.0.1 and its ``otelllm_store`` exporter
(``collector/storeexporter``, Go) writes the spans straight into the store as sealed segments
(``$OTEL_LLM_COLLECTOR_STORE``); the metrics it receives go to the spool folder beside the store
(``<store>.otlp/metrics/``, bounded JSON lines that nothing ingests). :class:`CollectorRun`
starts it, waits for its health check, merges the store's small segments now and then while it
runs, and on stop ends it with SIGTERM (it seals what waits). Spool files that collectors of
earlier versions wrote (``<store>.otlp/traces*.binpb``) are still ingested (:class:`~otel_llm.
_show._ingest._otlp_files.Spool`): before the start, while it runs, and at stop.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final, Literal

from otel_llm import _env as env
from otel_llm._defaults import DEFAULTS
from otel_llm._errors import CollectorError
from otel_llm._packaged import COLLECTOR, packaged
from otel_llm._show._ingest._claim import StoreClaimed, announce, claim, spool_path
from otel_llm._show._ingest._otlp_files import IngestReport, Spool, kept_files
from otel_llm._show._store._access import prepare_for_writing

CONFIGS: Final = ("duckdb", "clickhouse")
"""The configs shipped in ``collector/``, by name (``--config NAME``)."""
BUILD_SCRIPT: Final = "build.sh"


def collector_dir() -> Path:
    """The ``collector/`` folder: inside the installed package (a wheel carries it), else
    beside the package in a checkout."""
    return packaged(COLLECTOR, BUILD_SCRIPT, CollectorError)


def config_path(choice: str) -> Path:
    """``duckdb`` / ``clickhouse``: the shipped config; anything else: a path to a config."""
    if choice in CONFIGS:
        return collector_dir() / f"{choice}.yaml"
    path = Path(choice)
    if not path.is_file():
        raise CollectorError(f"no collector config at {path} (or name one of {', '.join(CONFIGS)})")
    return path


Landing = Literal["store", "spool", "elsewhere"]
"""Where a collector config puts its spans (:func:`where_spans_land`)."""

_COMMENT: Final = re.compile(r"(?:^|\s)#.*$", re.MULTILINE)
"""A YAML comment: from a ``#`` at a line's start or after a space to the line's end."""
_STORE_EXPORTER: Final = re.compile(r"^\s*otelllm_store(?:/[^:\s]*)?\s*:", re.MULTILINE)
"""The ``otelllm_store`` exporter defined (as a key, with or without a name after ``/``)."""


def where_spans_land(config: Path) -> Landing:
    """Where a collector run with ``config`` puts its spans, as its text says (otel-llm reads
    no YAML at run time): ``store`` when it defines the ``otelllm_store`` exporter on the store
    ``otel-llm collector`` gives it (``${env:OTEL_LLM_COLLECTOR_STORE}``); ``spool`` when it
    writes ``traces*.binpb`` files into the spool folder (``${env:OTEL_LLM_COLLECTOR_SPOOL}/
    traces``: a config of an earlier version, whose files the command ingests); else
    ``elsewhere`` (ClickHouse, a file of its own, another backend): the store is not written,
    so the command does not claim it."""
    text = _COMMENT.sub("", config.read_text(encoding="utf-8", errors="replace"))
    if _STORE_EXPORTER.search(text) and env.OTEL_LLM_COLLECTOR_STORE in text:
        return "store"
    if re.search(re.escape(env.OTEL_LLM_COLLECTOR_SPOOL) + r"[^}]*}/traces", text):
        return "spool"
    return "elsewhere"


def collector_binary(announce: Callable[[str], None] | None = None) -> Path:
    """The collector binary: ``$OTEL_LLM_COLLECTOR_BIN``, else built by ``build.sh`` (a cached
    binary when the manifest has not changed; the first build takes minutes)."""
    named = env.env_path(env.OTEL_LLM_COLLECTOR_BIN)
    if named is not None:
        if not (named.is_file() and os.access(named, os.X_OK)):
            raise CollectorError(f"${env.OTEL_LLM_COLLECTOR_BIN}={named} is not an executable")
        return named
    script = collector_dir() / BUILD_SCRIPT
    if announce is not None:
        announce(f"building the collector if needed ({script}) …")
    try:
        done = subprocess.run(
            ["bash", str(script)], stdout=subprocess.PIPE, stderr=None, text=True, check=False
        )
    except OSError as exc:
        raise CollectorError(f"could not run {script}: {exc.strerror or exc}") from exc
    path = Path(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None
    if done.returncode != 0 or path is None or not path.is_file():
        raise CollectorError(f"{script} failed (exit code {done.returncode}; see above)")
    return path


_PR_SET_PDEATHSIG: Final = 1


def _end_with_parent() -> None:
    """In the collector's process before it starts: on Linux, SIGTERM it when the process that
    started it dies (killed outright, it cannot stop the collector itself); elsewhere nothing."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True, slots=True)
class Ports:
    """The collector's ports on 127.0.0.1."""

    grpc: int = DEFAULTS.collector_grpc_port
    http: int = DEFAULTS.collector_http_port
    health: int = DEFAULTS.collector_health_port

    def __post_init__(self) -> None:
        named = self._named()
        for index, (name, port) in enumerate(named):
            same = [other for other, taken in named[index + 1 :] if taken == port]
            if same:
                raise CollectorError(
                    f"the {name} and {' and '.join(same)} ports are both {port}: the collector "
                    "listens on three different ports (--grpc-port, --http-port, --health-port)"
                )

    def _named(self) -> tuple[tuple[str, int], ...]:
        return (("gRPC", self.grpc), ("HTTP", self.http), ("health", self.health))

    @classmethod
    def free(cls) -> Ports:
        """Three different ports nothing listens on (tests, the demo)."""
        while len(ports := {free_port(), free_port(), free_port()}) < 3:
            pass  # the system handed one out twice: ask again
        return cls(*ports)

    @property
    def traces_url(self) -> str:
        """Where an SDK sends spans over OTLP/HTTP."""
        return f"http://127.0.0.1:{self.http}/v1/traces"

    def taken(self) -> list[str]:
        """The ports something already listens on, named (``health 13133``): a collector
        started on one of them could not bind it, and an answer on the health port would be
        another process's."""
        return [f"{name} {port}" for name, port in self._named() if _listened_on(port)]


def _listened_on(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port`` (a port in TIME_WAIT is free)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class CollectorRun:
    """One collector process and the ingest of its files into a store (a context manager:
    ``__exit__`` stops it and ingests the rest; :attr:`report` says what landed)."""

    def __init__(
        self,
        binary: Path,
        config: Path,
        *,
        store: Path | None,
        ports: Ports | None = None,
        log: int | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.binary = binary
        self.config = config
        self.ports = ports or Ports()
        self.store_path = store
        self.store = prepare_for_writing(store) if store is not None else None
        self.spool = (
            Spool(spool_path(store), self.store)
            if store is not None and self.store is not None
            else None
        )
        self.report = IngestReport()
        self._log = log
        self._extra_env = extra_env or {}
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._spool_lock: BinaryIO | None = None

    def environment(self) -> dict[str, str]:
        """The collector's environment: ours, with its ports and spool set."""
        values = {
            **os.environ,
            env.OTEL_LLM_COLLECTOR_GRPC_PORT: str(self.ports.grpc),
            env.OTEL_LLM_COLLECTOR_HTTP_PORT: str(self.ports.http),
            env.OTEL_LLM_COLLECTOR_HEALTH_PORT: str(self.ports.health),
            **self._extra_env,
        }
        if self.spool is not None:
            values[env.OTEL_LLM_COLLECTOR_SPOOL] = str(self.spool.folder)
        if self.store is not None:
            values[env.OTEL_LLM_COLLECTOR_STORE] = str(self.store.path.absolute())
        return values

    def start(self, timeout_s: float = DEFAULTS.collector_start_timeout_s) -> None:
        """Ingest what an earlier run left, start the collector, wait for its health check
        (ports something already listens on are refused first: the health check that answered
        could be another collector's, and "up" would be said of one that is not)."""
        if taken := self.ports.taken():
            raise CollectorError(
                f"port {', '.join(taken)} on 127.0.0.1 is in use (another collector?): stop "
                "what listens there or choose other ports (--grpc-port, --http-port, "
                "--health-port)"
            )
        if self.spool is not None:
            self._hold_spool()
            try:
                self.spool.seal_current()
                self.ingest()
            except BaseException:
                self._release_spool()  # a start in this process later must be able to claim it
                raise
        try:
            self._process = subprocess.Popen(
                [str(self.binary), f"--config={self.config}"],
                env=self.environment(),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                start_new_session=True,  # Ctrl-C reaches us; we stop it in order
                preexec_fn=_end_with_parent,
            )
        except OSError as exc:
            self._release_spool()
            raise CollectorError(f"could not start {self.binary}: {exc.strerror or exc}") from exc
        deadline = time.monotonic() + timeout_s
        url = f"http://127.0.0.1:{self.ports.health}/"
        while True:
            code = self._process.poll()
            if code is not None:
                self._release_spool()
                raise CollectorError(
                    f"the collector exited with code {code} before its health check answered "
                    f"(its log says why: a port in use, a config it refused)"
                )
            with (
                contextlib.suppress(urllib.error.URLError, OSError),
                urllib.request.urlopen(url, timeout=1.0) as answer,
            ):
                if answer.status == 200:
                    self._announce()
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise CollectorError(f"the collector's health check ({url}) did not answer")
            time.sleep(0.05)

    def _hold_spool(self) -> None:
        """One collector per spool: a second one would write the same files. The claim says
        where this one listens once it answers (:meth:`_announce`), so an application sending
        to it leaves the store to it; until then it names no port (not those of the last run:
        an application started meanwhile keeps its store rather than lose what its exporter's
        retries outlast)."""
        assert self.spool is not None
        assert self.store_path is not None
        try:
            self.spool.folder.mkdir(parents=True, exist_ok=True)
            handle = claim(self.store_path)
        except StoreClaimed:
            raise CollectorError(
                f"another otel-llm collector is running on {self.store_path} (its files are in "
                f"{self.spool.folder}); stop it first"
            ) from None
        except OSError as exc:
            raise _unwritable_spool(self.spool.folder, exc) from exc
        try:
            announce(handle, ())
        except OSError as exc:
            handle.close()
            raise _unwritable_spool(self.spool.folder, exc) from exc
        self._spool_lock = handle

    def _announce(self) -> None:
        """Name the ports in the claim: the collector answers on them (a claim that cannot be
        written names none, and applications keep their store)."""
        if self._spool_lock is not None:
            with contextlib.suppress(OSError):
                announce(
                    self._spool_lock,
                    (self.ports.grpc, self.ports.http),
                    protocols={"grpc": self.ports.grpc, "http/protobuf": self.ports.http},
                )

    def _release_spool(self) -> None:
        if self._spool_lock is not None:
            self._spool_lock.close()  # closing the file releases the lock
            self._spool_lock = None

    @property
    def pid(self) -> int | None:
        """The collector process's id while it runs (benchmarks read its CPU time)."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """True while the collector process lives."""
        return self._process is not None and self._process.poll() is None

    def ingest(self) -> IngestReport:
        """Ingest the finished files now (what this pass did; also added to :attr:`report`)."""
        if self.spool is None:
            return IngestReport()
        with self._lock:
            done = self.spool.ingest()
            self.report.add(done)
            return done

    def compact(self) -> int:
        """Merge the store's small segments if any merge is due (the collector seals a segment
        up to four times a second while spans arrive); the number merged."""
        return self.store.compact() if self.store is not None else 0

    def stop(self, timeout_s: float = DEFAULTS.collector_stop_timeout_s) -> int | None:
        """End the collector (SIGTERM: it writes its last batches; SIGKILL after
        ``timeout_s``), then ingest every file left. Its exit code (None: not started)."""
        process = self._process
        code = None
        if self._spool_lock is not None:  # no longer answers: applications keep their store
            with contextlib.suppress(OSError):
                announce(self._spool_lock, ())
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            code = process.returncode
        if self.spool is not None:
            try:
                self.spool.seal_current()
                self.ingest()
                for path in kept_files(self.spool.folder):
                    if not any(str(path.name) in problem for problem in self.report.problems):
                        self.report.problems.append(f"{path}: kept by an earlier ingest")
            finally:
                self._release_spool()
        return code

    def __enter__(self) -> CollectorRun:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _unwritable_spool(folder: Path, exc: OSError) -> CollectorError:
    """The error for a spool folder this process cannot write (read-only, another user's)."""
    return CollectorError(
        f"cannot write the spool folder {folder} ({exc.strerror or exc}): otel-llm collector "
        "holds its claim on the store there (and the collector writes its metrics there); make "
        "it writable by this user (its mode, its owner, a mount that is not read-only), or "
        "choose another store with --db"
    )


@contextlib.contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM while the block runs (the handlers are put back)."""
    stop = threading.Event()
    previous = {
        number: signal.signal(number, lambda *_: stop.set())
        for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run_until_stopped(
    run: CollectorRun,
    stop: threading.Event,
    say: Callable[[str], None],
    poll_s: float = DEFAULTS.collector_poll_s,
) -> int | None:
    """Ingest finished files (and merge small segments every ``compact_every_s``) until
    ``stop`` is set or the collector exits, then stop it and ingest the rest; the collector's
    exit code."""
    merged_at = time.monotonic()
    try:
        while not stop.wait(poll_s):
            if time.monotonic() - merged_at >= DEFAULTS.compact_every_s:
                merged_at = time.monotonic()
                try:
                    run.compact()
                except (OSError, ValueError) as exc:  # merging is an optimisation: the
                    # collector runs on (ValueError: a segment pyarrow cannot read, such as
                    # a footer naming a column in bytes that are not UTF-8)
                    say(f"could not merge the store's segments ({exc})")
            done = run.ingest()
            for problem in done.problems:
                say(f"kept a damaged file: {problem}")
            if done.spans:
                say(f"{done.spans} spans from {done.files} file(s) into {run.store_path}")
            if not run.running:
                say("the collector exited on its own (its log above says why)")
                break
    finally:  # an ingest that failed (a full disk) still ends the collector first
        code = run.stop()
    return code


@contextlib.contextmanager
def sending_to(ports: Ports) -> Iterator[None]:
    """While the block runs, the standard variables send spans (and nothing else) over
    OTLP/HTTP to the collector on ``ports``: what ``init()`` and the SDK's exporter read."""
    values = {
        env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: ports.traces_url,
        env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf",
        env.OTEL_TRACES_EXPORTER: "otlp",  # the demo's spans go to its collector whatever is set
        env.OTEL_EXPORTER_OTLP_ENDPOINT: "",  # blank: no metrics to an endpoint set elsewhere
        env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "",
    }
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def start_for_demo(store: Path, say: Callable[[str], None]) -> CollectorRun:
    """A collector on free ports with the ``duckdb`` config, ingesting into ``store``, its log
    kept in the spool folder (``collector.log``)."""
    binary = collector_binary(say)
    folder = spool_path(store)
    folder.mkdir(parents=True, exist_ok=True)
    log = os.open(folder / "collector.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        run = CollectorRun(binary, config_path("duckdb"), store=store, ports=Ports.free(), log=log)
        run.start()
    finally:
        os.close(log)  # the child has its own copy
    return run
