"""Which script answers a request: header, body field, registered model name, preset, default.

Selection order (the first that applies wins):

1. header ``X-Sim-Script`` — a JSON script object, or the name of a registered script or preset;
2. body field ``sim`` — a JSON object script, or such a name;
3. the request's ``model`` among the server's registered scripts;
4. the request's ``model`` among the named presets (:data:`PRESETS`);
5. the server's default script.

A sampler draws from the server's generator in arrival order, unless the body carries
:data:`SCRIPT_KEY_FIELD`: then it draws from a generator of its own, seeded by the server's seed,
that key and the number of earlier requests with the same key (see ``_Simulator.rng_for``).

A script source is either a fixed :class:`Script` or a :data:`Preset` (a sampler called with the
server's seeded ``random.Random``, so ``measured`` draws a fresh script per request). A script
that does not validate, or a name that is neither registered nor a preset, is a
:class:`BadRequest`, which the server answers with HTTP 400 and the reason.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Literal

from pydantic import ValidationError

from otel_llm._errors import ConfigurationError
from otel_llm.simulator._presets import PRESETS, Preset
from otel_llm.simulator._script import Script

SCRIPT_HEADER = "X-Sim-Script"
"""Request header carrying a JSON script (or a script name)."""

SCRIPT_FIELD = "sim"
"""Request body field carrying a JSON object script (or a script name)."""

SCRIPT_KEY_FIELD = "sim_key"
"""Request body field naming the draw of a request (text): a sampling preset then draws from a
generator seeded by the server's seed, this key and how many earlier requests carried the same
key, so the script does not depend on the order in which concurrent requests arrive."""

_MAX_KEY = 200

ScriptSource = Script | Preset
"""A fixed script, or a sampler drawing one per request."""

Origin = Literal["header", "body", "model", "preset", "default"]
"""Where the script of a request came from."""


class BadRequest(ValueError):
    """A request the simulator answers with HTTP 400; ``code`` goes into the error body."""

    def __init__(self, message: str, *, code: str = "invalid_request") -> None:
        self.code = code
        super().__init__(message)


def draw_key(body: Mapping[str, object]) -> str | None:
    """The :data:`SCRIPT_KEY_FIELD` of a request body, if it has one."""
    value = body.get(SCRIPT_KEY_FIELD)
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_KEY or not _unicode(value):
        raise BadRequest(
            f"body field {SCRIPT_KEY_FIELD!r} must be text of 1 to {_MAX_KEY} characters",
            code="invalid_key",
        )
    return value


def _unicode(text: str) -> bool:
    """Whether ``text`` is Unicode text (JSON may carry a lone surrogate, which is not)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def describe(error: ValidationError) -> str:
    """A one-line account of every problem of a script, naming each field."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "script"
        problems.append(f"{where}: {item['msg']}")
    return "; ".join(problems)


def draw(source: ScriptSource, rng: random.Random) -> Script:
    """The script a source gives for one request; a preset that draws something else is a
    :class:`TypeError` naming it (the request fails: a bug of the preset, not the request)."""
    if isinstance(source, Script):
        return source
    script: object = source(rng)
    if not isinstance(script, Script):
        raise TypeError(f"the preset {source!r} drew {type(script).__name__}, not a Script")
    return script


def _named(
    name: str, where: str, registry: Mapping[str, ScriptSource], rng: random.Random
) -> Script:
    source = registry.get(name)
    if source is None:
        source = PRESETS.get(name)
    if source is None:
        known = ", ".join(sorted({*registry, *PRESETS}))
        raise BadRequest(
            f"unknown script {name!r} in {where}; known: {known}", code="unknown_script"
        )
    return draw(source, rng)


def _from_header(value: str, registry: Mapping[str, ScriptSource], rng: random.Random) -> Script:
    text = value.strip()
    if not text.startswith("{"):
        return _named(text, f"{SCRIPT_HEADER} header", registry, rng)
    try:
        return Script.model_validate_json(text)
    except ValidationError as exc:
        raise BadRequest(
            f"invalid script in {SCRIPT_HEADER} header: {describe(exc)}", code="invalid_script"
        ) from exc


def _from_body(value: object, registry: Mapping[str, ScriptSource], rng: random.Random) -> Script:
    if isinstance(value, str):
        return _named(value, f"body field {SCRIPT_FIELD!r}", registry, rng)
    if not isinstance(value, dict):
        raise BadRequest(
            f"body field {SCRIPT_FIELD!r} must be a JSON object script or a script name, "
            f"not {type(value).__name__}",
            code="invalid_script",
        )
    try:
        return Script.model_validate(value)
    except ValidationError as exc:
        raise BadRequest(
            f"invalid script in body field {SCRIPT_FIELD!r}: {describe(exc)}",
            code="invalid_script",
        ) from exc


def select_script(
    *,
    header: str | None,
    body: Mapping[str, object],
    model: str,
    registry: Mapping[str, ScriptSource],
    default: ScriptSource,
    rng: random.Random,
) -> tuple[Script, Origin]:
    """The script answering one request and where it came from (see the module docstring)."""
    if header is not None:
        return _from_header(header, registry, rng), "header"
    sim = body.get(SCRIPT_FIELD)
    if sim is not None:
        return _from_body(sim, registry, rng), "body"
    source = registry.get(model)
    if source is not None:
        return draw(source, rng), "model"
    preset = PRESETS.get(model)
    if preset is not None:
        return preset(rng), "preset"
    return draw(default, rng), "default"


def checked_source(key: str, source: object) -> ScriptSource:
    """``source`` when it is a :class:`Script` or a preset (a callable drawing one); else a
    :class:`~otel_llm.ConfigurationError` naming ``key``, raised when the server is made
    rather than as an HTTP 500 at the first request it would answer."""
    if isinstance(source, Script) or (callable(source) and not isinstance(source, type)):
        return source  # a callable is taken for a preset
    hint = " (a JSON object: Script.model_validate(it))" if isinstance(source, dict) else ""
    raise ConfigurationError(
        key,
        "must be a Script or a preset (a callable that draws one from a random.Random), "
        f"not {type(source).__name__}{hint}",
    )


def checked_registry(scripts: Mapping[str, object] | None) -> dict[str, ScriptSource]:
    """The scripts a server registers by model name (text), each :func:`checked_source`."""
    if scripts is None:
        return {}
    if not isinstance(scripts, Mapping):
        raise ConfigurationError(
            "scripts", f"must map model names to scripts, not {type(scripts).__name__}"
        )
    for name in scripts:
        if not isinstance(name, str):
            raise ConfigurationError("scripts", f"a model name must be text, not {name!r}")
    return {name: checked_source(f"scripts[{name!r}]", source) for name, source in scripts.items()}


def resolve_default(default: object, registry: Mapping[str, ScriptSource]) -> ScriptSource:
    """The server's default script source: a script, a sampler, or a registered/preset name."""
    if default is None:
        return Script()
    if not isinstance(default, str):
        return checked_source("default", default)
    source = registry.get(default, PRESETS.get(default))
    if source is None:
        known = ", ".join(sorted({*registry, *PRESETS}))
        raise ConfigurationError("default", f"unknown default script {default!r}; known: {known}")
    return source
