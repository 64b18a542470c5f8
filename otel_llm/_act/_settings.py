"""Configuration of the client: environment keys, a settings object, constructor arguments.

Keys are ``{SCOPE}__...`` with ``__`` as separator (``LLM`` for chat, ``EMBEDDING`` for
embeddings). Per-source keys have four segments, ``{SCOPE}__{PROVIDER}__{N}__{FIELD}``
(``LLM__OPENAI__1__BASE_URL``); scope-level keys have three, ``{SCOPE}__{GROUP}__{FIELD}``
(``LLM__HEDGE__AFTER_S``), and the group names (:data:`RESERVED_GROUPS`) are never parsed as a
provider. Every key has three layers — environment, :class:`ClientSettings` fields, ``Client``
constructor arguments — and the explicit argument wins. An invalid value raises a
:class:`~otel_llm.ConfigurationError` naming the key.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Self

from pydantic import (
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from otel_llm._act._groups import (
    AdmissionSettings,
    BreakerSettings,
    Group,
    HedgeSettings,
    PoolSettings,
    RetrySettings,
    StreamSettings,
)
from otel_llm._act._source import NUMBERS_AS_TEXT, Source
from otel_llm._defaults import DEFAULTS
from otel_llm._errors import ConfigurationError

RESERVED_GROUPS = frozenset({"HEDGE", "STREAM", "RETRY", "BREAKER", "ADMISSION", "POOL"})
"""Scope-level groups; never a provider name."""

_SOURCE_KEY = re.compile(r"^([A-Z0-9_]+?)__([0-9]+)__([A-Z0-9_]+)$")


class ConfigWarning(UserWarning):
    """A configuration that works but is probably not what was meant."""


def parse_source_keys(scope: str, environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Per-source keys of ``scope`` grouped by ``{PROVIDER}__{N}``; raises on malformed keys."""
    prefix = f"{scope.upper()}__"
    found: dict[str, dict[str, str]] = {}
    for raw_key, value in environ.items():
        key = raw_key.upper()
        if not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        head = rest.split("__", 1)[0]
        if head in RESERVED_GROUPS:
            continue
        match = _SOURCE_KEY.match(rest)
        if match is None:
            raise ConfigurationError(
                raw_key,
                f"per-source keys have four segments, {prefix}{{PROVIDER}}__{{N}}__{{FIELD}}; "
                f"scope-level groups are {', '.join(sorted(RESERVED_GROUPS))}",
            )
        provider, number, field = match.groups()
        found.setdefault(f"{provider}__{number}", {})[field.lower()] = value
    return found


def _sources_from_env(scope: str, environ: Mapping[str, str]) -> list[dict[str, Any]]:
    sources = []
    for name, fields in sorted(
        parse_source_keys(scope, environ).items(), key=lambda item: int(item[0].split("__")[1])
    ):
        provider, number = name.split("__")
        entry: dict[str, Any] = {
            "name": f"{provider.lower()}-{number}",
            "provider": provider.lower(),
        }
        entry.update(fields)
        entry.setdefault("priority", int(number))
        entry["_key"] = f"{scope.upper()}__{name}"
        sources.append(entry)
    return sources


