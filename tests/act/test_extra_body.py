"""``Client.chat(extra_body=…)``: fields set as they are in the body sent to whichever source
answers, on every API the client speaks; a value that is not a mapping is refused before any
request is sent."""

from __future__ import annotations

import pytest

from otel_llm import Client, InvalidRequest
from otel_llm.simulator import SCRIPT_KEY_FIELD, Script, SimulatedProvider
from tests.support.sim_sources import PROVIDERS, sim_source

MESSAGES = [{"role": "user", "content": "hello"}]
SCRIPT = Script(first_chunk_delay_s=0.0, chunk_interval_s=0.0, chunk_count=3)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_extra_fields_reach_the_body_on_every_api(provider: str) -> None:
    """The simulator reads its draw key from the body: it kept the script under that key for
    the answer, which it does only when the field arrived."""
    async with SimulatedProvider(default=SCRIPT) as sim:
        async with Client([sim_source(provider, sim)]) as client:
            result = await client.chat(MESSAGES, extra_body={SCRIPT_KEY_FIELD: "call-1"})
        assert result.text.startswith("word0")
        assert sim.stats.scripts_for("call-1") == (SCRIPT,)
        assert sim.stats.script_of(result.response_id or "") == SCRIPT


@pytest.mark.parametrize("bad", [["x"], "sim_key=1", {1: "x"}])
async def test_extra_body_that_is_not_fields_is_refused_before_sending(bad: object) -> None:
    """A list, a string or a mapping with a key that is not a name: ``InvalidRequest``, and
    the provider saw nothing."""
    async with SimulatedProvider(default=SCRIPT) as sim:
        async with Client([sim_source("anthropic", sim)]) as client:
            with pytest.raises(InvalidRequest, match="extra_body"):
                await client.chat(MESSAGES, extra_body=bad)  # type: ignore[arg-type]
        assert sim.stats.requests == 0


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [True, False])
async def test_extra_body_cannot_turn_the_stream_flag(provider: str, stream: bool) -> None:
    """``stream`` in ``extra_body`` would make the source answer in the other mode than the
    client reads (a JSON document read as a stream, or a stream read as a document):
    ``InvalidRequest`` naming ``chat(stream=...)``, and the provider saw nothing."""
    async with SimulatedProvider(default=SCRIPT) as sim:
        async with Client([sim_source(provider, sim)]) as client:
            with pytest.raises(InvalidRequest, match=r"extra_body\['stream'\].*chat\(stream="):
                await client.chat(MESSAGES, stream=stream, extra_body={"stream": not stream})
        assert sim.stats.requests == 0
