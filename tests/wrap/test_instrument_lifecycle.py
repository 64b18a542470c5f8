"""``instrument()`` and each ``instrument_<sdk>()`` / ``uninstrument_<sdk>()`` together: in any
order, on one thread or two, with the SDK imported before or after — and the providers they
are given checked before anything is wrapped or left waiting for an import.

The orderings run in a fresh process (the SDK must not be imported yet, and a regression hangs:
the child dumps its threads and exits at its own deadline rather than hang the suite)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import metrics, trace

import otel_llm
from otel_llm import ConfigurationError
from otel_llm._wrap._every_sdk import SDKS
from tests.support import REPOSITORY
from tests.support.processes import run_python

DEADLINE_S = 90
"""The child's own deadline: importing LiteLLM on a loaded machine takes tens of seconds."""

_PRELUDE = f"""
import faulthandler, json, os, sys
faulthandler.dump_traceback_later({DEADLINE_S}, exit=True)  # a hang: every thread's stack
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
import importlib
import otel_llm

def sdk_method(name):
    # one method each SDK's instrumentation wraps, as it is now on its class (or module)
    if name == "openai":
        from openai.resources.chat.completions.completions import Completions
        return Completions.__dict__["create"]
    if name == "anthropic":
        from anthropic.resources.messages.messages import Messages
        return Messages.__dict__["create"]
    if name == "google_genai":
        from google.genai.models import Models
        return Models.__dict__["generate_content_stream"]
    import litellm
    return litellm.completion

def ours(function):
    return "otel_llm" in function.__code__.co_filename

def patch_of(name):
    return importlib.import_module(f"otel_llm._wrap._{{name}}")._PATCH
"""

SDK_NAMES = [sdk.name for sdk in SDKS]

_INSTRUMENT_THEN_ONE = (
    _PRELUDE
    + """
name = sys.argv[1]
otel_llm.instrument(stall_threshold_ms=111)  # the SDK is not imported: its wrapping waits
getattr(otel_llm, f"instrument_{name}")(stall_threshold_ms=222)  # imports it: the hook runs
wrapped = ours(sdk_method(name))
threshold = patch_of(name).config.threshold_ms
getattr(otel_llm, f"uninstrument_{name}")()
print(json.dumps({"wrapped": wrapped, "threshold": threshold,
                  "restored": not ours(sdk_method(name))}))
"""
)


@pytest.mark.timeout(DEADLINE_S + 60)
@pytest.mark.parametrize("name", SDK_NAMES)
def test_instrument_then_instrument_sdk_returns_with_the_sdk_wrapped_once(name: str) -> None:
    """``instrument()`` then ``instrument_<sdk>()`` before the SDK is imported: the second
    call's import runs the first's hook, which installs too; both return, the SDK is wrapped
    once (one ``uninstrument_<sdk>()`` restores it) and the later call's threshold holds."""
    done = run_python(_INSTRUMENT_THEN_ONE, name, cwd=REPOSITORY)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"wrapped": True, "threshold": 222, "restored": True}


_FAKE_SDK = "fake_llm_sdk_of_the_lifecycle_tests"  # no "otel_llm" in its file name

_TWO_THREADS = (
    _PRELUDE
    + f"""
import threading, time
from otel_llm._wrap._patching import SdkPatch, Target
from otel_llm._wrap._post_import import when_imported

sys.path.insert(0, sys.argv[1])
patch = SdkPatch("instrument_fake", (
    Target("{_FAKE_SDK}", None, "call", False, lambda *_: None, lambda result, *_: result),
))

def install():
    patch.install(tracer_provider=None, meter_provider=None, stall_threshold_ms=None)

def waiting_for_the_import(thread):
    # the thread's innermost Python frame is the import system's module lock, waiting
    frame = sys._current_frames().get(thread.ident)
    code = frame.f_code if frame is not None else None
    return code is not None and code.co_name == "acquire" and "_bootstrap" in code.co_filename

other = threading.Thread(target=install)

def start_the_other_install():
    # runs on this thread inside `import {_FAKE_SDK}`, just before the waiting install below:
    # the other thread's install must wait for this import to finish
    other.start()
    deadline = time.monotonic() + 30
    while not waiting_for_the_import(other):
        assert other.is_alive() and time.monotonic() < deadline, "never waited for the import"
        time.sleep(0.001)

when_imported("{_FAKE_SDK}", "test", start_the_other_install)
when_imported("{_FAKE_SDK}", "instrument", install)  # as instrument() leaves it
import {_FAKE_SDK} as fake
other.join()
wrapped = ours(fake.call)
patch.uninstall()
print(json.dumps({{"wrapped": wrapped, "restored": not ours(fake.call)}}))
"""
)


@pytest.mark.timeout(DEADLINE_S + 60)
def test_install_on_one_thread_while_another_imports_the_sdk_with_a_hook_pending(
    tmp_path: Path,
) -> None:
    """One thread installs while another imports the SDK and, inside that import, runs
    ``instrument()``'s waiting hook (which installs too): both finish and the SDK is wrapped
    once. The first thread waits for the import before it takes the instrumentation's lock,
    so the hook is never left waiting for that lock."""
    (tmp_path / f"{_FAKE_SDK}.py").write_text('def call():\n    return "the SDK\'s own"\n')
    done = run_python(_TWO_THREADS, str(tmp_path), cwd=REPOSITORY)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"wrapped": True, "restored": True}


