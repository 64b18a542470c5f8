"""What every SDK instrumentation shares (``otel_llm/_wrap/_patching.py``): wrapping and
restoring methods, a nested wrapped call metered once, telemetry that never breaks the call."""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_llm import _semconv as sc
from otel_llm._wrap._patching import PatchConfig, SdkPatch, Target
from otel_llm._wrap._recorder import CallRecorder

MODULE = "otel_llm_fake_sdk"
ANSWER = {"model": "m", "id": "r1", "choices": [{"index": 0, "finish_reason": "stop"}]}


class Outer:
    """An SDK whose one method calls another wrapped one, as LiteLLM calls the openai SDK."""

    def create(self, **kwargs: Any) -> dict[str, Any]:
        return Inner().create(**kwargs)

    async def acreate(self, **kwargs: Any) -> dict[str, Any]:
        return await Inner().acreate(**kwargs)


class Runner:
    """An SDK whose one method runs the application's code (a tool) inside its call, as
    Gemini's automatic function calling does."""

    def create(self, **kwargs: Any) -> dict[str, Any]:
        kwargs["tool"]()
        return ANSWER

    async def acreate(self, **kwargs: Any) -> dict[str, Any]:
        await kwargs["tool"]()
        return ANSWER


class Inner:
    def create(self, **kwargs: Any) -> dict[str, Any]:
        if kwargs.get("fail"):
            raise ValueError("the provider said no")
        return ANSWER

    async def acreate(self, **kwargs: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        return self.create(**kwargs)


def _recorder(name: str) -> Any:
    def make(config: PatchConfig, _: Any, __: Any, kwargs: Mapping[str, Any]) -> CallRecorder:
        if kwargs.get("broken_telemetry"):
            raise RuntimeError("a bug in the instrumentation")
        return CallRecorder(
            config.tracer,
            config.metrics,
            operation=sc.OPERATION_CHAT,
            provider=name,
            model="m",
            streamed=False,
            threshold_ms=config.threshold_ms,
        )

    return make


def _answer(result: Any, recorder: CallRecorder, _: bool) -> Any:
    recorder.end_completion(result)
    return result


def _patch(cls: str, provider: str, nested: tuple[str, ...] = ()) -> SdkPatch:
    return SdkPatch(
        f"instrument_{provider}",
        (
            Target(MODULE, cls, "create", False, _recorder(provider), _answer),
            Target(MODULE, cls, "acreate", True, _recorder(provider), _answer),
        ),
        nested=nested,
    )


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    module = types.ModuleType(MODULE)
    classes = {"Outer": Outer, "Inner": Inner, "Runner": Runner}
    for name, cls in classes.items():
        setattr(module, name, cls)
    sys.modules[MODULE] = module
    originals = {name: dict(vars(cls)) for name, cls in classes.items()}
    exporter = InMemorySpanExporter()
    yield exporter
    del sys.modules[MODULE]
    for name, cls in classes.items():
        for method in ("create", "acreate"):
            setattr(cls, method, originals[name][method])


def _install(exporter: InMemorySpanExporter) -> tuple[SdkPatch, SdkPatch]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    outer = _patch("Outer", "outer", nested=("instrument_inner",))
    inner = _patch("Inner", "inner", nested=("instrument_inner",))  # acreate calls create
    runner = _patch("Runner", "runner")
    for patch in (inner, outer, runner):
        patch.install(tracer_provider=provider, meter_provider=None, stall_threshold_ms=None)
    return outer, inner


def _calls(exporter: InMemorySpanExporter) -> list[str]:
    return [
        str((span.attributes or {}).get(sc.GEN_AI_PROVIDER_NAME))
        for span in exporter.get_finished_spans()
        if (span.attributes or {}).get(sc.SPAN_ROLE) == sc.SPAN_ROLE_CALL
    ]


def test_a_call_made_inside_a_wrapped_call_is_metered_once_by_the_outer(
    spans: InMemorySpanExporter,
) -> None:
    """LiteLLM over the openai SDK, both instrumented: one call span, the outer API's."""
    _install(spans)
    assert Outer().create()["id"] == "r1"
    assert asyncio.run(Outer().acreate())["id"] == "r1"
    assert _calls(spans) == ["outer", "outer"]
    Inner().create()  # called directly, the inner SDK is metered
    assert _calls(spans) == ["outer", "outer", "inner"]


def test_a_call_the_applications_code_makes_inside_a_wrapped_call_is_its_own(
    spans: InMemorySpanExporter,
) -> None:
    """An SDK that runs the application's tool inside its call names no SDK it is built on:
    a call the tool makes has its own spans, and the SDK's own call is metered too."""
    _install(spans)
    Runner().create(tool=lambda: Inner().create())

    async def tool() -> None:
        await Inner().acreate()
        Outer().create()  # an SDK built on another, called by the tool: still one call

    asyncio.run(Runner().acreate(tool=tool))
    assert _calls(spans) == ["inner", "runner", "inner", "outer", "runner"]


def test_an_error_inside_ends_the_outer_spans_and_the_next_call_is_metered_again(
    spans: InMemorySpanExporter,
) -> None:
    """The nesting mark is reset when the wrapped call raises."""
    _install(spans)
    with pytest.raises(ValueError, match="said no"):
        Outer().create(fail=True)
    Inner().create()
    assert _calls(spans) == ["outer", "inner"]


def test_telemetry_that_fails_never_breaks_the_call(spans: InMemorySpanExporter) -> None:
    """A recorder that cannot be built: the SDK's own answer, unchanged, and no span."""
    _install(spans)
    assert Inner().create(broken_telemetry=True)["id"] == "r1"
    assert _calls(spans) == []


def test_uninstall_restores_every_method_and_install_twice_wraps_once(
    spans: InMemorySpanExporter,
) -> None:
    before = Inner.__dict__["create"]
    outer, inner = _install(spans)
    inner.install(tracer_provider=None, meter_provider=None, stall_threshold_ms=None)
    assert Inner.__dict__["create"].__wrapped__ is before  # one layer, not two
    inner.uninstall()
    outer.uninstall()
    assert Inner.__dict__["create"] is before
    Outer().create()
    assert _calls(spans) == []
