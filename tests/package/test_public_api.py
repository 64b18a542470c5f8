"""The public surface does not drift by accident, and importing it stays cheap."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import otel_llm
from tests.support import REPOSITORY

ROOT = REPOSITORY

EXPECTED = {
    "Admission",
    "AdmissionSettings",
    "AllSourcesExhausted",
    "AsyncObservedStream",
    "AuthenticationError",
    "BackendUnavailable",
    "BadRequest",
    "BreakerSettings",
    "CallStats",
    "ChatResult",
    "Client",
    "ClientSettings",
    "CollectorError",
    "Completion",
    "ConfigWarning",
    "ConfigurationError",
    "ContentFiltered",
    "ContextLengthExceeded",
    "DerivingSpanProcessor",
    "EmbeddingSettings",
    "Embeddings",
    "EmbeddingsResult",
    "ExportStats",
    "HedgeSettings",
    "InvalidRequest",
    "Limits",
    "LocalAdmission",
    "MalformedResponse",
    "MalformedStream",
    "NotAStore",
    "NotFound",
    "ObservedStream",
    "open_store",
    "OtelLLMError",
    "PermanentError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeout",
    "RateLimited",
    "RedisAdmission",
    "RetrySettings",
    "SegmentSpanExporter",
    "ServerError",
    "Source",
    "StallFigures",
    "StreamSettings",
    "Telemetry",
    "ToolCall",
    "TransientError",
    "TruncatedStream",
    "UnsupportedSchema",
    "Usage",
    "WatchdogTimeout",
    "__version__",
    "init",
    "instrument",
    "instrument_anthropic",
    "instrument_google_genai",
    "instrument_litellm",
    "instrument_openai",
    "observe_stream",
    "openai_classifier",
    "uninstrument",
    "uninstrument_anthropic",
    "uninstrument_google_genai",
    "uninstrument_litellm",
    "uninstrument_openai",
}


PUBLIC_SUBPACKAGES = {"testing", "simulator", "cli", "conformance"}
"""Public on purpose: test doubles, the simulated provider, the command line, the conformance
suite (present in the namespace once imported)."""


def test_public_names_are_exactly_the_curated_set() -> None:
    """__all__ is the curated surface, and every name in it resolves."""
    assert set(otel_llm.__all__) == EXPECTED
    for name in otel_llm.__all__:
        assert getattr(otel_llm, name) is not None


def test_nothing_else_is_public() -> None:
    """As httpx checks: every public name in the package's namespace is in __all__ — no
    subpackage or helper leaks as public (the layers are private: ``_act``, ``_measure`` …),
    also once every lazily imported name has been loaded into the namespace."""
    for name in otel_llm.__all__:
        getattr(otel_llm, name)
    public = {name for name in vars(otel_llm) if not name.startswith("_")}
    assert public <= set(otel_llm.__all__) | PUBLIC_SUBPACKAGES
    assert set(otel_llm.__all__) <= set(dir(otel_llm))


def test_unknown_name_is_an_attribute_error() -> None:
    """A name that is not public raises AttributeError, so hasattr() and getattr() defaults work."""
    assert not hasattr(otel_llm, "Nonexistent")
    assert getattr(otel_llm, "_act_missing", None) is None


def test_type_checking_imports_match_the_lazy_table() -> None:
    """What type checkers see (the ``if TYPE_CHECKING:`` imports) is what ``__getattr__``
    imports: same names from the same modules, and together with the eager imports exactly
    ``__all__``."""
    tree = ast.parse(inspect.getsource(otel_llm))
    checked: dict[str, str] = {}
    eager: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "_typing.TYPE_CHECKING":
            for item in node.body:
                assert isinstance(item, ast.ImportFrom)
                checked.update({alias.name: str(item.module) for alias in item.names})
        elif isinstance(node, ast.ImportFrom) and node.module != "importlib":
            eager.update(alias.name for alias in node.names)
    lazy = {name: module for module, names in otel_llm._LAZY.items() for name in names}
    assert checked == lazy
    assert set(lazy) | eager == set(otel_llm.__all__)


def test_import_loads_neither_duckdb_nor_the_sdk(tmp_path: Path) -> None:
    """``import otel_llm`` (and ``instrument_openai()``, the web application's one line) in a
    fresh process imports neither DuckDB, the OpenTelemetry SDK, the client's settings models,
    nor the CLI's libraries; ``init()`` then loads DuckDB and the SDK it wires."""
    script = textwrap.dedent(
        """
        import sys
        import otel_llm

        heavy = ("duckdb", "opentelemetry.sdk", "pydantic_settings", "rich", "typer")
        print(sorted(m for m in heavy if m in sys.modules))
        otel_llm.instrument_openai()
        print(sorted(m for m in heavy if m in sys.modules))
        otel_llm.init(db_path=sys.argv[1], set_global=False, otlp=False).shutdown()
        print(sorted(m for m in heavy if m in sys.modules))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "t.duckdb")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    after_import, after_instrument, after_init = out.stdout.splitlines()
    assert after_import == "[]"
    assert after_instrument == "[]"
    assert after_init == "['duckdb', 'opentelemetry.sdk']"


def test_errors_form_one_tree() -> None:
    """Every error the library raises derives from OtelLLMError."""
    for name in otel_llm.__all__:
        value = getattr(otel_llm, name)
        if (
            isinstance(value, type)
            and issubclass(value, Exception)
            and not issubclass(value, Warning)
        ):
            assert issubclass(value, otel_llm.OtelLLMError), name


def test_the_old_exporter_name_still_works_and_says_what_replaced_it() -> None:
    """``DuckDBSpanExporter`` (it never touched DuckDB) is the same class under its new name,
    ``SegmentSpanExporter``; every use of the old name warns, and it is not in ``__all__``."""
    import otel_llm

    with pytest.warns(DeprecationWarning, match="use otel_llm.SegmentSpanExporter"):
        old = otel_llm.DuckDBSpanExporter
    assert old is otel_llm.SegmentSpanExporter
    with pytest.warns(DeprecationWarning, match="DuckDBSpanExporter is deprecated"):
        from otel_llm import DuckDBSpanExporter  # noqa: F401
    assert "DuckDBSpanExporter" not in otel_llm.__all__
