"""A demo site running in a background thread with its own event loop, for synchronous callers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from crawlfleet.demosite.accesslog import AccessRecord
from crawlfleet.demosite.catalog import Redesign
from crawlfleet.demosite.catalogue import CatalogueEdits
from crawlfleet.demosite.guarded import GuardRules
from crawlfleet.demosite.server import DemoSite

_START_TIMEOUT_S = 30.0


class ThreadedDemoSite:
    """A ``DemoSite`` served from a daemon thread; ``start``/``stop`` block until done.

    Usable as a context manager. ``log``, ``clear_log`` and ``reset_flaky`` are safe to call
    from any thread.
    """

    def __init__(
        self,
        port: int = 0,
        addresses: Mapping[str, str] | None = None,
        access_log_path: Path | None = None,
        crawl_delay_s: float = 2.0,
        guard: GuardRules | None = None,
    ) -> None:
        self.site = DemoSite(port, addresses, access_log_path, crawl_delay_s, guard)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the demo site is already started")
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="demo-site", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            asyncio.run_coroutine_threadsafe(self.site.start(), loop).result(_START_TIMEOUT_S)
        except BaseException:
            self._shutdown_loop()
            raise

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self.site.stop(), self._loop).result(_START_TIMEOUT_S)
        self._shutdown_loop()

    def __enter__(self) -> ThreadedDemoSite:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self.site.port

    def url(self, role: str, path: str = "/") -> str:
        return self.site.url(role, path)

    @property
    def log(self) -> list[AccessRecord]:
        return self.site.log

    def clear_log(self) -> None:
        self.site.clear_log()

    @property
    def edits(self) -> CatalogueEdits:
        """The shop's catalogue changes (safe to make from any thread)."""
        return self.site.edits

    @property
    def redesign(self) -> Redesign:
        """The redesign host's switch (safe to set from any thread)."""
        return self.site.redesign

    def reset_flaky(self) -> None:
        self.site.reset_flaky()

    def _shutdown_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop, self._thread = None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(_START_TIMEOUT_S)
        loop.close()
