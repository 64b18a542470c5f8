"""Per-chunk CPU cost of otel-llm's wrappers of the anthropic, google-genai and LiteLLM SDKs and of
the openai SDK's Responses API, against each bare SDK and every peer instrumentation of it that
installs here, at 150 and 2,000 chunks.

One streamed call per SDK, through its sync client, from the simulated provider in its own
process at zero cadence (each answer is ``N`` chunks of text):

* ``anthropic``: ``Anthropic(...).messages.create(..., stream=True)``, iterated to the end; the
  SDK yields ``N`` ``content_block_delta`` events and 5 others (``message_start``,
  ``content_block_start``/``stop``, ``message_delta``, ``message_stop``);
* ``google-genai``: ``genai.Client(...).models.generate_content_stream(...)``; ``N`` responses
  with text and 2 without (the opening usage, the finish);
* ``responses``: the openai SDK's ``OpenAI(...).responses.create(..., stream=True)``; ``N``
  ``response.output_text.delta`` events and 8 others (created, in progress, the item's and the
  part's opening and closing, the text's end, completed);
* ``litellm``: ``litellm.completion(model="openai/…", api_base=…, stream=True)`` (LiteLLM over
  its OpenAI route: it streams through the openai SDK); ``N`` chunks and 2 others (the role
  chunk, the finish chunk). LiteLLM hands every streamed chunk, and at the end the whole
  answer, to its logging thread pool -- with or without a callback -- so after each stream the
  worker waits until that pool has nothing left to do (a blocking wait on the pool's own
  pending-task count, no polling) before the stream counts as done: its work is counted for
  every variant, bare included. The pool starts a thread per task while none is idle (up to 100),
  so each worker first grows it to its full size: no variant's measured stream starts threads.

Variants, each in a process of its own: ``bare`` (the SDK alone), ``otel-llm``
(``instrument_anthropic()``, ``instrument_google_genai()``, ``instrument_openai()``,
``instrument_litellm()``) and the peers:

* ``openllmetry``: OpenLLMetry's ``AnthropicInstrumentor`` (anthropic),
  ``GoogleGenerativeAiInstrumentor`` (google-genai: it wraps ``google.genai.models.Models``),
  ``OpenAIInstrumentor`` (the Responses API);
* ``contrib``: the OpenTelemetry contrib ``GoogleGenAiSdkInstrumentor`` (google-genai), on the
  OpenTelemetry GenAI utilities. Its release declares ``google-genai >= 1.32, < 3`` and without
  ``skip_dep_check=True`` instruments nothing under the google-genai 3.x installed here; with it,
  it works. The contrib openai-v2 instrumentation (2.4b0) wraps chat completions and embeddings
  only, not the Responses API, so it is no peer of ``responses``;
* ``litellm-otel``: LiteLLM's own OpenTelemetry callback
  (``litellm.integrations.opentelemetry.OpenTelemetry``, what ``litellm.callbacks = ["otel"]``
  installs), given the same providers and with its metrics on (off by default:
  ``LITELLM_OTEL_INTEGRATION_ENABLE_METRICS``), so that it records what the others record.
  It runs offline.

OpenLIT (``openlit``) is no peer: its releases require ``anthropic < 1`` and ``openai < 3``, so
pip installs it only by downgrading the anthropic and openai SDKs pinned here (to 0.125 and
2.54), along with a dozen web-framework instrumentations and boto3.

Every instrumented variant records into the same telemetry as ``openai_sdk``'s: an SDK
``TracerProvider`` with a ``SimpleSpanProcessor`` to an ``InMemorySpanExporter`` (otel-llm's
through its ``DerivingSpanProcessor``, as its users have it; its cost counts against otel-llm
only) and a ``MeterProvider`` with an ``InMemoryMetricReader``; no logger provider. The peers
run with their defaults: OpenLLMetry captures prompts and answers as span attributes
(``TRACELOOP_TRACE_CONTENT`` defaults to true), LiteLLM's callback too (its
``message_logging`` is on by default); the contrib instrumentation and otel-llm do not capture
content. The benchmark changes none of these variables and warns when one is set.

Two figures per variant and length, as in ``openai_sdk``:

1. Primary, deterministic: instructions per chunk under ``valgrind --tool=callgrind``. Each
   variant process starts, instruments, streams a warm-up answer, then each measured answer
   (``--chunks``: 150 and 2,000) between two calls of ``os.getppid()``, where callgrind dumps
   its counters: each measured count is the whole ``create()`` call, every chunk, the end of
   the spans and their export, with start-up, warm-up and shut-down left out. The processes
   run with ``PYTHONHASHSEED=0``, niced, one after another. A full garbage collection runs
   before each measured stream (outside it), so that a collection inside it is one the
   variant's own allocations caused: without it, one collection more or less (up to 50 million
   instructions, 25,000 per chunk of a 2,000-chunk stream) fell into a stream by history.
2. Secondary, noisy: the median ``time.process_time()`` per chunk over ``--rounds`` rounds,
   without valgrind, every variant process warmed up first, the variants in a rotating order.

Targets, per SDK and length (judged on instructions; on CPU time with ``--no-callgrind``):
otel-llm <= 1.05x bare, and below every peer. Each SDK ends with one PASS or FAIL line, the run
with a summary of them.

    .venv/bin/python -m benchmarks.overhead.wrapped_sdks [--sdk anthropic,...] [--chunks 150,2000]
        [--rounds 7] [--no-callgrind] [--variants bare,otel-llm,...] [--out FILE]

About 15 minutes per SDK on a 2-core machine (LiteLLM's longer), most of it under callgrind.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import shutil
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks import child_command, child_env
from benchmarks.overhead._per_chunk import (
    BARE_TARGET,
    TARGET_RATIO,
    Result,
    Telemetry,
    callgrind,
    callgrind_worker,
    describe_recorded,
    in_memory_telemetry,
    script_headers,
    table,
    timed,
    timing_worker,
    verdicts,
)
from benchmarks.support.provider import start_provider

MODEL = "bench"
MESSAGES: Any = [{"role": "user", "content": "go"}]
API_KEY = "sk-bench"
CONTENT_VARIABLES = (
    "TRACELOOP_TRACE_CONTENT",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    "OTEL_SEMCONV_STABILITY_OPT_IN",
    "LITELLM_OTEL_INTEGRATION_ENABLE_METRICS",
)
LITELLM_DRAIN_TIMEOUT_S = 120.0
"""How long a LiteLLM worker waits for LiteLLM's logging pool after a stream (a bound, never
reached in a healthy run: the pool's work is a few seconds under callgrind)."""


