"""The ground-truth proof of ``otel-llm tune`` on the package model alone: how far apart a
``tune`` prediction from N recorded calls and the p99 of M fresh calls are, when tune is right.

A p99 over 2,000 calls is one order statistic of a heavy-tailed distribution: two honest runs
differ by several per cent by chance alone, so a "within 10 %" check is only meaningful at sizes
this study chooses. It runs what ``benchmarks/tune/_truth.py`` runs — without the client,
the store or a clock, so thousands of trials are cheap:

* :func:`recorded_sample` — the calls :func:`~benchmarks.tune._truth.record` makes (the
  same sources, seeds and scripts in the same order), each attempt's timeline exactly as the
  store records and ``tune`` reads it (the span's chunk events chosen by the SDK's own rule,
  read back by tune's own reader), as tune's :class:`~otel_llm._tune._sample.Sample`;
* :func:`tune_sample` — tune's own grid, replay and choice on that sample;
* :func:`model_run` — a setting on fresh draws through the package model (zero overhead, calls
  in sequence), the stand-in for the client that the real runs then confirm.

:func:`wrong_floor` and :func:`stall_free_pool` make deliberately wrong samples, to show that the
check catches a tune that reads timelines badly.
"""

from __future__ import annotations

import itertools
import random
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from benchmarks.tune._truth import NO_TIMEOUT_S, source_seeds
from otel_llm import _semconv as sc
from otel_llm._defaults import DEFAULTS
from otel_llm._measure._events import choose_event_indices
from otel_llm._tune._grid import grid
from otel_llm._tune._hedging_model import Rules, Timeline, mean_backoff_s, simulate_call
from otel_llm._tune._recorded import Recorded, RecordedAttempt, RecordedCall, timeline_of_events
from otel_llm._tune._replay import DEFAULT_SEED, Draws, Figures, figures_of, replay
from otel_llm._tune._sample import Sample, sample
from otel_llm._tune._script_timeline import arrivals, timeline_of
from otel_llm._tune._tuning import Setting, recommend
from otel_llm.simulator._presets import Preset
from otel_llm.simulator._script import Script

_NS = 1_000_000_000
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def stored_timeline(script: Script, floor_ms: int = DEFAULTS.chunk_event_floor_ms) -> Timeline:
    """The timeline tune reads from the store for an attempt that streamed ``script`` on
    virtual time: the SDK's choice of chunk events (:func:`choose_event_indices`, which raises
    the floor of a stream with more long gaps than its events allow), read by tune's reader."""
    floor_s = floor_ms / 1000
    if script.chunk_interval_s <= floor_s:  # only silences make gaps above the floor
        return timeline_of(script, floor_s)
    offsets = [round(t * _NS) for t in arrivals(script)]
    gaps = [later - earlier for earlier, later in itertools.pairwise(offsets)]
    indexes, floor = choose_event_indices(
        len(offsets), gaps, floor_ms=floor_ms, budget=DEFAULTS.chunk_event_budget
    )
    return timeline_of_events(
        outcome=sc.OUTCOME_OK,
        duration_ns=offsets[-1],
        floor_ms=floor,
        indexes=indexes,
        gaps_ns=[gaps[i - 1] if i else None for i in indexes],
        offsets_ns=[offsets[i] for i in indexes],
    )


def recorded_scripts(preset: Preset, calls: int, seed: int, sources: int = 3) -> list[Script]:
    """The scripts :func:`~benchmarks.tune._truth.record` serves, in call order: call
    *i* runs on source *i* mod ``sources``, whose generator draws its requests in turn."""
    rngs = [random.Random(s) for s in source_seeds(seed, sources).values()]
    return [preset(rngs[index % sources]) for index in range(calls)]


def sample_of(timelines: Sequence[tuple[str, Timeline]], floor_ms: int) -> Sample:
    """Tune's sample of unhedged calls, one attempt each: (source, timeline) in call order."""
    attempts = tuple(
        RecordedAttempt(
            call=f"call-{index}",
            started_at=_EPOCH + timedelta(seconds=index),
            source=source,
            leg="primary",
            number=1,
            outcome=sc.OUTCOME_OK,
            streamed=True,
            metering=sc.METERING_EXACT,
            floor_ms=floor_ms,
            timeline=timeline,
        )
        for index, (source, timeline) in enumerate(timelines)
    )
    calls = {a.call: RecordedCall(a.timeline.end_s, 1) for a in attempts}
    return sample(Recorded(attempts, calls, len(attempts)))


