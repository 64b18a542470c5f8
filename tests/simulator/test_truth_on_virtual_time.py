"""The scripted ground truth against otel-llm's own client, on virtual time: served over real
loopback sockets by the simulated provider on ``run_virtual(real_io=True)``, every figure the
client measures is the one :func:`scripted_figures` dictates, to the millisecond, on each wire
format the client speaks (and a ``malformed`` line, which cuts nothing from what is sent, ends
the client's attempt there)."""

from __future__ import annotations

import contextlib
import random

import pytest

from otel_llm import Client, Source
from otel_llm.simulator import Script, Silence, SimulatedProvider, WireName, scripted_figures
from otel_llm.simulator._script import Fault
from otel_llm.testing import Spans, figures_of, run_virtual

WIRES: dict[str, WireName] = {"openai": "chat", "anthropic": "anthropic", "gemini": "gemini"}
"""The client's providers and the simulator's wire format each speaks."""

CALLS = 30
THRESHOLD_S = 1.0


def drawn(rng: random.Random) -> Script:
    """A script with gaps at and around the threshold, keepalives, holds, a reasoning phase,
    tool calls and the faults that end a stream."""
    count = rng.randint(2, 10)
    fault: Fault | None = rng.choice([None, None, "truncate", "error", "reset"])
    return Script(
        first_chunk_delay_s=rng.choice([0.0, 0.7, 1.3, 10.0]),
        chunk_count=count,
        chunk_interval_s=rng.choice([0.0, 0.1, 0.3, 1.1]),
        silences=tuple(
            Silence(
                after_chunk=rng.randrange(count),
                duration_s=rng.choice([0.5, 0.9, 1.0, 1.001, 3.3]),
                keepalive_every_s=rng.choice([None, 0.3]),
            )
            for _ in range(rng.randint(0, 3))
        ),
        hold_s=rng.choice([0.0, 2.2]),
        reasoning_chunks=rng.choice([0, 1]),
        tool_call=rng.random() < 0.2,
        fault=fault,
        fault_after_chunk=rng.randrange(count) if fault else 0,
    )


def ms(seconds: float) -> int:
    return int(seconds * 1000 + 1e-6)


async def measured(provider: SimulatedProvider, name: str, script: Script) -> tuple[int, ...]:
    """(ttft, chunks, stalls, stall, longest gap) of one attempt of the client on ``name``."""
    spans = Spans()
    base = f"{provider.url}/v1beta" if name == "gemini" else provider.base_url
    source = Source(name="a", provider=name, base_url=base, model="m", api_key="sim")
    async with Client([source], tracer_provider=spans.provider, max_attempts=1) as client:
        sim = script.model_dump(mode="json")
        with contextlib.suppress(Exception):  # a fault ends the call; the attempt's figures stay
            await client.chat([{"role": "user", "content": "hi"}], extra_body={"sim": sim})
    spans.check()
    (attempt,) = spans.attempts()
    figures = figures_of(attempt)
    values = (
        figures.ttft_ms,
        figures.chunk_count,
        figures.stall_count,
        figures.stall_ms,
        figures.max_inter_chunk_ms,
    )
    return tuple(-1 if value is None else value for value in values)


def truth(script: Script, wire: WireName) -> tuple[int, ...]:
    figures = scripted_figures(script, threshold_s=THRESHOLD_S, wire=wire)
    if figures.chunk_count < 2:  # no gap: the stall figures are not set
        ttft = -1 if figures.ttft_s is None else ms(figures.ttft_s)
        return (ttft, figures.chunk_count or -1, -1, -1, -1)
    assert figures.ttft_s is not None
    return (
        ms(figures.ttft_s),
        figures.chunk_count,
        figures.stall_count,
        ms(figures.stall_s),
        ms(figures.longest_gap_s),
    )


def test_the_client_measures_exactly_the_scripted_figures_on_every_wire() -> None:
    """Thirty drawn scripts, each on a drawn wire: measured == scripted, field by field."""
    rng = random.Random(20261208)
    cases = [(rng.choice(sorted(WIRES)), drawn(rng)) for _ in range(CALLS)]

    async def main() -> list[tuple[str, Script, tuple[int, ...]]]:
        async with SimulatedProvider() as provider:
            return [(name, s, await measured(provider, name, s)) for name, s in cases]

    for name, script, got in run_virtual(main(), real_io=True):
        assert got == truth(script, WIRES[name]), (name, script)


@pytest.mark.parametrize("name", sorted(WIRES))
def test_a_malformed_line_ends_the_clients_attempt_after_the_chunk_before_it(name: str) -> None:
    """``malformed`` after chunk 2 of 6: the server sends every chunk, the client measures
    chunks 0…2 (what ``scripted_figures`` of a ``truncate`` after chunk 2 dictates)."""
    malformed = Script(chunk_count=6, chunk_interval_s=0.3, fault="malformed", fault_after_chunk=2)
    cut_there = malformed.model_copy(update={"fault": "truncate"})

    async def main() -> tuple[int, ...]:
        async with SimulatedProvider() as provider:
            return await measured(provider, name, malformed)

    got = run_virtual(main(), real_io=True)
    assert got == truth(cut_there, WIRES[name])
    assert scripted_figures(malformed, threshold_s=THRESHOLD_S, wire=WIRES[name]).chunk_count == 6
