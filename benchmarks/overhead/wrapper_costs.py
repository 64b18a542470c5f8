"""Where otel-llm's instructions go in a wrapped SDK's stream: each piece of the wrapper counted
alone under callgrind, per chunk and per call.

``wrapped_sdks`` measures the whole: otel-llm against the bare SDK. This one takes the wrapper
apart, on the SDK's own streamed items (captured from a real stream of the simulated provider
through the bare SDK, then replayed from a list, so the SDK's own work is not in any figure):

* per item, each in a loop over the items of a ``--chunks``-chunk answer, less the same loop
  doing nothing: ``read`` (the API's reader: the chunk rule and what the item says),
  ``on_item`` (the recorder's per-item path: the consumer's hold, the reader, the chunk
  clock), ``iterate`` (the stream
  proxy the application reads -- ``ObservedStream``, for google-genai a ``LaterStream`` in
  front of it -- with its two clock reads and the ``on_item``);
* per call: ``start`` (the recorder the wrapped method builds: the call span and the attempt
  span started, their attributes) and ``end`` after answers of each length (the attempt's
  figures, chunk events, the call span's response attributes, the metrics, both spans ended
  and exported through the ``DerivingSpanProcessor`` and a ``SimpleSpanProcessor`` to an
  in-memory exporter, as in ``wrapped_sdks``);
* beside them, the floors: per item, a generator that reads the clock before and after each
  item and does nothing else (:func:`clock_each`: the least a Python wrapper that times items
  for the consumer costs); per call, the OpenTelemetry SDK's own cost of recording the same two
  spans, chunk events and metric points, handed every value ready-made
  (:func:`floor_replay`) -- what no instrumentation that records them can go below.

What the pieces do not cover of ``wrapped_sdks``' otel-llm overhead is the patched method's
own path (the configuration, the nesting guard, the proxy's construction) and the effect on
the SDK of being called through a wrapper.

    .venv/bin/python -m benchmarks.overhead.wrapper_costs [--sdk anthropic,...]
        [--chunks 150,2000]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks import child_command
from benchmarks.overhead._per_chunk import in_memory_telemetry, script_headers
from benchmarks.overhead.wrapped_sdks import (
    API_KEY,
    CLIENTS,
    MESSAGES,
    MODEL,
    SDKS,
    _instrument,
    worker_env,
)
from benchmarks.support.callgrind import marked_run, totals_of
from benchmarks.support.provider import start_provider

REPEAT_CALLS = 20
"""Calls per per-call phase (``start``, ``end``): the figure is their mean."""
REPEAT_ITEMS = 3
"""Passes over the items per per-item phase."""


@dataclass(frozen=True)
class Wiring:
    """How otel-llm's wrapper of one SDK builds a call's recorder, and the stream proxy."""

    factory: Callable[..., Any]
    """``(config, resource, args, kwargs) -> CallRecorder``: the wrapped method's own."""
    config: Callable[[], Any]
    """The instrumentation's ``PatchConfig``."""
    resource: Callable[[Any], Any]
    """The SDK resource ``self`` of the wrapped method, from the client."""
    kwargs: Callable[[Any, dict[str, str]], dict[str, Any]]
    """The wrapped call's keyword arguments (the client, the script's headers)."""
    later: bool = False
    """The proxy is a ``LaterStream`` (the request goes out at the first step)."""


def _wiring(sdk: str) -> Wiring:
    if sdk == "anthropic":
        from otel_llm._wrap import _anthropic as anthropic

        return Wiring(
            anthropic._create,
            lambda: anthropic._PATCH.config,
            lambda client: client.client.messages,
            lambda _, headers: {
                "model": MODEL,
                "max_tokens": 4096,
                "messages": MESSAGES,
                "stream": True,
                "extra_headers": headers,
            },
        )
    if sdk == "google-genai":
        from otel_llm._wrap import _google_genai as gemini

        return Wiring(
            gemini._stream,
            lambda: gemini._PATCH.config,
            lambda client: client.client.models,
            lambda client, headers: {
                "model": MODEL,
                "contents": "go",
                "config": client.types.GenerateContentConfig(
                    http_options=client.types.HttpOptions(headers=headers)
                ),
            },
            later=True,
        )
    if sdk == "responses":
        from otel_llm._wrap import _openai as openai

        return Wiring(
            openai._responses,
            lambda: openai._PATCH.config,
            lambda client: client.client.responses,
            lambda _, headers: {
                "model": MODEL,
                "input": "go",
                "stream": True,
                "extra_headers": headers,
            },
        )
    from otel_llm._wrap import _litellm as litellm

    return Wiring(
        lambda config, resource, _, kwargs: litellm._recorder(config, resource, (), kwargs),
        lambda: litellm._PATCH.config,
        lambda _: None,
        lambda client, headers: {
            "model": f"openai/{MODEL}",
            "api_base": client.base,
            "api_key": API_KEY,
            "messages": MESSAGES,
            "stream": True,
            "extra_headers": headers,
            "max_retries": 0,
        },
    )


