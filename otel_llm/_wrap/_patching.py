"""Instrumenting an SDK at its own API: what every ``instrument_<sdk>()`` shares.

An :class:`SdkPatch` names the methods of one SDK that are wrapped (:class:`Target`: a module, a
class, a method, sync or async) and, per target, how a call becomes a :class:`CallRecorder` and
how the method's result is observed (a stream wrapped, an answer recorded). It owns the rest,
once for every SDK:

- the configuration of the instrumentation (tracer, metrics, stall threshold), swapped whole so
  a call in flight keeps the one it started with;
- the warning, once per process and SDK, when wrapped calls would record nothing because no
  tracer provider is configured;
- the providers it is given checked before anything is wrapped;
- installing idempotently — the SDK imported outside the lock, since its import may install
  again (``instrument()``'s hook) — and uninstalling without breaking another instrumentation
  that wrapped ours since: ours is then left in place as a pass-through;
- never letting telemetry break the call: a recorder that cannot be built, or a result that
  cannot be observed, leaves the SDK's own behaviour untouched;
- one call, one span set: a wrapped call that an SDK makes *inside* its own wrapped call, to an
  SDK it is built on (LiteLLM calling the openai SDK, an SDK helper calling its own ``create``),
  passes through, so a call is metered once, by the outermost API the application called. Only
  the SDKs each one names pass through (``nested``): a call to any other — made by the
  application's own code that an SDK runs inside its call, such as a tool function run by
  Gemini's automatic function calling — is a call of its own, with its own spans.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace

from otel_llm import _env as env
from otel_llm._arguments import check_providers
from otel_llm._measure._metrics import LlmMetrics
from otel_llm._measure._stalls import resolve_threshold_ms
from otel_llm._version import __version__
from otel_llm._wrap._recorder import CallRecorder

logger = logging.getLogger("otel_llm")

_Inside = tuple[frozenset[str], object | None, int]

_INSIDE: contextvars.ContextVar[_Inside] = contextvars.ContextVar(
    "otel_llm_wrapped", default=(frozenset(), None, 0)
)
"""While a wrapped call is being made (the SDK method runs), the SDKs (their instrument
functions' names) whose calls made inside it are part of it and pass through — with the asyncio
task an async call runs in (``None`` for a sync call, even one made inside a task) and its
thread. A task started while it runs, or a
thread it hands its context to, inherits the context but need not be the call: an SDK runs the
application's code there (LiteLLM's success callbacks: async ones in a task it starts, sync ones
in its logging threads), so calls made there are calls of their own — but for a thread an async
call hands its work to (LiteLLM's ``acompletion`` runs ``completion`` in one)."""


def _current_task() -> object | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no event loop runs in this thread
        return None


def _passes_through(name: str) -> bool:
    """Whether a call of the SDK ``name`` made here is part of a wrapped call around it: made
    inside it, to an SDK it is built on — in its own task (or a thread without a task that it
    handed its work to) when it is async, in its own thread when it is not."""
    inside, task, thread = _INSIDE.get()
    if name not in inside:
        return False
    if task is None:  # a sync call: its thread (an event loop it runs there included)
        return threading.get_ident() == thread
    current = _current_task()
    return current is None or current is task


def _mark_inside(nested: frozenset[str], *, is_async: bool) -> contextvars.Token[_Inside]:
    """Mark a wrapped call as being made: an async call by its task, a sync one by its thread
    only (made by code running in a task, its sync callbacks' threads are not its own)."""
    task = _current_task() if is_async else None
    return _INSIDE.set((nested, task, threading.get_ident()))


_UNCONFIGURED = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
"""The API's stand-ins when no SDK provider is installed: spans through them go nowhere."""


@dataclass(frozen=True, slots=True)
class PatchConfig:
    """What every wrapped call of one SDK records with."""

    tracer: trace.Tracer
    metrics: LlmMetrics
    threshold_ms: int


RecorderFactory = Callable[[PatchConfig, Any, tuple[Any, ...], Mapping[str, Any]], CallRecorder]
"""``(config, self, args, kwargs)`` of a wrapped call → the recorder of its spans (``self`` is
``None`` for a module-level function)."""
Observer = Callable[[Any, CallRecorder, bool], Any]
"""``(result, recorder, is_async)`` → what the application receives in place of ``result``
(the result itself, or a proxy of it that meters the stream)."""
Starter = Callable[[], CallRecorder | None]
"""Starts the spans of a call when its request is sent (``None``: pass it through)."""
LaterObserver = Callable[[Any, Starter, bool], Any]
"""``(result, start, is_async)`` for a method whose result sends its request later — a
generator that sends it at its first step, a stream manager that sends it on ``with`` — so the
spans start then, not when the method returned."""


@dataclass(frozen=True, slots=True)
class Target:
    """One wrapped method ``<module>.<cls>.<method>``, or function ``<module>.<method>`` when
    ``cls`` is ``None``.

    ``observe`` meters a result whose request was sent by the method itself; ``observe_later``
    one whose request is sent later (exactly one of the two is given)."""

    module: str
    cls: str | None
    method: str
    is_async: bool
    recorder: RecorderFactory
    observe: Observer | None = None
    observe_later: LaterObserver | None = None

    def __post_init__(self) -> None:
        if (self.observe is None) == (self.observe_later is None):
            raise ValueError(f"{self.key}: give exactly one of observe and observe_later")

    @property
    def key(self) -> tuple[str, str, str]:
        return self.module, self.cls or "", self.method

    def owner(self) -> Any:
        """The class (or module) the method is an attribute of."""
        module = importlib.import_module(self.module)
        return module if self.cls is None else getattr(module, self.cls)


class SdkPatch:
    """The wrapped methods of one SDK, installed and removed as a whole."""

    def __init__(
        self, function_name: str, targets: tuple[Target, ...], *, nested: tuple[str, ...] = ()
    ) -> None:
        """``nested`` names (by their instrument functions) the SDKs this one calls inside its
        own wrapped calls — itself when its helpers call its own wrapped methods: their calls
        made there pass through. An SDK that runs the application's code inside its calls
        (tools) names none it cannot tell from the application's."""
        self._name = function_name
        self._targets = targets
        self._nested = frozenset(nested)
        self._lock = threading.Lock()
        self._config: PatchConfig | None = None
        self._provider_checked = False
        """Set once the first wrapped call looked for a tracer provider (or one was passed)."""
        self._warned_no_provider = False
        self._owners: dict[tuple[str, str, str], Any] = {}
        """The class (or module) each wrapped method was taken from, to put it back on."""
        self._originals: dict[tuple[str, str, str], Any] = {}
        self._installed: dict[tuple[str, str, str], Any] = {}
        """Our wrapper on each method (compared by identity: proxies forward attributes)."""

    @property
    def config(self) -> PatchConfig | None:
        """The configuration wrapped calls record with; ``None`` when not instrumented."""
        return self._config

    def install(
        self,
        *,
        tracer_provider: trace.TracerProvider | None,
        meter_provider: metrics.MeterProvider | None,
        stall_threshold_ms: int | None,
    ) -> None:
        """Wrap every target (each once); a second call only swaps the configuration.

        The SDK is imported before the lock is taken, never under it: its import may run
        ``instrument()``'s hook, which installs too — on this thread, or on another thread
        importing the SDK while this one waits for that import to finish. That nested install
        finds the lock free and wraps; this one then finds the methods wrapped and only sets
        its configuration (the later call's arguments win)."""
        check_providers(tracer_provider=tracer_provider, meter_provider=meter_provider)
        threshold = resolve_threshold_ms(stall_threshold_ms)
        provider = tracer_provider or trace.get_tracer_provider()
        config = PatchConfig(
            provider.get_tracer("otel_llm", __version__), LlmMetrics(meter_provider), threshold
        )
        owners = self._import_owners()
        with self._lock:
            self._config = config
            self._provider_checked = tracer_provider is not None
            found = 0
            for target, owner in owners:
                current = vars(owner).get(target.method)
                if current is None:
                    self._not_found(target)
                    continue
                found += 1
                installed = self._installed.get(target.key)
                if installed is not None and _in_chain(current, installed):
                    continue
                self._owners[target.key] = owner
                self._originals[target.key] = current
                self._installed[target.key] = wrapper = self._wrap(current, target)
                setattr(owner, target.method, wrapper)
            if not found:
                self._config = None
                raise ImportError(f"{self._name}: none of the methods it wraps exist here")

    def uninstall(self) -> None:
        """Restore the SDK. Where another instrumentation wrapped ours since, ours is left in
        place as a pass-through, so theirs keeps working. Imports nothing: each method is put
        back on the class (or module) it was taken from."""
        with self._lock:
            for target in self._targets:
                original = self._originals.get(target.key)
                if original is None:
                    continue
                owner = self._owners[target.key]
                if vars(owner).get(target.method) is self._installed[target.key]:
                    setattr(owner, target.method, original)
                    del self._owners[target.key]
                    del self._originals[target.key]
                    del self._installed[target.key]
            self._config = None

    def _import_owners(self) -> list[tuple[Target, Any]]:
        """Each target with the class (or module) its method is on, importing the SDK (never
        called under the lock). A target whose module or class is missing is left out."""
        owners: list[tuple[Target, Any]] = []
        for target in self._targets:
            try:
                owners.append((target, target.owner()))
            except (ImportError, AttributeError):
                self._not_found(target)
        return owners

    def _not_found(self, target: Target) -> None:
        # an SDK version without this method: the others are still wrapped
        logger.debug("otel-llm: %s: %s not found", self._name, ".".join(target.key))

    def _start(self, target: Target, resource: Any, args: Any, kwargs: Any) -> CallRecorder | None:
        """The recorder of one call, or ``None`` to pass it through untouched."""
        config = self._config
        if config is None:
            return None
        if not self._provider_checked:
            self._check_provider()
        try:
            return target.recorder(config, resource, args, kwargs)
        except Exception:  # telemetry never breaks the call
            logger.exception("otel-llm: could not start the spans of a %s call", self._name)
            return None

    def _check_provider(self) -> None:
        """Warn once when wrapped calls record nothing: no provider was passed and none is
        installed globally (the API's proxy or no-op stands in), and the SDK is not disabled on
        purpose. Checked at the first wrapped call, so instrumenting before ``init()`` is fine."""
        self._provider_checked = True
        if env.env_flag(env.OTEL_SDK_DISABLED):
            return
        if not isinstance(trace.get_tracer_provider(), _UNCONFIGURED):
            return
        with self._lock:  # two threads' first calls warn once between them
            first, self._warned_no_provider = not self._warned_no_provider, True
        if first:
            logger.warning(
                "otel-llm: %s() records nothing: no tracer provider is configured "
                "(call otel_llm.init() first, install an SDK TracerProvider, or pass "
                "tracer_provider=; %s=true silences this)",
                self._name,
                env.OTEL_SDK_DISABLED,
            )

    def _wrap(self, original: Callable[..., Any], target: Target) -> Callable[..., Any]:
        invoke = _invoker(original, method=target.cls is not None)
        if target.observe_later is not None:
            wrapped = self._wrap_later(original, target, target.observe_later, invoke)
        else:
            assert target.observe is not None
            wrapped = self._wrap_call(original, target, target.observe, invoke)
        if target.cls is not None:
            return wrapped
        return _as_function(wrapped, is_async=target.is_async)

    def _wrap_call(
        self, original: Callable[..., Any], target: Target, observe: Observer, invoke: Invoker
    ) -> Callable[..., Any]:
        start, name, nested = self._start, self._name, self._nested
        if target.is_async:

            @functools.wraps(original)
            async def async_wrapper(resource: Any, *args: Any, **kwargs: Any) -> Any:
                recorder = None if _passes_through(name) else start(target, resource, args, kwargs)
                if recorder is None:
                    return await invoke(resource, args, kwargs)
                token = _mark_inside(nested, is_async=True)
                try:
                    result = await invoke(resource, args, kwargs)
                except BaseException as exc:
                    recorder.end_raised(exc)
                    raise
                finally:
                    _INSIDE.reset(token)
                return _observed(observe, result, recorder, True)

            return async_wrapper

        @functools.wraps(original)
        def wrapper(resource: Any, *args: Any, **kwargs: Any) -> Any:
            recorder = None if _passes_through(name) else start(target, resource, args, kwargs)
            if recorder is None:
                return invoke(resource, args, kwargs)
            token = _mark_inside(nested, is_async=False)
            try:
                result = invoke(resource, args, kwargs)
            except BaseException as exc:
                recorder.end_raised(exc)
                raise
            finally:
                _INSIDE.reset(token)
            return _observed(observe, result, recorder, False)

        return wrapper

    def _wrap_later(
        self,
        original: Callable[..., Any],
        target: Target,
        observe_later: LaterObserver,
        invoke: Invoker,
    ) -> Callable[..., Any]:
        """A method whose result sends the request later: the recorder starts then (a call
        made inside another wrapped call still passes through)."""
        start_call = self._start

        def starter(resource: Any, args: Any, kwargs: Any) -> Starter | None:
            if _passes_through(self._name) or self._config is None:
                return None
            return lambda: start_call(target, resource, args, kwargs)

        if target.is_async:

            @functools.wraps(original)
            async def async_wrapper(resource: Any, *args: Any, **kwargs: Any) -> Any:
                start = starter(resource, args, kwargs)
                result = await invoke(resource, args, kwargs)
                return (
                    result if start is None else _observed_later(observe_later, result, start, True)
                )

            return async_wrapper

        @functools.wraps(original)
        def wrapper(resource: Any, *args: Any, **kwargs: Any) -> Any:
            start = starter(resource, args, kwargs)
            result = invoke(resource, args, kwargs)
            return result if start is None else _observed_later(observe_later, result, start, False)

        return wrapper


Invoker = Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]
"""``(resource, args, kwargs)`` → the wrapped method's (or function's) result."""


