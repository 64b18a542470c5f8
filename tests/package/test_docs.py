"""The docs site: ``mkdocs build --strict`` passes, the generated reference pages hold every fact
of the code they are written from, every Python snippet of the docs and the README runs, and
the docs cite no requirement ids.

The snippets run in a fresh process per page (a page's snippets share one namespace, in order,
as a reader runs them), in a temporary directory, with ``OPENAI_BASE_URL`` pointing at the
project's simulated provider and ``OPENAI_API_KEY`` set — the way the docs tell a reader to try
them without a provider account. A snippet that cannot run must be preceded by
``<!-- not run: REASON -->`` and say why in the visible text beside it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from otel_llm.testing import SimulatedProvider, ThreadedProvider
from tests.support import REPOSITORY

ROOT = REPOSITORY
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("**/*.md"))
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*\Z")


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("otel_llm_docs_hooks", DOCS / "_hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOKS = _hooks()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as CI builds it: ``mkdocs build --strict``."""
    target = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml")]
    result = subprocess.run(
        [*command, "-d", str(target)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    return target


def _text(site: Path, page: str) -> str:
    """A built page's text, tags stripped and entities decoded."""
    import html

    raw = (site / page / "index.html").read_text(encoding="utf-8")
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def test_every_page_is_built(site: Path) -> None:
    for page in PAGES:
        relative = page.relative_to(DOCS).with_suffix("")
        built = site / ("" if relative.name == "index" else relative) / "index.html"
        assert built.is_file(), relative
    for uri in HOOKS.PAGES:
        assert (site / Path(uri).with_suffix("") / "index.html").is_file(), uri


def test_environment_page_names_every_variable(site: Path) -> None:
    text = _text(site, "reference/environment")
    names = HOOKS.env_names()
    assert len(names) >= 20
    assert [name for name in names if name not in text] == []


def test_errors_page_names_every_error_class(site: Path) -> None:
    from otel_llm import _errors

    text = _text(site, "reference/errors")
    defined = [
        name
        for name, value in vars(_errors).items()
        if isinstance(value, type) and issubclass(value, _errors.OtelLLMError)
    ]
    assert len(defined) >= 20
    assert [name for name in defined if name not in text] == []


def test_cli_page_names_every_command_and_option(site: Path) -> None:
    text = _text(site, "reference/cli")
    commands = HOOKS.cli_commands()
    assert {"demo", "query", "report", "tune", "views", "compact", "collector"} <= set(commands)
    missing = []
    for name, command in commands.items():
        if f"otel-llm {name}" not in text:
            missing.append(name)
        missing += [
            f"{name} {opt}"
            for param in command.params
            for opt in param.opts
            if param.param_type_name == "option" and opt not in text
        ]
    assert missing == []


def test_settings_page_has_every_key_and_default(site: Path) -> None:
    text = _text(site, "reference/settings")
    from otel_llm._act._settings import CLIENT_ARGUMENTS

    rows = list(HOOKS.settings_rows())
    assert len(rows) >= 25
    for key, *_ in [*rows, *HOOKS.source_rows()]:
        assert key in text
    for argument in CLIENT_ARGUMENTS:
        assert argument in text
    assert "| `{SCOPE}__RETRY__MAX_ATTEMPTS` | `max_attempts` | int | `3` | ≥ 1, ≤ 1000 |" in (
        HOOKS.settings()
    )


def test_configuration_page_covers_every_key() -> None:
    """The hand-written rules name every key the settings model has (a new key needs words)."""
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    keys = [key.replace("{SCOPE}", "").lstrip("_") for key, *_ in HOOKS.settings_rows()]
    fields = [key.rsplit("__", 1)[1] for key, *_ in HOOKS.source_rows()]
    assert [key for key in keys if key not in text] == []
    assert [field for field in fields if f"`{field}`" not in text] == []


def test_figures_and_defaults_pages(site: Path) -> None:
    from dataclasses import fields

    from otel_llm._defaults import Defaults
    from otel_llm._figures import FIGURES

    figures = _text(site, "reference/figures")
    assert [f.name for f in FIGURES if f.name not in figures or f.column not in figures] == []
    defaults = _text(site, "reference/defaults")
    assert [item.name for item in fields(Defaults) if item.name not in defaults] == []


# --- the snippets -----------------------------------------------------------------------------


def snippets(path: Path) -> Iterator[tuple[int, str, str | None]]:
    """(line, code, reason it is not run) of every ```python block of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        skipped = NOT_RUN.search(text[: match.start()])
        yield line, match.group(1), skipped.group(1).strip() if skipped else None


SNIPPET_FILES = [ROOT / "README.md", *PAGES]
RUNNER = """
import json, sys
namespace = {"__name__": "__main__"}
for label, code in json.load(open(sys.argv[1])):
    print(f"--- {label}", flush=True)
    exec(compile(code, label, "exec"), namespace)
"""


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    """A simulated OpenAI-compatible provider on loopback (its default script, 100× fast)."""
    threaded = ThreadedProvider(SimulatedProvider(time_scale=0.01))
    try:
        yield threaded.base_url
    finally:
        threaded.close()


def test_snippets_are_found() -> None:
    found = [(path, line) for path in SNIPPET_FILES for line, _, _ in snippets(path)]
    assert len(found) >= 8
    skipped = [(p, line, why) for p in SNIPPET_FILES for line, _, why in snippets(p) if why]
    assert len(skipped) <= 2, skipped  # rare, and each says why


@pytest.mark.parametrize(
    "path",
    [path for path in SNIPPET_FILES if any(True for _ in snippets(path))],
    ids=lambda path: str(path.relative_to(ROOT)),
)
def test_snippets_run(path: Path, provider: str, tmp_path: Path) -> None:
    blocks = [
        (f"{path.relative_to(ROOT)}:{line}", code)
        for line, code, skipped in snippets(path)
        if skipped is None
    ]
    program = tmp_path / "snippets.json"
    program.write_text(json.dumps(blocks), encoding="utf-8")
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(
            ("OTEL_", "LLM__", "EMBEDDING__", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_")
        )
    }
    root = provider.removesuffix("/v1")
    env.update(  # every SDK a page shows reads the simulated provider from its own variables
        OPENAI_BASE_URL=provider,
        OPENAI_API_KEY="sim-key",
        ANTHROPIC_BASE_URL=root,
        ANTHROPIC_API_KEY="sim-key",
        GOOGLE_GEMINI_BASE_URL=root,
        GEMINI_API_KEY="sim-key",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, str(program)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


# --- words the docs never use ----------------------------------------------------------------

FORBIDDEN = re.compile(r"\bSPEC\b|§\s?\d|\b[RM]\d{1,2}\b|farm-studio|farm-bench|`duplicates`")


def test_no_requirement_ids_in_the_docs() -> None:
    files = [ROOT / "README.md", ROOT / "mkdocs.yml", *PAGES, *(ROOT / "deploy").rglob("*")]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        if path.is_file() and path.suffix in (".md", ".yml", ".yaml", ".py", "")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if FORBIDDEN.search(line)
    ]
    assert found == []


# --- the tests the docs name ------------------------------------------------------------------

TEST_REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def test_every_test_the_docs_name_exists() -> None:
    """A page that says which test holds a rule names a test that is there."""
    named = [
        (page, match.group(1), match.group(2))
        for page in [ROOT / "README.md", *PAGES]
        for match in TEST_REFERENCE.finditer(page.read_text(encoding="utf-8"))
    ]
    assert len(named) >= 10
    missing = []
    for page, path, function in named:
        file = ROOT / path
        if not file.is_file() or (
            function is not None and f"def {function}(" not in file.read_text(encoding="utf-8")
        ):
            missing.append(f"{page.relative_to(ROOT)}: {path}::{function}")
    assert not missing, missing