# --- the SDKs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Peer:
    """A peer instrumentation: its variant name, distribution and who makes it."""

    variant: str
    distribution: str
    maker: str


@dataclass(frozen=True)
class Sdk:
    """One SDK (or API) under test."""

    name: str
    distribution: str
    call: str
    """The streamed call, as the report names it."""
    extra_items: int
    """Items the SDK yields per answer beside its ``N`` incremental chunks."""
    peers: tuple[Peer, ...]
    not_compared: str
    """Peers that are not compared, and why (printed)."""

    @property
    def variants(self) -> tuple[str, ...]:
        return ("bare", "otel-llm", *(peer.variant for peer in self.peers))


OPENLLMETRY = "OpenLLMetry"
SDKS: dict[str, Sdk] = {
    sdk.name: sdk
    for sdk in (
        Sdk(
            "anthropic",
            "anthropic",
            "Anthropic(...).messages.create(..., stream=True)",
            5,
            (Peer("openllmetry", "opentelemetry-instrumentation-anthropic", OPENLLMETRY),),
            "the OpenTelemetry contrib and GenAI utilities have no anthropic instrumentation here",
        ),
        Sdk(
            "google-genai",
            "google-genai",
            "genai.Client(...).models.generate_content_stream(...)",
            2,
            (
                Peer(
                    "openllmetry", "opentelemetry-instrumentation-google-generativeai", OPENLLMETRY
                ),
                Peer(
                    "contrib",
                    "opentelemetry-instrumentation-google-genai",
                    "OpenTelemetry contrib, GenAI utilities; skip_dep_check=True: it declares "
                    "google-genai < 3",
                ),
            ),
            "",
        ),
        Sdk(
            "responses",
            "openai",
            "OpenAI(...).responses.create(..., stream=True) (the Responses API)",
            8,
            (Peer("openllmetry", "opentelemetry-instrumentation-openai", OPENLLMETRY),),
            "contrib openai-v2 (opentelemetry-instrumentation-openai-v2) does not instrument "
            "the Responses API",
        ),
        Sdk(
            "litellm",
            "litellm",
            'litellm.completion(model="openai/...", stream=True), LiteLLM over its OpenAI route',
            2,
            (Peer("litellm-otel", "litellm", "LiteLLM's own OpenTelemetry callback"),),
            "OpenLLMetry and the OpenTelemetry contrib have no LiteLLM instrumentation",
        ),
    )
}
ALL_VARIANTS = ("bare", "otel-llm", "openllmetry", "contrib", "litellm-otel")
NOT_A_PEER = (
    "OpenLIT (openlit 1.45.0) is no peer: it requires anthropic < 1 and openai < 3, so it "
    "installs only by downgrading the SDKs under test"
)


