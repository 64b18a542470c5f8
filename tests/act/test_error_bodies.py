"""An error answer's body is read only up to the error-body limit: a provider (or a proxy in
front of it) answering 503 with a huge or endless body costs the process that limit, not the
body — for a streamed and a non-streamed chat request and for embeddings alike. Against a real
HTTP server on ``127.0.0.1``, in a process of its own so that its peak memory is its own."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.processes import run_python

BODY_MB = 300
"""What the server would send (it stops once the client hangs up)."""

SCRIPT = r"""
import asyncio, json, resource, socket, sys, threading, time

from otel_llm import AllSourcesExhausted, Client, Source

BODY_MB = int(sys.argv[1])
PIECE = b"x" * 65536
sent = []


def answer(connection):
    with connection:
        request = b""
        while b"\r\n\r\n" not in request:
            data = connection.recv(65536)
            if not data:
                return
            request += data
        head, _, body = request.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n")
             if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            body += connection.recv(65536)
        total = 0
        try:
            connection.sendall(b"HTTP/1.1 503 Service Unavailable\r\n"
                               b"Content-Type: application/json\r\nConnection: close\r\n\r\n"
                               b'{"error": {"message": "overloaded ')
            while total < BODY_MB * 1024 * 1024:
                connection.sendall(PIECE)
                total += len(PIECE)
        except OSError:
            pass  # the client hung up
        sent.append(total)


def serve(server):
    while True:
        try:
            connection, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=answer, args=(connection,), daemon=True).start()


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(url):
    source = Source(name="s", provider="sim", base_url=url + "/v1", model="m", timeout_s=30)
    results = {}
    async with Client([source], max_attempts=1) as client, Client(
        [source], scope="embeddings", max_attempts=1
    ) as embedder:
        calls = {
            "stream": lambda: client.chat([{"role": "user", "content": "hi"}]),
            "no-stream": lambda: client.chat([{"role": "user", "content": "hi"}], stream=False),
            "embeddings": lambda: embedder.embed(["hi"]),
        }
        for name, call in calls.items():
            before, started = peak_mb(), time.monotonic()
            try:
                await call()
            except AllSourcesExhausted as exc:
                error = f"{type(exc).__name__}: {exc}"
            else:
                error = "no error"
            results[name] = {
                "error": error[:300],
                "grew_mb": peak_mb() - before,
                "took_s": time.monotonic() - started,
            }
    return results


server = socket.create_server(("127.0.0.1", 0))
threading.Thread(target=serve, args=(server,), daemon=True).start()
host, port = server.getsockname()[:2]
results = asyncio.run(main(f"http://{host}:{port}"))
print(json.dumps({"calls": results, "peak_mb": peak_mb()}))
"""


def test_a_huge_error_body_is_read_only_up_to_the_limit(tmp_path: Path) -> None:
    """A 503 with a 300 MB body: each call fails with the provider's 503 within seconds, and
    the process's peak memory grows by far less than the body (it grew by the whole body, and
    more, when the body was read whole before being cut)."""
    done = run_python(SCRIPT, str(BODY_MB), cwd=Path.cwd())
    assert done.returncode == 0, done.stderr[-3000:]
    calls = json.loads(done.stdout.splitlines()[-1])["calls"]
    for name, call in calls.items():
        assert "503" in call["error"], (name, call)
        assert "overloaded" in call["error"], (name, call)
        assert call["grew_mb"] < BODY_MB / 4, (name, call)
        assert call["took_s"] < 20, (name, call)
