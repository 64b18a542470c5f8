"""``otel_llm/_tune/_tuning.py`` and ``_config_lines.py``: the frontier, the recommendation
within the budget, the refusal below the rule, the JSON document, and configuration lines the
client accepts."""

from __future__ import annotations

import io
import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_llm import Client, ClientSettings, ConfigurationError, Source, open_store
from otel_llm._defaults import DEFAULTS
from otel_llm._tune._config_lines import ConfigLines, config_lines
from otel_llm._tune._hedging_model import FAILED_S, Rules, p99_interval, percentiles
from otel_llm._tune._replay import Figures
from otel_llm._tune._sample import MIN_CALLS, RULE
from otel_llm._tune._tuning import (
    DEFAULT_BUDGET,
    MAX_BUDGET,
    Setting,
    Tuning,
    check_budget,
    check_max_attempts,
    check_timeout,
    frontier,
    recommend,
    tune,
)
from otel_llm.cli._render import Format, Output
from otel_llm.cli._tune import render_table
from tests.support.tune_store import write_store

CALLS = MIN_CALLS + 200


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1,200 unhedged calls of one source drawn like the user's traffic."""
    path = tmp_path_factory.mktemp("tune") / "s"
    write_store(path, CALLS)
    return path


def _tune(path: Path, **options: object) -> Tuning:
    with open_store(path) as conn:
        return tune(conn, **options)  # type: ignore[arg-type]


def _setting(p99: float, requests: float, ratio: float = 0.25, hedged: bool = True) -> Setting:
    rules = Rules(stall_after_s=5.0 if hedged else None, ratio=ratio)
    return Setting(rules, Figures(p99 / 2, p99 * 0.9, p99, requests))


POINTS = st.lists(
    st.tuples(st.floats(min_value=1.0, max_value=100.0), st.floats(min_value=1.0, max_value=2.0)),
    min_size=1,
    max_size=30,
)


@given(POINTS)
def test_the_frontier_is_every_setting_no_other_beats_on_both(
    points: list[tuple[float, float]],
) -> None:
    """No frontier setting is beaten on both p99 and requests by any setting, and every other
    setting is matched or beaten on both by one on the frontier; fewest requests first."""
    settings = [_setting(p99, requests) for p99, requests in points]
    kept = frontier(settings)
    for s in kept:
        f = s.figures
        assert not any(
            o.figures.p99_s <= f.p99_s
            and o.figures.requests_per_call <= f.requests_per_call
            and (o.figures.p99_s, o.figures.requests_per_call) != (f.p99_s, f.requests_per_call)
            for o in settings
        )
    for s in settings:
        assert any(
            k.figures.p99_s <= s.figures.p99_s
            and k.figures.requests_per_call <= s.figures.requests_per_call
            for k in kept
        )
    assert [k.figures.requests_per_call for k in kept] == sorted(
        k.figures.requests_per_call for k in kept
    )


def test_the_recommendation_is_the_lowest_p99_the_budget_and_its_bucket_allow() -> None:
    """Lowest p99 within the budget; a ratio above budget − 1 is never chosen (its bucket
    would not hold the budget); ties go to fewer requests; nothing fits: None."""
    unhedged = _setting(30.0, 1.0, hedged=False)
    cheap = _setting(20.0, 1.10)
    best = _setting(15.0, 1.24)
    over = _setting(10.0, 1.30)
    loose_bucket = _setting(12.0, 1.20, ratio=0.5)
    tie = _setting(15.0, 1.20)
    assert recommend([unhedged, cheap, best, over, loose_bucket], 1.25) is best
    assert recommend([unhedged, cheap, best, tie], 1.25) is tie
    assert recommend([unhedged, cheap], 1.05) is unhedged
    assert recommend([cheap, over], 1.05) is None