def _instrument(sdk: str, variant: str, telemetry: Telemetry) -> None:
    """Install ``variant``'s instrumentation of ``sdk`` into ``telemetry``."""
    providers: dict[str, Any] = {
        "tracer_provider": telemetry.tracer_provider,
        "meter_provider": telemetry.meter_provider,
    }
    instrumentor: Any
    if variant == "otel-llm":
        import otel_llm

        wrap = {
            "anthropic": otel_llm.instrument_anthropic,
            "google-genai": otel_llm.instrument_google_genai,
            "responses": otel_llm.instrument_openai,
            "litellm": otel_llm.instrument_litellm,
        }[sdk]
        wrap(**providers)
    elif (sdk, variant) == ("anthropic", "openllmetry"):
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

        instrumentor = AnthropicInstrumentor
        instrumentor().instrument(**providers)
    elif (sdk, variant) == ("google-genai", "openllmetry"):
        from opentelemetry.instrumentation.google_generativeai import (
            GoogleGenerativeAiInstrumentor,
        )

        instrumentor = GoogleGenerativeAiInstrumentor
        instrumentor().instrument(**providers)
    elif (sdk, variant) == ("google-genai", "contrib"):
        from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

        instrumentor = GoogleGenAiSdkInstrumentor
        instrumentor().instrument(**providers, skip_dep_check=True)
    elif (sdk, variant) == ("responses", "openllmetry"):
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        instrumentor = OpenAIInstrumentor
        instrumentor().instrument(**providers)
    elif (sdk, variant) == ("litellm", "litellm-otel"):
        import litellm
        from litellm.integrations.opentelemetry import OpenTelemetry, OpenTelemetryConfig

        config = OpenTelemetryConfig(exporter=telemetry.spans, enable_metrics=True)
        litellm.callbacks = [OpenTelemetry(config=config, **providers)]
    else:
        raise SystemExit(f"{variant} is no variant of {sdk}")


class _Client:
    """The SDK's sync client: one streamed request per answer."""

    def request(self, headers: dict[str, str]) -> Iterable[Any]:
        raise NotImplementedError

    def settle(self) -> None:
        """Wait for what the SDK still does after its stream ended (nothing, mostly)."""

    def close(self) -> None:
        """Close the client."""


class _Anthropic(_Client):
    def __init__(self, root: str) -> None:
        import anthropic

        self.client = anthropic.Anthropic(base_url=root, api_key=API_KEY, max_retries=0)

    def request(self, headers: dict[str, str]) -> Iterable[Any]:
        return self.client.messages.create(
            model=MODEL, max_tokens=4096, messages=MESSAGES, stream=True, extra_headers=headers
        )

    def close(self) -> None:
        self.client.close()


