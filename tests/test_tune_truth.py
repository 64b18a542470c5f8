"""``otel-llm tune`` on known ground truth (issue 13 §3): unhedged calls of a known distribution
recorded into a real store, ``tune --budget 1.25`` through the CLI, its recommendation run with
the real client on fresh draws — the predicted p99 and requests per call hold.

Everything runs on virtual time (``run_virtual``: simulated seconds, no real clock in any
figure), so the outcome does not depend on the machine's load; see the proof tests for the sizes
and the noise analysis behind the tolerance.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import sys
from pathlib import Path

import pytest

from otel_llm import CallStats, Client, Source
from otel_llm._errors import AllSourcesExhausted
from otel_llm.simulator import Script, Silence, scripted_figures
from otel_llm.testing import Spans, figures_of, run_virtual
from otel_llm.testing._memory_provider import MemoryProvider
from otel_llm.testing._tune_noise import recorded_sample, stored_timeline
from otel_llm.testing._tune_truth import FAST_STALLS, PRESETS, read_sample, record

ROOT = Path(__file__).resolve().parent.parent


def _source(name: str, **fields: object) -> Source:
    return Source(name=name, provider="sim", base_url=f"http://{name}.test/v1", model="m", **fields)


def test_memory_provider_streams_the_script_on_virtual_time(spans: Spans) -> None:
    """A script served in memory reaches the client with its scripted gaps exactly: the
    client's figures and the processor's equal the script's ground truth, in simulated time."""
    script = Script(
        first_chunk_delay_s=2.5,
        chunk_count=30,
        chunk_interval_s=0.05,
        silences=(Silence(after_chunk=4, duration_s=40.0), Silence(after_chunk=20, duration_s=3.0)),
    )
    upstream = MemoryProvider(lambda _rng: script, {"a": 1})

    async def main() -> tuple[float, CallStats]:
        loop = asyncio.get_running_loop()
        async with Client(
            [_source("a", timeout_s=100.0)],
            http_client=upstream.client(),
            tracer_provider=spans.provider,
        ) as client:
            started = loop.time()
            result = await client.chat([{"role": "user", "content": "hi"}], stream=True)
            return loop.time() - started, result.stats

    elapsed, stats = run_virtual(main())
    truth = scripted_figures(script, threshold_s=1.0)
    assert elapsed == pytest.approx(script.nominal_duration_s, abs=1e-6)
    assert stats.ttft_ms == 2500
    assert stats.stall_count == truth.stall_count == 2
    assert stats.stall_ms == round(truth.stall_s * 1000)
    assert stats.chunk_count == 30
    (attempt,) = spans.attempts()
    assert figures_of(attempt).stall_ms == stats.stall_ms
    assert [s.source for s in upstream.served] == ["a"]
    assert upstream.served[0].stream is True


def test_memory_provider_draws_each_source_from_its_own_seed() -> None:
    """Each source draws its scripts from its own generator: the same seeds give the same
    scripts in the same order, another source's requests do not shift them."""
    preset = PRESETS["measured"]

    async def ask(upstream: MemoryProvider, hosts: list[str]) -> None:
        async with upstream.client() as http:
            for host in hosts:
                body = {"model": "m", "messages": [], "stream": False}
                response = await http.post(f"http://{host}.test/v1/chat/completions", json=body)
                assert response.status_code == 200
                assert response.json()["choices"][0]["finish_reason"] == "stop"

    alone = MemoryProvider(preset, {"a": 7, "b": 8})
    mixed = MemoryProvider(preset, {"a": 7, "b": 8})
    run_virtual(ask(alone, ["a", "a", "a"]))
    run_virtual(ask(mixed, ["b", "a", "b", "a", "a"]))
    assert [s.script for s in alone.served] == [s.script for s in mixed.served if s.source == "a"]
    assert len({s.script for s in mixed.served}) == 5


def test_memory_provider_answers_scripted_errors() -> None:
    """An error script is the scripted HTTP error (a 503 is retried and then exhausts the call),
    and a source the provider does not know is a 404."""
    upstream = MemoryProvider(lambda _rng: Script(error_status=503), {"a": 1})

    async def main() -> int:
        async with Client([_source("a")], http_client=upstream.client(), max_attempts=2) as client:
            with pytest.raises(AllSourcesExhausted):
                await client.chat([{"role": "user", "content": "hi"}], stream=True)
        async with upstream.client() as http:
            missing = await http.post("http://zz.test/v1/chat/completions", json={})
        return missing.status_code

    assert run_virtual(main()) == 404
    assert len(upstream.served) == 2


def test_fast_stalls_is_the_hedging_model_variant() -> None:
    """The proof's short-frequent-stalls preset is ``benchmarks/hedging_model.py``'s
    ``FAST_STALLS`` (defined twice, held equal here)."""
    path = ROOT / "benchmarks" / "hedging_model.py"
    spec = importlib.util.spec_from_file_location("hedging_model_for_truth", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        assert module.FAST_STALLS == FAST_STALLS
    finally:
        del sys.modules[spec.name]


def test_store_holds_exactly_the_served_timelines(tmp_path: Path) -> None:
    """What tune reads from a recorded store is the served scripts' timelines to the
    microsecond (first chunk, every gap above the 100 ms floor, the end): the same sample the
    model-only study builds from the same seeds without a client or a store."""
    recording = record(tmp_path / "store", PRESETS["measured"], 90, seed=3)
    assert recording.spans_dropped == 0
    assert recording.spans_written == 180
    stored = read_sample(tmp_path / "store")
    model = recorded_sample(PRESETS["measured"], 90, seed=3)
    assert stored.primary_sources == model.primary_sources
    assert stored.floor_ms == model.floor_ms == 100
    assert len(stored.primaries) == 90
    for read, made, served in zip(stored.primaries, model.primaries, recording.served, strict=True):
        assert made == stored_timeline(served.script)
        assert read.first_s == pytest.approx(made.first_s, abs=1e-6)
        assert read.end_s == pytest.approx(made.end_s, abs=1e-6)
        assert len(read.long_gaps) == len(made.long_gaps)
        for (at, gap), (made_at, made_gap) in zip(read.long_gaps, made.long_gaps, strict=True):
            assert at == pytest.approx(made_at, abs=1e-6)
            assert gap == pytest.approx(made_gap, abs=1e-6)
    assert sum(len(t.long_gaps) for t in stored.primaries) > 20  # the preset does stall
    assert all(math.isfinite(t.first_s) for t in stored.primaries)
