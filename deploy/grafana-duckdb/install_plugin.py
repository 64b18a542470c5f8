"""Download Grafana's DuckDB data source plugin (motherduck-duckdb-datasource) from its GitHub
release into Grafana's plugins folder — the plugin is unsigned and not in Grafana's catalog, so
Grafana cannot install it itself. Run by the ``duckdb-plugin`` service of ``compose.yaml`` before
Grafana starts; standard library only.

Environment: ``DUCKDB_PLUGIN_VERSION`` (``0.4.5``: its DuckDB is 1.5.4, the engine the suite's
old-reader tests run), ``PLUGINS_DIR`` (``/var/lib/grafana/plugins``), ``DUCKDB_PLUGIN_URL`` (the
release asset, by default built from the version), ``GRAFANA_UID`` (``472``, the user the Grafana
image runs as: the plugins folder is handed to it).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path

PLUGIN_ID = "motherduck-duckdb-datasource"
RELEASES = "https://github.com/motherduckdb/grafana-duckdb-datasource/releases/download"


def main() -> int:
    version = os.environ.get("DUCKDB_PLUGIN_VERSION", "0.4.5")
    url = os.environ.get("DUCKDB_PLUGIN_URL") or f"{RELEASES}/v{version}/{PLUGIN_ID}-{version}.zip"
    plugins = Path(os.environ.get("PLUGINS_DIR", "/var/lib/grafana/plugins"))
    target = plugins / PLUGIN_ID
    stamp = target / ".otel-llm-installed"
    if stamp.is_file() and stamp.read_text().strip() == url:
        print(f"{PLUGIN_ID} {version} is already in {target}")
        return 0
    with tempfile.TemporaryDirectory() as work:
        archive = Path(work, "plugin.zip")
        print(f"downloading {url}")
        with urllib.request.urlopen(url, timeout=120) as answer, archive.open("wb") as out:
            shutil.copyfileobj(answer, out)
        unpacked = Path(work, "unpacked")
        with zipfile.ZipFile(archive) as bundle:
            for member in bundle.infolist():
                path = bundle.extract(member, unpacked)
                mode = member.external_attr >> 16  # zipfile drops permissions: restore them
                if mode and not member.is_dir():
                    os.chmod(path, stat.S_IMODE(mode))
        root = plugin_root(unpacked)
        if root is None:
            print(f"error: {url} holds no plugin.json of {PLUGIN_ID}", file=sys.stderr)
            return 1
        for binary in root.glob("gpx_*"):  # the backend, whatever the zip kept of its mode
            binary.chmod(binary.stat().st_mode | 0o755)
        shutil.rmtree(target, ignore_errors=True)
        plugins.mkdir(parents=True, exist_ok=True)
        shutil.copytree(root, target)
    stamp.write_text(url + "\n")
    owner = int(os.environ.get("GRAFANA_UID", "472"))  # the Grafana image's user
    for entry in [plugins, *plugins.rglob("*")]:
        os.chown(entry, owner, -1, follow_symlinks=False)
    print(f"installed {PLUGIN_ID} {version} into {target}")
    return 0


def plugin_root(folder: Path) -> Path | None:
    """The folder whose plugin.json names the plugin (the zip may or may not nest it)."""
    for manifest in sorted(folder.rglob("plugin.json"), key=lambda path: len(path.parts)):
        try:
            if json.loads(manifest.read_text(encoding="utf-8")).get("id") == PLUGIN_ID:
                return manifest.parent
        except (OSError, ValueError):
            continue
    return None


if __name__ == "__main__":
    sys.exit(main())