@pytest.mark.parametrize("budget", [1.1, DEFAULT_BUDGET, 1.5])
def test_on_a_store_the_recommendation_keeps_within_the_budget(store: Path, budget: float) -> None:
    """On 1,200 recorded calls: the recommendation costs at most the budget, its ratio lets
    the bucket enforce it, no setting within those bounds has a lower p99, and it beats not
    hedging; its configuration sets exactly its keys."""
    tuning = _tune(store, budget=budget)
    chosen = tuning.recommendation
    assert tuning.sample.enough
    assert tuning.sample.calls == CALLS
    assert chosen is not None
    assert tuning.baseline is not None
    assert chosen.figures.requests_per_call <= budget
    assert chosen.rules.ratio <= budget - 1 + 1e-9
    within = [
        s
        for s in tuning.settings
        if s.figures.requests_per_call <= budget
        and (not s.rules.hedging or s.rules.ratio <= budget - 1 + 1e-9)
    ]
    assert round(chosen.figures.p99_s, 3) == min(round(s.figures.p99_s, 3) for s in within)
    assert chosen.rules.hedging, "the stalls of this traffic are worth hedging"
    assert chosen.figures.p99_s < tuning.baseline.figures.p99_s
    assert tuning.config is not None
    assert tuning.config.client_kwargs["hedge_budget_ratio"] == pytest.approx(chosen.rules.ratio)
    assert chosen.rules.stall_after_s is None or (
        tuning.config.client_kwargs["hedge_stall_after_s"] == chosen.rules.stall_after_s
    )
    assert chosen.rules.stall_after_s is None or chosen.rules.stall_after_s > 0.1, "above floor"


def test_the_replay_of_unhedged_calls_matches_their_recording(store: Path) -> None:
    """The baseline (unhedged, replayed) of calls recorded unhedged is their own figures."""
    tuning = _tune(store)
    assert tuning.baseline is not None
    assert tuning.recorded is not None
    assert tuning.baseline.figures.p99_s == pytest.approx(tuning.recorded.p99_s, abs=1e-6)
    assert tuning.baseline.figures.requests_per_call == tuning.recorded.requests_per_call == 1.0


def test_below_the_rule_nothing_is_recommended(tmp_path: Path) -> None:
    """Fewer calls than the rule asks: the figures are computed, the recommendation is None,
    the JSON says enough: false and names what is short."""
    write_store(tmp_path / "s", 120)
    tuning = _tune(tmp_path / "s")
    assert not tuning.sample.enough
    assert tuning.recommendation is None
    assert tuning.settings
    document = tuning.as_json()
    assert document["recommendation"] is None
    assert document["data"]["enough"] is False
    assert "120 usable calls" in document["data"]["problems"][0]
    assert tuning.verdict.startswith("not enough data")


def test_the_json_document_has_the_agreed_shape(store: Path) -> None:
    """Every key helper scripts rely on, with its type; settings include the frontier."""
    document = _tune(store, source="sim-1", seed=3).as_json()
    data = document["data"]
    assert {
        k: type(data[k]) for k in ("attempts_used", "calls", "censored", "floor_ms")
    } == dict.fromkeys(("attempts_used", "calls", "censored", "floor_ms"), int)
    assert data["sources"] == {"sim-1": CALLS}
    assert data["enough"] is True
    assert data["rule"] == RULE
    assert document["budget"] == DEFAULT_BUDGET
    numbers = {"p50_s", "p95_s", "p99_s", "requests_per_call"}
    figures = {*numbers, "p99_interval_s"}
    assert set(document["baseline"]) == figures
    setting_keys = {"after_s", "stall_after_s", "watchdog_s", "budget_ratio", *figures}
    for row in (*document["frontier"], *document["settings"]):
        assert set(row) == setting_keys
        assert all(isinstance(row[k], float) for k in numbers)
        low, high = row["p99_interval_s"]
        assert low <= row["p99_s"] <= high
        assert all(row[k] is None or isinstance(row[k], float) for k in ("after_s", "watchdog_s"))
    assert all(row in document["settings"] for row in document["frontier"])
    for row in document["settings"]:  # an unhedged setting has no budget ratio
        unhedged = row["after_s"] is None and row["stall_after_s"] is None
        assert (row["budget_ratio"] is None) is unhedged
    recommendation = document["recommendation"]
    assert setting_keys - figures <= set(recommendation)
    assert set(recommendation["predicted"]) == figures
    assert all(isinstance(line, str) and "=" in line for line in recommendation["env"])
    assert all(isinstance(v, int | float) for v in recommendation["client_kwargs"].values())


