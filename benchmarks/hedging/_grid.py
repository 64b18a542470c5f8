"""The grid of hedge settings that ``hedging_model.py`` and ``hedging_tail_latency.py`` share.

A :class:`Setting` is one row: stall trigger × first-token trigger × watchdog × budget ratio
(seconds are simulated seconds, as the simulator scripts them). Its :attr:`Setting.name` is the
row name both benchmarks print, so a model row and a client row of the same setting carry the
same name. :data:`DEFAULT` is the grid the client benchmark runs by default (~1 minute a setting
at 1,000 calls: a dozen settings spanning the model's frontier); :data:`FULL` is the model's
grid (too long for the client: run a subset of it with ``--grid NAME,NAME``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from otel_llm._defaults import DEFAULTS
from otel_llm._tune import _hedging_model as model

BURST = DEFAULTS.hedge_budget_burst
"""The hedge budget's burst in every row (the library default)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One hedge setting, as the client's keys spell it (simulated seconds)."""

    stall_after_s: float | None = None
    """``HEDGE__STALL_AFTER_S`` (``None``: no stall hedge)."""
    after_s: float | None = None
    """``HEDGE__AFTER_S`` (``None``: no first-token hedge)."""
    watchdog_s: float | None = None
    """The watchdog, before the first chunk and between chunks (``None``: none)."""
    budget: float = DEFAULTS.hedge_budget_ratio
    """``HEDGE__BUDGET_RATIO``."""

    @property
    def hedging(self) -> bool:
        """Whether either trigger is set."""
        return self.stall_after_s is not None or self.after_s is not None

    @property
    def both(self) -> bool:
        """Whether both triggers are set (the rows that need per-trigger budgets)."""
        return self.stall_after_s is not None and self.after_s is not None

    @property
    def name(self) -> str:
        """The row name: ``none``, ``wd 20`` (watchdog and retry only), ``stall 10 b0.25``,
        ``ft 6 b0.25``, ``stall 10 ft 6 wd 20 b0.5``..."""
        parts = []
        if self.stall_after_s is not None:
            parts.append(f"stall {self.stall_after_s:g}")
        if self.after_s is not None:
            parts.append(f"ft {self.after_s:g}")
        if self.watchdog_s is not None:
            parts.append(f"wd {self.watchdog_s:g}")
        if not parts:
            return "none"
        if self.hedging:
            parts.append(f"b{self.budget:g}")
        return " ".join(parts)

    def rules(self, max_rounds: int) -> model.Rules:
        """The package model's rules of this setting."""
        return model.Rules(
            self.after_s,
            self.stall_after_s,
            self.watchdog_s,
            self.budget,
            BURST,
            max_rounds=max_rounds,
        )


NONE = Setting()
"""No mitigation at all."""

DEFAULT: tuple[Setting, ...] = (
    NONE,
    Setting(watchdog_s=20.0),
    Setting(after_s=6.0),
    Setting(stall_after_s=5.0),
    Setting(stall_after_s=8.0),
    Setting(stall_after_s=10.0),
    Setting(stall_after_s=15.0),
    Setting(stall_after_s=5.0, budget=0.5),
    Setting(stall_after_s=10.0, watchdog_s=20.0),
    Setting(stall_after_s=5.0, watchdog_s=20.0, budget=0.5),
    Setting(stall_after_s=10.0, after_s=6.0),
    Setting(stall_after_s=10.0, after_s=6.0, watchdog_s=20.0),
)
"""The client benchmark's grid: unhedged, watchdog and retry alone, the first-token trigger
alone, the stall trigger alone at several triggers and both budgets, with the 20 s watchdog, and
both triggers (with and without it)."""

STALLS: tuple[float | None, ...] = (None, 2.0, 3.0, 5.0, 8.0, 10.0, 15.0)
AFTERS: tuple[float | None, ...] = (None, 6.0)
WATCHDOGS: tuple[float | None, ...] = (None, 12.0, 20.0, 30.0)
BUDGETS: tuple[float, ...] = (0.25, 0.5)


def full_grid(
    stalls: Sequence[float | None] = STALLS,
    afters: Sequence[float | None] = AFTERS,
    watchdogs: Sequence[float | None] = WATCHDOGS,
    budgets: Sequence[float] = BUDGETS,
) -> tuple[Setting, ...]:
    """Every combination, without duplicates: a watchdog only above the triggers (a shorter one
    kills the leg before its trigger fires), the budget only for settings that hedge."""
    rows: list[Setting] = []
    for stall, after, watchdog, budget in itertools.product(stalls, afters, watchdogs, budgets):
        triggers = [value for value in (stall, after) if value is not None]
        if watchdog is not None and any(watchdog <= value for value in triggers):
            continue
        row = Setting(stall, after, watchdog, budget if triggers else DEFAULTS.hedge_budget_ratio)
        if row not in rows:
            rows.append(row)
    return tuple(rows)


FULL = full_grid()
"""The model's grid (``--grid full``)."""

GRIDS = {"default": DEFAULT, "full": FULL}


def by_name(settings: Sequence[Setting] = FULL + DEFAULT) -> dict[str, Setting]:
    """Settings by row name."""
    return {setting.name: setting for setting in settings}


def parse_grid(text: str) -> tuple[Setting, ...]:
    """``default``, ``full``, or row names separated by commas (any of either grid)."""
    if text in GRIDS:
        return GRIDS[text]
    known = by_name()
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ValueError(
            f"unknown rows {unknown}: use default, full, or names like {DEFAULT[5].name!r}"
        )
    return tuple(known[name] for name in names)
