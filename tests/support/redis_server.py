"""A real, throw-away ``redis-server`` for tests, and the session fixture ``redis_url``.

A test module gets the fixture by importing ``redis_url_fixture``.

The server listens on 127.0.0.1 at a free port, keeps nothing on disk (``--save ''``, no
append-only file, a temporary ``--dir``) and is ready when it answers PING.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest

from tests.conftest import require

READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
_PING = b"*1\r\n$4\r\nPING\r\n"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def answers_ping(port: int, password: str | None = None) -> bool:
    """Whether a Redis server on ``port`` answers PING now (with AUTH first when needed)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as conn:
            if password is not None:
                conn.sendall(f"AUTH {password}\r\n".encode())
                if not conn.recv(64).startswith(b"+OK"):
                    return False
            conn.sendall(_PING)
            return conn.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process; use as a context manager, or :meth:`start` / :meth:`stop`."""

    def __init__(self, *, password: str | None = None) -> None:
        self.password = password
        self.port = 0
        self._dir = tempfile.TemporaryDirectory(prefix="otel-llm-redis-")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://`` URL of the running server (with the password when one is set)."""
        auth = f":{self.password}@" if self.password is not None else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start on a free port and return once the server answers PING (bounded in time)."""
        for _ in range(3):  # another process may take the free port before redis binds it
            self.port = free_port()
            args = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port)]
            args += ["--save", "", "--appendonly", "no", "--dir", self._dir.name]
            args += ["--logfile", str(Path(self._dir.name) / "redis.log")]
            if self.password is not None:
                args += ["--requirepass", self.password]
            self._process = subprocess.Popen(args, stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + READY_TIMEOUT_S
            while self._process.poll() is None and time.monotonic() < deadline:
                if answers_ping(self.port, self.password):
                    return self
                time.sleep(0.01)  # polling interval of a bounded readiness check
            self.stop()
        raise RuntimeError(f"redis-server did not start; log: {self.log()}")

    def log(self) -> str:
        """The server's log so far (for failure messages)."""
        path = Path(self._dir.name) / "redis.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self) -> None:
        """Kill the server abruptly (SIGKILL) and wait until it is gone."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(STOP_TIMEOUT_S)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after a bound)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
        self._dir.cleanup()


def require_redis_server() -> None:
    """Skip locally when ``redis-server`` is missing; fail in CI."""
    require(shutil.which("redis-server") is not None, "redis-server (./dev test installs it)")


@pytest.fixture(scope="session", name="redis_url")
def redis_url_fixture() -> Iterator[str]:
    """URL of a redis-server shared by the session's tests (each test uses its own keys)."""
    require_redis_server()
    with RedisServer() as server:
        yield server.url