def _invoker(original: Callable[..., Any], *, method: bool) -> Invoker:
    """How the original is called: a method bound to the resource first, as attribute access
    would bind it — so another instrumentation's wrapper beneath ours (a ``wrapt`` descriptor)
    sees the instance — and a module-level function as it is."""
    if not method:
        return lambda _, args, kwargs: original(*args, **kwargs)
    bind = getattr(original, "__get__", None)
    if bind is None:
        return lambda resource, args, kwargs: original(resource, *args, **kwargs)
    return lambda resource, args, kwargs: bind(resource, type(resource))(*args, **kwargs)


def _as_function(wrapped: Callable[..., Any], *, is_async: bool) -> Callable[..., Any]:
    """A wrapper of a module-level function: the method wrapper, with no resource."""
    if is_async:

        @functools.wraps(wrapped)
        async def async_function(*args: Any, **kwargs: Any) -> Any:
            return await wrapped(None, *args, **kwargs)

        return async_function

    @functools.wraps(wrapped)
    def function(*args: Any, **kwargs: Any) -> Any:
        return wrapped(None, *args, **kwargs)

    return function


def _observed_later(
    observe_later: LaterObserver, result: Any, start: Starter, is_async: bool
) -> Any:
    """``observe_later(result, …)``; should it fail, the result itself, unmetered."""
    try:
        return observe_later(result, start, is_async)
    except Exception:
        logger.exception("otel-llm: could not observe the result of a wrapped call")
        return result


def _observed(observe: Observer, result: Any, recorder: CallRecorder, is_async: bool) -> Any:
    """``observe(result, …)``; should it fail, the result itself, unmetered (its spans end as
    dropped: what followed was not measured)."""
    try:
        return observe(result, recorder, is_async)
    except Exception:
        logger.exception("otel-llm: could not observe the result of a wrapped call")
        recorder.end_dropped()
        return result


def _in_chain(function: Any, ours: Any) -> bool:
    """True when ``ours`` is ``function`` or anything it wraps (``__wrapped__`` chain)."""
    seen: set[int] = set()
    while function is not None and id(function) not in seen:
        if function is ours:
            return True
        seen.add(id(function))
        function = getattr(function, "__wrapped__", None)
    return False
