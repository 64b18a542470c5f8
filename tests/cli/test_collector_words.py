"""What ``otel-llm collector`` says is true of the config it runs: the spans go into the store
only with a config whose ``otelllm_store`` exporter writes it (or, from a config of an earlier
version, through spool files it ingests); ClickHouse's config, or one that writes a file of its
own, sends them elsewhere — said so, and the store is neither made nor claimed. Run as a user
runs it, with a stand-in for the Collector (it answers the health check, ends on SIGTERM)."""

from __future__ import annotations

from pathlib import Path

from otel_llm.cli._collector import collector_dir
from tests.show.ingest.test_collector_cli import _stand_in, _until_stopped
from tests.support.processes import run_cli

_FILE_CONFIG = """\
# traces to a file of its own (no otelllm_store, no OTEL_LLM_COLLECTOR_STORE: this comment
# names them only)
extensions:
  health_check:
    endpoint: 127.0.0.1:${env:OTEL_LLM_COLLECTOR_HEALTH_PORT}
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${env:OTEL_LLM_COLLECTOR_HTTP_PORT}
exporters:
  file:
    path: ./spans.json
service:
  extensions: [health_check]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
"""


def _run(tmp_path: Path, *arguments: str) -> tuple[int, str]:
    stand_in = _stand_in(tmp_path, life=30.0)  # a run gone wrong ends, said, within the bound
    return _until_stopped("--db", "store", *arguments, cwd=tmp_path, binary=stand_in)


def test_a_config_writing_a_file_of_its_own_is_not_said_to_fill_the_store(tmp_path: Path) -> None:
    config = tmp_path / "file.yaml"
    config.write_text(_FILE_CONFIG)
    code, said = _run(tmp_path, f"--config={config}")
    assert code == 0, said
    assert f"spans where {config} sends them, not into the store --db names" in said
    assert f"collector stopped (exit code 0); spans went where {config} sends them" in said
    assert "into store" not in said
    assert not (tmp_path / "store").exists()  # neither made
    assert not (tmp_path / "store.otlp").exists()  # nor claimed


def test_clickhouse_s_config_by_its_path_does_not_claim_the_store(tmp_path: Path) -> None:
    config = tmp_path / "clickhouse.yaml"
    config.write_text((collector_dir() / "clickhouse.yaml").read_text())
    code, said = _run(tmp_path, f"--config={config}")
    assert code == 0, said
    assert f"collector stopped (exit code 0); spans went where {config} sends them" in said
    assert not (tmp_path / "store.otlp").exists()


def test_a_copy_of_the_duckdb_config_fills_the_store(tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text((collector_dir() / "duckdb.yaml").read_text())
    code, said = _run(tmp_path, f"--config={config}")
    assert code == 0, said
    assert "collector stopped (exit code 0); spans went straight into store" in said
    assert (tmp_path / "store.otlp").is_dir()  # claimed


def test_a_config_of_an_earlier_version_fills_the_store_through_spool_files(
    tmp_path: Path,
) -> None:
    """Collectors of earlier versions wrote the spans into spool files for the command to
    ingest: it says so, not that they went straight into the store."""
    config = tmp_path / "old.yaml"
    config.write_text(
        _FILE_CONFIG.replace(
            "./spans.json", "${env:OTEL_LLM_COLLECTOR_SPOOL:-./otel-llm-spool}/traces.binpb"
        )
    )
    code, said = _run(tmp_path, f"--config={config}")
    assert code == 0, said
    assert "spans into store through spool files" in said
    assert "collector stopped (exit code 0); 0 spans ingested into store from spool files" in said
    assert "straight into" not in said


def test_a_problem_found_before_the_collector_is_up_is_said_at_once(tmp_path: Path) -> None:
    """A spool file kept at the ingest before the start is said as the collector comes up,
    not only when it stops."""
    from otel_llm._show._ingest._claim import spool_path

    spool_path(tmp_path / "store").mkdir(parents=True)
    damaged = spool_path(tmp_path / "store") / "traces-2026-01-01T00-00-00.000-size.binpb"
    damaged.write_bytes(b"\xff\xff\xff\xffnot a message")
    code, said = _run(tmp_path)
    assert code == 1, said
    at_once = said.index(f"kept a damaged file: {damaged}")
    assert at_once < said.index("collector stopped")
    assert said.index("collector up") < at_once


def test_help_says_where_the_spans_go_for_each_config() -> None:
    done = run_cli("collector", "--help", columns=200)
    assert done.returncode == 0, done.stderr
    assert "ingesting its spans" not in done.stdout
    said = " ".join(done.stdout.split())
    assert "its spans where its config sends them" in said
    assert "With the duckdb config they go straight into the store" in said
