"""``otel-llm tune`` on a store several services write: a client hedges only to its own
sources, so a call's hedge legs come from its own service's other sources, never from another
application's; ``--service`` tunes one service."""

from __future__ import annotations

import json
import random
from pathlib import Path

from tests.support.processes import run_cli
from tests.support.tune_store import Scripted, TuneStore, stream

FAST_CALLS = 2400
SLOW_CALLS = 800


def _fast(rng: random.Random, source: str) -> Scripted:
    """A fast model: its first chunk after 0.3 s, done in under a second, but one attempt in
    twenty stalls 10 s after its sixth chunk."""
    silences = {5: 10_000.0} if rng.random() < 0.05 else None
    arrivals = stream(300.0 + rng.uniform(0, 20), 20, 25.0, silences)
    return Scripted(arrivals, arrivals[-1] + 5.0, source=source)


def _slow(rng: random.Random, source: str) -> Scripted:
    """Another application's slow model: its first chunk after 20 s."""
    arrivals = stream(20_000.0 + rng.uniform(0, 500), 20, 25.0)
    return Scripted(arrivals, arrivals[-1] + 5.0, source=source)


def _write(path: Path) -> None:
    rng = random.Random(11)
    for service, calls, draw, sources in (
        ("fast-app", FAST_CALLS, _fast, ("a-1", "b-2")),
        ("slow-app", SLOW_CALLS, _slow, ("c-1", "d-2")),
    ):
        store = TuneStore(path, service=service)
        try:
            for index in range(calls):
                store.call([draw(rng, sources[index % 2])])
        finally:
            store.close()


def test_hedge_legs_come_from_the_calls_own_service(tmp_path: Path) -> None:
    """The fast service's calls on a-1 are hedged from b-2 only: a stall hedge then cuts every
    stalled call but the rare one whose hedge stalls too, so the recommendation's p99 is a
    couple of seconds — drawn from the slow service's sources as well, two hedges in three
    would wait 20 s for a first chunk and the p99 would stay at the stall (over 10 s). The
    note says which services the replayed calls came from."""
    path = tmp_path / "s"
    _write(path)
    result = run_cli(
        "tune", "--db", str(path), "--source", "a-1", "--budget", "2", "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["data"]["calls"] == FAST_CALLS // 2
    predicted = document["recommendation"]["predicted"]
    assert predicted["p99_s"] < 5.0, predicted
    everything = run_cli("tune", "--db", str(path), "--budget", "2", "--format", "json")
    data = json.loads(everything.stdout)["data"]
    assert data["services"] == {"fast-app": FAST_CALLS, "slow-app": SLOW_CALLS}
    assert any("2 services" in note for note in data["notes"])


def test_service_tunes_one_service(tmp_path: Path) -> None:
    """``--service`` replays that service's calls only, hedged from its own sources; an
    unknown one is an error naming the services there are."""
    path = tmp_path / "s"
    _write(path)
    result = run_cli(
        "tune", "--db", str(path), "--service", "fast-app", "--budget", "2", "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["data"]["calls"] == FAST_CALLS
    assert document["data"]["sources"] == {"a-1": FAST_CALLS // 2, "b-2": FAST_CALLS // 2}
    assert document["data"]["notes"] == []
    assert document["recommendation"]["predicted"]["p99_s"] < 5.0
    unknown = run_cli("tune", "--db", str(path), "--service", "nope")
    assert unknown.returncode == 2
    assert "--service" in unknown.stderr
    assert "fast-app, slow-app" in unknown.stderr
    assert "Traceback" not in unknown.stderr
