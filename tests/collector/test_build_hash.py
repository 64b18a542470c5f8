"""collector/build.sh keys its cached binary on the store exporter's sources too: a change to a
Go file or to schema.json builds anew (a stale binary is never reused), a change elsewhere in the
module folder does not."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from otel_llm.cli._collector import collector_dir

OCB_VERSION = "v0.161.0"


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _hash(copy: Path, cache: Path, fake_go: Path) -> str:
    """The hash build.sh names the build by (a stand-in builder fails right after)."""
    done = subprocess.run(
        ["bash", str(copy / "build.sh")],
        env={**os.environ, "GO": str(fake_go), "XDG_CACHE_HOME": str(cache)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0  # the stand-in builder fails: nothing is built
    found = re.search(r"building the collector \(([0-9a-f]{16})\)", done.stderr)
    assert found, done.stderr
    return found.group(1)


def test_the_cache_key_covers_the_exporters_sources(tmp_path: Path) -> None:
    """Editing a .go file, go.sum or schema.json changes the build's hash; a README beside
    them does not."""
    copy = tmp_path / "collector"
    shutil.copytree(
        collector_dir(), copy, ignore=shutil.ignore_patterns("*.test", "*.out", "clickhouse")
    )
    cache = tmp_path / "cache"
    fake_go = tmp_path / "bin" / "go"
    _executable(
        fake_go, '#!/bin/sh\n[ "$1 $2" = "env GOVERSION" ] && echo go1.26.8 && exit 0\nexit 1\n'
    )
    _executable(
        cache / "otel-llm" / "collector" / f"builder-{OCB_VERSION}" / "builder",
        "#!/bin/sh\nexit 1\n",
    )
    exporter = copy / "storeexporter"
    first = _hash(copy, cache, fake_go)
    assert _hash(copy, cache, fake_go) == first  # the same sources: the same key
    (exporter / "NOTES.md").write_text("not a source")
    assert _hash(copy, cache, fake_go) == first
    seen = {first}
    for name in ("rows.go", "go.sum", "schema.json"):
        with (exporter / name).open("a") as source:
            source.write("\n")
        changed = _hash(copy, cache, fake_go)
        assert changed not in seen, name
        seen.add(changed)
