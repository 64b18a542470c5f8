"""``otel-llm tune`` on stores with nothing it can replay, recorded by the real client over
loopback: what it says about the data must be true of them."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_llm import Client, DerivingSpanProcessor, SegmentSpanExporter, Source
from otel_llm.simulator import Script, SimulatedProvider
from tests.support.processes import run_cli

SCRIPT = Script(first_chunk_delay_s=0.01, chunk_interval_s=0.001, chunk_count=5)


async def _calls(provider: TracerProvider, calls: int, *, stream: bool) -> None:
    async with SimulatedProvider(scripts={"scripted": SCRIPT}) as sim:
        sources = [
            Source(name=f"sim-{n}", provider="sim", base_url=sim.base_url, model="scripted")
            for n in (1, 2)
        ]
        async with Client(sources, tracer_provider=provider) as client:
            for _ in range(calls):
                await client.chat([{"role": "user", "content": "hi"}], stream=stream)


def _record(path: Path, calls: int, *, stream: bool) -> None:
    exporter = SegmentSpanExporter(path)
    provider = TracerProvider()
    provider.add_span_processor(DerivingSpanProcessor([SimpleSpanProcessor(exporter)]))
    try:
        asyncio.run(_calls(provider, calls, stream=stream))
    finally:
        provider.shutdown()


def test_non_streamed_calls_only_are_not_blamed_on_hedges_nor_called_one_source(
    tmp_path: Path,
) -> None:
    """Unhedged, non-streamed calls: every call is left out as not streamed. The data line
    says so without blaming hedge losers (there were none), and with no usable source the
    output does not claim the store has one source only."""
    path = tmp_path / "s"
    _record(path, 4, stream=False)
    table = run_cli("tune", "--db", str(path), columns=400)
    assert table.returncode == 3, table.stderr
    assert "4 not streamed" in table.stdout
    assert "4 calls whose first attempt is not usable." in table.stdout
    assert "hedge's losing primary" not in table.stdout
    assert "one source only" not in table.stdout
    document = json.loads(run_cli("tune", "--db", str(path), "--format", "json").stdout)
    assert document["data"]["sources"] == {}
    assert document["data"]["single_source"] is False
    assert document["data"]["notes"] == []


def test_an_empty_range_claims_no_source(tmp_path: Path) -> None:
    """No call in the range (``--since`` after the only call started): no source, so no
    one-source note either."""
    path = tmp_path / "s"
    _record(path, 1, stream=True)
    after = datetime.now(UTC).isoformat()
    result = run_cli("tune", "--db", str(path), "--since", after, "--format", "json")
    assert result.returncode == 3, result.stderr
    data = json.loads(result.stdout)["data"]
    assert (data["calls"], data["sources"], data["single_source"]) == (0, {}, False)
    table = run_cli("tune", "--db", str(path), "--since", after)
    assert "No call to replay in the range." in table.stdout
    assert "one source only" not in table.stdout
