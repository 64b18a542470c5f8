"""init() after a shutdown() whose metrics collector hung exports metrics again."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from tests.support.processes import run_python

SCRIPT = textwrap.dedent(
    """
    import http.server, socket, threading, time
    import otel_llm
    from opentelemetry import metrics

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)
    held = []  # taken, never answered
    threading.Thread(target=lambda: [held.append(hung.accept()) for _ in range(16)],
                     daemon=True).start()
    exports = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            exports.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    good = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=good.serve_forever, daemon=True).start()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{hung.getsockname()[1]}"
    first = otel_llm.init(db_path="one")
    counter = metrics.get_meter("probe").create_counter("probe")
    counter.add(1)
    first.shutdown()  # gives up on the hung collector; its last export goes on behind
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{good.server_address[1]}"
    second = otel_llm.init(db_path="two")
    deadline = time.monotonic() + 60
    while any(t.name == "otel-llm metrics shutdown" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the first shutdown's metrics never ended"
        time.sleep(0.05)
    before = exports.count("/v1/metrics")
    counter.add(1)
    second.meter_provider.force_flush(timeout_millis=30_000)
    print("exported after the first shutdown ended:", exports.count("/v1/metrics") - before)
    second.shutdown()
    """
).replace("import otel_llm", "import os\nimport otel_llm", 1)


def test_init_after_a_shutdown_that_gave_up_on_its_collector_exports_metrics(
    tmp_path: Path,
) -> None:
    """The first session's collector takes the connection and never answers: its
    ``shutdown()`` gives up after its bound while the last export waits on. The next
    ``init()``'s exporter, attached meanwhile, stays attached when that export ends (it was
    detached then, and the second session exported no metrics at all)."""
    variables = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = run_python(SCRIPT, cwd=tmp_path, env={**variables, "OTEL_TRACES_EXPORTER": "none"})
    assert done.returncode == 0, done.stderr
    assert "exported after the first shutdown ended: 0" not in done.stdout, done.stdout
    assert "exported after the first shutdown ended: " in done.stdout, done.stdout
