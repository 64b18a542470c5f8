"""A report loaded in Debian's ``chromium`` (headless, driven by playwright) with the network
blocked: what it asked for, what it logged, what it drew — the browser tests' helper."""

from __future__ import annotations

import base64
import importlib.util
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.conftest import require

if TYPE_CHECKING:
    from playwright.sync_api import Page

LAPTOP = {"width": 1366, "height": 768}
"""The viewport: a laptop screen."""
TIMEOUT_MS = 20_000
"""Bound on every wait of the page (loading, drawing)."""

RENDERED = "document.querySelectorAll('.chart:not([data-rendered])').length === 0"
"""True once vega-embed has drawn (or failed to draw) every chart."""

_COLOURS = """async (url) => {
  const image = new Image();
  image.src = url;
  await image.decode();
  const canvas = document.createElement("canvas");
  canvas.width = image.width;
  canvas.height = image.height;
  const context = canvas.getContext("2d");
  context.drawImage(image, 0, 0);
  const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
  const seen = new Set();
  for (let i = 0; i < pixels.length && seen.size < 1000; i += 4) {
    seen.add((pixels[i] << 16) | (pixels[i + 1] << 8) | pixels[i + 2]);
  }
  return seen.size;
}"""


def chromium_path() -> str:
    """Debian's chromium, or a skip here (a failure in CI)."""
    path = shutil.which("chromium")
    require(path is not None, "chromium (Debian package chromium) for the browser tests")
    require(importlib.util.find_spec("playwright") is not None, "playwright (the dev extra)")
    assert path is not None
    return path


@dataclass
class Loaded:
    """What the page did while it loaded and drew."""

    page: Page
    requests: list[str] = field(default_factory=list)
    """Every URL the page requested (the file itself included)."""
    blocked: list[str] = field(default_factory=list)
    """Requests that would have left the machine (aborted)."""
    console: list[tuple[str, str]] = field(default_factory=list)
    """(type, text) of every console message."""
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    """``alert()`` and friends: a value that ran as script would show here."""

    def evaluate(self, script: str, arg: Any = None) -> Any:
        return self.page.evaluate(script, arg)

    def distinct_colours(self, png: bytes) -> int:
        """How many colours a screenshot has (up to 1000), decoded by the browser itself."""
        blank = self.page.context.new_page()
        try:
            url = "data:image/png;base64," + base64.b64encode(png).decode()
            return int(blank.evaluate(_COLOURS, url))
        finally:
            blank.close()


@contextmanager
def loaded(
    report: Path, viewport: dict[str, int] = LAPTOP, timezone: str | None = None
) -> Iterator[Loaded]:
    """``report`` opened from ``file://`` in headless chromium (in ``timezone``, or the
    machine's), every chart drawn; every request that is not for a file is aborted and
    recorded."""
    from playwright.sync_api import Route, sync_playwright

    executable = chromium_path()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            context = browser.new_context(
                viewport=viewport,  # type: ignore[arg-type]
                timezone_id=timezone,
            )
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            seen = Loaded(page)

            def route(route: Route) -> None:
                url = route.request.url
                if url.startswith("file://"):
                    route.continue_()
                else:
                    seen.blocked.append(url)
                    route.abort()

            context.route("**/*", route)
            page.on("request", lambda request: seen.requests.append(request.url))
            page.on("console", lambda message: seen.console.append((message.type, message.text)))
            page.on("pageerror", lambda error: seen.page_errors.append(str(error)))

            def dialog(d: Any) -> None:
                seen.dialogs.append(d.message)
                d.dismiss()

            page.on("dialog", dialog)
            page.goto(report.absolute().as_uri(), wait_until="load")
            page.wait_for_function(RENDERED, timeout=TIMEOUT_MS)
            yield seen
        finally:
            browser.close()
