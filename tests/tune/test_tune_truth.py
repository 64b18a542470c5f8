"""``otel-llm tune`` on known ground truth: unhedged calls of a known distribution
recorded into a real store, ``tune --budget 1.25`` through the CLI, its recommendation run with
the real client on fresh draws — the predicted p99 and requests per call hold.

Everything runs on virtual time (``run_virtual``: simulated seconds, no real clock in any
figure), so the outcome does not depend on the machine's load; see the proof tests for the sizes
and the noise analysis behind the tolerance.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from benchmarks.tune import _noise, _truth  # the proof harness lives with the benchmarks
from otel_llm import AllSourcesExhausted, CallStats, Client, Source
from otel_llm._defaults import DEFAULTS
from otel_llm.simulator import Script, Silence, scripted_figures
from otel_llm.testing import Spans, figures_of, run_virtual
from otel_llm.testing._memory_provider import MemoryProvider
from tests.support import REPOSITORY

PRESETS = _truth.PRESETS
Proof = _truth.Proof
prove_all = _truth.prove_all
read_sample = _truth.read_sample
record = _truth.record
rules_of = _truth.rules_of
tune_run = _truth.tune_run
predict = _noise.predict
recorded_sample = _noise.recorded_sample
stored_timeline = _noise.stored_timeline
wrong_floor = _noise.wrong_floor

ROOT = REPOSITORY


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


# --- the proof ------------------------------------------------------------------------------
#
# How far apart may an honest prediction and measurement be? A p99 over 2,000 calls is one order
# statistic of a heavy-tailed distribution, and tune's prediction is itself the p99 of 2,000
# replayed calls. ``benchmarks/tune/ground_truth.py --noise`` runs this very proof on the package
# model alone (the recorded sample exactly as tune reads the store, tune's own grid, replay and
# choice, fresh draws through the model) over many seed pairs. At 2,000 recorded and 2,000 fresh
# calls (results in benchmarks/results/tune_ground_truth.txt):
#
# * measured preset, 150 trials: measured / predicted p99 mean 1.014, sd 0.120; 35 % of trials
#   fall outside ±10 %, 3 % outside ±30 %, 99 % within ±33.8 %;
# * fast stalls, 60 trials: mean 1.021, sd 0.068; 15 % outside ±10 %, none outside ±20 %
#   (99 % within ±17.6 %).
#
# So a ±10 % check at these sizes would fail for a third of all seeds with tune right; the
# tolerances below are the ones any seed meets with probability > 99 % (≈ 3.3 standard
# deviations). The ±10 % claim itself needs about 10,000 recorded and 20,000 fresh calls
# (tune replays at most its newest 10,000): the benchmark runs it at that size. The seeds here
# are fixed (virtual time makes the run deterministic) and were not chosen: by the analysis any
# seed passes with probability > 99 %.

RECORDED = 2000
"""Unhedged calls recorded per preset (the issue's ≥ 2,000)."""
FRESH = 2000
"""Fresh calls of the recommended setting per preset."""
SEED = 1
BUDGET = 1.25
TOLERANCE = {"measured": 0.40, "fast-stalls": 0.25}
"""Measured p99 / tune's predicted p99 must lie within 1 ± this, per preset (see above)."""
BURST = DEFAULTS.hedge_budget_burst
"""The client's hedge budget burst (``HEDGE__BUDGET_BURST``, 10)."""
WRONG_FLOOR_S = 1000.0
"""The wrong prediction's floor: above every scripted gap (silences are capped at 600 s)."""


@pytest.fixture(scope="module")
def proofs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Proof]:
    """Both presets' proofs (record, tune through the CLI, fresh run), in two processes."""
    directory = tmp_path_factory.mktemp("tune-truth")
    return prove_all(["measured", "fast-stalls"], RECORDED, FRESH, SEED, BUDGET, directory)


def test_tune_refuses_too_few_recorded_calls(tmp_path: Path) -> None:
    """On a real recording below its data rule (300 calls), tune says how much it used and
    recommends nothing (its own exit code), instead of a setting from a handful of calls."""
    record(tmp_path / "store", PRESETS["measured"], 300, seed=4)
    document, exit_code = tune_run(tmp_path / "store", BUDGET)
    assert exit_code == 3
    assert document["recommendation"] is None
    assert document["data"]["calls"] == 300
    assert document["data"]["enough"] is False


@pytest.mark.timeout(900)
def test_tune_used_every_recorded_call(proofs: dict[str, Proof]) -> None:
    """Tune replayed every recorded call through its own first attempt, from three sources,
    censored nothing and judged the data enough; what it read is what was served."""
    for name, proof in proofs.items():
        data = proof.document["data"]
        assert data["calls"] == data["attempts_used"] == RECORDED, name
        assert data["censored"] == 0, name
        assert data["enough"] is True, name
        assert data["floor_ms"] == 100, name
        assert sorted(data["sources"]) == ["sim-1", "sim-2", "sim-3"], name
        assert min(data["sources"].values()) >= RECORDED // 3, name
        assert proof.recording.spans_dropped == 0, name
        model = recorded_sample(PRESETS[name], RECORDED, SEED)
        assert len(proof.sample.primaries) == len(model.primaries) == RECORDED
        for read, made in zip(proof.sample.primaries, model.primaries, strict=True):
            assert read.end_s == pytest.approx(made.end_s, abs=1e-6)
            assert len(read.long_gaps) == len(made.long_gaps)


