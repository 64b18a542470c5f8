"""The docs site's build hook (``hooks:`` in ``mkdocs.yml``): the reference pages, written at
build time from the code that owns each fact, so they cannot go stale.

- ``reference/environment.md`` — every variable of :mod:`otel_llm._env` (name, docstring);
- ``reference/settings.md`` — every client configuration key, from the settings model
  (``ClientSettings``'s groups and ``Source``): key, ``Client`` argument, default, bounds,
  meaning;
- ``reference/defaults.md`` — every field of :class:`otel_llm._defaults.Defaults`;
- ``reference/errors.md`` — the error hierarchy of :mod:`otel_llm._errors` with docstrings;
- ``reference/figures.md`` — the table of figures of :mod:`otel_llm._figures`;
- ``reference/cli.md`` — every command and option of the typer app (``otel_llm.cli._app``).

This is docs tooling, not part of the package: ``tests/package/test_docs.py`` imports it by path.
"""

from __future__ import annotations

import ast
import enum
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

PAGES: dict[str, tuple[str, Callable[[], str]]] = {}
"""``reference/<name>.md`` → (title, the function that writes it)."""

GENERATED_NOTE = (
    '!!! info "Generated from the code"\n'
    "    `docs/_hooks.py` writes this page at every build of the site from {source}. To change "
    "it, change the code.\n"
)


