"""Run a function once a module has been imported — now, if it already is, else right after its
import completes.

``instrument()`` wraps every installed SDK, but importing an SDK the application never uses
costs start-up time (LiteLLM takes seconds and reaches for the network when imported). So an
SDK not imported yet is wrapped when the application imports it: a finder placed first on
``sys.meta_path`` hands the import to the finders after it and runs the waiting functions once
the module has executed, before the importing code gets it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

logger = logging.getLogger("otel_llm")

Hook = Callable[[], None]


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the hooks; everything else is the loader's."""

    def __init__(self, loader: importlib.abc.Loader, after: Hook) -> None:
        self._loader = loader
        self._after = after

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._after()


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a module with waiting hooks, takes the spec the other finders
    give and has its loader run the hooks after the module executed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, dict[str, Hook]] = {}

    def wait(self, module: str, key: str, hook: Hook) -> None:
        with self._lock:
            self._waiting.setdefault(module, {})[key] = hook

    def forget(self, key: str) -> None:
        with self._lock:
            for hooks in self._waiting.values():
                hooks.pop(key, None)
            for module in [name for name, hooks in self._waiting.items() if not hooks]:
                del self._waiting[module]

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        with self._lock:
            if fullname not in self._waiting:
                return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if isinstance(loader, importlib.abc.Loader) and hasattr(loader, "exec_module"):
            spec.loader = _Loader(loader, lambda: self._fire(fullname))
        return spec

    def _fire(self, module: str) -> None:
        with self._lock:
            hooks = list(self._waiting.pop(module, {}).values())
        for hook in hooks:
            try:
                hook()
            except Exception:  # telemetry never stops the application's import
                logger.exception("otel-llm: could not instrument %s once imported", module)


_FINDER = _Finder()
_INSTALL_LOCK = threading.Lock()


def when_imported(module: str, key: str, hook: Hook) -> bool:
    """Run ``hook`` now if ``module`` is imported (True), else once it is (False). A second
    hook under the same ``key`` replaces the first."""
    if module in sys.modules:
        hook()
        return True
    with _INSTALL_LOCK:
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
    _FINDER.wait(module, key, hook)
    if module in sys.modules:  # imported meanwhile, by another thread
        _FINDER.forget(key)
        hook()
        return True
    return False


def forget(key: str) -> None:
    """Drop the hook waiting under ``key`` (if any)."""
    _FINDER.forget(key)