def _check_proof(proof: Proof) -> None:
    predicted = proof.recommendation["predicted"]
    measured = proof.measured
    assert measured.failures == 0
    assert measured.requests == measured.attempts  # every request is some call's attempt
    assert FRESH + measured.hedges <= measured.requests  # a retry is a request too
    ratio = measured.p99_s / predicted["p99_s"]
    tolerance = TOLERANCE[proof.preset]
    assert abs(ratio - 1.0) <= tolerance, (proof.preset, measured.p99_s, predicted["p99_s"])
    assert predicted["requests_per_call"] <= BUDGET
    # the hedge bucket's own cap: hedge legs <= ratio x rounds + burst, so at 2,000 calls a run
    # may exceed 1.25 requests per call by the burst's 10 / 2,000 (the noise study saw 1.254)
    assert measured.requests_per_call <= BUDGET + BURST / FRESH, proof.preset


@pytest.mark.timeout(900)
def test_measured_preset_recommendation_holds_on_fresh_draws(proofs: dict[str, Proof]) -> None:
    """On the measured preset tune's recommended setting, run by the real client on 2,000
    fresh draws, meets its predicted p99 (within the tolerance the noise study sets for
    2,000 recorded and 2,000 fresh calls) and stays within 1.25 requests per call."""
    _check_proof(proofs["measured"])


@pytest.mark.timeout(900)
def test_fast_stalls_recommendation_holds_on_fresh_draws(proofs: dict[str, Proof]) -> None:
    """The same on short frequent stalls."""
    _check_proof(proofs["fast-stalls"])


@pytest.mark.timeout(900)
def test_a_wrong_prediction_is_caught(proofs: dict[str, Proof]) -> None:
    """A tune that read the timelines with the wrong floor — one above every gap, so that no
    stall is seen — predicts a p99 the fresh run misses by far more than the tolerance: the
    check fails for it (on the measured preset, where hedging the stalls is what buys the p99).
    Subtler errors are beyond what 2,000 + 2,000 calls can resolve: the noise study measures
    how often the check catches a floor of 20 s or 60 s (0-6 % off: about as often as the right
    prediction) and hedge pools without the attempts that stalled > 20 s (65 % off: ±30 %
    catches it for 98 % of seeds at these sizes, ±10 % for every seed at 10,000 + 20,000)."""
    proof = proofs["measured"]
    rules = rules_of(proof.recommendation)
    blind = predict(wrong_floor(proof.sample, WRONG_FLOOR_S), rules)
    assert abs(proof.measured.p99_s / blind.p99_s - 1.0) > TOLERANCE["measured"]
    right = predict(proof.sample, rules)
    assert right.p99_s == pytest.approx(proof.predicted_p99_s, abs=1e-3)  # tune's own replay


def _stalled_share_hedged(proof: Proof, stall_floor_s: float) -> float:
    """Of the recorded calls whose longest gap is a stall of the preset (longer than its stall
    floor), the share the recommended stall trigger would fire on."""
    trigger = proof.recommendation["stall_after_s"]
    longest = [max((g for _, g in t.long_gaps), default=0.0) for t in proof.sample.primaries]
    stalled = [gap for gap in longest if gap > stall_floor_s]
    if trigger is None:
        return 0.0
    return sum(gap > trigger for gap in stalled) / len(stalled)


@pytest.mark.timeout(900)
def test_short_stalls_change_the_recommendation(proofs: dict[str, Proof]) -> None:
    """Expected before running: a hedge wins only when the stall outlasts a fresh attempt
    (first chunk ~1.6 s + generation ~3.6 s at the median). The measured preset's stalls last
    20 s and more (median 55 s), so tune should hedge every stalled call — 19 % of calls, inside
    the 25 % budget — and cut the p99 several-fold; short frequent stalls (40 % of calls, median
    8 s) mostly end before a hedge could win, so tune should leave many of them alone (hedge
    only the longest, not every stall with a shorter trigger) and hedging should buy far less.
    Checked on tune's output and the fresh runs. (Here: stall trigger 12 s on both presets; it
    fires on every measured stall and on 18 % of the short ones; p99 gain 3.4x against 1.07x.
    The noise study's 60 trials chose 8-12 s on short stalls: at most 46 % of them hedged.)"""
    measured, fast = proofs["measured"], proofs["fast-stalls"]
    assert _stalled_share_hedged(measured, 20.0) >= 0.9
    assert _stalled_share_hedged(fast, 3.0) <= 0.6

    def gain(proof: Proof) -> float:
        return float(proof.document["baseline"]["p99_s"]) / proof.predicted_p99_s

    assert gain(measured) >= 2.5
    assert gain(fast) <= 1.5
    assert float(measured.document["baseline"]["p99_s"]) / measured.measured.p99_s >= 2.5


@pytest.mark.timeout(900)
def test_each_preset_s_choice_is_at_least_as_good_there_as_the_other_s(
    proofs: dict[str, Proof],
) -> None:
    """Tune's choice depends on the data it read: each preset's recommended setting, replayed on
    that preset's own recorded sample, predicts a p99 no worse than the other preset's
    recommendation replayed on the same sample (within its budget). The two grids are built from
    different data, so the other preset's setting need not be among this one's candidates: a
    grid that missed a better setting, or a choice that ignored the sample, fails here."""
    for own, other in (("measured", "fast-stalls"), ("fast-stalls", "measured")):
        proof = proofs[own]
        theirs = predict(proof.sample, rules_of(proofs[other].recommendation))
        if theirs.requests_per_call <= BUDGET:
            assert proof.predicted_p99_s <= theirs.p99_s + 1e-3, (own, theirs)