class _Gemini(_Client):
    def __init__(self, root: str) -> None:
        from google import genai
        from google.genai import types

        self.types = types
        self.client = genai.Client(api_key=API_KEY, http_options=types.HttpOptions(base_url=root))

    def request(self, headers: dict[str, str]) -> Iterable[Any]:
        config = self.types.GenerateContentConfig(
            http_options=self.types.HttpOptions(headers=headers)
        )
        return self.client.models.generate_content_stream(model=MODEL, contents="go", config=config)

    def close(self) -> None:
        self.client.close()


class _Responses(_Client):
    def __init__(self, root: str) -> None:
        import openai

        self.client = openai.OpenAI(base_url=f"{root}/v1", api_key=API_KEY, max_retries=0)

    def request(self, headers: dict[str, str]) -> Iterable[Any]:
        return self.client.responses.create(
            model=MODEL, input="go", stream=True, extra_headers=headers
        )

    def close(self) -> None:
        self.client.close()


class _LiteLLM(_Client):
    def __init__(self, root: str) -> None:
        import litellm
        from litellm.litellm_core_utils.thread_pool_executor import executor

        self.litellm = litellm
        self.base = f"{root}/v1"
        # LiteLLM's logging pool counts its queued and running tasks in a semaphore of
        # max_pending_tasks slots; all slots free = nothing left to do
        slots = getattr(executor, "_pending_slots", None)
        self.capacity = getattr(executor, "_max_pending_tasks", None)
        threads = getattr(executor, "_max_workers", None)
        if (
            not isinstance(slots, threading.Semaphore)
            or not isinstance(self.capacity, int)
            or not isinstance(threads, int)
        ):
            raise SystemExit("this LiteLLM's logging pool cannot be waited for")
        self.slots = slots
        # the pool starts a thread per task while none is idle, up to its maximum: grown to it
        # here, every variant's streams run on a full pool, not on threads started mid-stream
        gate = threading.Event()
        for _ in range(threads):
            executor.submit(gate.wait)
        gate.set()
        self.settle()

    def request(self, headers: dict[str, str]) -> Iterable[Any]:
        stream: Iterable[Any] = self.litellm.completion(
            model=f"openai/{MODEL}",
            api_base=self.base,
            api_key=API_KEY,
            messages=MESSAGES,
            stream=True,
            extra_headers=headers,
            max_retries=0,
        )
        return stream

    def settle(self) -> None:
        """Block until LiteLLM's logging pool is idle (each finished task releases a slot and
        wakes this wait)."""
        slots: Any = self.slots  # threading.Semaphore's own condition and count
        with slots._cond:
            idle = slots._cond.wait_for(
                lambda: slots._value >= self.capacity, timeout=LITELLM_DRAIN_TIMEOUT_S
            )
        if not idle:
            raise SystemExit(f"LiteLLM's logging pool still busy after {LITELLM_DRAIN_TIMEOUT_S} s")


CLIENTS: dict[str, Callable[[str], _Client]] = {
    "anthropic": _Anthropic,
    "google-genai": _Gemini,
    "responses": _Responses,
    "litellm": _LiteLLM,
}


class SdkStreamer:
    """One variant's client of one SDK in its worker process (see ``_per_chunk.Streamer``)."""

    def __init__(self, args: argparse.Namespace) -> None:
        warnings.simplefilter("ignore")  # the peers' pydantic/semconv deprecation warnings
        sdk = SDKS[args.sdk]
        self.variant: str = args.variant
        self.extra_items = sdk.extra_items
        self.header = args.script_header
        if self.variant == "bare":
            self.telemetry = Telemetry()
        else:
            self.telemetry = in_memory_telemetry(deriving=self.variant == "otel-llm")
            _instrument(sdk.name, self.variant, self.telemetry)
        self.client = CLIENTS[sdk.name](args.url.removesuffix("/v1"))

    def stream(self, chunks: int) -> int:
        seen = 0
        for _ in self.client.request(script_headers(self.header, chunks)):
            seen += 1
        self.client.settle()
        return seen

    def recorded(self) -> dict[str, Any]:
        return self.telemetry.recorded()

    def close(self) -> None:
        self.client.close()


# --- the driver -------------------------------------------------------------------------------


