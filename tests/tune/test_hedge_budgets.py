"""The per-trigger hedge budget (``otel_llm/_act/_hedge_budget.py``): the stall
trigger keeps the whole bucket, the first-token trigger spends only what it overflows; the cap
on extra requests holds; it is the budget the model study chose (``overflow 5 +ft``)."""

from __future__ import annotations

import importlib
import random
from types import ModuleType
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_llm._act._hedge_budget import FIRST_TOKEN, STALL, HedgeBudget, HedgeBudgets, Trigger
from otel_llm._defaults import DEFAULTS
from otel_llm.cli._demo import DemoBudget

Op = tuple[Literal["earn", "spend", "refund"], Trigger]
"""One step of a budget's life: a round started, a hedge asked for, a hedge given back."""

OPS = st.lists(
    st.tuples(st.sampled_from(["earn", "spend", "refund"]), st.sampled_from([FIRST_TOKEN, STALL])),
    max_size=400,
)
RATIOS = st.sampled_from([0.0, 0.1, 0.25, 0.5, 1.0, 2.5])
BURSTS = st.sampled_from([1.0, 2.0, 5.0, 10.0])


def replay(budgets: HedgeBudgets, ops: list[Op]) -> None:
    """Run ``ops`` on ``budgets``, checking the cap at every prefix: hedges granted (spent and
    not given back) never exceed ratio × rounds + what the buckets start with (burst, and
    first_token_burst with both triggers). A refund only gives back a hedge of
    that trigger that was granted and not yet given back (what the ledger does)."""
    rounds = 0
    granted = {FIRST_TOKEN: 0, STALL: 0}
    for op, trigger in ops:
        if op == "earn":
            budgets.earn()
            rounds += 1
        elif op == "spend":
            granted[trigger] += budgets.spend(trigger)
        elif granted[trigger]:
            budgets.refund(trigger)
            granted[trigger] -= 1
        start = budgets.burst + (budgets.first_token_burst if budgets.both else 0.0)
        assert sum(granted.values()) <= budgets.ratio * rounds + start + 1e-9
        assert budgets.stall.tokens >= 0.0
        assert budgets.first_token.tokens >= 0.0
        assert budgets.held <= budgets.burst + (budgets.first_token_burst if budgets.both else 0)


@settings(max_examples=300, deadline=None)
@given(ops=OPS, ratio=RATIOS, burst=BURSTS, first_token_burst=BURSTS, both=st.booleans())
def test_hedges_granted_stay_within_the_cap(
    ops: list[Op], ratio: float, burst: float, first_token_burst: float, both: bool
) -> None:
    """Over any sequence of earn/spend/refund, one trigger set or both, the hedges granted stay
    at most ratio × primary rounds + the starting tokens at every prefix from the start."""
    replay(HedgeBudgets(ratio, burst, first_token_burst, both), ops)


@settings(max_examples=200, deadline=None)
@given(ops=OPS, ratio=RATIOS, burst=BURSTS, first_token_burst=BURSTS)
def test_one_trigger_is_exactly_the_single_bucket(
    ops: list[Op], ratio: float, burst: float, first_token_burst: float
) -> None:
    """With one trigger set, either trigger spends the one whole bucket: every answer and every
    token count is a single HedgeBudget's (``first_token_burst`` plays no part)."""
    budgets = HedgeBudgets(ratio, burst, first_token_burst, both=False)
    single = HedgeBudget(ratio, burst)
    for op, trigger in ops:
        if op == "earn":
            budgets.earn()
            single.earn()
        elif op == "spend":
            assert budgets.spend(trigger) == single.spend()
        else:
            budgets.refund(trigger)
            single.refund()
        assert budgets.held == single.tokens


@settings(max_examples=200, deadline=None)
@given(ops=OPS, ratio=RATIOS, burst=BURSTS, first_token_burst=BURSTS)
def test_with_both_the_stall_trigger_spends_as_if_alone(
    ops: list[Op], ratio: float, burst: float, first_token_burst: float
) -> None:
    """With both triggers, first-token spends and refunds never touch the stall bucket: every
    stall spend is answered exactly as the stall trigger alone (the same rounds and stall
    steps, no first-token steps) would answer it, and its tokens are the same throughout."""
    both = HedgeBudgets(ratio, burst, first_token_burst, both=True)
    alone = HedgeBudgets(ratio, burst, first_token_burst, both=False)
    granted = 0
    for op, trigger in ops:
        if op == "earn":
            both.earn()
            alone.earn()
        elif trigger == FIRST_TOKEN:
            if op == "spend":
                granted += both.spend(FIRST_TOKEN)
            elif granted:
                both.refund(FIRST_TOKEN)
                granted -= 1
        elif op == "spend":
            assert both.spend(STALL) == alone.spend(STALL)
        else:
            both.refund(STALL)
            alone.refund(STALL)
        assert both.stall.tokens == alone.stall.tokens


