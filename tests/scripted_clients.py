"""Clients on a scripted upstream (in memory), for the tests of the retry loop and its
policies: sources ``a``, ``b``… answer at ``http://<name>.test/v1``."""

from __future__ import annotations

from otel_llm import Client, Source
from otel_llm.testing import Scripted, Spans

MESSAGES = [{"role": "user", "content": "hi"}]


def source(host: str, **fields: object) -> Source:
    return Source(
        name=host,
        provider="sim",
        base_url=f"http://{host}.test/v1",
        model=f"{host}-m",
        **fields,  # type: ignore[arg-type]
    )


def client(script: Scripted, spans: Spans, *sources: Source, **options: object) -> Client:
    return Client(
        list(sources) or [source("a"), source("b")],
        http_client=script.client(),
        tracer_provider=spans.provider,
        backoff_base_s=0.01,
        backoff_max_s=0.02,
        seed=7,
        **options,  # type: ignore[arg-type]
    )
