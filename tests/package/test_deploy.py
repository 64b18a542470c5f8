"""The docker compose recipes of ``deploy/``, checked as files (Docker does not run here): the
services, images that are not Alpine-based, host paths that exist, the environment the mounted
provisioning files read, ports bound to 127.0.0.1 only, the Collector's build and config, and
the DuckDB plugin's installer run on a zip laid out like a release."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import REPOSITORY

ROOT = REPOSITORY
DEPLOY = ROOT / "deploy"
DUCKDB = DEPLOY / "grafana-duckdb"
CLICKHOUSE = DEPLOY / "clickhouse-collector"
STORE_VARIABLE = "OTEL_LLM_STORE_DIR"  # the one host path outside the checkout: the store
PLUGIN = "motherduck-duckdb-datasource"
VOLUME = re.compile(r"(?P<host>.+?):(?P<container>/[^:]*)(?::(?P<mode>ro|rw))?")
"""``host:container[:mode]``; a host of ``${NAME:-default}`` holds a colon of its own."""
DEFAULTED = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def compose(folder: Path) -> dict[str, Any]:
    document = yaml.safe_load((folder / "compose.yaml").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def resolved(text: str) -> str:
    """``${NAME:-default}`` as compose resolves it with NAME unset."""
    return DEFAULTED.sub(lambda match: match.group(2) or "", text)


def binds(service: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(host as written, container path, mode) of every bind mount (named volumes left out)."""
    found = []
    for volume in service.get("volumes", []):
        match = VOLUME.fullmatch(volume)
        assert match, volume
        host, container, mode = match.group("host", "container", "mode")
        if host.startswith((".", "/", "$")):
            found.append((host, container, mode or "rw"))
    return found


def environment(service: dict[str, Any]) -> dict[str, str]:
    value = service.get("environment", {})
    assert isinstance(value, dict), "environment as a mapping"
    return {name: str(setting) for name, setting in value.items()}


@pytest.mark.parametrize(
    ("folder", "services"),
    [(DUCKDB, {"duckdb-plugin", "grafana"}), (CLICKHOUSE, {"clickhouse", "collector", "grafana"})],
    ids=["grafana-duckdb", "clickhouse-collector"],
)
def test_structure(folder: Path, services: set[str]) -> None:
    document = compose(folder)
    assert set(document["services"]) == services
    for name, service in document["services"].items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on {dependency}"
        image = resolved(service["image"])
        assert "alpine" not in image.lower(), f"{name}: {image}"
        if name == "grafana":
            assert image.startswith("grafana/grafana-oss:"), image
            assert image.endswith("-ubuntu"), image
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        for host, container, _mode in binds(service):
            assert container.startswith("/")
            if host == f"${{{STORE_VARIABLE}:-../../otel-llm-store}}":
                continue  # the store: wherever the application writes it
            assert "$" not in host, f"{name}: {host}"
            assert (folder / host).resolve().exists(), f"{name} mounts {host}, which is missing"
    for volume in document.get("volumes", {}):
        assert any(
            v.split(":")[0] == volume
            for s in document["services"].values()
            for v in s.get("volumes", [])
        )


def _provisioned(service: dict[str, Any], folder: Path) -> list[Path]:
    return [
        (folder / host).resolve()
        for host, container, _ in binds(service)
        if container.startswith("/etc/grafana/provisioning/")
    ]


@pytest.mark.parametrize(("folder", "source"), [(DUCKDB, "duckdb"), (CLICKHOUSE, "clickhouse")])
def test_grafana_gets_what_its_provisioning_reads(folder: Path, source: str) -> None:
    grafana = compose(folder)["services"]["grafana"]
    env = environment(grafana)
    provisioned = _provisioned(grafana, folder)
    assert {path.name for path in provisioned} == {f"{source}.yaml", "otel-llm.yaml"}
    for path in provisioned:
        assert path.is_relative_to(ROOT / "dashboards" / "provisioning"), path
        variables = set(re.findall(r"\$\{(\w+)\}", path.read_text(encoding="utf-8")))
        assert variables, path
        assert variables <= set(env), f"{path.name} reads {variables - set(env)}, not set"
    targets = {container: host for host, container, _ in binds(grafana)}
    dashboards = f"{env['OTEL_LLM_DASHBOARDS']}/{source}"
    assert dashboards in targets
    assert (folder / targets[dashboards]).resolve() == ROOT / "dashboards" / source
    assert (ROOT / "dashboards" / source / "otel-llm.json").is_file()


def test_duckdb_grafana_loads_the_unsigned_plugin_and_reads_the_store() -> None:
    services = compose(DUCKDB)["services"]
    grafana, installer = services["grafana"], services["duckdb-plugin"]
    env = environment(grafana)
    assert PLUGIN in env["GF_PLUGINS_ALLOW_LOADING_UNSIGNED_PLUGINS"].split(",")
    store = [c for h, c, _ in binds(grafana) if STORE_VARIABLE in h]
    assert store == [env["OTEL_LLM_STORE"]]
    assert [mode for h, _, mode in binds(grafana) if STORE_VARIABLE in h] == ["rw"]
    assert grafana["depends_on"]["duckdb-plugin"]["condition"] == "service_completed_successfully"
    plugins = "/var/lib/grafana/plugins"
    assert f"grafana-plugins:{plugins}" in grafana["volumes"]
    assert f"grafana-plugins:{plugins}" in installer["volumes"]
    assert environment(installer)["PLUGINS_DIR"] == plugins
    script = [c for h, c, _ in binds(installer) if h == "./install_plugin.py"]
    assert script
    assert script[0] in installer["command"]


