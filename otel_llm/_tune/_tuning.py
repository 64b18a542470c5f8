"""``otel-llm tune``: a store's attempts → timelines → the hedging model over a grid → the
frontier and the recommended setting for a request budget.

The **frontier** is every setting that no other beats on both p99 wall time and requests per
call. The **recommendation** is the setting with the lowest p99 among those with requests per
call within the budget and a ``HEDGE__BUDGET_RATIO`` of at most budget − 1 (so that on live
traffic the client's hedge bucket, which earns that ratio per round started, keeps *hedges*
near the budget over a long run of calls; it does not cap retries — a retry round even earns —
and each process starts with a full burst, so a short run, or a run of failures, can cost
more); ties go to fewer requests. There is none when the data break the rule of
:mod:`otel_llm._tune._sample`: the figures are then still computed and shown, but nothing is
recommended. Recommendations only: no threshold adapts at run time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import duckdb
from pydantic import ValidationError

from otel_llm._act._groups import RetrySettings
from otel_llm._act._source import inter_chunk_budget_s
from otel_llm._defaults import DEFAULTS
from otel_llm._errors import ConfigurationError
from otel_llm._tune._config_lines import ConfigLines, config_lines
from otel_llm._tune._grid import grid
from otel_llm._tune._hedging_model import Rules
from otel_llm._tune._recorded import read_recorded
from otel_llm._tune._replay import DEFAULT_SEED, Draws, Figures, figures_of, replay
from otel_llm._tune._sample import RULE, Sample, sample

BUDGET_KEY: Final = "--budget"
DEFAULT_BUDGET: Final = 1.0 + DEFAULTS.hedge_budget_ratio
"""``--budget``: requests per call, the client's own default hedge budget (1.25)."""
MAX_BUDGET: Final = 10.0
"""The largest ``--budget``: a call of the client's default three rounds makes at most six
requests, so a budget above ten requests per call allows nothing more."""
TIMEOUT_KEY: Final = "--timeout"
MAX_ATTEMPTS_KEY: Final = "--max-attempts"
MAX_CALLS: Final = 10_000
"""The newest calls of the range a run replays (a few seconds of model time per 2,000)."""
_SLACK: Final = 1e-9


def check_budget(budget: float) -> float:
    """``budget`` if it is a number of requests per call from 1 to :data:`MAX_BUDGET`, else a
    :class:`ConfigurationError` naming ``--budget``."""
    if isinstance(budget, bool) or not math.isfinite(budget) or not 1.0 <= budget <= MAX_BUDGET:
        raise ConfigurationError(
            BUDGET_KEY,
            f"requests per call, a number from 1 to {MAX_BUDGET:g} (1.25: at most 25 % extra), "
            f"got {budget!r}",
        )
    return float(budget)


def check_timeout(timeout_s: float | None) -> float | None:
    """``timeout_s`` if it is ``None`` (not set) or a finite number of seconds > 0 (the
    client's ``TIMEOUT_S``), else a :class:`ConfigurationError` naming ``--timeout``."""
    if timeout_s is None:
        return None
    if isinstance(timeout_s, bool) or not math.isfinite(timeout_s) or timeout_s <= 0:
        raise ConfigurationError(
            TIMEOUT_KEY,
            f"the client's TIMEOUT_S, a finite number of seconds > 0, got {timeout_s!r}",
        )
    return float(timeout_s)


def check_max_attempts(max_attempts: int | None) -> int:
    """The client's ``RETRY__MAX_ATTEMPTS`` (its default when ``None``), if it is one the
    client accepts, else a :class:`ConfigurationError` naming ``--max-attempts``."""
    if max_attempts is None:
        return DEFAULTS.max_attempts
    try:
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
            raise TypeError
        return RetrySettings.model_validate({"max_attempts": max_attempts}).max_attempts
    except (TypeError, ValidationError):
        limits = RetrySettings.model_fields["max_attempts"].metadata  # the model's own bounds
        low = next(limit.ge for limit in limits if hasattr(limit, "ge"))
        high = next(limit.le for limit in limits if hasattr(limit, "le"))
        raise ConfigurationError(
            MAX_ATTEMPTS_KEY,
            f"the client's RETRY__MAX_ATTEMPTS (rounds a call may run), a whole number from "
            f"{low} to {high}, got {max_attempts!r}",
        ) from None


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting and what the replay gave it."""

    rules: Rules
    figures: Figures

    def as_json(self) -> dict[str, Any]:
        """The setting's fields and figures, as ``--format json`` prints them."""
        rules = self.rules
        return {
            "after_s": rules.after_s,
            "stall_after_s": rules.stall_after_s,
            "watchdog_s": rules.watchdog_s,
            "budget_ratio": rules.ratio if rules.hedging else None,
            **self.figures.as_json(),
        }


