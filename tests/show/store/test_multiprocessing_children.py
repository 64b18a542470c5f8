"""Children made by ``multiprocessing`` with fork end with ``os._exit``, where no exit handler
runs: their spans still reach the store — a ``Process`` and a ``Pool``'s workers that never
flush, each in a fresh parent after ``init()`` (counted back from the store, none twice)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from otel_llm._show._store._access import open_store
from tests.support.processes import run_python

_SCRIPT = textwrap.dedent(
    """
    import multiprocessing
    import otel_llm
    from opentelemetry import trace

    def spans(count):
        tracer = trace.get_tracer("app")
        for number in range(count):
            tracer.start_span(f"child span {{number}}").end()
        return count

    if __name__ == "__main__":
        telemetry = otel_llm.init(db_path="store", otlp=False)
        spans(1)  # the parent's writer runs before the fork
        assert telemetry.force_flush(30)
        context = multiprocessing.get_context("fork")
        {children}
        telemetry.shutdown()
    """
)
_PROCESSES = """
        children = [context.Process(target=spans, args=(10,)) for _ in range(3)]
        for child in children:
            child.start()
        for child in children:
            child.join(60)
        print("exit codes", [child.exitcode for child in children])
"""
_POOL = """
        with context.Pool(2) as pool:
            print("made", sum(pool.map(spans, [10] * 4)))
            pool.close()
            pool.join()
"""


@pytest.mark.parametrize(("children", "expected"), [(_PROCESSES, 31), (_POOL, 41)])
def test_fork_children_of_multiprocessing_write_their_spans(
    tmp_path: Path, children: str, expected: int
) -> None:
    """Every span the children ended is in the store once, with the parent's."""
    script = _SCRIPT.format(children=textwrap.indent(textwrap.dedent(children), " " * 4))
    (tmp_path / "app.py").write_text(script)
    out = run_python("import runpy; runpy.run_path('app.py', run_name='__main__')", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    with open_store(tmp_path / "store") as conn:
        total, distinct = conn.execute(
            'SELECT count(*), count(DISTINCT "SpanId") FROM otel_traces'
        ).fetchone() or (0, 0)
    assert (total, distinct) == (expected, expected), out.stdout + out.stderr