def test_both_buckets_start_full_and_the_first_token_one_earns_the_overflow() -> None:
    """Both triggers: both buckets start full, so a fresh client's first late first chunk is
    hedged at once; once spent, the first-token bucket earns only what the full stall bucket
    cannot hold, up to ``first_token_burst``; while the stall bucket has room, rounds refill it
    first and nothing spills."""
    budgets = HedgeBudgets(ratio=0.5, burst=2.0, first_token_burst=1.5, both=True)
    assert (budgets.stall.tokens, budgets.first_token.tokens) == (2.0, 1.5)
    assert budgets.spend(FIRST_TOKEN), "a fresh client hedges at once"
    assert not budgets.spend(FIRST_TOKEN), "0.5 left: a first-token hedge never takes stall tokens"
    budgets.earn()
    assert (budgets.stall.tokens, budgets.first_token.tokens) == (2.0, 1.0)
    for _ in range(3):
        budgets.earn()
    assert budgets.first_token.tokens == 1.5, "held at first_token_burst"
    assert budgets.spend(STALL)
    budgets.earn()  # 1.0 -> 1.5: the stall bucket has room, nothing spills
    assert (budgets.stall.tokens, budgets.first_token.tokens) == (1.5, 1.5)
    assert budgets.spend(FIRST_TOKEN)
    assert not budgets.spend(FIRST_TOKEN)
    assert budgets.stall.tokens == 1.5
    assert budgets.held == 2.0


def test_refunds_go_back_to_the_bucket_that_paid() -> None:
    """A first-token hedge given back returns to the first-token bucket, a stall hedge to the
    stall bucket; a stall token the stall bucket has no room for any more (it filled up while
    the hedge was being admitted) spills to the first-token bucket, like an earned one."""
    budgets = HedgeBudgets(ratio=1.0, burst=2.0, first_token_burst=5.0, both=True)
    for _ in range(3):
        assert budgets.spend(FIRST_TOKEN)
    assert budgets.first_token.tokens == 2.0
    assert budgets.spend(FIRST_TOKEN)
    budgets.refund(FIRST_TOKEN)
    assert (budgets.stall.tokens, budgets.first_token.tokens) == (2.0, 2.0)
    assert budgets.spend(STALL)
    budgets.earn()  # another round meanwhile: the stall bucket is full again
    assert (budgets.stall.tokens, budgets.first_token.tokens) == (2.0, 2.0)
    budgets.refund(STALL)
    assert (budgets.stall.tokens, budgets.first_token.tokens) == (2.0, 3.0)


def test_one_trigger_has_the_whole_bucket() -> None:
    """One trigger set: a first-token hedge spends the whole burst, from the start, as the
    client did before per-trigger budgets (as both triggers unset leave the client
    unhedged, one trigger alone changes nothing)."""
    budgets = HedgeBudgets(ratio=0.0, burst=3.0, first_token_burst=1.0, both=False)
    assert [budgets.spend(FIRST_TOKEN) for _ in range(4)] == [True, True, True, False]
    budgets.refund(FIRST_TOKEN)
    assert budgets.spend(STALL)
    assert budgets.held == 0.0


def test_the_default_first_token_burst() -> None:
    """The first-token trigger saves at most 5 tokens by default (the study's spill)."""
    assert DEFAULTS.hedge_first_token_burst == 5.0


def load_study() -> ModuleType:
    """The budget study, ``benchmarks/hedging/model.py``."""
    return importlib.import_module("benchmarks.hedging.model")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_it_is_the_studys_overflow_5_ft_budget(seed: int) -> None:
    """On a random sequence of rounds and hedge requests (quiet stretches that let the stall
    bucket fill and spill, busy ones that drain it), the client's budget at its defaults
    answers every request and holds every token as the study's "overflow 5 +ft" row."""
    study = load_study()
    (policy,) = [p for p in study.POLICIES if p.label == "overflow 5 +ft"]
    ratio, burst = DEFAULTS.hedge_budget_ratio, DEFAULTS.hedge_budget_burst
    assert burst == study.BURST
    theirs = study.Budgets(policy, ratio, burst)
    ours = HedgeBudgets(ratio, burst, DEFAULTS.hedge_first_token_burst, both=True)
    rng = random.Random(seed)
    answers = {FIRST_TOKEN: 0, STALL: 0}
    for step in range(20_000):
        busy = (step // 500) % 2 == 1
        if rng.random() < (0.4 if busy else 0.8):
            theirs.earn()
            ours.earn()
        else:
            trigger = rng.choice([FIRST_TOKEN, STALL])
            answer = ours.spend(trigger)
            assert answer == theirs.spend(trigger), step
            answers[trigger] += answer
        assert ours.held == theirs.held, step
    assert min(answers.values()) > 100, "both triggers were granted hedges: not vacuous"


@settings(max_examples=100, deadline=None)
@given(
    concurrency=st.integers(min_value=1, max_value=60),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_the_demos_budget_never_refuses_a_hedge(concurrency: int, seed: int) -> None:
    """The demo's budget (``DemoBudget``): with at most ``concurrency`` rounds in flight, each
    asking for at most one hedge from either trigger, in any interleaving and at any length of
    run, no hedge is ever refused — so whether a demo call hedges does not depend on how its
    calls interleave."""
    demo = DemoBudget.for_concurrency(concurrency)
    budgets = HedgeBudgets(demo.ratio, demo.burst, demo.first_token_burst, both=True)
    rng = random.Random(seed)
    in_flight = 0
    for _ in range(2_000):
        if in_flight < concurrency and (in_flight == 0 or rng.random() < 0.5):
            budgets.earn()
            in_flight += 1
            continue
        in_flight -= 1  # a round ends, having asked for at most one hedge
        ask = rng.choice([None, FIRST_TOKEN, STALL])
        if ask is not None:
            assert budgets.spend(ask), (ask, budgets)