def page(name: str, title: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    """Register a generated reference page."""

    def register(write: Callable[[], str]) -> Callable[[], str]:
        PAGES[f"reference/{name}.md"] = (title, write)
        return write

    return register


# --- reading the code ---------------------------------------------------------------------


def rst_to_markdown(text: str) -> str:
    """A docstring's reST inline markup as Markdown: ``x`` → `x`, :role:`~a.b.C` → `C`."""
    text = re.sub(r":[a-z]+:`~[\w.]*?\.(\w+)`", r"`\1`", text)
    text = re.sub(r":[a-z]+:`([^`]+)`", r"`\1`", text)
    text = re.sub(r"``(.+?)``", r"`\1`", text, flags=re.DOTALL)
    return text


def one_line(text: str) -> str:
    """A docstring as one Markdown table cell (paragraphs joined, pipes escaped)."""
    return " ".join(rst_to_markdown(inspect.cleandoc(text)).split()).replace("|", "\\|")


def attribute_docs(owner: type | Path) -> dict[str, str]:
    """The docstrings under the annotated assignments of a class body (or a module file):
    ``name: T = value`` followed by a string literal."""
    if isinstance(owner, Path):
        body = ast.parse(owner.read_text(encoding="utf-8")).body
    else:
        source = textwrap.dedent(inspect.getsource(owner))
        node = ast.parse(source).body[0]
        assert isinstance(node, ast.ClassDef)
        body = node.body
    docs: dict[str, str] = {}
    for current, following in zip(body, [*body[1:], None], strict=True):
        if not isinstance(current, ast.AnnAssign) or not isinstance(current.target, ast.Name):
            continue
        if (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[current.target.id] = following.value.value
    return docs


def shown(value: Any) -> str:
    """A default as the docs show it."""
    if value is None:
        return "none"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


# --- environment ----------------------------------------------------------------------------

_SECTION = re.compile(r"^# --- (.+?) -*$")


@page("environment", "Environment variables")
def environment() -> str:
    """Every ``Final`` string constant of ``_env.py`` that names a variable, under its section
    comment, with its docstring."""
    from otel_llm import _env

    path = Path(_env.__file__)
    lines = path.read_text(encoding="utf-8").splitlines()
    docs = attribute_docs(path)
    sections: list[tuple[str, list[str]]] = []
    for line in lines:
        heading = _SECTION.match(line)
        if heading:
            sections.append((heading.group(1), []))
            continue
        match = re.match(r"^([A-Z][A-Z0-9_]*): Final = ", line)
        if match and match.group(1) in docs and sections:
            sections[-1][1].append(match.group(1))
    out = [
        "# Environment variables\n",
        GENERATED_NOTE.format(
            source="`otel_llm/_env.py`, where every variable otel-llm reads "
            "is a documented constant"
        ),
        "The client's own configuration keys (`LLM__…`, `EMBEDDING__…`) are listed under "
        "[Settings keys](settings.md).\n",
    ]
    for title, names in sections:
        if not names:
            continue
        out.append(f"## {title[0].upper()}{title[1:]}\n")
        out.append("| variable | meaning |\n|---|---|")
        for name in names:
            value = getattr(_env, name)
            out.append(f"| `{value}` | {one_line(docs[name])} |")
        out.append("")
    return "\n".join(out)


def env_names() -> list[str]:
    """Every variable name ``_env.py`` documents (the test checks each is on the page)."""
    from otel_llm import _env

    docs = attribute_docs(Path(_env.__file__))
    return [getattr(_env, name) for name in docs if name.isupper() and name != "SEPARATOR"]


# --- settings -------------------------------------------------------------------------------


def _bounds(info: Any) -> str:
    """pydantic's numeric and length constraints of a field, as text."""
    parts = []
    for item in info.metadata:
        for attribute, sign in (
            ("gt", ">"),
            ("ge", "≥"),
            ("lt", "<"),
            ("le", "≤"),
            ("min_length", "length ≥"),
        ):
            bound = getattr(item, attribute, None)
            if bound is not None:
                parts.append(f"{sign} {bound}")
    return ", ".join(parts)


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation).replace("typing.", "")
    text = re.sub(r"pydantic\.types\.", "", text)
    return text.replace("NoneType", "None").replace("|", "or")


def _defaults_doc(*names: str) -> str:
    """The docstring of the first of ``names`` that is a field of ``Defaults`` (a settings field
    without a docstring of its own reads its default from there)."""
    from otel_llm._defaults import Defaults

    docs = attribute_docs(Defaults)
    return next((docs[name] for name in names if name in docs), "")


def settings_rows() -> Iterator[tuple[str, str, str, str, str, str]]:
    """(key, Client argument, type, default, bounds, meaning) of every scope-level key."""
    from otel_llm._act._groups import Group
    from otel_llm._act._settings import CLIENT_ARGUMENTS, ClientSettings

    arguments = {path: argument for argument, path in CLIENT_ARGUMENTS.items()}
    for group, info in ClientSettings.model_fields.items():
        model = info.annotation
        if not (isinstance(model, type) and issubclass(model, Group)):
            continue
        docs = attribute_docs(model)
        for field, field_info in model.model_fields.items():
            key = f"{{SCOPE}}__{group.upper()}__{field.upper()}"
            argument = arguments.get(f"{group}.{field}")
            yield (
                key,
                f"`{argument}`" if argument else "—",
                _type_name(field_info.annotation),
                shown(field_info.default),
                _bounds(field_info),
                one_line(docs.get(field) or _defaults_doc(f"{group}_{field}", field) or "—"),
            )


def source_rows() -> Iterator[tuple[str, str, str, str, str]]:
    """(key, type, default, bounds, meaning) of every per-source key."""
    from pydantic_core import PydanticUndefined

    from otel_llm._act._source import Source

    docs = attribute_docs(Source)
    for field, info in Source.model_fields.items():
        if field in ("name", "provider"):  # the key's {PROVIDER}__{N} names them
            continue
        default = "required" if info.default is PydanticUndefined else shown(info.default)
        if field == "priority":
            default = "`N`"
        yield (
            f"{{SCOPE}}__{{PROVIDER}}__{{N}}__{field.upper()}",
            _type_name(info.annotation),
            default,
            _bounds(info),
            one_line(docs.get(field) or _defaults_doc(field) or "—"),
        )


@page("settings", "Settings keys")
def settings() -> str:
    from otel_llm._act._settings import RESERVED_GROUPS
    from otel_llm._defaults import DEFAULTS

    out = [
        "# Settings keys\n",
        GENERATED_NOTE.format(
            source="the settings model (`otel_llm/_act/_settings.py`, its "
            "groups in `_groups.py`, `Source` in `_source.py`) and "
            "`otel_llm/_defaults.py`"
        ),
        f"`{{SCOPE}}` is `{DEFAULTS.scope}` for chat and `EMBEDDING` for embeddings. Every key "
        "has three layers — the environment, a `ClientSettings` object, a `Client(...)` "
        "argument — and the explicit argument wins. The rules beyond these bounds (guards "
        "between keys, what each key does) are on [Configuration](../configuration.md).\n",
        "## Per-source keys\n",
        "`{SCOPE}__{PROVIDER}__{N}__{FIELD}`: the source is named `{provider}-{N}`, and `N` is "
        "its default priority. In code: `Source(name=…, provider=…, <field>=…)`.\n",
        "| key | type | default | bounds | meaning |\n|---|---|---|---|---|",
    ]
    out += [
        f"| `{key}` | {kind} | {default} | {bounds} | {meaning} |"
        for key, kind, default, bounds, meaning in source_rows()
    ]
    groups = ", ".join(f"`{name}`" for name in sorted(RESERVED_GROUPS))
    out += [
        "",
        "## Scope-level keys\n",
        f"`{{SCOPE}}__{{GROUP}}__{{FIELD}}`; the groups {groups} are reserved and never parsed "
        "as a provider.\n",
        "| key | `Client` argument | type | default | bounds | meaning |\n"
        "|---|---|---|---|---|---|",
    ]
    out += [
        f"| `{key}` | {argument} | {kind} | {default} | {bounds} | {meaning} |"
        for key, argument, kind, default, bounds, meaning in settings_rows()
    ]
    out.append("")
    return "\n".join(out)


@page("defaults", "Defaults")
def defaults() -> str:
    from dataclasses import fields

    from otel_llm._defaults import DEFAULTS, Defaults

    docs = attribute_docs(Defaults)
    out = [
        "# Defaults\n",
        GENERATED_NOTE.format(
            source="`otel_llm/_defaults.py`, where every default of the library is written once"
        ),
        "Seconds are floats; a name ending in `_ms` is whole milliseconds. The client's keys "
        "that read these are on [Settings keys](settings.md).\n",
        "| name | value | meaning |\n|---|---|---|",
    ]
    for item in fields(Defaults):
        value = getattr(DEFAULTS, item.name)
        out.append(f"| `{item.name}` | {shown(value)} | {one_line(docs.get(item.name, ''))} |")
    out.append("")
    return "\n".join(out)


# --- errors -----------------------------------------------------------------------------------


def error_classes() -> list[type[BaseException]]:
    """Every error class defined in ``_errors.py``, in the order of the file."""
    from otel_llm import _errors

    found = [
        value
        for value in vars(_errors).values()
        if isinstance(value, type)
        and issubclass(value, _errors.OtelLLMError)
        and value.__module__ == _errors.__name__
    ]
    return sorted(found, key=lambda cls: inspect.getsourcelines(cls)[1])


@page("errors", "Error classes")
def errors() -> str:
    import otel_llm
    from otel_llm import _errors

    classes = error_classes()
    out = [
        "# Error classes\n",
        GENERATED_NOTE.format(source="`otel_llm/_errors.py`, the one error hierarchy"),
        "How they are raised, retried and kept free of secrets: [Errors](../errors.md).\n",
        "```",
    ]

    def tree(cls: type[BaseException], depth: int) -> None:
        extra = [
            base.__name__
            for base in cls.__bases__
            if base.__module__ == "builtins" and base is not Exception
        ]
        also = f"   (also a {', '.join(extra)})" if extra else ""
        out.append(f"{'    ' * depth}{cls.__name__}{also}")
        for sub in sorted(cls.__subclasses__(), key=classes.index):
            if sub in classes:
                tree(sub, depth + 1)

    tree(_errors.OtelLLMError, 0)
    out += ["```", ""]
    for cls in classes:
        bases = ", ".join(f"`{base.__name__}`" for base in cls.__bases__)
        out.append(f"## `{cls.__name__}`\n")
        exported = (
            f"`from otel_llm import {cls.__name__}`"
            if cls.__name__ in otel_llm.__all__
            else "not exported by `otel_llm` (catch a base class)"
        )
        out.append(f"Subclass of {bases}; {exported}.\n")
        out.append(rst_to_markdown(inspect.cleandoc(cls.__doc__ or "")) + "\n")
    return "\n".join(out)


# --- figures ---------------------------------------------------------------------------------


@page("figures", "Figures")
def figures() -> str:
    from otel_llm._figures import FIGURES

    out = [
        "# Figures\n",
        GENERATED_NOTE.format(source="`otel_llm/_figures.py`, the one table of figures"),
        "Each figure's name is its `CallStats` field, its view column (`llm_attempts`, "
        "`llm_calls`) and SQL alias; the span attribute and the typed `otel_traces` column "
        "derive from it. A figure that depends on the stall threshold is re-derived by "
        "`llm_attempts_at(T)` from the stored chunk gaps. Definitions in words: "
        "[Figures](../figures.md).\n",
        "| figure | meaning | span attribute | `otel_traces` column | depends on the threshold |",
        "|---|---|---|---|---|",
    ]
    for figure in FIGURES:
        out.append(
            f"| `{figure.name}` | {one_line(figure.meaning)} | `{figure.attribute}` | "
            f"`{figure.column}` | {'yes' if figure.at_threshold else 'no'} |"
        )
    out.append("")
    return "\n".join(out)


# --- the command line --------------------------------------------------------------------------


def cli_commands() -> dict[str, Any]:
    """The click command of every ``otel-llm`` subcommand, by name."""
    import typer.main

    from otel_llm.cli._app import app

    group: Any = typer.main.get_command(app)
    context = group.context_class(group, info_name="otel-llm")
    return {name: group.get_command(context, name) for name in group.list_commands(context)}


@page("cli", "Command line")
def cli() -> str:
    import typer.main

    from otel_llm.cli._app import app

    group: Any = typer.main.get_command(app)
    out = [
        "# Command line: `otel-llm`\n",
        GENERATED_NOTE.format(source="the typer app (`otel_llm/cli/_app.py`)"),
        f"{group.help}\n",
        "`otel-llm --version` prints the version. Every command takes `--help`.\n",
    ]
    for name, command in cli_commands().items():
        context = command.context_class(command, info_name=name)
        usage = " ".join(command.collect_usage_pieces(context))
        out.append(f"## `otel-llm {name}`\n")
        out.append(f"```\notel-llm {name} {usage}\n```\n")
        out.append(inspect.cleandoc(command.help or "") + "\n")
        rows = []
        for param in command.params:
            record = param.get_help_record(context)
            if record is None:
                continue
            usage_text, help_text = record
            rows.append(
                f"| `{usage_text}` | {' '.join(help_text.split()).replace('|', chr(92) + '|')} |"
            )
        if rows:
            out += ["| argument or option | meaning |", "|---|---|", *rows, ""]
    return "\n".join(out)


# --- mkdocs' hooks --------------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    """Add every generated page to the site's files (before the nav is resolved)."""
    from mkdocs.structure.files import File

    for uri, (_title, write) in PAGES.items():
        files.append(File.generated(config, uri, content=write()))
    return files