@dataclass(frozen=True, slots=True)
class Tuning:
    """Everything one run of ``otel-llm tune`` found."""

    sample: Sample
    budget: float
    seed: int
    max_calls: int
    settings: tuple[Setting, ...]
    """Every setting replayed; the first is the baseline (unhedged, no watchdog)."""
    frontier: tuple[Setting, ...]
    recommendation: Setting | None
    config: ConfigLines | None
    """The recommendation's configuration lines."""
    recorded: Figures | None
    """The replayed calls' own figures, as recorded (the sanity line); a recorded call that
    failed counts as failed (:data:`~otel_llm._tune._hedging_model.FAILED_S`), as in the replay."""
    timeout_s: float | None = None
    """The client's ``TIMEOUT_S`` every setting replays (``--timeout``; ``None``: not set, so
    60 s before the first chunk and 30 s between chunks)."""
    service: str | None = None
    """The one service whose calls were replayed (``--service``; ``None``: every service)."""
    max_attempts: int = DEFAULTS.max_attempts
    """The rounds a call may run in every setting replayed (``--max-attempts``: the client's
    ``RETRY__MAX_ATTEMPTS``)."""

    @property
    def client_json(self) -> dict[str, float]:
        """The client every setting replays: the silences it kills a leg at without a
        watchdog, before the first chunk and between chunks, and the rounds a call may run."""
        fallback = inter_chunk_budget_s(None, self.timeout_s)
        return {
            "timeout_s": self.timeout_s if self.timeout_s is not None else DEFAULTS.timeout_s,
            "inter_chunk_timeout_s": fallback,
            "max_attempts": self.max_attempts,
        }

    @property
    def baseline(self) -> Setting | None:
        """The unhedged replay without a watchdog (``None``: no call to replay)."""
        return self.settings[0] if self.settings else None

    @property
    def verdict(self) -> str:
        """Why there is no recommendation, or which it is, in one sentence."""
        if self.settings and all(setting.figures.all_failed for setting in self.settings):
            return (
                f"every one of the {self.sample.calls:,} calls replayed failed, in every setting: "
                "no wall time to compare, so nothing to recommend"
            )
        if not self.sample.enough:
            return "not enough data to recommend: " + "; ".join(self.sample.problems)
        if self.recommendation is None:
            return f"no setting keeps within {self.budget:g} requests per call"
        if not self.recommendation.rules.hedging:
            return "no hedge setting within the budget beats not hedging"
        if self.sample.single_source:
            return (
                f"the lowest p99 within {self.budget:g} requests per call, with a second "
                "source like this one (the client hedges only to a different source)"
            )
        return f"the lowest p99 within {self.budget:g} requests per call"

    def data_json(self) -> dict[str, Any]:
        """How much data the run used, and the rule."""
        s = self.sample
        return {
            "attempts_used": s.attempts_used,
            "calls": s.calls,
            "censored": s.censored,
            "sources": dict(sorted(s.sources.items())),
            "floor_ms": s.floor_ms,
            "failed_share": round(self.recorded.failed_share, 4) if self.recorded else None,
            "enough": s.enough,
            "rule": RULE,
            "problems": list(s.problems),
            "calls_to_record": None if s.enough else s.calls_to_record(),
            "single_source": s.single_source,
            "notes": list(s.notes),
            "left_out": dict(sorted(s.left_out.items())),
            "calls_in_range": s.calls_in_range,
            "max_calls": self.max_calls,
            "source": s.source,
            "service": self.service,
            "services": dict(s.services),
            "seed": self.seed,
            **self.client_json,
        }

    def as_json(self) -> dict[str, Any]:
        """The document ``--format json`` prints."""
        recommendation: dict[str, Any] | None = None
        if self.recommendation is not None and self.config is not None:
            fields = self.recommendation.as_json()
            recommendation = {
                key: fields[key] for key in ("after_s", "stall_after_s", "watchdog_s")
            }
            recommendation["budget_ratio"] = fields["budget_ratio"]
            recommendation["predicted"] = self.recommendation.figures.as_json()
            recommendation["env"] = list(self.config.env)
            recommendation["client_kwargs"] = dict(self.config.client_kwargs)
            recommendation["source_kwargs"] = dict(self.config.source_kwargs)
        baseline = self.baseline
        return {
            "data": self.data_json(),
            "budget": self.budget,
            **self.client_json,
            "baseline": baseline.figures.as_json() if baseline else None,
            "recorded": self.recorded.as_json() if self.recorded else None,
            "frontier": [setting.as_json() for setting in self.frontier],
            "settings": [setting.as_json() for setting in self.settings],
            "recommendation": recommendation,
            "verdict": self.verdict,
        }


