"""A loopback HTTP server that answers every request with the bytes it is given: a body written
in pieces, then the connection closed cleanly or reset — for streams no well-behaved server
would send."""

from __future__ import annotations

import socket
import struct
import threading
from types import TracebackType


class RawServer:
    """Serves :attr:`pieces` (then closes, or resets when :attr:`reset`) to every request on
    ``127.0.0.1``; set them before each request."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.reset = False
        self.content_type = "text/event-stream"
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="raw-server", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with connection:
                self._answer(connection)

    def _answer(self, connection: socket.socket) -> None:
        connection.settimeout(5)
        request = b""
        try:
            while b"\r\n\r\n" not in request:
                data = connection.recv(65536)
                if not data:
                    return
                request += data
            head, _, body = request.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            while len(body) < length:
                data = connection.recv(65536)
                if not data:
                    return
                body += data
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: "
                + self.content_type.encode()
                + b"\r\nConnection: close\r\n\r\n"
            )
            for piece in self.pieces:
                connection.sendall(piece)
            if self.reset:
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            return

    def close(self) -> None:
        self._stop.set()
        self._socket.close()
        self._thread.join(5)

    def __enter__(self) -> RawServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
