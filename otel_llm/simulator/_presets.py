"""Named presets of the simulated provider, and the ``measured`` sampler.

A :data:`Preset` is a callable ``(random.Random) -> Script``: a fixed preset ignores the generator,
``measured`` and ``oracle`` draw a fresh script per request from the server's seeded generator.

``measured`` reproduces the user's measurement on 4,407 real calls (median first chunk 1.63 s,
silence 71.3 % of model time) — see
:class:`MeasuredFit` for the distributions and how they reproduce each figure. ``oracle`` draws
exactly the same calls (same random numbers in the same order) without any silence: it is what
the measured calls would have looked like had the provider never stalled, the lower bound a
hedging strategy can approach.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from otel_llm.simulator._script import Script, Silence

Preset = Callable[[random.Random], Script]
"""Draws the script of one request from the server's seeded generator."""


@dataclass(frozen=True, slots=True)
class FixedPreset:
    """A preset that always answers with the same script."""

    script: Script

    def __call__(self, rng: random.Random) -> Script:
        """The script (the generator is not used)."""
        return self.script


@dataclass(frozen=True, slots=True)
class MeasuredFit:
    """Distributions fitted to the user's 4,407 measured calls. Seconds are scripted.

    Every call draws:

    * time to first chunk ``T ~ LogNormal(median 1.63 s, σ 0.78)`` — median 1.63 s, and
      P(T > 20 s) = P(Z > ln(20/1.63)/0.78 = 3.21) ≈ 0.07 %, i.e. ~3 of 4,407 calls;
    * chunk count ``N ~ LogNormal(median 120, σ 0.9)`` clamped to [2, 4000] and cadence
      ``I ~ LogNormal(median 30 ms, σ 0.3)`` capped at 0.25 s (far below a 1 s stall threshold),
      so the generation time ``(N-1)·I`` has a median of ~3.6 s;
    * with probability ``stall_probability`` (0.19) a *stalled* call: one long silence
      ``20 s + LogNormal(median 34.9 s, σ 1.2)`` capped at 600 s (median 54.9 s, always > 20 s)
      plus 0, 1, 1 or 2 (uniformly) shorter silences ``LogNormal(median 4 s, σ 0.8)``, each at
      most the long one — the provider queues the same call more than once;
    * otherwise, with probability 0.3, one moderate silence ``LogNormal(median 5 s, σ 0.7)``
      clamped to [1.5 s, 19.5 s] (a stall at a 1 s threshold, never a "silence > 20 s");
    * with probability 129/4407 a reasoning phase of 20–70 % of the chunks (reasoning tokens are
      reported on that share of calls only).

    Silences sit at uniformly drawn chunk positions and are drawn independently of ``N``, so
    silence does not correlate with output size (nor with input size, which the script ignores).

    What this gives (200,000 draws, seed 1): median time to first chunk 1.63 s; 0.06 % of calls
    with a first chunk > 20 s; 19.0 % of calls with a silence > 20 s; among those the median wall
    time is 69.3 s and the median longest silence 55.0 s; silence is 71.0 % of all time (summed
    silence / summed wall time, wall = first chunk delay + cadence + silences); r(silence, chunk
    count) = 0.00; reasoning on 2.9 % of calls. Measured: 1.63 s, 3/4407, 19.0 %, 69.4 s, 54.9 s,
    71.3 %, r = 0.05, 129/4407. The 4 s shorter silences of stalled calls are what lifts their wall
    time from ~60 s to ~69 s; the heavy tail (σ 1.2) of the long silence is what makes silence
    71 % of all time although only one call in five stalls.

    Every call consumes the same sequence of random numbers whatever its branch, so ``measured``
    and ``oracle`` from equal seeds draw the same calls, and so do different stall probabilities
    apart from which calls stall.
    """

    ttfc_median_s: float = 1.63
    ttfc_sigma: float = 0.78
    chunks_median: float = 120.0
    chunks_sigma: float = 0.9
    chunks_max: int = 4000
    interval_median_s: float = 0.03
    interval_sigma: float = 0.3
    interval_max_s: float = 0.25
    stall_floor_s: float = 20.0
    stall_excess_median_s: float = 34.9
    stall_sigma: float = 1.2
    stall_max_s: float = 600.0
    extra_silence_counts: tuple[int, ...] = (0, 1, 1, 2)
    extra_silence_median_s: float = 4.0
    extra_silence_sigma: float = 0.8
    moderate_probability: float = 0.3
    moderate_median_s: float = 5.0
    moderate_sigma: float = 0.7
    moderate_min_s: float = 1.5
    moderate_max_s: float = 19.5
    reasoning_probability: float = 129 / 4407
    reasoning_share_min: float = 0.2
    reasoning_share_max: float = 0.7


MEASURED_FIT = MeasuredFit()
"""The fit of the 4,407 measured calls' figures."""

STALL_PROBABILITY = 0.19
"""Share of measured calls with a silence longer than 20 s."""


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return rng.lognormvariate(math.log(median), sigma)


def _positions(wanted: list[float], gaps: int) -> list[int]:
    """Distinct chunk indices in ``[0, gaps)`` from uniforms; a taken index moves to the next."""
    taken: list[int] = []
    for u in wanted:
        index = min(gaps - 1, int(u * gaps))
        while index in taken and len(taken) < gaps:
            index = (index + 1) % gaps
        taken.append(index)
    return taken