@pytest.mark.parametrize("budget", [0.99, 0.0, -1.0, math.nan, math.inf, 10.01, 1e308])
def test_a_budget_below_one_request_per_call_is_refused(budget: float) -> None:
    """--budget is requests per call: below 1, above 10 (a call makes at most six requests:
    1e308 would make the ratios overflow to inf), or not finite, is a clear error."""
    with pytest.raises(ConfigurationError, match="--budget"):
        check_budget(budget)
    assert check_budget(MAX_BUDGET) == 10.0


@pytest.mark.parametrize("timeout_s", [0.0, -1.0, math.nan, math.inf])
def test_a_timeout_that_is_no_duration_is_refused(timeout_s: float) -> None:
    """--timeout is the client's TIMEOUT_S: a finite number of seconds > 0."""
    with pytest.raises(ConfigurationError, match="--timeout"):
        check_timeout(timeout_s)


def _set_beside_two_sources(lines: ConfigLines, monkeypatch: pytest.MonkeyPatch) -> None:
    """``lines``' environment keys set beside two sources, openai-1 and azure-2, as a user
    pastes them."""
    for name in ("OPENAI__1", "AZURE__2"):
        monkeypatch.setenv(f"LLM__{name}__BASE_URL", "http://127.0.0.1:9/v1")
        monkeypatch.setenv(f"LLM__{name}__MODEL", "m")
    for line in lines.env:
        key, value = line.split("=")
        monkeypatch.setenv(key, value)