def frontier(settings: Sequence[Setting]) -> tuple[Setting, ...]:
    """The settings no other beats on both p99 and requests per call (fewest requests first);
    of equal ones, the first."""
    kept: list[Setting] = []
    best = math.inf
    order = sorted(
        range(len(settings)),
        key=lambda i: (settings[i].figures.requests_per_call, settings[i].figures.p99_s, i),
    )
    for index in order:
        setting = settings[index]
        if setting.figures.p99_s < best:
            kept.append(setting)
            best = setting.figures.p99_s
    return tuple(kept)


def recommend(settings: Sequence[Setting], budget: float) -> Setting | None:
    """The setting with the lowest p99 whose requests per call are within ``budget`` and
    whose budget ratio is at most budget − 1 (ties, to the millisecond the metering
    records: fewer requests, then the earlier)."""
    allowed = budget - 1.0 + _SLACK
    eligible = [
        (round(s.figures.p99_s, 3), s.figures.requests_per_call, index, s)
        for index, s in enumerate(settings)
        if s.figures.requests_per_call <= budget + _SLACK
        and (not s.rules.hedging or s.rules.ratio <= allowed)
    ]
    return min(eligible, key=lambda item: item[:3])[3] if eligible else None


def tune(
    conn: duckdb.DuckDBPyConnection,
    *,
    budget: float = DEFAULT_BUDGET,
    source: str | None = None,
    service: str | None = None,
    start: datetime | None = None,
    seed: int = DEFAULT_SEED,
    max_calls: int = MAX_CALLS,
    timeout_s: float | None = None,
    max_attempts: int | None = None,
) -> Tuning:
    """Tune on the calls of the open store ``conn`` that started at ``start`` or later (all of
    them when None; see the module docstring), of ``service`` (every service when None), for a
    client whose sources have ``TIMEOUT_S`` = ``timeout_s`` and whose calls run at most
    ``max_attempts`` rounds (``None``: the client's defaults). Raises
    :class:`ConfigurationError` for a bad budget, timeout, attempt count, source or service."""
    budget = check_budget(budget)
    timeout_s = check_timeout(timeout_s)
    attempts = check_max_attempts(max_attempts)
    data = sample(read_recorded(conn, since=start, max_calls=max_calls, service=service), source)
    settings: list[Setting] = []
    recorded: Figures | None = None
    if data.calls:
        rules = grid(data, budget, timeout_s, attempts)
        draws = Draws.of(data, seed, max(r.max_rounds for r in rules))
        settings = [Setting(r, replay(data, r, draws)) for r in rules]
        recorded = figures_of(  # a failed call counts as failed, as the replay counts it
            [call.wall_s if call.ok else math.inf for call in data.recorded],
            sum(call.requests for call in data.recorded),
        )
    chosen = recommend(settings, budget) if data.enough else None
    config = config_lines(chosen.rules, data.sources) if chosen is not None else None
    return Tuning(
        sample=data,
        budget=budget,
        timeout_s=timeout_s,
        max_attempts=attempts,
        service=service,
        seed=seed,
        max_calls=max_calls,
        settings=tuple(settings),
        frontier=frontier(settings),
        recommendation=chosen,
        config=config,
        recorded=recorded,
    )


def tune_store(path: Path, **options: Any) -> Tuning:
    """:func:`tune` on the store at ``path`` (:class:`NotAStore` when it is not one)."""
    from otel_llm._show._store._access import open_store

    with open_store(path) as conn:
        return tune(conn, **options)
