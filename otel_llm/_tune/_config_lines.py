"""A hedge setting as the configuration to paste: environment keys and ``Client(...)`` and
``Source(...)`` keyword arguments, named from the settings model itself (so a renamed key
cannot leave tune printing the old one)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from otel_llm._act._groups import HedgeSettings, RetrySettings
from otel_llm._act._settings import RESERVED_GROUPS
from otel_llm._act._source import Source, inter_chunk_budget_s
from otel_llm._defaults import DEFAULTS
from otel_llm._env import scope_key
from otel_llm._tune._hedging_model import Rules

_HEDGE_GROUP, _RETRY_GROUP = "HEDGE", "RETRY"
_AFTER, _STALL, _RATIO = "after_s", "stall_after_s", "budget_ratio"
_ATTEMPTS: Final = "max_attempts"
_TTFT, _INTER, _TIMEOUT = "ttft_timeout_s", "inter_token_timeout_s", "timeout_s"
_ENV_SOURCE: Final = re.compile(r"^([a-z0-9_]+)-([0-9]+)$")
"""A source named from its environment keys: ``{provider}-{N}``."""

assert {_AFTER, _STALL, _RATIO} <= set(HedgeSettings.model_fields), "hedge keys renamed"
assert {_TTFT, _INTER, _TIMEOUT} <= set(Source.model_fields), "watchdog keys renamed"
assert _ATTEMPTS in RetrySettings.model_fields, "retry key renamed"
assert {_HEDGE_GROUP, _RETRY_GROUP} <= RESERVED_GROUPS, "group renamed"


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


@dataclass(frozen=True, slots=True)
class ConfigLines:
    """The configuration of one setting."""

    env: tuple[str, ...]
    client_kwargs: dict[str, float | int]
    source_kwargs: dict[str, float | int]
    """The watchdog: per source (``Source(...)``), both timeouts the same; and ``timeout_s``
    when the setting replayed a source that sets it."""


def _default_fallbacks(rules: Rules) -> bool:
    """Whether ``rules`` kill a leg without a watchdog where a source that sets no
    ``TIMEOUT_S`` would (so the configuration need not set it)."""
    gap = rules.gap_timeout_s if rules.gap_timeout_s is not None else rules.timeout_s
    return (rules.timeout_s, gap) == (DEFAULTS.timeout_s, inter_chunk_budget_s(None, None))


def config_lines(rules: Rules, sources: Iterable[str], scope: str = DEFAULTS.scope) -> ConfigLines:
    """The keys that set ``rules`` on a client of ``sources`` (named ``{provider}-{N}`` when
    they came from the environment; another name gets ``<PROVIDER>__<N>`` to fill in): the
    hedge keys, the watchdog's and, when ``rules`` replayed a source that sets ``TIMEOUT_S``,
    that, and ``RETRY__MAX_ATTEMPTS`` when ``rules`` replayed a client that sets another than
    the default (so that the pasted configuration is the client the replay ran)."""
    prefix = HedgeSettings.argument_prefix or ""
    hedge: dict[str, float | int] = {}
    if rules.after_s is not None:
        hedge[_AFTER] = _number(rules.after_s)
    if rules.stall_after_s is not None:
        hedge[_STALL] = _number(rules.stall_after_s)
    if hedge:
        hedge[_RATIO] = _number(rules.ratio)
    env = [
        f"{scope_key(scope, _HEDGE_GROUP, field.upper())}={value:g}"
        for field, value in hedge.items()
    ]
    client_kwargs = {f"{prefix}{field}": value for field, value in hedge.items()}
    if rules.max_rounds != DEFAULTS.max_attempts:
        env.append(f"{scope_key(scope, _RETRY_GROUP, _ATTEMPTS.upper())}={rules.max_rounds}")
        client_kwargs[f"{RetrySettings.argument_prefix or ''}{_ATTEMPTS}"] = rules.max_rounds
    source_kwargs: dict[str, float | int] = {}
    if rules.timeout_s is not None and not _default_fallbacks(rules):
        source_kwargs[_TIMEOUT] = _number(rules.timeout_s)
    if rules.watchdog_s is not None:
        seconds = _number(rules.watchdog_s)
        source_kwargs.update({_TTFT: seconds, _INTER: seconds})
    if source_kwargs:
        named = sorted({m.groups() for name in sources if (m := _ENV_SOURCE.match(name))})
        if not named or len(named) < len(set(sources)):
            named.append(("<PROVIDER>", "<N>"))
        for provider, number in named:
            for field, value in source_kwargs.items():
                key = "__".join((scope, provider.upper(), number, field.upper()))
                env.append(f"{key}={value:g}")
    return ConfigLines(tuple(env), client_kwargs, source_kwargs)