_UNINSTRUMENT_BEFORE_IMPORT = (
    _PRELUDE
    + """
dropped = sys.argv[1].split(",")
otel_llm.instrument()  # no SDK is imported: each one's wrapping waits for its import
for name in dropped:
    getattr(otel_llm, f"uninstrument_{name}")()
names = ["openai", "anthropic", "google_genai", "litellm"]
print(json.dumps({name: ours(sdk_method(name)) for name in names}))
"""
)


@pytest.mark.timeout(DEADLINE_S + 60)
@pytest.mark.parametrize("dropped", [("openai", "google_genai"), ("anthropic", "litellm")])
def test_uninstrument_sdk_before_its_import_drops_instrument_s_waiting_hook(
    dropped: tuple[str, ...],
) -> None:
    """``instrument()``, then ``uninstrument_<sdk>()`` before the application imports that SDK:
    imported later, it stays unwrapped; the SDKs not uninstrumented are still wrapped."""
    done = run_python(_UNINSTRUMENT_BEFORE_IMPORT, ",".join(dropped), cwd=REPOSITORY)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {name: name not in dropped for name in SDK_NAMES}


_FUNCTIONS = [
    pytest.param("instrument", otel_llm.instrument, id="instrument"),
    *(
        pytest.param(
            name := f"instrument_{sdk.name}",
            getattr(importlib.import_module(sdk.module), name),
            id=name,
        )
        for sdk in SDKS
    ),
]
"""``instrument()`` and every ``instrument_<sdk>()``."""


def _sdk_methods() -> list[object]:
    """One wrapped method of each SDK, as it is now (the SDKs are imported here)."""
    import litellm
    from anthropic.resources.messages.messages import Messages
    from google.genai.models import Models
    from openai.resources.chat.completions.completions import Completions

    return [
        Completions.__dict__["create"],
        Messages.__dict__["create"],
        Models.__dict__["generate_content_stream"],
        litellm.completion,
    ]


@pytest.fixture
def uninstrumented() -> Iterator[None]:
    yield
    otel_llm.uninstrument()


class _NotAProvider:
    """Has ``get_tracer`` but is no TracerProvider; its repr must never be printed."""

    def __repr__(self) -> str:
        return "sk-do-not-print"

    def get_tracer(self, *_: object, **__: object) -> object:
        return trace.NoOpTracer()


_TRACER = "tracer_provider: must be an OpenTelemetry TracerProvider, got "
_METER = "meter_provider: must be an OpenTelemetry MeterProvider, got "


@pytest.mark.usefixtures("uninstrumented")
@pytest.mark.parametrize(("name", "function"), _FUNCTIONS)
@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("tracer_provider", "sk-do-not-print", _TRACER + "str"),
        ("tracer_provider", _NotAProvider(), _TRACER + f"{__name__}._NotAProvider"),
        ("tracer_provider", metrics.NoOpMeterProvider(), _TRACER + "opentelemetry.metrics."),
        ("meter_provider", object(), _METER + "object"),
        ("meter_provider", trace.NoOpTracerProvider(), _METER + "opentelemetry.trace."),
    ],
    ids=["tracer-str", "tracer-duck", "tracer-meter", "meter-object", "meter-tracer"],
)
def test_a_provider_that_is_not_opentelemetry_s_is_refused_before_anything_is_wrapped(
    name: str, function: Callable[..., Any], argument: str, value: object, message: str
) -> None:
    """A wrong-typed ``tracer_provider`` / ``meter_provider`` (even one with a
    ``get_tracer``) is a ConfigurationError naming the argument and the type given, never the
    value; no SDK method is replaced."""
    before = _sdk_methods()
    with pytest.raises(ConfigurationError) as raised:
        function(**{argument: value})
    assert raised.value.key == argument
    assert str(raised.value).startswith(message)
    assert "sk-do-not-print" not in str(raised.value)
    assert _sdk_methods() == before


_BAD_PROVIDER_THEN_IMPORT = (
    _PRELUDE
    + """
try:
    otel_llm.instrument(tracer_provider="x")
except otel_llm.ConfigurationError as exc:
    refused = exc.key
names = ["openai", "anthropic", "google_genai", "litellm"]
print(json.dumps({"refused": refused, "wrapped": [n for n in names if ours(sdk_method(n))]}))
"""
)


@pytest.mark.timeout(DEADLINE_S + 60)
def test_instrument_refusing_a_provider_leaves_no_sdk_waiting_for_its_import() -> None:
    """``instrument(tracer_provider=<not a provider>)`` before any SDK is imported leaves no
    wrapping waiting: each SDK imported afterwards is the SDK's own."""
    done = run_python(_BAD_PROVIDER_THEN_IMPORT, cwd=REPOSITORY)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"refused": "tracer_provider", "wrapped": []}


@pytest.mark.usefixtures("uninstrumented")
@pytest.mark.parametrize(("name", "function"), _FUNCTIONS)
def test_the_api_s_no_op_providers_are_providers(name: str, function: Callable[..., Any]) -> None:
    """The API's no-op providers are accepted (only their interfaces are used): the SDK (every
    SDK, for ``instrument()``) is wrapped."""
    before = _sdk_methods()
    function(tracer_provider=trace.NoOpTracerProvider(), meter_provider=metrics.NoOpMeterProvider())
    changed = [now is not then for now, then in zip(_sdk_methods(), before, strict=True)]
    assert changed == [name in ("instrument", f"instrument_{sdk.name}") for sdk in SDKS]