class _SourcesFromEnv(PydanticBaseSettingsSource):
    """Settings source reading the four-segment per-source keys."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        scope = getattr(self.settings_cls, "scope", DEFAULTS.scope)
        sources = _sources_from_env(scope, os.environ)
        return {"sources": sources} if sources else {}


class ClientSettings(BaseSettings):
    """Everything a client is configured with. Fields are read from ``{SCOPE}__*`` environment
    keys unless given here; ``Client`` arguments override both."""

    model_config = SettingsConfigDict(
        env_prefix=f"{DEFAULTS.scope}__",
        env_nested_delimiter="__",
        case_sensitive=False,
        extra="forbid",
        frozen=True,
        hide_input_in_errors=True,
    )
    scope: ClassVar[str] = DEFAULTS.scope
    hedged: ClassVar[bool] = True
    """Whether calls of this scope may hedge (the embeddings scope never does)."""

    sources: tuple[Source, ...] = ()
    stream: StreamSettings = StreamSettings()
    hedge: HedgeSettings = HedgeSettings()
    retry: RetrySettings = RetrySettings()
    breaker: BreakerSettings = BreakerSettings()
    admission: AdmissionSettings = AdmissionSettings()
    pool: PoolSettings = PoolSettings()

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            if "sources" not in values:
                values = {**values, "sources": _sources_from_env(self.scope, os.environ)}
            error = configuration_error(exc, self.scope, values)
        else:
            check_hedge_assembly(self)
            return
        raise error  # unchained: pydantic's error repeats the input values, secrets included

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _SourcesFromEnv(settings_cls), env_settings, dotenv_settings)

    @model_validator(mode="before")
    @classmethod
    def _drop_key_markers(cls, data: Any) -> Any:
        """Sources given as fields (from the environment or a mapping) lose the key they were
        read from and may spell numbers as text, as every other settings field may."""
        if isinstance(data, dict) and isinstance(data.get("sources"), list | tuple):
            data = dict(data)
            data["sources"] = [
                {**{k: v for k, v in s.items() if k != "_key"}, NUMBERS_AS_TEXT: True}
                if isinstance(s, dict)
                else s
                for s in data["sources"]
            ]
        return data

    def merged(self, **overrides: Any) -> Self:
        """A copy with ``overrides`` (``None`` values ignored) applied and re-validated."""
        data = self.model_dump()
        data["sources"] = list(self.sources)
        for key, value in overrides.items():
            if value is None:
                continue
            if "." in key:
                group, field = key.split(".", 1)
                data[group] = {**data[group], field: value}
            else:
                data[key] = value
        try:
            merged = self.model_validate(data)
        except ValidationError as exc:
            error = configuration_error(exc, self.scope, data)
        else:
            check_hedge_assembly(merged)
            return merged
        raise error  # unchained, as in __init__

    @classmethod
    def for_scope(cls, scope: str) -> type[ClientSettings]:
        """The settings class reading ``{scope}__*`` keys."""
        scope = scope.upper()
        if scope == cls.scope:
            return cls
        if scope == EmbeddingSettings.scope:
            return EmbeddingSettings
        if not re.fullmatch(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*", scope):  # "__" separates keys
            raise ConfigurationError(
                "scope",
                f"must be an identifier without '__' (the separator of its keys) and without a "
                f"'_' at either end, got {scope!r}",
            )
        config = SettingsConfigDict(**{**cls.model_config, "env_prefix": f"{scope}__"})
        return type(f"{scope.title()}Settings", (cls,), {"model_config": config, "scope": scope})


class EmbeddingSettings(ClientSettings):
    """Settings of the ``EMBEDDING`` scope (non-streaming: hedge keys have no effect)."""

    model_config = SettingsConfigDict(
        **{**ClientSettings.model_config, "env_prefix": "EMBEDDING__"}
    )
    scope: ClassVar[str] = "EMBEDDING"
    hedged: ClassVar[bool] = False

    @model_validator(mode="after")
    def _warn_hedge(self) -> Self:
        if self.hedge.enabled:
            warnings.warn(
                "EMBEDDING__HEDGE__* is set, but hedging applies to streamed chat only; "
                "embeddings calls run unhedged",
                ConfigWarning,
                stacklevel=2,
            )
        return self


def check_hedge_assembly(settings: ClientSettings) -> None:
    """The hedge keys' guards: a trigger the watchdog or the call deadline would pre-empt is an
    error; hedging with a single source is a warning."""
    hedge, retry, sources = settings.hedge, settings.retry, settings.sources
    if not hedge.enabled or not sources or not settings.hedged:
        return
    scope = settings.scope
    if hedge.after_s is not None:
        shortest = min(source.effective_ttft_timeout_s for source in sources)
        if hedge.after_s >= shortest:
            raise ConfigurationError(
                f"{scope}__HEDGE__AFTER_S",
                f"{hedge.after_s:g} must be below the shortest first-chunk timeout "
                f"(ttft_timeout_s or timeout_s: {shortest:g}); the hedge could never start",
            )
    if hedge.stall_after_s is not None:
        shortest = min(source.effective_inter_chunk_timeout_s for source in sources)
        if hedge.stall_after_s >= shortest:
            raise ConfigurationError(
                f"{scope}__HEDGE__STALL_AFTER_S",
                f"{hedge.stall_after_s:g} must be below the shortest inter-chunk timeout "
                f"(inter_token_timeout_s, else timeout_s when set, else "
                f"{DEFAULTS.inter_token_timeout_s:g} s: {shortest:g}); the watchdog would kill "
                "the stream before the hedge window opens; set inter_token_timeout_s above it",
            )
    deadline = retry.call_deadline_s
    for name, value in (("AFTER_S", hedge.after_s), ("STALL_AFTER_S", hedge.stall_after_s)):
        if value is not None and deadline is not None and value >= deadline:
            raise ConfigurationError(
                f"{scope}__HEDGE__{name}",
                f"{value:g} must be below {scope}__RETRY__CALL_DEADLINE_S ({deadline:g})",
            )
    if len(sources) == 1:
        warnings.warn(
            f"{scope}__HEDGE__* is set with a single source: a hedge needs a different source, "
            "so no hedge will ever start",
            ConfigWarning,
            stacklevel=2,
        )


def _key_for(loc: tuple[int | str, ...], scope: str, values: Mapping[str, Any]) -> str:
    if not loc:
        return scope
    head = loc[0]
    if head == "sources" and len(loc) >= 2 and isinstance(loc[1], int):
        raw = values.get("sources")
        entry = raw[loc[1]] if isinstance(raw, list | tuple) and loc[1] < len(raw) else None
        field = str(loc[2]).upper() if len(loc) > 2 else ""
        if isinstance(entry, dict) and "_key" in entry:
            return f"{entry['_key']}__{field}" if field else entry["_key"]
        return f"sources[{loc[1]}]" + (f".{loc[2]!s}" if len(loc) > 2 else "")
    if str(head).upper() in RESERVED_GROUPS and len(loc) > 1:
        return f"{scope}__{str(head).upper()}__{str(loc[1]).upper()}"
    return f"{scope}__{str(head).upper()}"


def configuration_error(
    exc: ValidationError, scope: str, values: Mapping[str, Any]
) -> ConfigurationError:
    """A ConfigurationError naming the key of every problem in ``exc``."""
    problems = []
    first_key = scope
    named: list[tuple[str, str]] = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        inner = (error.get("ctx") or {}).get("error")
        if isinstance(inner, ConfigurationError) and inner.fields:  # a Source's own fields
            named += [(_key_for((*loc, field), scope, values), why) for field, why in inner.fields]
        elif isinstance(inner, ConfigurationError):  # raised by a nested settings object
            named.append((inner.key, inner.reason))
        else:
            named.append(
                (_key_for(loc, scope, values), str(error["msg"]).removeprefix("Value error, "))
            )
    for index, (key, message) in enumerate(named):
        if index == 0:
            first_key = key
            problems.append(message)
        else:
            problems.append(f"{key}: {message}")
    return ConfigurationError(first_key, "; ".join(problems))


def _client_arguments() -> dict[str, str]:
    """``Client`` argument → settings path (``group.field``), derived from the groups."""
    arguments: dict[str, str] = {}
    for group, info in ClientSettings.model_fields.items():
        model = info.annotation
        if isinstance(model, type) and issubclass(model, Group):
            prefix = model.argument_prefix
            if prefix is not None:
                for field in model.model_fields:
                    arguments[f"{prefix}{field}"] = f"{group}.{field}"
    return arguments


CLIENT_ARGUMENTS: Final = _client_arguments()
"""Every key's constructor argument (the third layer), generated from the settings model: the
``Client`` keyword ``hedge_after_s`` sets ``hedge.after_s`` (``{SCOPE}__HEDGE__AFTER_S``)."""
