"""Without the ``testing`` extra (aiohttp): the simulator, and the conformance suite that runs
on it, say what to install; ``otel_llm.testing`` still imports (its simulator is lazy)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support import REPOSITORY

HINT = "needs aiohttp: pip install 'aiohttp>=3.10' (otel-llm's testing extra)"


def _without_aiohttp(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python *args`` in a process where aiohttp cannot be imported (as when not installed:
    ``importlib.util.find_spec`` finds nothing)."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['aiohttp'] = None\n")
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPOSITORY,
        env={"PYTHONPATH": f"{tmp_path}:{REPOSITORY}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_simulator_names_what_to_install(tmp_path: Path) -> None:
    code = (
        "import otel_llm.testing\n"  # imports: the simulator is loaded on first use
        "try:\n"
        "    import otel_llm.simulator\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(exc.name, '|', exc)\n"
    )
    done = _without_aiohttp(tmp_path, "-c", code)
    assert done.returncode == 0, done.stderr
    name, _, message = done.stdout.strip().partition(" | ")
    assert name == "aiohttp"
    assert message.startswith("otel_llm.simulator (the simulated provider")
    assert HINT in message


def test_the_conformance_suite_ends_on_what_to_install(tmp_path: Path) -> None:
    done = _without_aiohttp(tmp_path, "-m", "otel_llm.conformance", "--list")
    assert done.returncode == 1
    assert done.stdout == ""
    assert HINT in done.stderr.strip().splitlines()[-1]


def test_a_star_import_of_the_testing_doubles_works_without_it(tmp_path: Path) -> None:
    """``from otel_llm.testing import *`` gives the doubles that need nothing more (it raised
    the simulator's ImportError, since ``__all__`` named the simulated provider); the simulated
    provider still names what to install when asked for."""
    code = (
        "from otel_llm.testing import *\n"
        "print(sorted(name for name in dir() if not name.startswith('_')))\n"
        "try:\n"
        "    SimulatedProvider\n"
        "except NameError:\n"
        "    print('no SimulatedProvider')\n"
        "try:\n"
        "    from otel_llm.testing import SimulatedProvider\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = _without_aiohttp(tmp_path, "-c", code)
    assert done.returncode == 0, done.stderr
    names, missing, hint = done.stdout.strip().splitlines()
    assert "run_virtual" in names
    assert "Scripted" in names
    assert missing == "no SimulatedProvider"
    assert HINT in hint