def sample_measured(
    rng: random.Random,
    *,
    stall_probability: float = STALL_PROBABILITY,
    silences: bool = True,
    fit: MeasuredFit = MEASURED_FIT,
) -> Script:
    """Draw one call of the measured distribution (see :class:`MeasuredFit`).

    ``silences=False`` draws the same call without any silence (the ``oracle``).
    """
    ttfc = _lognormal(rng, fit.ttfc_median_s, fit.ttfc_sigma)
    count = min(fit.chunks_max, max(2, round(_lognormal(rng, fit.chunks_median, fit.chunks_sigma))))
    interval = min(fit.interval_max_s, _lognormal(rng, fit.interval_median_s, fit.interval_sigma))
    reasons = rng.random() < fit.reasoning_probability
    reasoning_share = rng.uniform(fit.reasoning_share_min, fit.reasoning_share_max)
    stalls = rng.random() < stall_probability
    long_silence = min(
        fit.stall_max_s,
        fit.stall_floor_s + _lognormal(rng, fit.stall_excess_median_s, fit.stall_sigma),
    )
    extra_count = rng.choice(fit.extra_silence_counts)
    extras = [
        min(long_silence, _lognormal(rng, fit.extra_silence_median_s, fit.extra_silence_sigma))
        for _ in range(max(fit.extra_silence_counts))
    ]
    moderate_happens = rng.random() < fit.moderate_probability
    moderate = _lognormal(rng, fit.moderate_median_s, fit.moderate_sigma)
    places = [rng.random() for _ in range(1 + max(fit.extra_silence_counts))]

    if stalls:
        durations = [long_silence, *extras[:extra_count]]
    elif moderate_happens:
        durations = [min(fit.moderate_max_s, max(fit.moderate_min_s, moderate))]
    else:
        durations = []
    positions = _positions(places[: len(durations)], count - 1)
    scripted = tuple(
        Silence(after_chunk=position, duration_s=duration)
        for position, duration in zip(positions, durations, strict=True)
    )
    reasoning = max(1, min(count - 1, round(count * reasoning_share))) if reasons else 0
    return Script(
        first_chunk_delay_s=ttfc,
        chunk_count=count,
        chunk_interval_s=interval,
        silences=scripted if silences else (),
        reasoning_chunks=reasoning,
    )


@dataclass(frozen=True, slots=True)
class MeasuredPreset:
    """Draws a fresh :func:`sample_measured` call per request."""

    stall_probability: float = STALL_PROBABILITY
    silences: bool = True
    fit: MeasuredFit = MEASURED_FIT

    def __post_init__(self) -> None:
        if not 0.0 <= self.stall_probability <= 1.0:
            raise ValueError(f"stall_probability must be in [0, 1], not {self.stall_probability}")

    def __call__(self, rng: random.Random) -> Script:
        """One call of the measured distribution."""
        return sample_measured(
            rng, stall_probability=self.stall_probability, silences=self.silences, fit=self.fit
        )


def measured(stall_probability: float = STALL_PROBABILITY) -> MeasuredPreset:
    """The measured distribution with ``stall_probability`` of calls stalling for > 20 s."""
    return MeasuredPreset(stall_probability=stall_probability)


def oracle(stall_probability: float = STALL_PROBABILITY) -> MeasuredPreset:
    """The measured calls without any silence (paired draw for draw with :func:`measured`)."""
    return MeasuredPreset(stall_probability=stall_probability, silences=False)


def _steady(
    *,
    first_chunk_delay_s: float = 0.3,
    chunk_count: int = 40,
    reasoning_chunks: int = 0,
    silences: tuple[Silence, ...] = (),
) -> FixedPreset:
    """A steady stream of chunks every 30 ms, changed as given."""
    return FixedPreset(
        Script(
            first_chunk_delay_s=first_chunk_delay_s,
            chunk_count=chunk_count,
            chunk_interval_s=0.03,
            reasoning_chunks=reasoning_chunks,
            silences=silences,
        )
    )


PRESETS: Mapping[str, Preset] = MappingProxyType(
    {
        "smooth": _steady(),
        "stall": _steady(silences=(Silence(after_chunk=9, duration_s=12.0),)),
        "keepalive-stall": _steady(
            silences=(Silence(after_chunk=9, duration_s=12.0, keepalive_every_s=2.0),)
        ),
        "reasoning": _steady(chunk_count=60, reasoning_chunks=40),
        "slow-first": _steady(first_chunk_delay_s=8.0),
        "measured": measured(),
        "oracle": oracle(),
    }
)
"""Presets by name; a request whose ``model`` is one of these names gets that behaviour.

``smooth`` 40 chunks every 30 ms after 0.3 s; ``stall`` the same with a 12 s silence after chunk
9; ``keepalive-stall`` that silence with ``: ping`` every 2 s; ``reasoning`` 40 reasoning-only
chunks then 20 content chunks; ``slow-first`` the first chunk after 8 s; ``measured`` and
``oracle`` see :class:`MeasuredFit`.
"""


FAST_STALLS = MeasuredPreset(
    stall_probability=0.4,
    fit=replace(
        MEASURED_FIT,
        stall_floor_s=3.0,
        stall_excess_median_s=5.0,
        stall_sigma=0.7,
        stall_max_s=120.0,
        extra_silence_median_s=2.0,
    ),
)
"""A variant of the measured fit with short frequent stalls (for hedging studies and the proof of
``otel-llm tune``): 40 % of calls stall, 3 s + LogNormal(median 5 s, σ 0.7) capped at 120 s (the
measured preset: 19 %, 20 s + LogNormal(median 34.9 s, σ 1.2) capped at 600 s)."""

SLOW_TTFT = MeasuredPreset(fit=replace(MEASURED_FIT, ttfc_median_s=3.0, ttfc_sigma=1.1))
"""A variant of the measured fit with slow first chunks: TTFT LogNormal(median 3 s, σ 1.1),
~26 % later than 6 s; the measured stalls."""
