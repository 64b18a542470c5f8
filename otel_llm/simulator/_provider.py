"""Running the simulated provider: in the caller's event loop, in a thread, or until Ctrl-C.

* :class:`SimulatedProvider` — ``async with SimulatedProvider(...) as provider:`` serves on
  127.0.0.1 with an OS-assigned port; ``provider.base_url`` (``…/v1``) is what an OpenAI client
  is given, ``provider.url`` what an Anthropic or Gemini client is given as its base URL and an
  Azure OpenAI client as its ``azure_endpoint``.
* :meth:`SimulatedProvider.start_in_thread` — the same served from its own thread and event loop,
  for synchronous clients (the synchronous ``openai`` SDK); close it or use it as ``with``.
* :func:`serve` — the ``otel-llm provider`` command: serve until interrupted.
"""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from collections.abc import Callable, Mapping
from contextlib import suppress
from types import TracebackType
from typing import Self

from aiohttp import web

from otel_llm._errors import ConfigurationError
from otel_llm.simulator._presets import PRESETS
from otel_llm.simulator._provider_stats import ProviderStats
from otel_llm.simulator._select import ScriptSource
from otel_llm.simulator._server import STATS_KEY, create_app

LOOPBACK = "127.0.0.1"
"""The address the simulator binds unless told otherwise."""

_SHUTDOWN_GRACE_S = 0.5
_MAX_PORT = 65535
_THREAD_TIMEOUT_S = 10.0


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SimulatedProvider:
    """The simulated provider served from the running event loop (``async with``).

    ``scripts``, ``default``, ``time_scale`` and ``seed`` are those of :func:`create_app`; they
    and ``port`` (0: one the OS picks) are checked here, a
    :class:`~otel_llm.ConfigurationError` naming the key.
    Client disconnects cancel their handler at once (``handler_cancellation``), so
    ``stats.disconnected`` counts a dropped stream even in the middle of a silence.
    """

    def __init__(
        self,
        *,
        scripts: Mapping[str, ScriptSource] | None = None,
        default: ScriptSource | str | None = None,
        time_scale: float = 1.0,
        seed: int = 0,
        host: str = LOOPBACK,
        port: int = 0,
    ) -> None:
        if not (isinstance(port, int) and not isinstance(port, bool) and 0 <= port <= _MAX_PORT):
            raise ConfigurationError(
                "port", f"must be a port number from 0 to {_MAX_PORT}, not {port!r}"
            )
        self.app = create_app(scripts=scripts, default=default, time_scale=time_scale, seed=seed)
        self.stats: ProviderStats = self.app[STATS_KEY]
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        """``http://<host>:<port>`` of the running server: the base URL of the Anthropic and
        Gemini SDKs, Azure OpenAI's ``azure_endpoint``."""
        if self._url is None:
            raise RuntimeError("the simulated provider is not running")
        return self._url

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ``http://<host>:<port>/v1``."""
        return f"{self.url}/v1"

    async def start(self) -> None:
        """Bind and start serving."""
        if self._runner is not None:
            raise RuntimeError("the simulated provider is already running")
        runner = web.AppRunner(
            self.app,
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=_SHUTDOWN_GRACE_S,
        )
        await runner.setup()
        try:
            await web.TCPSite(runner, self._host, self._port).start()
        except BaseException:
            await runner.cleanup()
            raise
        host, port = runner.addresses[0][:2]
        shown = f"[{host}]" if ":" in host else host
        self._runner = runner
        self._url = f"http://{shown}:{port}"

    async def stop(self) -> None:
        """Stop serving; answers still running are cancelled after a short grace period."""
        runner, self._runner = self._runner, None
        self._url = None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    @classmethod
    def start_in_thread(
        cls,
        *,
        scripts: Mapping[str, ScriptSource] | None = None,
        default: ScriptSource | str | None = None,
        time_scale: float = 1.0,
        seed: int = 0,
        host: str = LOOPBACK,
        port: int = 0,
    ) -> ThreadedProvider:
        """Serve from a new thread with its own event loop, for synchronous code."""
        provider = cls(
            scripts=scripts, default=default, time_scale=time_scale, seed=seed, host=host, port=port
        )
        return ThreadedProvider(provider)


class ThreadedProvider:
    """A :class:`SimulatedProvider` running in its own thread; ``close()`` stops it."""

    def __init__(self, provider: SimulatedProvider) -> None:
        self.provider = provider
        self.stats: ProviderStats = provider.stats
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name="otel-llm-simulated-provider", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(_THREAD_TIMEOUT_S):
            self.close()
            raise TimeoutError("the simulated provider did not start in time")
        error = self._take_error()
        if error is not None:
            self._thread.join(_THREAD_TIMEOUT_S)
            raise error

    @property
    def url(self) -> str:
        """``http://<host>:<port>`` of the running server."""
        return self.provider.url

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ``http://<host>:<port>/v1``."""
        return self.provider.base_url

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported by __init__ or close(), never lost in the thread
            self._error = exc
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with self.provider:
            self._ready.set()
            await self._stop.wait()

    def close(self) -> None:
        """Stop the server and its thread; re-raises an error the server thread hit."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with suppress(RuntimeError):  # the loop has already finished
                loop.call_soon_threadsafe(stop.set)
        self._thread.join(_THREAD_TIMEOUT_S)
        error = self._take_error()
        if error is not None:
            raise error

    def _take_error(self) -> BaseException | None:
        error, self._error = self._error, None
        return error

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _print_flushed(line: str) -> None:
    print(line, flush=True)


def serve(
    host: str = LOOPBACK,
    port: int = 8080,
    *,
    preset: str | None = None,
    time_scale: float = 1.0,
    seed: int = 0,
    scripts: Mapping[str, ScriptSource] | None = None,
    announce: Callable[[str], object] | None = None,
) -> None:
    """Serve the simulated provider until interrupted (``otel-llm provider``).

    Binds loopback by default; any other address must be passed as ``host`` explicitly and is
    announced with a warning, since the simulator has no authentication. ``preset`` names the
    behaviour of models that match no registered script or preset (default: ``Script()``).
    The first line announced (flushed to stdout by default) carries the base URL.
    """
    announce = announce or _print_flushed
    if preset is not None and preset not in PRESETS and preset not in (scripts or {}):
        raise ValueError(f"unknown preset {preset!r}; known: {', '.join(sorted(PRESETS))}")
    provider = SimulatedProvider(
        scripts=scripts, default=preset, time_scale=time_scale, seed=seed, host=host, port=port
    )

    async def run() -> None:
        async with provider:
            announce(
                f"simulated provider on {provider.base_url} (OpenAI chat completions and "
                f"Responses); Anthropic Messages and Gemini at {provider.url}, Azure OpenAI "
                f"at {provider.url}/openai (default {preset or 'script'}, time_scale "
                f"{time_scale}, seed {seed}); Ctrl-C stops it"
            )
            if not is_loopback(host):
                announce(f"warning: serving on {host}, reachable beyond this machine")
            await asyncio.Event().wait()

    with suppress(KeyboardInterrupt):
        asyncio.run(run())