def test_a_non_default_timeout_is_among_the_lines_to_paste(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A setting replayed with TIMEOUT_S 200 s prints ``…__TIMEOUT_S=200`` for every source
    (and ``timeout_s`` for ``Source(...)``): the client built from the lines has that read
    timeout and accepts an 80 s stall trigger under a 120 s watchdog (a trigger below its
    watchdog); the default timeout prints no such line."""
    rules = Rules(stall_after_s=80.0, watchdog_s=120.0, ratio=0.125, timeout_s=200.0)
    lines = config_lines(rules, ["openai-1", "azure-2"])
    assert "LLM__OPENAI__1__TIMEOUT_S=200" in lines.env
    assert "LLM__AZURE__2__TIMEOUT_S=200" in lines.env
    assert lines.source_kwargs["timeout_s"] == 200
    _set_beside_two_sources(lines, monkeypatch)
    settings = ClientSettings()
    assert {s.timeout_s for s in settings.sources} == {200.0}
    assert {s.inter_token_timeout_s for s in settings.sources} == {120.0}
    sources = [
        Source(
            name=n, provider="p", base_url="http://127.0.0.1:9/v1", model="m", **lines.source_kwargs
        )
        for n in ("a", "b")
    ]
    assert Client(sources, **lines.client_kwargs) is not None  # type: ignore[arg-type]
    plain = Rules(
        stall_after_s=4.0,
        timeout_s=DEFAULTS.timeout_s,
        gap_timeout_s=DEFAULTS.inter_token_timeout_s,
    )
    default = config_lines(plain, ["a-1"])  # a source that sets no TIMEOUT_S
    assert not any("TIMEOUT_S" in line for line in default.env)
    assert "timeout_s" not in default.source_kwargs
    given = config_lines(Rules(stall_after_s=4.0, timeout_s=DEFAULTS.timeout_s), ["a-1"])
    assert "LLM__A__1__TIMEOUT_S=60" in given.env  # --timeout 60: 60 s between chunks too


def test_the_timeout_reaches_every_setting_and_the_json(store: Path) -> None:
    """tune --timeout 45: every setting replayed kills at 45 s, none has a trigger or
    watchdog at or above it; the JSON says 45 at the top and in data."""
    tuning = _tune(store, timeout_s=45.0)
    assert {s.rules.timeout_s for s in tuning.settings} == {45.0}
    for setting in tuning.settings:
        rules = setting.rules
        assert all(t < 45.0 for t in (rules.after_s, rules.stall_after_s, rules.watchdog_s) if t)
    document = tuning.as_json()
    assert document["timeout_s"] == document["data"]["timeout_s"] == 45.0
    assert _tune(store).as_json()["timeout_s"] == DEFAULTS.timeout_s


@pytest.mark.parametrize("attempts", [0, -1, 1001, True, 2.5, "3"])
def test_a_max_attempts_the_client_refuses_is_refused(attempts: object) -> None:
    """--max-attempts is the client's RETRY__MAX_ATTEMPTS: a whole number within the client's
    own bounds; not given, the client's default."""
    with pytest.raises(ConfigurationError, match=r"--max-attempts: .* from 1 to 1000"):
        check_max_attempts(attempts)  # type: ignore[arg-type]
    assert check_max_attempts(None) == DEFAULTS.max_attempts
    assert check_max_attempts(1000) == 1000


def test_max_attempts_reaches_every_setting_the_json_and_the_lines(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tune --max-attempts 1: every setting replays calls of one round, so a leg the
    watchdog kills ends its call failed where three rounds retried it; the JSON says 1 at the
    top and in data, and the lines to paste set RETRY__MAX_ATTEMPTS (the client built from
    them runs one round); the default prints no such line."""
    once = _tune(store, max_attempts=1)
    thrice = _tune(store)
    assert {s.rules.max_rounds for s in once.settings} == {1}
    assert {s.rules.max_rounds for s in thrice.settings} == {DEFAULTS.max_attempts}
    pairs = list(zip(once.settings, thrice.settings, strict=True))
    assert all(a.rules.watchdog_s == b.rules.watchdog_s for a, b in pairs)
    watched = [(a, b) for a, b in pairs if a.rules.watchdog_s is not None]
    assert watched, "the store's silences suggest a watchdog"
    assert all(a.figures.failed_share >= b.figures.failed_share for a, b in watched)
    assert any(a.figures.failed_share > b.figures.failed_share for a, b in watched)
    assert all(a.figures.requests_per_call <= b.figures.requests_per_call for a, b in pairs)
    document = once.as_json()
    assert document["max_attempts"] == document["data"]["max_attempts"] == 1
    assert thrice.as_json()["max_attempts"] == DEFAULTS.max_attempts
    rules = Rules(stall_after_s=4.0, ratio=0.25, max_rounds=5)
    lines = config_lines(rules, ["openai-1", "azure-2"])
    assert "LLM__RETRY__MAX_ATTEMPTS=5" in lines.env
    assert lines.client_kwargs["max_attempts"] == 5
    _set_beside_two_sources(lines, monkeypatch)
    assert ClientSettings().retry.max_attempts == 5
    source = Source(name="a", provider="p", base_url="http://127.0.0.1:9/v1", model="m")
    client = Client([source, source.model_copy(update={"name": "b"})], **lines.client_kwargs)  # type: ignore[arg-type]
    assert client.settings.retry.max_attempts == 5
    assert not any("MAX_ATTEMPTS" in line for line in config_lines(Rules(), ["a-1"]).env)


def test_the_configuration_lines_are_what_the_client_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The env lines, set in the environment beside two sources, are read by the client's
    settings as the setting; the keyword arguments build a Client that accepts them."""
    rules = Rules(after_s=2.5, stall_after_s=4.0, watchdog_s=20.0, ratio=0.25)
    lines = config_lines(rules, ["openai-1", "azure-2"])
    assert lines.env[:3] == (
        "LLM__HEDGE__AFTER_S=2.5",
        "LLM__HEDGE__STALL_AFTER_S=4",
        "LLM__HEDGE__BUDGET_RATIO=0.25",
    )
    _set_beside_two_sources(lines, monkeypatch)
    settings = ClientSettings()
    assert settings.hedge.after_s == 2.5
    assert settings.hedge.stall_after_s == 4.0
    assert settings.hedge.budget_ratio == 0.25
    assert {s.ttft_timeout_s for s in settings.sources} == {20.0}
    assert {s.inter_token_timeout_s for s in settings.sources} == {20.0}
    sources = [
        Source(
            name=n, provider="p", base_url="http://127.0.0.1:9/v1", model="m", **lines.source_kwargs
        )
        for n in ("a", "b")
    ]
    client = Client(sources, **lines.client_kwargs)  # type: ignore[arg-type]
    assert client is not None
    other = config_lines(rules, ["my source"])
    assert "LLM__<PROVIDER>__<N>__TTFT_TIMEOUT_S=20" in other.env
    assert config_lines(Rules(), ["a-1"]).env == ()


def test_a_watchdog_alone_is_printed_under_its_header(store: Path) -> None:
    """An unhedged recommendation with a watchdog: the table prints its env lines and, under
    "Or in code:", the ``Source(...)`` arguments (no ``Client(...)`` line: no hedge key)."""
    tuning = _tune(store)
    assert tuning.recommendation is not None
    rules = Rules(watchdog_s=20.0, timeout_s=60.0, gap_timeout_s=30.0)  # TIMEOUT_S not set
    chosen = Setting(rules, tuning.recommendation.figures)
    watched = replace(
        tuning, recommendation=chosen, config=config_lines(chosen.rules, ["sim-1", "sim-2"])
    )
    stream = io.StringIO()
    render_table(watched, Output.on(stream, Format.TABLE, 200))
    text = stream.getvalue()
    assert "LLM__SIM__1__TTFT_TIMEOUT_S=20" in text
    assert "Or in code:\n  Source(..., ttft_timeout_s=20, inter_token_timeout_s=20)" in text
    assert "Client(sources" not in text
    assert watched.as_json()["recommendation"]["budget_ratio"] is None


def test_the_p99_interval_is_the_order_statistics_around_the_99th_percentile() -> None:
    """Over 1,000 calls the 95 % interval of the p99 runs from the 18th to the 4th slowest
    call (ranks 990 ∓ 1.96 √9.9); it holds the p99, narrows with more calls, and a failed call
    counts as very long."""
    walls = [float(i) for i in range(1, 1001)]
    assert p99_interval(walls) == (983.0, 997.0)
    assert p99_interval(walls)[0] <= percentiles(walls)[2] <= p99_interval(walls)[1]
    more = [w / 10 for w in range(1, 10001)]
    low, high = p99_interval(more)
    assert (high - low) / 1000 < (997.0 - 983.0) / 1000
    assert p99_interval([*walls[:-20], *[math.inf] * 20])[1] == FAILED_S


def test_the_recommendation_says_how_far_its_p99_could_move(store: Path) -> None:
    """The table states the recommended p99's 95 % interval over the recorded calls."""
    tuning = _tune(store, source="sim-1", seed=3)
    out = io.StringIO()
    render_table(tuning, Output.on(out, Format.TABLE, 200))
    assert tuning.recommendation is not None
    interval = tuning.recommendation.figures.p99_interval_s
    assert interval is not None
    assert f"Its p99 rests on {tuning.sample.calls:,} recorded calls" in out.getvalue()
    assert "95 % interval" in out.getvalue()


def test_a_percentile_between_an_answered_and_a_failed_call_is_failed() -> None:
    """20 calls, 5 failed: the p99 and the p95 fall between the slowest answered call and a
    failed one, and are failed — interpolating with the failed calls' stand-in gave a p99 of
    810,000,000,000 s, printed as a time; the p50 falls among answered calls and is one."""
    walls = [float(i) for i in range(1, 16)] + [math.inf] * 5
    p50, p95, p99 = percentiles(walls)
    assert (p95, p99) == (FAILED_S, FAILED_S)
    assert p50 == 10.5
    assert percentiles([1.0, 2.0, 3.0, math.inf]) == (2.5, FAILED_S, FAILED_S)
    assert percentiles([1.0, 2.0, 3.0]) == (2.0, 2.9, 2.98)