def worker_command(args: argparse.Namespace, sdk: str, variant: str, role: str) -> list[str]:
    return [
        *child_command(__spec__.name),
        "--sdk",
        sdk,
        "--variant",
        variant,
        f"--{role}",
        "--url",
        args.url,
        "--script-header",
        args.script_header,
        "--chunks",
        ",".join(str(chunks) for chunks in args.chunks),
        "--warmup-chunks",
        str(args.warmup_chunks),
    ]


def worker_env() -> dict[str, str]:
    """The workers' environment: LiteLLM reads its bundled model prices, never the network."""
    return {**child_env(), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def run_sdk(args: argparse.Namespace, sdk: Sdk) -> dict[str, Result]:
    """Both figures for every variant of ``sdk`` that was asked for."""
    variants = [v for v in sdk.variants if v in args.variants]
    results = {variant: Result() for variant in variants}
    print(f"{sdk.name}: CPU time, {args.rounds} rounds ...", file=sys.stderr, flush=True)
    commands = {v: worker_command(args, sdk.name, v, "time-worker") for v in variants}
    timed(commands, worker_env(), args.chunks, args.rounds, results)
    if not args.no_callgrind:
        for variant in variants:  # one at a time: the machine is shared
            command = worker_command(args, sdk.name, variant, "callgrind-worker")
            callgrind(command, worker_env(), variant, args.chunks, results[variant])
    return results


@dataclass
class SdkReport:
    text: str
    word: str
    """``PASS``, ``FAIL`` or ``INCOMPLETE``."""
    detail: str
    """What failed, where (empty on a pass)."""


def report_sdk(args: argparse.Namespace, sdk: Sdk, results: dict[str, Result]) -> SdkReport:
    lines: list[str] = []
    emit = lines.append
    use_callgrind = not args.no_callgrind
    variants = list(results)
    peers = [peer.variant for peer in sdk.peers if peer.variant in results]
    unit = "instructions" if use_callgrind else "CPU time"
    emit(f"== {sdk.name}: {sdk.distribution} {version(sdk.distribution)}, {sdk.call}, sync client")
    for peer in sdk.peers:
        emit(
            f"  peer {peer.variant}: {peer.distribution} {version(peer.distribution)} "
            f"({peer.maker})"
        )
    if sdk.not_compared:
        emit(f"  not compared: {sdk.not_compared}")
    emit(f"  each answer: N chunks and {sdk.extra_items} other items the SDK yields")
    failed: list[str] = []
    complete = len(peers) == len(sdk.peers)
    for chunks in args.chunks:
        emit("")
        emit(f"-- {chunks:,} chunks")
        for line in table(variants, results, chunks, chunks):
            emit(line)
        emit("recorded for the measured stream:")
        for variant in variants:
            emit(f"  {variant:<13}{describe_recorded(results[variant].recorded.get(chunks, {}))}")
        inst: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for variant in variants:
            per_chunk = results[variant].instructions_per_chunk(chunks)
            if per_chunk is not None:
                inst[variant] = per_chunk
            per_chunk = results[variant].cpu_per_chunk(chunks)
            if per_chunk is not None:
                cpu[variant] = per_chunk
        verdict = verdicts(inst if use_callgrind else cpu, peers, unit)
        for line in verdict.lines:
            emit(line)
        if use_callgrind and "otel-llm" in cpu and "bare" in cpu:
            emit(
                f"(CPU time, secondary: otel-llm {cpu['otel-llm'] / cpu['bare']:.3f}x bare; "
                "not judged: noisy)"
            )
        complete = complete and verdict.complete
        failed += [f"{target} at {chunks:,} chunks" for target in verdict.failed]
    if use_callgrind:
        emit("")
        emit(
            "whole callgrind process (start-up, instrumentation, warm-up, measured streams, exit):"
        )
        for variant in variants:
            total = results[variant].process_instructions
            emit(f"  {variant:<13}{total:>16,}" if total else f"  {variant:<13}{'-':>16}")
    if failed:
        word, detail = "FAIL", "; ".join(failed)
    elif not complete:
        word, detail = "INCOMPLETE", "not every variant ran"
    else:
        word, detail = "PASS", ""
    lengths = " and ".join(f"{chunks:,}" for chunks in args.chunks)
    emit("")
    emit(
        f"{word}  {sdk.name}: otel-llm <= {TARGET_RATIO:.2f}x bare and below every peer at "
        f"{lengths} chunks ({unit})" + (f": {detail}" if detail else "")
    )
    return SdkReport("\n".join(lines), word, detail)


def main(args: argparse.Namespace) -> None:
    from otel_llm.simulator import SCRIPT_HEADER

    args.script_header = SCRIPT_HEADER
    for name in CONTENT_VARIABLES:
        if name in os.environ:
            print(f"note: {name}={os.environ[name]!r} is set: not the default", file=sys.stderr)
    started = time.monotonic()
    unit = "instructions per chunk, callgrind" if not args.no_callgrind else "CPU time per chunk"
    preamble = [
        "streamed calls through each SDK's sync client, simulated provider in its own process, "
        "zero cadence",
        f"instructions: callgrind, one measured stream of each length per variant process "
        f"(after a {args.warmup_chunks:,}-chunk warm-up)"
        if not args.no_callgrind
        else "instructions: not measured (--no-callgrind)",
        f"CPU time: time.process_time(), median of {args.rounds} rounds per length "
        "(secondary: noisy on a shared machine)",
        NOT_A_PEER,
    ]
    print("\n".join(preamble), flush=True)
    texts = list(preamble)
    summary: list[str] = []
    proc, args.url = start_provider()
    try:
        for name in args.sdk:
            sdk = SDKS[name]
            done = report_sdk(args, sdk, run_sdk(args, sdk))
            print("\n" + done.text, flush=True)
            texts.append("\n" + done.text)
            summary.append(f"{done.word:<6}{name}" + (f": {done.detail}" if done.detail else ""))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    tail = ["", f"== summary ({unit}; targets: {BARE_TARGET}, below every peer)"]
    tail += summary
    tail += ["", f"run time {time.monotonic() - started:.0f} s"]
    print("\n".join(tail), flush=True)
    if args.out:
        from benchmarks.support.header import header

        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(header(__spec__.name) + "\n" + "\n".join(texts + tail) + "\n")


def _names(allowed: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [name for name in text.split(",") if name]
        unknown = [name for name in names if name not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(allowed)}")
        return names

    return parse


def _lengths(text: str) -> list[int]:
    try:
        lengths = [int(part) for part in text.split(",") if part]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 1:
        raise argparse.ArgumentTypeError("a comma-separated list of positive chunk counts")
    return lengths


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    assert __doc__ is not None
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sdk",
        type=_names(tuple(SDKS)),
        default=list(SDKS),
        help="comma-separated subset of " + ",".join(SDKS),
    )
    parser.add_argument(
        "--chunks",
        type=_lengths,
        default=[150, 2_000],
        help="answer lengths, comma-separated (default 150,2000)",
    )
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per variant")
    parser.add_argument("--warmup-chunks", type=int, default=200)
    parser.add_argument("--no-callgrind", action="store_true", help="CPU time only")
    parser.add_argument(
        "--variants",
        type=_names(ALL_VARIANTS),
        default=list(ALL_VARIANTS),
        help="comma-separated subset of " + ",".join(ALL_VARIANTS) + " (each SDK runs its own)",
    )
    parser.add_argument("--out", help="also write the report, with its header, to this file")
    parser.add_argument("--variant", choices=ALL_VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--callgrind-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--time-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--script-header", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.variant:
        if len(args.sdk) != 1:
            parser.error("a worker runs one SDK")
        args.sdk = args.sdk[0]
    elif not args.no_callgrind and shutil.which("valgrind") is None:
        parser.error("valgrind is not on PATH (use --no-callgrind for CPU time only)")
    return args


if __name__ == "__main__":
    arguments = parse()
    if arguments.callgrind_worker:
        callgrind_worker(
            SdkStreamer(arguments), arguments.chunks, arguments.warmup_chunks, collect=True
        )
    elif arguments.time_worker:
        timing_worker(SdkStreamer(arguments), arguments.warmup_chunks, collect=True)
    else:
        from benchmarks.support.header import print_header

        print_header(__spec__.name)
        main(arguments)