def recorded_sample(preset: Preset, calls: int, seed: int, sources: int = 3) -> Sample:
    """The sample tune reads from a :func:`~benchmarks.tune._truth.record` store of the
    same arguments."""
    names = list(source_seeds(seed, sources))
    scripts = recorded_scripts(preset, calls, seed, sources)
    timelines = [(names[i % sources], stored_timeline(s)) for i, s in enumerate(scripts)]
    return sample_of(timelines, DEFAULTS.chunk_event_floor_ms)


@dataclass(frozen=True, slots=True)
class Tuned:
    """Tune's choice on a sample: the recommended setting (``None``: none) and every setting."""

    recommendation: Setting | None
    settings: tuple[Setting, ...]


def tune_sample(data: Sample, budget: float, seed: int = DEFAULT_SEED) -> Tuned:
    """What ``otel-llm tune --budget BUDGET`` computes on ``data`` (its grid, replay and
    choice, as :func:`otel_llm._tune._tuning.tune` runs them after reading the store)."""
    rules = grid(data, budget, NO_TIMEOUT_S)  # the proof's sources never time out
    draws = Draws.of(data, seed, max(r.max_rounds for r in rules))
    settings = tuple(Setting(r, replay(data, r, draws)) for r in rules)
    chosen = recommend(settings, budget) if data.enough else None
    return Tuned(chosen, settings)


def predict(data: Sample, rules: Rules, seed: int = DEFAULT_SEED) -> Figures:
    """Tune's replay of one setting on ``data``."""
    return replay(data, rules, Draws.of(data, seed, rules.max_rounds))


def averaged_p99(data: Sample, rules: Rules, seeds: Iterable[int]) -> float:
    """The mean of tune's predicted p99 for ``rules`` over the draw ``seeds`` (the replay's own
    noise — which hedge legs the recorded calls meet — averaged out; the recorded sample's
    stays)."""
    return statistics.fmean(predict(data, rules, seed).p99_s for seed in seeds)


def model_run(rules: Rules, preset: Preset, calls: int, seed: int) -> Figures:
    """``calls`` calls under ``rules`` on fresh draws of ``preset`` through the package model:
    every leg an independent draw (what three independent sources give), calls in sequence,
    the budget spent in that order, the mean of the client's backoff between rounds."""
    rng = random.Random(f"fresh/{seed}")
    budget = rules.budgets()
    backoff = mean_backoff_s(rules.max_rounds)
    walls: list[float] = []
    requests = 0
    for _ in range(calls):
        outcome = simulate_call(rules, lambda _role: stored_timeline(preset(rng)), budget, backoff)
        walls.append(outcome.wall_s)
        requests += outcome.requests
    return figures_of(walls, requests)


def _with_timelines(data: Sample, change: dict[Timeline, Timeline]) -> Sample:
    pools = {name: tuple(change.get(t, t) for t in pool) for name, pool in data.pools.items()}
    return replace(data, primaries=tuple(change.get(t, t) for t in data.primaries), pools=pools)


def wrong_floor(data: Sample, floor_s: float) -> Sample:
    """``data`` as a tune that read only the gaps longer than ``floor_s`` would see it (the
    chunk events of shorter gaps lost): every shorter gap gone, ends unchanged. Wrong."""

    def kept(timeline: Timeline) -> Timeline:
        gaps = tuple(g for g in timeline.long_gaps if g[1] > floor_s)
        return replace(timeline, long_gaps=gaps)

    everything = set(data.primaries).union(*data.pools.values())
    return _with_timelines(data, {t: kept(t) for t in everything})


def stall_free_pool(data: Sample, above_s: float) -> Sample:
    """``data`` whose hedge pools lost every attempt with a gap longer than ``above_s`` (as a
    tune that took the long attempts for censored would draw them): hedge legs that never
    stall. Wrong."""
    pools = {
        name: tuple(t for t in pool if all(gap <= above_s for _, gap in t.long_gaps))
        for name, pool in data.pools.items()
    }
    return replace(data, pools=pools)
