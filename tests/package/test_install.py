"""otel-llm installed the way a user installs it into their own application: a wheel built
from the checkout (through its sdist, as ``python -m build`` does), installed with its
``testing`` extra into a fresh virtual environment outside the checkout, then run from there —
the import, the command, a short demo, the store's SQL, and the files it ships (the Collector's
configs, the Grafana dashboards) found as package data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

import otel_llm
from tests.support import REPOSITORY

ROOT = REPOSITORY

pytestmark = pytest.mark.timeout(900)


def _run(*command: str | Path, cwd: Path, timeout_s: float = 600) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(c) for c in command],
        cwd=cwd,
        env={**env, "COLUMNS": "160"},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh venv's bin/, a working directory outside the checkout)."""
    base = tmp_path_factory.mktemp("install")
    dist = base / "dist"
    _run(sys.executable, "-m", "build", "--outdir", dist, ROOT, cwd=base)
    wheels = list(dist.glob("otel_llm-*.whl"))
    sdists = list(dist.glob("otel_llm-*.tar.gz"))
    assert len(wheels) == 1, wheels
    assert len(sdists) == 1, sdists
    env_dir = base / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    _run(bin_dir / "python", "-m", "pip", "install", "--quiet", f"{wheels[0]}[testing]", cwd=base)
    work = base / "app"
    work.mkdir()
    return bin_dir, work


def test_the_wheel_carries_the_metadata_a_release_needs(tmp_path: Path) -> None:
    """Version from one place, the license file, classifiers, the extras, and the shipped
    files inside the package."""
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "build", "--wheel", "--outdir", dist, ROOT, cwd=tmp_path)
    (wheel,) = dist.glob("otel_llm-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"otel_llm-{otel_llm.__version__}.dist-info"
        metadata = archive.read(f"{info}/METADATA").decode()
    assert f"{info}/licenses/LICENSE" in names
    assert f"Version: {otel_llm.__version__}\n" in metadata
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Typing :: Typed" in metadata
    assert "Requires-Python: >=3.11" in metadata
    assert "Provides-Extra: testing" in metadata
    assert "otel_llm/py.typed" in names
    for shipped in (
        "otel_llm/_data/collector/build.sh",
        "otel_llm/_data/collector/manifest.yaml",
        "otel_llm/_data/collector/duckdb.yaml",
        "otel_llm/_data/collector/clickhouse.yaml",
        "otel_llm/_data/dashboards/duckdb/otel-llm.json",
        "otel_llm/_data/dashboards/provisioning/datasources/duckdb.yaml",
    ):
        assert shipped in names, shipped
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/"))]


def test_import_and_version_come_from_the_installed_wheel(installed: tuple[Path, Path]) -> None:
    bin_dir, work = installed
    where = _run(bin_dir / "python", "-c", "import otel_llm; print(otel_llm.__file__)", cwd=work)
    assert Path(where.strip()).is_relative_to(bin_dir.parent), where
    assert not Path(where.strip()).is_relative_to(ROOT)
    version = _run(bin_dir / "otel-llm", "--version", cwd=work)
    assert version.strip() == f"otel-llm {otel_llm.__version__}"


def test_demo_and_views_run_from_the_installed_wheel(installed: tuple[Path, Path]) -> None:
    bin_dir, work = installed
    store = work / "store"
    out = _run(bin_dir / "otel-llm", "demo", "--calls", "5", "--db", store, "--seed", "3", cwd=work)
    assert "Where the time went" in out
    assert "No report at the end" in out  # the report extra is not installed: it says so
    assert (store / "otel-llm-store.json").is_file()
    sql = _run(bin_dir / "otel-llm", "views", "--db", store, cwd=work)
    assert f"read_parquet('{store}/segments/*.parquet'" in sql
    calls = _run(
        bin_dir / "otel-llm", "query", "--db", store, "--format", "json",
        "SELECT count(*) AS calls FROM llm_calls", cwd=work,
    )  # fmt: skip
    assert json.loads(calls) == [{"calls": 5}]


def test_the_shipped_files_are_found_as_package_data(installed: tuple[Path, Path]) -> None:
    bin_dir, work = installed
    found = _run(
        bin_dir / "python", "-c",
        "from otel_llm.cli._collector import config_path, collector_dir; "
        "print(collector_dir()); print(config_path('duckdb')); print(config_path('clickhouse'))",
        cwd=work,
    ).split()  # fmt: skip
    for path in map(Path, found):
        assert path.exists(), path
        assert path.is_relative_to(bin_dir.parent), path
    written = _run(bin_dir / "otel-llm", "dashboards", work / "grafana", cwd=work).split()
    shipped = ROOT / "dashboards"
    assert len(written) == len([p for p in shipped.rglob("*") if p.is_file()])
    for line in written:
        relative = Path(line).relative_to(work / "grafana")
        assert Path(line).read_bytes() == (shipped / relative).read_bytes()