# --- the worker (under callgrind) ---------------------------------------------------------------


class Phases:
    """Runs named phases, each between two ``os.getppid()`` markers, each after a full garbage
    collection (outside it)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def run(self, name: str, phase: Callable[[], object]) -> None:
        gc.collect()
        os.getppid()
        phase()
        os.getppid()
        self.names.append(name)


def worker(args: argparse.Namespace) -> None:
    warnings.simplefilter("ignore")
    from otel_llm._wrap._chunk_view import ResponseNotes
    from otel_llm._wrap._later import LaterStream
    from otel_llm._wrap._observe import ObservedStream

    sdk = args.sdk
    client = CLIENTS[sdk](args.url.removesuffix("/v1"))
    wiring = _wiring(sdk)
    captured: dict[int, list[Any]] = {}
    for chunks in sorted({*args.chunks, max(args.chunks)}):
        captured[chunks] = list(client.request(script_headers(args.script_header, chunks)))
        client.settle()
    telemetry = in_memory_telemetry(deriving=True)
    _instrument(sdk, "otel-llm", telemetry)
    config = wiring.config()
    resource = wiring.resource(client)
    kwargs = wiring.kwargs(client, script_headers(args.script_header, max(args.chunks)))

    def recorder() -> Any:
        return wiring.factory(config, resource, (), kwargs)

    items = captured[max(args.chunks)]
    reader = recorder()._reader

    def loop() -> None:
        for _ in range(REPEAT_ITEMS):
            for _item in items:
                pass

    def read() -> None:
        for _ in range(REPEAT_ITEMS):
            notes = ResponseNotes()
            for item in items:
                reader.read(item, notes)

    fed = [recorder() for _ in range(REPEAT_ITEMS)]

    def on_item() -> None:
        now = time.monotonic_ns()
        for each in fed:
            for item in items:
                each.on_item(item, now, now)

    def clocked() -> None:
        for _ in range(REPEAT_ITEMS):
            for _item in clock_each(items):
                pass

    streams = [recorder() for _ in range(REPEAT_ITEMS)]

    def iterate() -> None:
        for each in streams:
            proxy: Any = (
                LaterStream(items, lambda each=each: each)
                if wiring.later
                else ObservedStream(items, each)
            )
            for _item in itertools.islice(proxy, len(items)):
                pass

    def start() -> None:
        for _ in range(REPEAT_CALLS):
            recorder()

    phases = Phases()
    # warm-up: every path once, then the exporter emptied
    warm = recorder()
    for item in captured[min(args.chunks)]:
        warm.on_item(item, time.monotonic_ns(), time.monotonic_ns())
    warm.end_ok()
    read()
    telemetry.recorded()
    phases.run("loop", loop)
    phases.run("read", read)
    phases.run("on_item", on_item)
    phases.run("iterate", iterate)
    phases.run("clocked", clocked)
    phases.run("start", start)
    for chunks in args.chunks:
        ready = [recorder() for _ in range(REPEAT_CALLS)]
        for each in ready:
            now = time.monotonic_ns()
            for item in captured[chunks]:
                now += 1000
                each.on_item(item, now, now)

        def end(ready: list[Any] = ready) -> None:
            for each in ready:
                each.end_ok()

        phases.run(f"end@{chunks}", end)
    for chunks in args.chunks:
        phases.run(f"floor@{chunks}", floor_replay(telemetry, recorder, captured[chunks]))
    spans = len(telemetry.spans.get_finished_spans())
    print(
        json.dumps(
            {
                "phases": phases.names,
                "items": {str(chunks): len(captured[chunks]) for chunks in captured},
                "spans": spans,
            }
        ),
        flush=True,
    )
    client.close()


def clock_each(items: Sequence[Any]) -> Iterator[Any]:
    """The least a Python wrapper that times each item for the consumer can do: a generator
    reading the clock before it asks for an item and after it has it, and nothing else."""
    iterator = iter(items)
    now_ns = time.monotonic_ns
    while True:
        asked = now_ns()
        try:
            item = next(iterator)
        except StopIteration:
            return
        arrived = now_ns()
        del asked, arrived
        yield item


def floor_replay(
    telemetry: Any, recorder: Callable[[], Any], items: Sequence[Any]
) -> Callable[[], None]:
    """The OpenTelemetry SDK's own cost of recording what otel-llm records for one call of
    ``items``: a call with them is recorded once, and the phase records it again
    ``REPEAT_CALLS`` times straight through the SDK's API -- both spans started with every
    attribute they end with, the attempt's chunk events added, both ended and exported
    through a ``SimpleSpanProcessor`` to an in-memory exporter, the histogram and counter points
    recorded into a ``MeterProvider`` with an in-memory reader -- with every value handed over
    ready-made: nothing read, measured, derived or checked. No instrumentation that records
    these spans and points can cost less."""
    from opentelemetry import trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    telemetry.recorded()
    model = recorder()
    now = time.monotonic_ns()
    for item in items:
        now += 1000
        model.on_item(item, now, now)
    model.end_ok()
    call, attempt = sorted(
        telemetry.spans.get_finished_spans(), key=lambda span: span.parent is not None
    )
    points = [
        # a histogram point has a sum, a counter's (the attempts counted) a value
        (metric.name, metric.unit, point.attributes, getattr(point, "sum", None), point)
        for resource in telemetry.metrics.get_metrics_data().resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        for point in metric.data.data_points
    ]
    telemetry.recorded()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    floor_tracer = tracer.get_tracer("floor")
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("floor")
    instruments = [
        (meter.create_histogram(name, unit=unit).record, attributes, value)
        if value is not None
        else (meter.create_counter(name, unit=unit).add, attributes, point.value)
        for name, unit, attributes, value, point in points
    ]
    events = [(event.name, event.attributes, event.timestamp) for event in attempt.events]

    def replay() -> None:
        for _ in range(REPEAT_CALLS):
            call_span = floor_tracer.start_span(
                call.name, attributes=call.attributes, start_time=call.start_time
            )
            context = trace.set_span_in_context(call_span)
            attempt_span = floor_tracer.start_span(
                attempt.name,
                context=context,
                attributes=attempt.attributes,
                start_time=attempt.start_time,
            )
            for name, attributes, timestamp in events:
                attempt_span.add_event(name, attributes, timestamp)
            attempt_span.end(attempt.end_time)
            call_span.end(call.end_time)
            for record, attributes, value in instruments:
                record(value, attributes)

    return replay


# --- the driver ---------------------------------------------------------------------------------


def measure(args: argparse.Namespace, sdk: str) -> str:
    command = [
        *child_command(__spec__.name),
        "--worker",
        "--sdk",
        sdk,
        "--url",
        args.url,
        "--script-header",
        args.script_header,
        "--chunks",
        ",".join(str(chunks) for chunks in args.chunks),
    ]
    phases = 6 + 2 * len(args.chunks)
    with marked_run(command, worker_env(), sdk, markers=2 * phases) as (done, parts):
        reply = json.loads(done.stdout.strip().splitlines()[-1])
        counts = dict(
            zip(reply["phases"], [totals_of(parts[2 * i + 1]) for i in range(phases)], strict=True)
        )
    longest = max(args.chunks)
    items = reply["items"][str(longest)]
    loop = counts["loop"]

    def per_chunk(name: str, *, minus: str | None = "loop") -> float:
        less = counts[minus] if minus else 0
        return (counts[name] - less) / (REPEAT_ITEMS * longest)

    lines = [
        f"== {sdk}: per chunk, items of a {longest:,}-chunk answer ({items:,} items), "
        f"less the bare loop ({loop / (REPEAT_ITEMS * items):,.0f} per item)",
        f"  iterate  (the stream proxy, clock reads, on_item)  {per_chunk('iterate'):>10,.0f}",
        f"  on_item  (hold, reader, chunk clock)               {per_chunk('on_item'):>10,.0f}",
        f"  read     (the reader alone)                        {per_chunk('read'):>10,.0f}",
        f"  clocked  (the floor: a generator reading the clock twice) "
        f"{per_chunk('clocked'):>6,.0f}",
        f"== {sdk}: per call (mean of {REPEAT_CALLS})",
        f"  start    (recorder: both spans started)            "
        f"{counts['start'] / REPEAT_CALLS:>10,.0f}",
    ]
    for chunks in args.chunks:
        lines.append(
            f"  end after {chunks:>5,} chunks (figures, events, metrics, export) "
            f"{counts[f'end@{chunks}'] / REPEAT_CALLS:>10,.0f}"
        )
    lines.append(
        "== the floor: the OpenTelemetry SDK recording the same spans, events and metric "
        f"points (mean of {REPEAT_CALLS})"
    )
    for chunks in args.chunks:
        lines.append(
            f"  a call of {chunks:>5,} chunks                                 "
            f"{counts[f'floor@{chunks}'] / REPEAT_CALLS:>10,.0f}"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> None:
    from otel_llm.simulator import SCRIPT_HEADER

    args.script_header = SCRIPT_HEADER
    proc, args.url = start_provider()
    try:
        for sdk in args.sdk:
            started = time.monotonic()
            print(measure(args, sdk), flush=True)
            print(f"  ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    assert __doc__ is not None
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sdk",
        type=lambda text: [name for name in text.split(",") if name],
        default=list(SDKS),
    )
    parser.add_argument(
        "--chunks",
        type=lambda text: [int(part) for part in text.split(",") if part],
        default=[150, 2_000],
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--script-header", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = [name for name in args.sdk if name not in SDKS]
    if unknown:
        parser.error(f"unknown SDKs {unknown}; choose from {', '.join(SDKS)}")
    if args.worker:
        args.sdk = args.sdk[0]
    return args


if __name__ == "__main__":
    arguments = parse()
    if arguments.worker:
        worker(arguments)
    else:
        from benchmarks.support.header import print_header

        print_header(__spec__.name)
        main(arguments)