def test_clickhouse_collector_wiring() -> None:
    services = compose(CLICKHOUSE)["services"]
    clickhouse, collector, grafana = (services[n] for n in ("clickhouse", "collector", "grafana"))
    assert any(
        c.startswith("/docker-entrypoint-initdb.d/")
        and h.endswith("collector/clickhouse/schema.sql")
        for h, c, _ in binds(clickhouse)
    )
    assert environment(grafana)["GF_PLUGINS_PREINSTALL"] == "grafana-clickhouse-datasource"
    assert environment(grafana)["CLICKHOUSE_HOST"] == "clickhouse"
    endpoint = environment(collector)["OTEL_LLM_CLICKHOUSE_ENDPOINT"]
    assert re.fullmatch(r"tcp://clickhouse:9000", endpoint)
    # the Collector: built with collector/build.sh, run with the repository's config
    build = collector["build"]
    dockerfile = (CLICKHOUSE / build["context"] / build["dockerfile"]).resolve()
    assert (CLICKHOUSE / build["context"]).resolve() == ROOT
    text = dockerfile.read_text(encoding="utf-8")
    assert "collector/build.sh" in text
    for base in re.findall(r"^FROM (\S+)", text, flags=re.MULTILINE):
        assert "alpine" not in base, base
    mounted = {c: (CLICKHOUSE / h).resolve() for h, c, _ in binds(collector)}
    configs = [arg.removeprefix("file:") for arg in collector["command"] if arg.startswith("file:")]
    assert [mounted[c] for c in configs] == [
        ROOT / "collector" / "clickhouse.yaml",
        CLICKHOUSE / "container.yaml",
    ]
    # container.yaml only moves the listeners to the container's interfaces, on the same ports
    base = yaml.safe_load((ROOT / "collector" / "clickhouse.yaml").read_text(encoding="utf-8"))
    override = yaml.safe_load((CLICKHOUSE / "container.yaml").read_text(encoding="utf-8"))
    assert set(override) == {"extensions", "receivers"}
    published = {port.rsplit(":", 1)[1] for port in collector["ports"]}
    listeners = [
        (base["extensions"]["health_check"], override["extensions"]["health_check"]),
        *(
            (
                base["receivers"]["otlp"]["protocols"][p],
                override["receivers"]["otlp"]["protocols"][p],
            )
            for p in ("grpc", "http")
        ),
    ]
    for original, moved in listeners:
        port = moved["endpoint"].split(":")[1]
        assert moved["endpoint"] == f"0.0.0.0:{port}"
        assert resolved(original["endpoint"].replace("env:", "")).endswith(f":{port}")
        assert port in published


def _release_zip(path: Path) -> None:
    """A zip laid out as the plugin's releases are: a folder named after the plugin."""
    with zipfile.ZipFile(path, "w") as bundle:
        bundle.writestr(f"{PLUGIN}/plugin.json", json.dumps({"id": PLUGIN, "type": "datasource"}))
        binary = zipfile.ZipInfo(f"{PLUGIN}/gpx_duckdb_datasource_linux_amd64")
        binary.external_attr = (stat.S_IFREG | 0o644) << 16  # a zip that lost the exec bit
        bundle.writestr(binary, b"\x7fELF")
        bundle.writestr(f"{PLUGIN}/module.js", "")


def test_the_plugin_installer(tmp_path: Path) -> None:
    archive = tmp_path / "plugin.zip"
    _release_zip(archive)
    plugins = tmp_path / "plugins"
    env = {
        **os.environ,
        "DUCKDB_PLUGIN_URL": archive.as_uri(),
        "PLUGINS_DIR": str(plugins),
        "GRAFANA_UID": str(os.getuid()),
    }

    def install() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(DUCKDB / "install_plugin.py")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    first = install()
    assert first.returncode == 0, first.stderr
    target = plugins / PLUGIN
    assert json.loads((target / "plugin.json").read_text())["id"] == PLUGIN
    assert os.access(target / "gpx_duckdb_datasource_linux_amd64", os.X_OK)
    second = install()
    assert second.returncode == 0
    assert "already" in second.stdout
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(broken, "w") as bundle:
        bundle.writestr("README.md", "no plugin here")
    env["DUCKDB_PLUGIN_URL"] = broken.as_uri()
    assert install().returncode == 1


def test_the_default_release_url() -> None:
    text = (DUCKDB / "install_plugin.py").read_text(encoding="utf-8")
    assert "https://github.com/motherduckdb/grafana-duckdb-datasource/releases/download" in text
    default = environment(compose(DUCKDB)["services"]["duckdb-plugin"])["DUCKDB_PLUGIN_VERSION"]
    assert resolved(default) == "0.4.5"
